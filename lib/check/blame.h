// SPDX-License-Identifier: Apache-2.0
// Who is to blame when a step's check fails: plain rules over what each
// rank said (or did not say) to rank 0, so that a node is named only on
// evidence found there and the nodes that merely waited for it are not.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mn {

enum class RankState {
    Done,       // finished its part
    Fault,      // found a fault on its own node (set-up, GPU, CUDA, a wrong result in its buffer)
    PeerError,  // a transfer with another rank failed or timed out: evidence against someone
    Stopped,    // rank 0 stopped it (another rank had failed) before it finished
    Silent,     // never reported before the deadline
};

struct RankEvidence {
    uint32_t rank = 0;
    uint32_t node = 0;  // index of its node in the report
    RankState state = RankState::Done;
    std::string error;  // what it said; for Silent, what it never finished
};

struct Blame {
    // Culprit node index -> what was found there ("rank 3: GPU1 (...): ...").
    std::map<uint32_t, std::vector<std::string>> faults;
    // Node index -> the culprit nodes it waited on (never a culprit itself).
    std::map<uint32_t, std::set<uint32_t>> waited_on;
    // Which evidence named the culprits (Done: none did).
    RankState culprit = RankState::Done;
    // The culprits are ranks that never reported: the check timed out.
    bool timed_out = false;
    std::vector<uint32_t> silent;  // those ranks
    // What the waiting ranks said, kept as evidence but not as blame:
    // (rank, text).
    std::vector<std::pair<uint32_t, std::string>> notes;
};

// The rules, in order of evidence:
//  1. ranks that found a fault at home are the culprits;
//  2. without one, ranks that never reported (stuck, stopped, dead);
//  3. without either, the ranks whose transfers failed: nothing tells
//     them apart, so each is named with what it saw.
// Every other rank that did not finish waited on the culprits' nodes. A
// node with a culprit rank is a culprit node, never "waited on".
Blame assign_blame(const std::vector<RankEvidence>& ranks);

}  // namespace mn
