// Heartbeats between rank 0 and every other rank, from threads of their
// own (step.h says why kBeat and kSilence are what they are): rank 0's Hub
// and a rank's Inbox. Neither waits on the phases' threads, so a rank busy
// in a long GPU call still answers, and a rank that stops answering is
// named within kSilence, in the phase rank 0 was in.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "helper/check/step.h"

namespace mn::check {

bool Pulse::skipped(double limit) {
    const double now = now_s();
    const bool gap = now - last_ > limit;
    last_ = now;
    return gap;
}

[[noreturn]] void end_now(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::thread([code] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        _exit(code);
    }).detach();
    gpu::abort_nccl();
    std::fflush(stdout);
    _exit(code);
}

// ---- rank 0: the hub ---------------------------------------------------------

struct Hub::State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Heard> q;
    std::vector<std::pair<uint32_t, Line*>> arrived;  // added, not yet taken by the thread
    msg::Stage stage = msg::Stage::Rendezvous;
    bool stop = false;
    uint64_t settle_asked = 0, settled = 0;
    wire::Mux mux;  // the thread's alone, but for wake()
};

namespace {

// The hub thread's own view of the ranks.
struct Watch {
    std::map<uint32_t, Line*> lines;
    std::map<uint32_t, double> heard;  // the ranks still watched: when last heard
};

// A rank's message (or end), as the hub thread takes it.
void take_event(Hub::State& s, Watch& w, const Self& self, bool json, const wire::Mux::Event& e) {
    const uint32_t r = static_cast<uint32_t>(e.key);
    Heard h;
    h.rank = r;
    if (e.msg) {
        auto m = msg::decode_from_rank(*e.msg);
        if (m && std::holds_alternative<msg::Beat>(m.value())) {
            w.heard[r] = now_s();
            return;
        }
        if (const auto* sup = m ? std::get_if<msg::Superseded>(&m.value()) : nullptr) {
            // This process was stopped or cut off while the others ended the
            // check: their verdict stands, and this rank says nothing more.
            std::fprintf(stderr, "mn-preflight: %s rank 0: the check ended without this rank (it was stopped or cut "
                                 "off); rank %u on %s gave the verdict\n",
                         self.label.c_str(), sup->by, sup->by_label.c_str());
            if (!json)
                std::printf("superseded: rank %u on %s gave the verdict (exit %d)\n", sup->by, sup->by_label.c_str(),
                            sup->code);
            // Nobody waits on this rank any more: no NCCL abort (racing the
            // resumed main thread inside NCCL crashed the process on an
            // H100), just the verdict's code.
            std::fflush(stdout);
            std::fflush(stderr);
            _exit(sup->code);
        }
        if (m) {
            w.heard[r] = now_s();
            h.msg = std::move(m.value());
        } else {
            h.garbled = true;
            h.error = m.problem().text();
        }
    } else {
        h.error = e.error;
    }
    if (!h.msg) w.heard.erase(r);  // gone: said once
    std::lock_guard<std::mutex> g(s.mu);
    s.q.push_back(std::move(h));
    s.cv.notify_all();
}

// Heartbeats out, silences in.
void beat_and_watch(Hub::State& s, Watch& w, msg::Stage stage, double& next_beat) {
    const double now = now_s();
    if (now >= next_beat) {
        const wire::Fields beat = msg::encode(msg::Beat{stage});
        for (const auto& [r, line] : w.lines)
            if (w.heard.count(r)) line->send_fields(beat, Deadline::in(1));
        next_beat = now + kBeat;
    }
    std::vector<uint32_t> silent;
    for (const auto& [r, t] : w.heard)
        if (now - t > kSilence) silent.push_back(r);
    for (uint32_t r : silent) {
        w.heard.erase(r);
        Heard h;
        h.rank = r;
        h.silent = true;
        h.error = "nothing heard from it for " + num(kSilence, -1) + " s";
        std::lock_guard<std::mutex> g(s.mu);
        s.q.push_back(std::move(h));
        s.cv.notify_all();
    }
}

void hub_loop(std::shared_ptr<Hub::State> s, Self self, bool json) {
    Watch w;
    Pulse pulse;
    double next_beat = 0;
    while (true) {
        msg::Stage stage;
        uint64_t asked;
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return;
            for (auto& [r, line] : s->arrived) {
                w.lines[r] = line;
                w.heard[r] = now_s();
                s->mux.add(r, line->fd(), line->seal());
            }
            s->arrived.clear();
            stage = s->stage;
            asked = s->settle_asked;
        }
        if (pulse.skipped())  // this process was stopped: nobody's silence counts
            for (auto& [r, t] : w.heard) t = now_s();
        beat_and_watch(*s, w, stage, next_beat);
        // Asked to settle: read everything there is now, without waiting.
        const Deadline d = Deadline::in(asked > s->settled ? 0 : 0.1);
        while (auto e = s->mux.next(d)) take_event(*s, w, self, json, *e);
        std::lock_guard<std::mutex> g(s->mu);
        if (asked > s->settled) {
            s->settled = asked;
            s->cv.notify_all();
        }
    }
}

}  // namespace

Hub::~Hub() {
    if (!st_) return;
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->stop = true;
    }
    st_->mux.wake();
    if (thread_.joinable()) thread_.join();
}

