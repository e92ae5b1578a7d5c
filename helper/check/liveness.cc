// SPDX-License-Identifier: Apache-2.0
// Heartbeats between rank 0 and every other rank, from the process's one
// control thread (step.h says why beat_period and kSilence are what they
// are): rank 0's Hub and a rank's Inbox, each a job of that thread. Neither
// waits on the phases' threads, so a rank busy in a long GPU call still
// answers, and a rank that stops answering is named within kSilence, in
// the phase rank 0 was in.
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
struct HubView {
    std::map<uint32_t, Line*> lines;
    std::map<uint32_t, double> heard;  // the ranks still watched: when last heard
    // Who speaks for each rank: itself on its own line, or its node's
    // leader, whose Relayed parts are taken for that rank only; and each
    // leader's ranks, which go with it.
    std::map<uint32_t, uint32_t> owner;
    std::map<uint32_t, std::vector<uint32_t>> speaks_for;
};

// What the hub heard, by kind, and the beats it sent (control_messages_by_kind).
enum Kind { kBeatIn, kSuperseded, kReady, kResult, kPairReport, kGpuRetestReport, kRelayed, kBeatOut, kKinds };
const char* const kKindName[kKinds] = {"Beat",    "Superseded", "Ready", "Result", "PairReport", "GpuRetestReport",
                                       "Relayed", "Beat out"};
std::atomic<uint64_t> g_by_kind[kKinds];

void push(Hub::State& s, Heard h) {
    std::lock_guard<std::mutex> g(s.mu);
    s.q.push_back(std::move(h));
    s.cv.notify_all();
}

// This process was stopped or cut off while the others ended the check:
// their verdict stands, and this rank says nothing more.
[[noreturn]] void superseded(const Self& self, bool json, const msg::Superseded* sup) {
    std::fprintf(stderr, "mn-preflight: %s rank 0: the check ended without this rank (it was stopped or cut "
                         "off); rank %u on %s gave the verdict\n",
                 self.label.c_str(), sup->by, sup->by_label.c_str());
    if (!json)
        std::printf("superseded: rank %u on %s gave the verdict (exit %d)\n", sup->by, sup->by_label.c_str(), sup->code);
    // Nobody waits on this rank any more: no NCCL abort (racing the
    // resumed main thread inside NCCL crashed the process on an H100),
    // just the verdict's code.
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(sup->code);
}

// What a leader said for its node's ranks: each part taken as that rank's
// own message (or end), if the leader speaks for it. A leader that
// claims a rank it does not speak for, or carries what does not decode,
// is at fault itself.
void take_relayed(Hub::State& s, HubView& w, const Self& self, bool json, uint32_t leader, const msg::Relayed& rel) {
    // Queued together: one wake-up of rank 0's phase for the lot.
    std::vector<Heard> heard;
    heard.reserve(rel.parts.size());
    for (const msg::Carried& c : rel.parts) {
        Heard h;
        h.rank = c.rank;
        const auto owner = w.owner.find(c.rank);
        const bool speaks = owner != w.owner.end() && owner->second == leader;
        if (c.what == msg::Carried::What::Hello) {
            auto hello = msg::decode<msg::Hello>(c.body.bytes);
            if (owner != w.owner.end() || c.rank == 0 || c.rank >= self.world || !hello || hello->rank != c.rank)
                continue;  // came already, or not a rank of the step: the rendezvous never hears it
            w.owner[c.rank] = leader;
            w.speaks_for[leader].push_back(c.rank);
            h.joined = std::move(hello.value());
            h.via = leader;
        } else if (!speaks) {
            continue;
        } else if (c.what == msg::Carried::What::Gone) {
            h.error = c.error;
            h.gone = c.silent ? Gone::StoppedAnswering : Gone::Ended;
        } else {
            auto m = msg::decode_from_rank(c.body.bytes);
            if (m) g_by_kind[m.value().index()].fetch_add(1, std::memory_order_relaxed);
            if (m && (std::holds_alternative<msg::Beat>(m.value()) || std::holds_alternative<msg::Relayed>(m.value())))
                continue;
            if (const auto* sup = m ? std::get_if<msg::Superseded>(&m.value()) : nullptr) superseded(self, json, sup);
            if (m) h.msg = std::move(m.value());
            else {
                h.gone = Gone::Garbled;
                h.error = m.problem().text();
            }
        }
        if (!h.msg && !h.joined) w.owner.erase(c.rank);  // gone: said once
        heard.push_back(std::move(h));
    }
    if (heard.empty()) return;
    std::lock_guard<std::mutex> g(s.mu);
    for (Heard& h : heard) s.q.push_back(std::move(h));
    s.cv.notify_all();
}

