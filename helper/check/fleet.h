// SPDX-License-Identifier: Apache-2.0
// fleet.cc's every-rank side: its node's software, read at launch, and the
// prolog's history line and metrics (rank 0's side, fingerprints_alike and
// remember, in lead.h).
#pragma once

#include <string>
#include <vector>

#include "helper/check.h"
#include "lib/check/gpu_health.h"
#include "lib/check/preflight.h"

namespace mn::check {

std::string node_fingerprint(const std::string& host);  // every rank: its node's, read at launch, sent when ready
void remember_prolog(const PrologOptions& o, const std::string& host, const std::vector<Charge>& problems,
                     const std::vector<std::string>& notes, const std::vector<GpuReadings>& gpus);

}  // namespace mn::check
