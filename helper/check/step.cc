#include "helper/check/step.h"

#include "build_config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn::check {

std::string env_or(const char* name, const std::string& dflt) {
    const char* v = std::getenv(name);
    return v && *v ? v : dflt;
}

Budgets Budgets::of(double t) {
    Budgets b;
    b.rendezvous = std::max(1.0, t * 0.5);
    b.readiness = std::max(b.rendezvous, t * 0.7);
    b.transfers = std::max(t * 0.5, t - 2.5);
    b.verdict = t - 0.5;
    // A slow node costs seconds, not a whole transfer at its speed.
    b.collective = std::clamp(t * 0.1, 0.5, 3.0);
    b.pair = std::clamp(t * 0.02, 0.25, 1.0);
    return b;
}

std::string Lead::who(uint32_t rank) const {
    std::string label;
    if (rank < members.size() && !members[rank].hello.label.empty()) label = members[rank].hello.label + " ";
    return label + "rank " + std::to_string(rank);
}

void Lead::note(uint32_t rank, RankState s, const std::string& error) {
    if (evidence.size() < members.size()) {
        evidence.resize(members.size());
        for (uint32_t r = 0; r < members.size(); ++r) {
            evidence[r].rank = r;
            evidence[r].node = members[r].node_index;
        }
    }
    evidence[rank].state = s;
    evidence[rank].error = error;
}

std::string Heard::gone(const std::string& phase) const {
    if (garbled) return "sent rank 0 a message that does not decode during " + phase + " (" + error + ")";
    return "its process ended during " + phase + " (" + error + ")";
}

std::optional<Heard> Lead::hear(const Deadline& d) {
    auto e = mux.next(d);
    if (!e) return std::nullopt;
    Heard h;
    h.rank = static_cast<uint32_t>(e->key);
    if (!e->msg) {
        h.error = e->error;
        return h;
    }
    auto m = msg::decode_from_rank(*e->msg);
    if (!m) {
        h.garbled = true;
        h.error = m.problem().text();
        return h;
    }
    h.msg = std::move(m.value());
    return h;
}

namespace {
// Only a build configured with --enable-test-hooks reads these variables.
bool hook_names_rank(const char* var, uint32_t rank) {
#ifdef MN_TEST_HOOKS
    for (const std::string& r : split_list(env_or(var)))
        if (r == std::to_string(rank)) return true;
#else
    (void)var, (void)rank;
#endif
    return false;
}
}  // namespace

bool setup_fails_on_purpose(uint32_t rank) { return hook_names_rank("MN_PREFLIGHT_FAIL_SETUP", rank); }
bool exits_on_purpose(uint32_t rank) { return hook_names_rank("MN_PREFLIGHT_EXIT_IN_COLLECTIVE", rank); }

// ---- the inbox of a rank other than 0 --------------------------------------

struct Inbox::State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<msg::FromLead> q;
    std::string closed;  // why the connection ended
};

namespace {

// Rank 0 said stop: leave NCCL (abort from this thread) and end with its
// code, within a bounded time whatever NCCL does.
[[noreturn]] void stop_now(const Self& self, int code, const std::string& why) {
    std::fprintf(stderr, "mn-preflight: %s rank %u: stopped by rank 0 (%s)\n", self.label.c_str(), self.rank,
                 why.c_str());
    std::fflush(stderr);
    std::thread([code] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        _exit(code);
    }).detach();
    gpu::abort_nccl();
    std::fflush(stdout);
    _exit(code);
}

}  // namespace

void Inbox::start(int fd, const Self& self, Deadline end) {
    st_ = std::make_shared<State>();
    std::thread([fd, self, end, s = st_] {
        while (true) {
            std::string err;
            auto f = wire::recv_msg(fd, end, &err);
            auto m = f ? msg::decode_from_lead(*f) : Outcome<msg::FromLead>(Problem{"", ""});
            std::lock_guard<std::mutex> g(s->mu);
            if (!f || !m) {
                s->closed = !f ? (err.empty() ? "rank 0 closed the connection" : err)
                               : "rank 0 sent a message that does not decode (" + m.problem().text() + ")";
                s->cv.notify_all();
                return;
            }
            const auto* word = std::get_if<msg::Word>(&m.value());
            if (word && !word->done) stop_now(self, word->code, word->why);
            s->q.push_back(std::move(m.value()));
            s->cv.notify_all();
            if (word) return;  // nothing follows done: leave the socket alone
        }
    }).detach();
}

std::optional<msg::FromLead> Inbox::next(const Deadline& d, std::string* err) {
    std::unique_lock<std::mutex> g(st_->mu);
    st_->cv.wait_until(g, d.at, [&] { return !st_->q.empty() || !st_->closed.empty(); });
    if (!st_->q.empty()) {
        msg::FromLead m = std::move(st_->q.front());
        st_->q.pop_front();
        return m;
    }
    if (err) *err = st_->closed.empty() ? "time ran out" : st_->closed;
    return std::nullopt;
}

// ---- the watchdog -------------------------------------------------------------

namespace {

struct Watch {
    std::mutex mu;
    std::string phase = "rendezvous";
    std::string waiting_for;  // rank 0: who has not reported
    bool done = false;
};

Watch& watch() {
    static Watch w;
    return w;
}

}  // namespace

void set_phase(const std::string& p, const std::string& waiting) {
    std::lock_guard<std::mutex> g(watch().mu);
    watch().phase = p;
    watch().waiting_for = waiting;
}

void mark_done() {
    std::lock_guard<std::mutex> g(watch().mu);
    watch().done = true;
}

void start_watchdog(double seconds, const Self& self, bool json) {
    std::thread([seconds, self, json] {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        std::lock_guard<std::mutex> g(watch().mu);
        if (watch().done) return;
        const std::string what = "phase " + watch().phase + " did not finish within --timeout " + num(seconds, -1) +
                                 " s" + (watch().waiting_for.empty() ? "" : "; " + watch().waiting_for);
        if (self.rank == 0) {
            if (json)
                std::printf("{\"verdict\":\"FAIL\",\"exit_code\":3,\"timed_out\":%s}\n", json_string(what).c_str());
            else
                std::printf("problem: time-out: %s\nFAIL (time-out)\n", what.c_str());
        } else {
            std::fprintf(stderr, "mn-preflight: %s rank %u: time-out: %s\n", self.label.c_str(), self.rank,
                         what.c_str());
        }
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(kTimeout);
    }).detach();
}

void progress(const Self& self, const std::string& line) {
    if (self.rank == 0) std::fprintf(stderr, "mn-preflight: %s\n", line.c_str());
}

}  // namespace mn::check
