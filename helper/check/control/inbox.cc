// SPDX-License-Identifier: Apache-2.0
// A rank's inbox, a job of the control thread (inbox.h says what it owns).
#include "helper/check/control/inbox.h"

#include <cstdio>
#include <mutex>

#include "helper/check/control/mailbox.h"
#include "helper/check/control/thread.h"

namespace mn::check {

struct Inbox::State {
    Mailbox<msg::FromLead> words;  // to this rank's phases
    std::mutex mu;
    bool stop = false;
    wire::Mux mux;  // key 0: this rank's line up (to rank 0, or its speaker); a speaker's: its node's ranks
};

namespace {

// Rank 0 said stop: leave NCCL (abort from this thread) and end with its
// code, within a bounded time whatever NCCL does.
[[noreturn]] void stop_now(const Self& self, int code, const std::string& why, bool via_speaker) {
    std::fprintf(stderr, "mn-preflight: %s rank %u: stopped by %s (%s)\n", self.label.c_str(), self.rank,
                 via_speaker ? "the verdict, through its node's leader" : "rank 0", why.c_str());
    end_now(code);
}

// The inbox thread's view of rank 0.
struct Rank0 {
    double heard = now_s();
    msg::Stage stage = msg::Stage::Rendezvous;  // where rank 0 last said it was
    std::optional<msg::Roster> roster;
    Gone gone = Gone::Ended;                     // why it is lost, once it is
    std::string error;
    bool via_speaker = false;                    // its words come through this node's speaker
    bool done = false;
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
    // (due_beat), and a rank of a node with a speaker hears them second hand.
    if (std::holds_alternative<msg::Plan>(m)) r0.stage = msg::Stage::Collective;
    if (std::holds_alternative<msg::PairCue>(m) || std::holds_alternative<msg::GpuRetest>(m))
        r0.stage = msg::Stage::Pairs;
    const auto* word = std::get_if<msg::Word>(&m);
    if (word && !word->done) stop_now(self, word->code, word->why, r0.via_speaker);
    const bool done = word != nullptr;
    s.words.put(std::move(m));
    r0.done = done;  // nothing follows done: leave the socket alone
    return !r0.done;
}

// One message (or the end) from rank 0; false once rank 0 is lost or done.
// A Relay's parts go to this node's ranks first, then this rank takes its
// own: a stop word ends this process, after its node has it.
bool take_word(Inbox::State& s, Rank0& r0, const Self& self, NodeRelay& relay, const wire::Mux::Event& e) {
    if (!e.msg) {
        r0.error = e.error;
        return false;
    }
    auto m = msg::decode_from_lead(*e.msg);
    if (!m) {
        r0.gone = Gone::Garbled;
        r0.error = m.problem().text();
        return false;
    }
    r0.heard = now_s();
    const auto* down = std::get_if<msg::Relay>(&m.value());
    if (!down) return take_lead(s, r0, self, std::move(m.value()));
    std::vector<const wire::Body*> own;
    for (const msg::RelayPart& p : down->parts)
        for (uint32_t to : p.to) {
            if (to == self.rank) own.push_back(&p.body.bytes);
            else relay.pass_down(to, p.body.bytes);
        }
    for (const wire::Body* b : own) {
        auto mine = msg::decode_from_lead(*b);
        if (!mine || std::holds_alternative<msg::Relay>(mine.value())) {
            r0.gone = Gone::Garbled;
            r0.error = mine ? "a Relay inside a Relay" : mine.problem().text();
            return false;
        }
        if (!take_lead(s, r0, self, std::move(mine.value()))) return false;
    }
    return true;
}

// One turn of the inbox on the control thread. Rank 0 lost: `lost` (never
// returns); false once rank 0 said done or the inbox stops.
struct InboxRun {
    std::shared_ptr<Inbox::State> s;
    Line* ctl = nullptr;
    Self self;
    RankZeroLost lost_to;
    Rank0 r0;
    NodeRelay relay;
    Pulse pulse;
    double next_beat = 0;
    bool turn() {
        {
            std::lock_guard<std::mutex> g(s->mu);
            if (s->stop) return false;
        }
        // This process was stopped, not rank 0; or the rendezvous is quiet.
        const bool quiet = !r0.roster && quiet_rendezvous(self.world);
        const bool skipped = pulse.skipped();
        if (skipped || quiet) r0.heard = now_s();
        const double period = beat_period(self.world);
        if (const double now = now_s(); !quiet && now >= next_beat) {
            if (due_beat(*ctl, now, period)) ctl->send(msg::Beat{r0.stage}, Deadline::in(1));
            next_beat = now + period;
        }
        // A speaker's door, while its node's ranks may still come.
        const bool door_open = relay.door_turn(s->mux, r0.roster.has_value());
        bool lost = false;
        const Deadline d = Deadline::in(door_open ? 0.02 : 0.1);
        while (auto e = s->mux.next(d)) {
            if (e->key != 0) relay.take(*e);
            else if (!take_word(*s, r0, self, relay, *e)) {
                lost = true;
                break;
            }
            if (d.passed()) break;
        }
        if (relay.speaks()) relay.serve(s->mux, *ctl, r0.stage, quiet || skipped, period);
        if (!lost && now_s() - r0.heard > kSilence && s->mux.pending(0)) r0.heard = now_s();  // behind, not lost
        if (!lost && now_s() - r0.heard > kSilence) {
            r0.gone = Gone::StoppedAnswering;
            r0.error = silence_words();
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
        NodeWord tell_node;
        if (relay.speaks()) tell_node = [this](const msg::Word& w) { relay.tell_all(w); };
        lost_to(r0.roster, loss_words(r0.gone, r0.error, r0.stage), tell_node);
        end_now(kCheckFailed);  // `lost` never returns
    }
};

}  // namespace

Inbox::~Inbox() { control_stop(st_); }

void Inbox::start(Line* ctl, const Self& self, bool via_speaker, RankZeroLost lost, std::shared_ptr<NodeDoor> door) {
    st_ = std::make_shared<State>();
    auto run = std::make_shared<InboxRun>();
    run->s = st_;
    run->ctl = ctl;
    run->self = self;
    run->lost_to = std::move(lost);
    run->relay = NodeRelay(std::move(door), self);
    run->r0.via_speaker = via_speaker;
    run->s->mux.add(0, ctl->fd(), ctl->seal());
    control_attach([run] { return run->turn(); });
}

std::optional<msg::FromLead> Inbox::next(const Deadline& d, std::string* err) {
    auto m = st_->words.take(d);
    if (!m && err) *err = "time ran out";
    return m;
}

}  // namespace mn::check
