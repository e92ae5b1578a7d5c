// Heartbeats between rank 0 and every other rank, from threads of their
// own (step.h says why beat_period and kSilence are what they are): rank 0's Hub
// and a rank's Inbox. Neither waits on the phases' threads, so a rank busy
// in a long GPU call still answers, and a rank that stops answering is
// named within kSilence, in the phase rank 0 was in.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
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

namespace {

volatile sig_atomic_t g_alarm_code = kTimeout;

extern "C" void on_alarm(int) { _exit(g_alarm_code); }

}  // namespace

void exit_at(double seconds, int code) {
    g_alarm_code = code;
    struct sigaction sa {};
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, nullptr);
    itimerval t{};
    const double s = std::max(0.001, seconds);
    t.it_value.tv_sec = static_cast<time_t>(s);
    t.it_value.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(t.it_value.tv_sec)) * 1e6);
    setitimer(ITIMER_REAL, &t, nullptr);
}

[[noreturn]] void end_now(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    // Bounded whatever NCCL's abort does: a timer, not a thread (there may
    // be none to be had).
    exit_at(1.5, code);
    gpu::abort_nccl();
    std::fflush(stdout);
    _exit(code);
}

// ---- the control thread --------------------------------------------------------

namespace {

struct Control {
    std::mutex mu;
    std::condition_variable cv;
    std::function<bool()> job;
    bool in_job = false;
    bool started = false;
    std::thread::id id;
};

Control& control() {
    static Control c;
    return c;
}

[[noreturn]] void control_loop() {
    Control& c = control();
    {
        std::lock_guard<std::mutex> g(c.mu);
        c.id = std::this_thread::get_id();
    }
    while (true) {
        std::function<bool()> job;
        {
            std::lock_guard<std::mutex> g(c.mu);
            job = c.job;
            c.in_job = static_cast<bool>(job);
        }
        bool more = true;
        {
            // Nothing leaves this thread as an exception (that would be an abort).
            try {
                watchdog_turn();
                if (job) more = job();
                else std::this_thread::sleep_for(std::chrono::milliseconds(100));
            } catch (const std::bad_alloc&) {
                std::fprintf(stderr, "%s\n", starved("the control thread", ENOMEM).text().c_str());
                std::fflush(stderr);
                _exit(kCheckFailed);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "mn-preflight: the control thread: internal error: %s\n", e.what());
                std::fflush(stderr);
                _exit(kCheckFailed);
            }
        }
        std::lock_guard<std::mutex> g(c.mu);
        if (!more && c.job) c.job = nullptr;
        c.in_job = false;
        c.cv.notify_all();
    }
}

}  // namespace

Outcome<bool> start_control() {
    Control& c = control();
    std::lock_guard<std::mutex> g(c.mu);
    if (c.started) return true;
    auto t = start_thread("the control thread (heartbeats and the watchdog)", control_loop);
    if (!t) return t.problem();
    t.value().detach();
    c.started = true;
    return true;
}

void control_attach(std::function<bool()> turn) {
    Control& c = control();
    std::lock_guard<std::mutex> g(c.mu);
    c.job = std::move(turn);
}

