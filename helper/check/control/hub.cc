// SPDX-License-Identifier: Apache-2.0
// Rank 0's hub, a job of the control thread (hub.h says what it owns).
#include "helper/check/control/hub.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "helper/check/control/mailbox.h"
#include "helper/check/control/thread.h"
#include "lib/util/bounded_file.h"

namespace mn::check {

struct Hub::State {
    Mailbox<Heard> heard;  // to rank 0's phases
    std::mutex mu;         // the rest
    std::condition_variable settled_cv;
    std::vector<std::pair<uint32_t, Line*>> arrived;  // added, not yet taken by the thread
    msg::Stage stage = msg::Stage::Rendezvous;
    bool stop = false;
    uint64_t settle_asked = 0, settled = 0;
    std::vector<uint32_t> standbys;  // the roster's: who may give a verdict in rank 0's place
    std::map<uint32_t, std::string> door_strangers;  // a speaker's rank -> the strangers at its node's door
    std::optional<OwnPause> pause;  // HubView's last, for rank 0's phases (Hub::own_pause)
    wire::Mux mux;  // the thread's alone, but for wake()
};

namespace {

// The hub thread's own view of the lines: no more than when each was
// last heard. Who speaks for whom is rank 0's membership's (Lead::hear).
struct HubView {
    std::map<uint32_t, Line*> lines;
    std::map<uint32_t, double> heard;  // the lines still watched: when last heard
    std::vector<uint32_t> standbys;
    // This process's last pause long enough for the ranks to give up on it,
    // and when it ended: losses seen within kSilence after it are its own.
    std::optional<OwnPause> pause;
    double pause_end = 0;
    double sending = 0;  // seconds the last turn spent in beats' sends (a full socket waits up to 1 s)
};

// The time this thread has waited for a CPU so far; none where the kernel
// keeps no schedstat.
std::optional<double> cpu_wait() {
    const auto text = read_bounded_text("/proc/thread-self/schedstat", 256);
    return text ? parse_schedstat_delay(*text) : std::nullopt;
}

// A loss just after this process's own pause is the pause's doing.
void mark_pause(const HubView& w, Heard& h) {
    if (w.pause && now_s() - w.pause_end <= kSilence) h.after_pause = w.pause;
}

// What the hub heard, by kind, and the beats it sent (control_messages_by_kind).
enum Kind { kBeatIn, kSuperseded, kReady, kResult, kPairReport, kGpuRetestReport, kRelayed, kBeatOut, kKinds };
const char* const kKindName[kKinds] = {"Beat",    "Superseded", "Ready", "Result", "PairReport", "GpuRetestReport",
                                       "Relayed", "Beat out"};
std::atomic<uint64_t> g_by_kind[kKinds];

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

// A rank's decoded word into h: a Superseded from a standby of the roster
// ends this process here (superseded); one that is not taken, and words
// that do not decode, are the rank's garbled words.
void take_word(Heard& h, Outcome<msg::FromRank>& m, const HubView& w, const Self& self, bool json) {
    const auto* sup = m ? std::get_if<msg::Superseded>(&m.value()) : nullptr;
    const std::string refused = sup ? msg::superseded_refusal(*sup, w.standbys) : "";
    if (sup && refused.empty()) superseded(self, json, sup);
    if (m && refused.empty()) {
        h.msg = std::move(m.value());
        return;
    }
    h.gone = Gone::Garbled;
    h.error = m ? refused : m.problem().text();
}

// What a speaker said for its node's ranks, unpacked: each part that
// rank's own message (or end, or hello), carried `via` the speaker.
// Whether the speaker speaks for that rank is rank 0's membership's to
// judge; a hello goes on as it came, decoded there once.
void take_relayed(Hub::State& s, const HubView& w, const Self& self, bool json, uint32_t speaker,
                  const msg::Relayed& rel) {
    if (rel.door_strangers) {
        std::lock_guard<std::mutex> g(s.mu);
        s.door_strangers[speaker] = *rel.door_strangers;
    }
    // Queued together: one wake-up of rank 0's phase for the lot.
    std::vector<Heard> heard;
    heard.reserve(rel.parts.size());
    for (const msg::Carried& c : rel.parts) {
        Heard h;
        h.rank = c.rank;
        h.via = speaker;
        switch (c.what) {
        case msg::Carried::What::Hello: h.joined = c.body.bytes; break;
        case msg::Carried::What::Gone:
            h.error = c.error;
            h.gone = c.silent ? Gone::StoppedAnswering : Gone::Ended;
            mark_pause(w, h);
            break;
        case msg::Carried::What::Said: {
            auto m = msg::decode_from_rank(c.body.bytes);
            if (m) g_by_kind[m.value().index()].fetch_add(1, std::memory_order_relaxed);
            if (m && (std::holds_alternative<msg::Beat>(m.value()) || std::holds_alternative<msg::Relayed>(m.value())))
                continue;
            take_word(h, m, w, self, json);
            break;
        }
        }
        heard.push_back(std::move(h));
    }
    s.heard.put_all(heard);
}

// A line's end (or silence): said once.
void lose(Hub::State& s, HubView& w, Heard h) {
    w.heard.erase(h.rank);
    mark_pause(w, h);
    s.heard.put(std::move(h));
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
        take_word(h, m, w, self, json);
        if (h.msg) w.heard[r] = now_s();
    } else {
        h.error = e.error;
    }
    if (!h.msg) return lose(s, w, std::move(h));  // gone: said once
    s.heard.put(std::move(h));
}

// Heartbeats out, silences in.
void beat_and_watch(Hub::State& s, HubView& w, msg::Stage stage, double& next_beat, double period) {
    const double now = now_s();
    w.sending = 0;
    if (now >= next_beat) {
        const wire::Body beat = msg::encode(msg::Beat{stage});
        for (const auto& [r, line] : w.lines)
            if (w.heard.count(r) && due_beat(*line, now, period)) {
                line->send_fields(beat, Deadline::in(1));
                g_by_kind[kBeatOut].fetch_add(1, std::memory_order_relaxed);
            }
        next_beat = now + period;
        w.sending = now_s() - now;
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
    std::optional<double> waited_before;  // cpu_wait() at the last turn
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
            w.standbys = s->standbys;
            stage = s->stage;
            asked = s->settle_asked;
        }
        // This process was stopped, or the rendezvous is quiet: nobody's
        // silence counts (and the clocks start afresh after it).
        const bool quiet = stage == msg::Stage::Rendezvous && quiet_rendezvous(self.world);
        const std::optional<double> waited = cpu_wait();
        const bool skipped = pulse.skipped();
        if (skipped || quiet) {
            const double now = now_s();
            for (auto& [r, t] : w.heard) t = now;
        }
        if (skipped) {
            // Time spent waiting to send is this thread's own work, not a pause.
            OwnPause p;
            p.seconds = pulse.gap() - w.sending;
            if (waited && waited_before) p.waited_for_cpu = std::max(0.0, *waited - *waited_before);
            if (pause_outlasts(p, kSilence, beat_period(self.world))) {
                w.pause = p;
                w.pause_end = now_s();
                std::lock_guard<std::mutex> g(s->mu);
                s->pause = p;
            }
        }
        waited_before = waited;
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
            s->settled_cv.notify_all();
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

Hub::~Hub() { control_stop(st_); }

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

std::map<uint32_t, std::string> Hub::door_strangers() const {
    if (!st_) return {};
    std::lock_guard<std::mutex> g(st_->mu);
    return st_->door_strangers;
}

void Hub::standbys(std::vector<uint32_t> ranks) {
    if (!st_) return;
    std::lock_guard<std::mutex> g(st_->mu);
    st_->standbys = std::move(ranks);
}

void Hub::stage(msg::Stage s) {
    if (!st_) return;
    std::lock_guard<std::mutex> g(st_->mu);
    st_->stage = s;
}

std::optional<Heard> Hub::next(const Deadline& d) {
    if (!st_) return std::nullopt;
    return st_->heard.take(d);
}

std::optional<OwnPause> Hub::own_pause() const {
    if (!st_) return std::nullopt;
    std::lock_guard<std::mutex> g(st_->mu);
    return st_->pause;
}

void Hub::settle() {
    if (!st_) return;
    std::unique_lock<std::mutex> g(st_->mu);
    const uint64_t ticket = ++st_->settle_asked;
    st_->mux.wake();
    // Bounded: a hub thread that cannot finish a round must not hold the verdict.
    st_->settled_cv.wait_for(g, std::chrono::seconds(1), [&] { return st_->settled >= ticket; });
}

}  // namespace mn::check