// A line's end (or silence): the ranks its leader spoke for go with it.
void lose(Hub::State& s, HubView& w, Heard h) {
    w.heard.erase(h.rank);
    if (auto it = w.owner.find(h.rank); it != w.owner.end() && it->second == h.rank) w.owner.erase(it);
    if (auto it = w.speaks_for.find(h.rank); it != w.speaks_for.end()) {
        for (uint32_t m : it->second)
            if (auto o = w.owner.find(m); o != w.owner.end() && o->second == h.rank) {
                h.carried.push_back(m);
                w.owner.erase(o);
            }
        w.speaks_for.erase(it);
    }
    push(s, std::move(h));
}

// A rank's message (or end), as the hub thread takes it.
void take_event(Hub::State& s, HubView& w, const Self& self, bool json, const wire::Mux::Event& e) {
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
        if (const auto* rel = m ? std::get_if<msg::Relayed>(&m.value()) : nullptr) {
            w.heard[r] = now_s();
            take_relayed(s, w, self, json, r, *rel);
            return;
        }
        if (const auto* sup = m ? std::get_if<msg::Superseded>(&m.value()) : nullptr) {
            superseded(self, json, sup);
        }
        if (m) {
            w.heard[r] = now_s();
            h.msg = std::move(m.value());
        } else {
            h.gone = Gone::Garbled;
            h.error = m.problem().text();
        }
    } else {
        h.error = e.error;
    }
    if (!h.msg) return lose(s, w, std::move(h));  // gone: said once
    push(s, std::move(h));
}

// A beat is due on `line` unless another message went out on it within
// half a period: that one told the other side as much. The longest gap
// between two messages is then 1.5 periods (1.5 s above 4,096 ranks),
// within kSilence; at 8,192 ranks it left out about a third of the beats
// (doc/scale.md).
bool due_beat(const Line& line, double now, double period) { return now - line.sent_at() >= period / 2; }

// The ranks of `heard` (when each was last heard) that stopped answering:
// nothing for kSilence. One whose words wait unread has not: this thread is
// behind, not the rank.
std::vector<uint32_t> stopped_answering(std::map<uint32_t, double>& heard, const wire::Mux& mux, double now) {
    std::vector<uint32_t> out;
    for (auto& [r, t] : heard)
        if (now - t > kSilence) {
            if (mux.pending(r)) t = now;
            else out.push_back(r);
        }
    return out;
}

// Heartbeats out, silences in.
void beat_and_watch(Hub::State& s, HubView& w, msg::Stage stage, double& next_beat, double period) {
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
    for (uint32_t r : stopped_answering(w.heard, s.mux, now)) {
        Heard h;
        h.rank = r;
        h.gone = Gone::StoppedAnswering;
        h.error = silence_words();
        lose(s, w, std::move(h));
    }
}

