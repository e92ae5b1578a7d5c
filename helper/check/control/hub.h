// SPDX-License-Identifier: Apache-2.0
// Rank 0's side of the control plane: every rank's line read by the
// control thread, heartbeats out, a rank that stops answering or ends
// reported once, and a speaker's Relayed unpacked into each rank's own
// words (the rank, and `via` the speaker that carried them). Who may speak
// for whom is not the hub's to know: rank 0's membership (lead.h, Member's
// via) judges every word it hands on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "helper/check/control/line.h"
#include "helper/check/control/messages.h"
#include "helper/check/self.h"
#include "lib/check/stall.h"

namespace mn::check {

// What rank 0 hears from a rank: a message, or why none will come; said on
// its own line (via 0) or carried by its node's speaker `via`.
struct Heard {
    uint32_t rank = 0;
    std::optional<msg::FromRank> msg;
    Gone gone = Gone::Ended;  // without a message
    std::string error;        // the detail: the line's error, the silence, what did not decode
    // A rank that joined through its node's speaker `via`: its hello as it
    // came, for the rendezvous to admit (decoded there, once).
    std::optional<wire::Body> joined;
    uint32_t via = 0;
    // A speaker's line lost: the ranks that rank 0 knew it spoke for, who
    // can no longer reply (filled by rank 0's membership, Lead::hear).
    std::vector<uint32_t> carried;
    // Rank 0 itself paused long enough for the ranks to give up on it just
    // before this loss (SIGSTOP, a starved CPU): the loss is the pause's
    // doing, not the rank's (Lead::lose).
    std::optional<OwnPause> after_pause;
};

class Hub {
public:
    Hub() = default;
    Hub(const Hub&) = delete;
    Hub& operator=(const Hub&) = delete;
    ~Hub();
    void start(const Self& self, bool json);  // on the control thread
    void add(uint32_t rank, Line* line);  // a rank that arrived; its Line outlives the hub
    void stage(msg::Stage s);             // what rank 0's heartbeats say
    // The roster's standbys: a Superseded is taken only as one of theirs.
    void standbys(std::vector<uint32_t> ranks);
    // What each node's speaker said of the strangers at its door (by the
    // speaker's rank; Relayed::door_strangers, the latest).
    std::map<uint32_t, std::string> door_strangers() const;
    std::optional<Heard> next(const Deadline& d);
    // This process's last pause long enough for the ranks to give up on it
    // (SIGSTOP, a starved CPU), as the control thread measured it.
    std::optional<OwnPause> own_pause() const;
    // Returns once the hub has read what the ranks sent so far (a
    // Superseded among it ends the process first): before a verdict.
    void settle();
    struct State;

private:
    std::shared_ptr<State> st_;
};

// What rank 0's hub heard, by kind ("Beat", "Ready", ...), and the beats it
// sent ("Beat out"): for --json's "control" (doc/scale.md).
std::map<std::string, uint64_t> control_messages_by_kind();

}  // namespace mn::check
