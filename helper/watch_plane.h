// SPDX-License-Identifier: Apache-2.0
// The hang watch's one line to rank 0's (helper/watch.cc), on the check's
// house: rank 0's watch listens at the step's watch port
// (MN_NCCL_WATCH_PORT, StepPlan::watch_port) behind the check's doorway,
// so only a process that proves the step secret is heard, and a stranger
// can neither trigger nor hush a verdict. Another node's watch that names
// something knocks there with its finding as the knock's first message and
// is done; so does one whose rank's Flight Recorder has not moved for the
// window, with that rank's position (lib/check/rank_positions.h). Nothing
// travels while nothing is named and every position moves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/check/rank_positions.h"
#include "lib/check/stall.h"
#include "lib/util/outcome.h"

namespace mn {

// Rank 0's side: a thread turns the doorway and keeps what came.
class WatchDoor {
public:
    // Listens at `port` on every address, for the ranks 1 to world - 1; a
    // problem when it cannot (the port is held: then each node's watch
    // says its own block).
    static Outcome<std::unique_ptr<WatchDoor>> open(uint16_t port, const std::string& secret, uint32_t world);
    ~WatchDoor();
    WatchDoor(const WatchDoor&) = delete;
    WatchDoor& operator=(const WatchDoor&) = delete;
    // What the other nodes' watches named since the last call, as they
    // said it (job and step are this step's: the secret proves it).
    std::vector<WatchReport> take();
    // Where the other nodes' ranks stand, as their watches sent it since
    // the last call (each sends again while its position holds).
    std::vector<RankPosition> take_positions();
    // Stops listening: a finding that comes after is not taken (its
    // sender, not welcomed, says its own block), so none is welcomed and
    // then lost when this watch ends. take() still gives what came.
    void close();
    // Once closed: who came without proving the step secret, or sent no
    // finding: "3 connections from 10.0.0.9 (3 did not prove the step
    // secret)"; "" when nobody did.
    std::string strangers();
    struct State;

private:
    explicit WatchDoor(std::shared_ptr<State> st) : st_(std::move(st)) {}
    std::shared_ptr<State> st_;
};

// Another node's side: tells rank 0's watch at addr:port what this rank's
// watch named, waiting at most `wait` seconds; "" once rank 0's watch took
// it, else why not (then this node says its own block).
std::string tell_rank0(const std::string& addr, uint16_t port, uint32_t rank, const WatchReport& r,
                       const std::string& secret, double wait);
// ... or where one of its ranks stands, for rank 0's watch to compare.
std::string tell_rank0(const std::string& addr, uint16_t port, uint32_t rank, const RankPosition& p,
                       const std::string& secret, double wait);

}  // namespace mn
