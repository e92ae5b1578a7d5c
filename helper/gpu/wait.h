// SPDX-License-Identifier: Apache-2.0
// The waits of the all-reduce: each polls (a stuck collective never blocks
// a thread), gives up at a deadline and stops at abort_nccl(). Internal to
// helper/gpu/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "helper/gpu/lanes.h"
#include "helper/gpu/nccl.h"

namespace mn::gpu {

struct Failure {
    std::string what;
    bool peer = false;  // most likely another rank's (AllreduceResult::peer)
};

// Waits for NCCL's non-blocking calls on `comms` to settle, until `until`
// (now_s()) or abort_nccl(). `what` names the call in the failure.
std::optional<Failure> settle(const std::vector<ncclComm_t>& comms, double until, const std::string& what);

// Waits for the lanes' streams, and for NCCL's errors on their
// communicators, the same way.
std::optional<Failure> drain(const std::vector<Lane>& lanes, const std::vector<ncclComm_t>& comms, double until,
                             const std::string& what);

}  // namespace mn::gpu
