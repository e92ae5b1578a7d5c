// SPDX-License-Identifier: Apache-2.0
// A node's speaker: above kGatherAbove ranks, each node's first task
// (LOCAL_RANK 0, not rank 0 itself) speaks to rank 0 for its node. The
// node's other ranks knock at its door (an abstract local socket named by
// the step secret, so another user can neither guess nor squat it) under
// the same handshake; its relay, a part of its inbox's turn on the control
// thread, carries their hellos and words up in one Relayed a turn and rank
// 0's words down (a Relay's parts), beats them and reports one that stops
// answering or ends. Rank 0 then holds a connection per node, not per
// rank: at 8,192 ranks on 2 cores its share of the loopback's messages
// held the control plane above a second (doc/scale.md).
// (The messages and the ranks' own lines still say "its node's leader".)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "helper/check/control/doorway.h"
#include "helper/check/control/line.h"
#include "helper/check/self.h"

namespace mn::check {

// This node's door: "@mn-preflight-node-" and a hex HMAC of the step
// secret, the node and MASTER_PORT.
std::string node_door_name(const Self& self);

// A speaker's door, served by its control thread from launch (its relay
// takes it over): the ranks proven and not yet taken.
class NodeDoor {
public:
    NodeDoor(Fd listen, const Self& self);
    ~NodeDoor();
    // One turn: accepts, challenges, reads for `wait` seconds at most; the
    // ranks admitted (purpose "node", a rank of the step, not yet come).
    // With the ranks held by hold() first.
    std::vector<Guest> turn(double wait);
    // A turn whose ranks wait here for the relay (before this rank joined).
    void hold(double wait);
    bool open() const { return door_ != nullptr; }
    // Every rank of the node came, or the rendezvous is over: the door
    // closes, strangers still waiting counted; their summary to stderr.
    void close();
    std::size_t came() const { return seen_.size(); }
    // Who came without the step secret, so far (kept once it closed).
    const Strangers& strangers() const { return door_ ? door_->strangers() : closed_; }

private:
    Fd listen_;
    Self self_;
    std::unique_ptr<Doorway> door_;
    Strangers closed_;
    std::set<uint32_t> seen_;
    std::vector<Guest> held_;
};

// The speaker's relay: its node's ranks' lines (in the inbox's Mux, keyed
// by rank), when each was last heard, and what they said since the last
// Relayed went up.
class NodeRelay {
public:
    NodeRelay() = default;
    NodeRelay(std::shared_ptr<NodeDoor> door, const Self& self) : door_(std::move(door)), self_(self) {}
    // This rank is its node's speaker.
    bool speaks() const { return door_ != nullptr; }
    // While its node's ranks may still come: one turn at the door, each
    // one admitted into `mux`. The door closes once every rank of the node
    // came or rank 0's roster did. True while it was open.
    bool door_turn(wire::Mux& mux, bool rostered);
    // What a rank of its node said (or its end). Beats stay here.
    void take(const wire::Mux::Event& e);
    // Rank 0's words for rank `to` of its node, as they travel.
    void pass_down(uint32_t to, const wire::Body& body);
    // Beats to its node's ranks (none while `quiet`), their silences, and
    // what they said up on `up` in as few messages as fit.
    void serve(const wire::Mux& mux, Line& up, msg::Stage stage, bool quiet, double period);
    // The word the check ends with, to every rank of its node (a takeover).
    void tell_all(const msg::Word& w);

private:
    void admit(wire::Mux& mux, Guest& g);
    std::shared_ptr<NodeDoor> door_;
    Self self_;
    std::map<uint32_t, std::unique_ptr<Line>> lines_;
    std::map<uint32_t, double> heard_;
    std::vector<msg::Carried> up_;
    unsigned strangers_said_ = 0;  // the door's strangers rank 0 was told of
    double next_beat_ = 0;
};

}  // namespace mn::check