void control_detach() {
    Control& c = control();
    std::unique_lock<std::mutex> g(c.mu);
    c.job = nullptr;
    if (std::this_thread::get_id() == c.id) return;  // from inside the job itself
    c.cv.wait(g, [&] { return !c.in_job; });
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

// What the hub heard, by kind, and the beats it sent (control_messages_by_kind).
enum Kind { kBeatIn, kSuperseded, kReady, kResult, kPairReport, kGpuRetestReport, kBeatOut, kKinds };
const char* const kKindName[kKinds] = {"Beat", "Superseded", "Ready", "Result", "PairReport", "GpuRetestReport",
                                       "Beat out"};
std::atomic<uint64_t> g_by_kind[kKinds];

// A rank's message (or end), as the hub thread takes it.
void take_event(Hub::State& s, Watch& w, const Self& self, bool json, const wire::Mux::Event& e) {
    const uint32_t r = static_cast<uint32_t>(e.key);
    Heard h;
    h.rank = r;
    if (e.msg) {
        auto m = msg::decode_from_rank(*e.msg);
        if (m) g_by_kind[m.value().index()].fetch_add(1, std::memory_order_relaxed);
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

// A beat is due on `line` unless another message went out on it within
// half a period: that one told the other side as much. The longest gap
// between two messages is then 1.5 periods (1.5 s above 4,096 ranks),
// within kSilence; at 8,192 ranks it left out about a third of the beats
// (doc/scale.md).
bool due_beat(const Line& line, double now, double period) { return now - line.sent_at() >= period / 2; }

// Heartbeats out, silences in.
void beat_and_watch(Hub::State& s, Watch& w, msg::Stage stage, double& next_beat, double period) {
    const double now = now_s();
    if (now >= next_beat) {
        const wire::Body beat = msg::encode(msg::Beat{stage});
        for (const auto& [r, line] : w.lines)
            if (w.heard.count(r) && due_beat(*line, now, period)) {
                line->send_fields(beat, Deadline::in(1));
                g_by_kind[kBeatOut].fetch_add(1, std::memory_order_relaxed);
            }
        next_beat = now + period;
    }
    std::vector<uint32_t> silent;
    for (auto& [r, t] : w.heard)
        if (now - t > kSilence) {
            // Its words wait unread: this thread is behind, the rank is not silent.
            if (s.mux.pending(r)) t = now;
            else silent.push_back(r);
        }
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

// One turn of the hub on the control thread: beats out, silences, then
// what came in for up to 0.1 s. False once the hub stops.
struct HubRun {
    std::shared_ptr<Hub::State> s;
    Self self;
    bool json = false;
    Watch w;
    Pulse pulse;
    double next_beat = 0;
    bool turn() {
        msg::Stage stage;
        uint64_t asked;
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return false;
            for (auto& [r, line] : s->arrived) {
                w.lines[r] = line;
                w.heard[r] = now_s();
                s->mux.add(r, line->fd(), line->seal());
            }
            s->arrived.clear();
            stage = s->stage;
            asked = s->settle_asked;
        }
        // This process was stopped, or the rendezvous is quiet: nobody's
        // silence counts (and the clocks start afresh after it).
        const bool quiet = stage == msg::Stage::Rendezvous && quiet_rendezvous(self.world);
        if (pulse.skipped() || quiet) {
            const double now = now_s();
            for (auto& [r, t] : w.heard) t = now;
        }
        if (!quiet) beat_and_watch(*s, w, stage, next_beat, beat_period(self.world));
        // Asked to settle: read everything there is now, without waiting.
        // Reading stops by 0.2 s whatever keeps coming, for the next beats.
        const Deadline d = Deadline::in(asked > s->settled ? 0 : 0.1);
        const Deadline cap = Deadline::in(0.2);
        while (auto e = s->mux.next(d)) {
            take_event(*s, w, self, json, *e);
            if (cap.passed()) break;
        }
        std::lock_guard<std::mutex> g(s->mu);
        if (asked > s->settled) {
            s->settled = asked;
            s->cv.notify_all();
        }
        return true;
    }
};

}  // namespace

std::map<std::string, uint64_t> control_messages_by_kind() {
    std::map<std::string, uint64_t> out;
    for (int k = 0; k < kKinds; ++k)
        if (uint64_t n = g_by_kind[k].load(std::memory_order_relaxed)) out[kKindName[k]] = n;
    return out;
}

Hub::~Hub() {
    if (!st_) return;
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->stop = true;
    }
    st_->mux.wake();
    control_detach();
}

void Hub::start(const Self& self, bool json) {
    st_ = std::make_shared<State>();
    auto run = std::make_shared<HubRun>();
    run->s = st_;
    run->self = self;
    run->json = json;
    control_attach([run] { return run->turn(); });
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

// One turn of the inbox on the control thread. Rank 0 lost: the standbys
// (never returns); false once rank 0 said done or the inbox stops.
struct InboxRun {
    std::shared_ptr<Inbox::State> s;
    Line* ctl = nullptr;
    Standin me;
    Rank0 r0;
    Pulse pulse;
    double next_beat = 0;
    bool turn() {
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return false;
        }
        // This process was stopped, not rank 0; or the rendezvous is quiet.
        const bool quiet = !r0.roster && quiet_rendezvous(me.self.world);
        if (pulse.skipped() || quiet) r0.heard = now_s();
        if (const double now = now_s(); !quiet && now >= next_beat) {
            const double period = beat_period(me.self.world);
            if (due_beat(*ctl, now, period)) ctl->send(msg::Beat{r0.stage}, Deadline::in(1));
            next_beat = now + period;
        }
        bool lost = false;
        const Deadline d = Deadline::in(0.1);
        while (auto e = s->mux.next(d)) {
            if (!take_word(*s, r0, me.self, *e)) {
                lost = true;
                break;
            }
            if (d.passed()) break;
        }
        if (!lost && now_s() - r0.heard > kSilence && s->mux.pending(0)) r0.heard = now_s();  // behind, not lost
        if (!lost && now_s() - r0.heard > kSilence) {
            r0.lost.silent = true;
            r0.lost.error = "nothing heard from it for " + num(kSilence, -1) + " s";
            lost = true;
        }
        if (!lost) return true;
        if (r0.done) return false;
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return false;
        }
        // The watchdog is this thread's: a timer keeps --timeout meanwhile.
        watchdog_to_timer();
        take_over(me, r0.roster, r0.lost.gone(msg::stage_name(r0.stage)), *ctl);
    }
};

}  // namespace

Inbox::~Inbox() {
    if (!st_) return;
    {
        std::lock_guard<std::mutex> g(st_->mu);
        st_->stop = true;
    }
    st_->mux.wake();
    control_detach();
}

void Inbox::start(Line* ctl, const Standin& me) {
    st_ = std::make_shared<State>();
    auto run = std::make_shared<InboxRun>();
    run->s = st_;
    run->ctl = ctl;
    run->me = me;
    run->s->mux.add(0, ctl->fd(), ctl->seal());
    control_attach([run] { return run->turn(); });
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
