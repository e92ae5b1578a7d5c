// SPDX-License-Identifier: Apache-2.0
// fleet.cc's every-rank side: its node's software, read at launch, and the
// prolog's history line and metrics (rank 0's side, fingerprints_alike and
// remember, in lead.h).
#pragma once

#include <string>
#include <vector>

#include "helper/check.h"
#include "lib/check/gpu_health.h"
#include <optional>
#include <string>
#include <vector>

#include "lib/check/preflight.h"

namespace mn::check {

// Every rank: its node's, read at launch, sent when ready. `nccl_env`: the
// NCCL_* variables as the step set them (nccl_environment of the process's
// environment before this program set its own NCCL_DEBUG*); none: read now.
std::string node_fingerprint(const std::string& host,
                             const std::optional<std::vector<std::string>>& nccl_env = std::nullopt);
// The process's environment, NAME=VALUE each (read it before other threads may set any).
std::vector<std::string> process_environment();
void remember_prolog(const PrologOptions& o, const std::string& host, const std::vector<Charge>& problems,
                     const std::vector<std::string>& notes, const std::vector<GpuReadings>& gpus);

}  // namespace mn::check
