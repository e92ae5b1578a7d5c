// SPDX-License-Identifier: Apache-2.0
// The step's one block (helper/watch.cc): rank 0's watch hears what every
// node's watch named and says it once. Reports of one subject become one:
// a node's link, named by the watchers that send to it and by its own
// (its interface down), is one "link down" seen from each of them.
#pragma once

#include <string>
#include <vector>

#include "lib/check/stall.h"

namespace mn {

// The reports in the order they came, each subject once: a link by the
// node named (its own watch's report first where it sent one, the
// others' "seen from" joined, the evidence of each kept once); a
// process by its host and pid. host_evidence holds where any report of the
// subject had it.
std::vector<WatchReport> merge_reports(const std::vector<WatchReport>& reports);

// The block of several subjects: each one's lines (watch_report_text), in
// order.
std::string watch_verdict_text(const std::vector<WatchReport>& subjects);

}  // namespace mn