void Hub::start(const Self& self, bool json) {
    st_ = std::make_shared<State>();
    thread_ = std::thread(hub_loop, st_, self, json);
}

void Hub::add(uint32_t rank, Line* line) {
    std::lock_guard<std::mutex> g(st_->mu);
    st_->arrived.push_back({rank, line});
    st_->mux.wake();
}

void Hub::stage(msg::Stage s) {
    if (!st_) return;
    std::lock_guard<std::mutex> g(st_->mu);
    st_->stage = s;
}

std::optional<Heard> Hub::next(const Deadline& d) {
    if (!st_) return std::nullopt;
    std::unique_lock<std::mutex> g(st_->mu);
    st_->cv.wait_until(g, d.at, [&] { return !st_->q.empty(); });
    if (st_->q.empty()) return std::nullopt;
    Heard h = std::move(st_->q.front());
    st_->q.pop_front();
    return h;
}

void Hub::settle() {
    if (!st_) return;
    std::unique_lock<std::mutex> g(st_->mu);
    const uint64_t ticket = ++st_->settle_asked;
    st_->mux.wake();
    // Bounded: a hub thread that cannot finish a round must not hold the verdict.
    st_->cv.wait_for(g, std::chrono::seconds(1), [&] { return st_->settled >= ticket; });
}

// ---- a rank other than 0: the inbox ------------------------------------------

struct Inbox::State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<msg::FromLead> q;
    bool stop = false;
    wire::Mux mux;
};

namespace {

// Rank 0 said stop: leave NCCL (abort from this thread) and end with its
// code, within a bounded time whatever NCCL does.
[[noreturn]] void stop_now(const Self& self, int code, const std::string& why) {
    std::fprintf(stderr, "mn-preflight: %s rank %u: stopped by rank 0 (%s)\n", self.label.c_str(), self.rank,
                 why.c_str());
    end_now(code);
}

// The inbox thread's view of rank 0.
struct Rank0 {
    double heard = now_s();
    msg::Stage stage = msg::Stage::Rendezvous;  // where rank 0 last said it was
    std::optional<msg::Roster> roster;
    Heard lost;                                  // why it is lost, once it is
    bool done = false;
};

// One message (or the end) from rank 0; false once rank 0 is lost or done.
bool take_word(Inbox::State& s, Rank0& r0, const Self& self, const wire::Mux::Event& e) {
    if (!e.msg) {
        r0.lost.error = e.error;
        return false;
    }
    auto m = msg::decode_from_lead(*e.msg);
    if (!m) {
        r0.lost.garbled = true;
        r0.lost.error = m.problem().text();
        return false;
    }
    r0.heard = now_s();
    if (const auto* b = std::get_if<msg::Beat>(&m.value())) {
        r0.stage = b->stage;
        return true;
    }
    if (const auto* roster = std::get_if<msg::Roster>(&m.value())) {
        r0.roster = *roster;
        return true;
    }
    const auto* word = std::get_if<msg::Word>(&m.value());
    if (word && !word->done) stop_now(self, word->code, word->why);
    std::lock_guard<std::mutex> g(s.mu);
    s.q.push_back(std::move(m.value()));
    s.cv.notify_all();
    r0.done = word != nullptr;  // nothing follows done: leave the socket alone
    return !r0.done;
}

void inbox_loop(std::shared_ptr<Inbox::State> s, Line* ctl, Standin me) {
    Rank0 r0;
    Pulse pulse;
    double next_beat = 0;
    s->mux.add(0, ctl->fd(), ctl->seal());
    while (true) {
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return;
        }
        if (pulse.skipped()) r0.heard = now_s();  // this process was stopped, not rank 0
        if (now_s() >= next_beat) {
            ctl->send(msg::Beat{r0.stage}, Deadline::in(1));
            next_beat = now_s() + kBeat;
        }
        auto e = s->mux.next(Deadline::in(0.1));
        if (e && !take_word(*s, r0, me.self, *e)) break;
        if (now_s() - r0.heard > kSilence) {
            r0.lost.silent = true;
            r0.lost.error = "nothing heard from it for " + num(kSilence, -1) + " s";
            break;
        }
    }
    if (r0.done) return;
    {
        std::lock_guard<std::mutex> g(s->mu);
        if (s->stop) return;
    }
    take_over(me, r0.roster, r0.lost.gone(msg::stage_name(r0.stage)), *ctl);
}

}  // namespace

Inbox::~Inbox() {
    if (!st_) return;
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->stop = true;
    }
    st_->mux.wake();
    if (thread_.joinable()) thread_.join();
}

void Inbox::start(Line* ctl, const Standin& me) {
    st_ = std::make_shared<State>();
    thread_ = std::thread(inbox_loop, st_, ctl, me);
}

std::optional<msg::FromLead> Inbox::next(const Deadline& d, std::string* err) {
    std::unique_lock<std::mutex> g(st_->mu);
    st_->cv.wait_until(g, d.at, [&] { return !st_->q.empty(); });
    if (st_->q.empty()) {
        if (err) *err = "time ran out";
        return std::nullopt;
    }
    msg::FromLead m = std::move(st_->q.front());
    st_->q.pop_front();
    return m;
}

}  // namespace mn::check