// One turn of the hub on the control thread: beats out, silences, then
// what came in for up to 0.1 s. False once the hub stops.
struct HubRun {
    std::shared_ptr<Hub::State> s;
    Self self;
    bool json = false;
    HubView w;
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
                w.owner[r] = r;
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

msg::Stage Hub::stage() const {
    if (!st_) return msg::Stage::Rendezvous;
    std::lock_guard<std::mutex> g(st_->mu);
    return st_->stage;
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
    wire::Mux mux;  // key 0: this rank's line up (to rank 0, or its leader); a leader's: its node's ranks
};

namespace {

// Rank 0 said stop: leave NCCL (abort from this thread) and end with its
// code, within a bounded time whatever NCCL does.
[[noreturn]] void stop_now(const Self& self, int code, const std::string& why, bool via_leader) {
    std::fprintf(stderr, "mn-preflight: %s rank %u: stopped by %s (%s)\n", self.label.c_str(), self.rank,
                 via_leader ? "the verdict, through its node's leader" : "rank 0", why.c_str());
    end_now(code);
}

// The inbox thread's view of rank 0.
struct Rank0 {
    double heard = now_s();
    msg::Stage stage = msg::Stage::Rendezvous;  // where rank 0 last said it was
    std::optional<msg::Roster> roster;
    Heard lost;                                  // why it is lost, once it is
    bool via_leader = false;                     // its words come through this node's leader
    bool done = false;
};

// A leader's view of its node's ranks (node.cc): their lines, when each
// was last heard, and what they said since the last Relayed went up.
struct Node {
    std::shared_ptr<NodeDoor> door;
    std::map<uint32_t, std::unique_ptr<Line>> lines;
    std::map<uint32_t, double> heard;
    std::vector<msg::Carried> up;
};

// One message from rank 0, decoded; false once rank 0 is done.
bool take_lead(Inbox::State& s, Rank0& r0, const Self& self, msg::FromLead m) {
    if (const auto* b = std::get_if<msg::Beat>(&m)) {
        r0.stage = b->stage;
        return true;
    }
    if (const auto* roster = std::get_if<msg::Roster>(&m)) {
        r0.roster = *roster;
        r0.stage = msg::Stage::Readiness;
        return true;
    }
    // Where rank 0 is, from its words too: its beats may be left out
    // (due_beat), and a rank of a node with a leader hears them second hand.
    if (std::holds_alternative<msg::Plan>(m)) r0.stage = msg::Stage::Collective;
    if (std::holds_alternative<msg::PairCue>(m) || std::holds_alternative<msg::GpuRetest>(m))
        r0.stage = msg::Stage::Pairs;
    const auto* word = std::get_if<msg::Word>(&m);
    if (word && !word->done) stop_now(self, word->code, word->why, r0.via_leader);
    const bool done = word != nullptr;
    std::lock_guard<std::mutex> g(s.mu);
    s.q.push_back(std::move(m));
    s.cv.notify_all();
    r0.done = done;  // nothing follows done: leave the socket alone
    return !r0.done;
}

// One message (or the end) from rank 0; false once rank 0 is lost or done.
// A Relay's parts go to this node's ranks first, then this rank takes its
// own: a stop word ends this process, after its node has it.
bool take_word(Inbox::State& s, Rank0& r0, const Self& self, Node& node, const wire::Mux::Event& e) {
    if (!e.msg) {
        r0.lost.error = e.error;
        return false;
    }
    auto m = msg::decode_from_lead(*e.msg);
    if (!m) {
        r0.lost.gone = Gone::Garbled;
        r0.lost.error = m.problem().text();
        return false;
    }
    r0.heard = now_s();
    const auto* relay = std::get_if<msg::Relay>(&m.value());
    if (!relay) return take_lead(s, r0, self, std::move(m.value()));
    std::vector<const wire::Body*> own;
    for (const msg::RelayPart& p : relay->parts)
        for (uint32_t to : p.to) {
            if (to == self.rank) own.push_back(&p.body.bytes);
            else if (auto it = node.lines.find(to); it != node.lines.end())
                it->second->send_fields(p.body.bytes, Deadline::in(1));
        }
    for (const wire::Body* b : own) {
        auto mine = msg::decode_from_lead(*b);
        if (!mine || std::holds_alternative<msg::Relay>(mine.value())) {
            r0.lost.gone = Gone::Garbled;
            r0.lost.error = mine ? "a Relay inside a Relay" : mine.problem().text();
            return false;
        }
        if (!take_lead(s, r0, self, std::move(mine.value()))) return false;
    }
    return true;
}

// A leader: a rank of its node that knocked at its door. Its hello goes
// up as it came (rank 0 decodes and judges it); one for another node or
// another rank is refused here.
void admit_member(Inbox::State& s, Node& node, const Self& self, Guest& g) {
    auto h = msg::decode<msg::Hello>(g.first);
    if (!h || h->rank != g.rank || h->node != self.node) {
        std::fprintf(stderr, "mn-preflight: %s rank %u: refused rank %u at its node's door: its hello %s\n",
                     self.label.c_str(), self.rank, g.rank,
                     !h ? "does not decode" : h->rank != g.rank ? "names another rank" : "names another node");
        return;
    }
    auto line = std::make_unique<Line>(std::move(g.fd), std::move(g.seal));
    s.mux.add(g.rank, line->fd(), line->seal());
    node.heard[g.rank] = now_s();
    node.up.push_back({g.rank, msg::Carried::What::Hello, {std::move(g.first)}, "", false});
    node.lines[g.rank] = std::move(line);
}

// A leader: what a rank of its node said (or its end). Beats stay here.
void take_member(Node& node, const wire::Mux::Event& e) {
    const uint32_t r = static_cast<uint32_t>(e.key);
    if (!node.heard.count(r)) return;
    if (!e.msg) {
        node.heard.erase(r);
        node.up.push_back({r, msg::Carried::What::Gone, {}, e.error, false});
        return;
    }
    node.heard[r] = now_s();
    auto m = msg::decode_from_rank(*e.msg);
    if (m && std::holds_alternative<msg::Beat>(m.value())) return;
    node.up.push_back({r, msg::Carried::What::Said, {*e.msg}, "", false});
}

// A leader: beats to its node's ranks, their silences, and what they said
// up to rank 0 in as few messages as fit.
void serve_node(Inbox::State& s, Node& node, Line& up, msg::Stage stage, bool quiet, double& next_beat,
                double period) {
    const double now = now_s();
    if (quiet) {
        for (auto& [r, t] : node.heard) t = now;
    } else {
        if (now >= next_beat) {
            const wire::Body beat = msg::encode(msg::Beat{stage});
            for (auto& [r, line] : node.lines)
                if (node.heard.count(r) && due_beat(*line, now, period)) line->send_fields(beat, Deadline::in(1));
            next_beat = now + period;
        }
        for (uint32_t r : stopped_answering(node.heard, s.mux, now)) {
            node.heard.erase(r);
            node.up.push_back({r, msg::Carried::What::Gone, {}, silence_words(), true});
        }
    }
    send_batched<msg::Relayed>(up, node.up, Deadline::in(1),
                               [](const msg::Carried& c) { return c.body.bytes.size() + c.error.size() + 32; });
    node.up.clear();
}

// One turn of the inbox on the control thread. Rank 0 lost: the standbys
// (never returns); false once rank 0 said done or the inbox stops.
struct InboxRun {
    std::shared_ptr<Inbox::State> s;
    Line* ctl = nullptr;
    Standin me;
    Rank0 r0;
    Node node;
    Pulse pulse;
    double next_beat = 0, next_node_beat = 0;
    bool turn() {
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return false;
        }
        // This process was stopped, not rank 0; or the rendezvous is quiet.
        const bool quiet = !r0.roster && quiet_rendezvous(me.self.world);
        const bool skipped = pulse.skipped();
        if (skipped || quiet) r0.heard = now_s();
        const double period = beat_period(me.self.world);
        if (const double now = now_s(); !quiet && now >= next_beat) {
            if (due_beat(*ctl, now, period)) ctl->send(msg::Beat{r0.stage}, Deadline::in(1));
            next_beat = now + period;
        }
        // A leader's door, while its node's ranks may still come.
        bool door_open = node.door && node.door->open();
        if (door_open) {
            for (Guest& g : node.door->turn(0.02)) admit_member(*s, node, me.self, g);
            if (r0.roster || node.door->came() + 1 >= me.self.local_world) node.door->close();
        }
        bool lost = false;
        const Deadline d = Deadline::in(door_open ? 0.02 : 0.1);
        while (auto e = s->mux.next(d)) {
            if (e->key != 0) take_member(node, *e);
            else if (!take_word(*s, r0, me.self, node, *e)) {
                lost = true;
                break;
            }
            if (d.passed()) break;
        }
        if (node.door) serve_node(*s, node, *ctl, r0.stage, quiet || skipped, next_node_beat, period);
        if (!lost && now_s() - r0.heard > kSilence && s->mux.pending(0)) r0.heard = now_s();  // behind, not lost
        if (!lost && now_s() - r0.heard > kSilence) {
            r0.lost.gone = Gone::StoppedAnswering;
            r0.lost.error = silence_words();
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
        take_over(me, r0.roster, loss_words(r0.lost, r0.stage), *ctl, [this](const msg::Word& w) {
            const wire::Body b = msg::encode(msg::FromLead(msg::Word{false, w.code, w.why}));
            for (auto& [r, line] : node.lines) line->send_fields(b, Deadline::in(0.5));
        });
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

void Inbox::start(Line* ctl, const Standin& me, std::shared_ptr<NodeDoor> door) {
    st_ = std::make_shared<State>();
    auto run = std::make_shared<InboxRun>();
    run->s = st_;
    run->ctl = ctl;
    run->me = me;
    run->node.door = std::move(door);
    run->r0.via_leader = me.via_leader;
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
