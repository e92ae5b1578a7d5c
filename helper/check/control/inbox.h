// SPDX-License-Identifier: Apache-2.0
// A rank other than 0: rank 0's words, read by the control thread, which
// also sends this rank's heartbeats, so that a stop word lands while this
// rank is busy or stuck inside NCCL (the thread aborts NCCL and ends the
// process with rank 0's code). A node's speaker's inbox relays for its
// node too (relay.h). Rank 0 lost (its connection ended, nothing from it
// for kSilence, a message that does not decode): the thread hands the
// check to `lost` (takeover.cc: the standbys), never returning.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "helper/check/control/line.h"
#include "helper/check/control/messages.h"
#include "helper/check/control/relay.h"
#include "helper/check/self.h"

namespace mn::check {

// The word a node's speaker ends with, passed on to its node's ranks.
using NodeWord = std::function<void(const msg::Word&)>;
// Rank 0 is lost: rank 0's roster if it came, the loss in words, and the
// way to this node's ranks (a speaker's; empty otherwise). Never returns.
using RankZeroLost =
    std::function<void(const std::optional<msg::Roster>& roster, const std::string& loss, const NodeWord& tell_node)>;

class Inbox {
public:
    Inbox() = default;
    Inbox(const Inbox&) = delete;
    Inbox& operator=(const Inbox&) = delete;
    ~Inbox();
    // On the control thread. `via_speaker`: this rank's line goes to its
    // node's speaker, not rank 0; a speaker's door and the ranks it held so
    // far with it.
    void start(Line* ctl, const Self& self, bool via_speaker, RankZeroLost lost,
               std::shared_ptr<NodeDoor> door = nullptr);
    std::optional<msg::FromLead> next(const Deadline& d, std::string* err);
    struct State;

private:
    std::shared_ptr<State> st_;
};

}  // namespace mn::check
