// SPDX-License-Identifier: Apache-2.0
// A node's last check for Prometheus: the text exposition format 0.0.4,
// written for node_exporter's textfile collector as
// DIR/mn_preflight_NODE.prom (atomically: a temporary file in DIR, fsync,
// rename). Rendering is pure; write_metrics() is the only I/O.
//
// The verdict is a state set, one series per kind with 1 on the kind of
// the last verdict and 0 on the others:
//   mn_preflight_last_verdict{node="node1",kind="ok"} 0
//   mn_preflight_last_verdict{node="node1",kind="slow"} 1 ...
// Prometheus' guidance for enums: every series exists on every scrape, so
// an alert is a plain comparison (kind="ok" == 0) that never hinges on a
// series appearing, and sum by (kind) counts the cluster's nodes by kind.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/check/gpu_health.h"
#include "lib/check/history.h"
#include "lib/util/outcome.h"

namespace mn {

struct NodeMetrics {
    std::string node;
    int64_t time = 0;   // unix seconds of the check
    std::string kind;   // the verdict's kind, one of verdict_kinds()
    // Findings of the check on this node by kind: the failure kinds of
    // verdict_kinds() and "warning". Kinds not given are 0.
    std::map<std::string, unsigned> findings;
    std::optional<double> busbw_gbps, pair_busbw_gbps;  // GB/s as mn-preflight prints them (1e9 bytes/s)
    std::vector<GpuReadings> gpus;  // NVML's readings of the node's GPUs
};

// From the node's history line, its findings' kinds (one of
// finding_kinds() per finding, given by whoever found it) and its GPUs'
// readings.
NodeMetrics node_metrics(const HistoryRecord& r, const std::vector<std::string>& finding_kinds,
                         const std::vector<GpuReadings>& gpus);

// The kinds mn_preflight_findings always has a series for.
const std::vector<std::string>& finding_kinds();

std::string render_metrics(const NodeMetrics& m);

// A label value as the format wants it: \\, \" and \n escaped.
std::string prom_label_value(const std::string& v);
// A sample value: the shortest exact decimal, or NaN, +Inf, -Inf.
std::string prom_number(double v);
// "mn_preflight_NODE.prom", NODE with '/' and other odd bytes as '_'.
std::string metrics_file_name(const std::string& node);

// DIR/mn_preflight_NODE.prom, replaced atomically (mode 0644, for the
// collector's user); the temporary file starts with '.' and does not end
// in .prom, so the collector never reads it half written. Returns the path.
Outcome<std::string> write_metrics(const std::string& dir, const NodeMetrics& m);

}  // namespace mn
