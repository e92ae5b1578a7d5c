// SPDX-License-Identifier: Apache-2.0
#include "lib/check/blame.h"

namespace mn {

Blame assign_blame(const std::vector<RankEvidence>& ranks) {
    Blame b;
    auto culprits_in = [&](RankState s) {
        for (const auto& r : ranks)
            if (r.state == s) b.faults[r.node].push_back("rank " + std::to_string(r.rank) + ": " + r.error);
        return !b.faults.empty();
    };
    RankState culprit = RankState::Fault;
    if (!culprits_in(RankState::Fault)) {
        culprit = RankState::Silent;
        if (culprits_in(RankState::Silent)) {
            b.timed_out = true;
            for (const auto& r : ranks)
                if (r.state == RankState::Silent) b.silent.push_back(r.rank);
        } else {
            culprit = RankState::PeerError;
            culprits_in(RankState::PeerError);
        }
    }
    if (b.faults.empty()) return b;
    b.culprit = culprit;
    std::set<uint32_t> culprit_nodes;
    for (const auto& [node, why] : b.faults) culprit_nodes.insert(node);
    for (const auto& r : ranks) {
        if (r.state == RankState::Done || r.state == culprit) continue;
        if (!r.error.empty()) b.notes.push_back({r.rank, r.error});
        if (culprit_nodes.count(r.node)) continue;
        b.waited_on[r.node].insert(culprit_nodes.begin(), culprit_nodes.end());
    }
    return b;
}

}  // namespace mn
