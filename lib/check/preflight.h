// SPDX-License-Identifier: Apache-2.0
// mn-preflight's judgement, apart from its sockets, CUDA and NCCL: the
// figures as nccl-tests computes them, the pair schedule for finding a bad
// node, fabric consistency, the verdict and its table and JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/check/history.h"

namespace mn {

// Exit codes, as documented in mn-preflight(1).
enum ExitCode { kPass = 0, kCheckFailed = 1, kUsage = 2, kTimeout = 3 };

// nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n.
double allreduce_busbw(double algbw, uint32_t nranks);

// Rounds of disjoint node pairs. Up to kAllPairsMax nodes every pair is
// tested (the circle method: n-1 rounds); above, each node with its two ring
// neighbours (2 or 3 rounds), so the check stays short on big jobs.
constexpr uint32_t kAllPairsMax = 16;
std::vector<std::vector<std::pair<uint32_t, uint32_t>>> pair_rounds(uint32_t nnodes);

// What a node's fabric looks like, compared between nodes.
struct FabricSignature {
    std::string fabric;  // ib, roce, socket
    std::string hcas;    // the chosen ports, "mlx5_0:1,mlx5_1:1"
    double rate_gbps = 0;
    unsigned mtu = 0;    // of the RoCE netdevs or the socket interface
    std::string summary() const;
    bool operator==(const FabricSignature& o) const {
        return fabric == o.fabric && hcas == o.hcas && rate_gbps == o.rate_gbps && mtu == o.mtu;
    }
};

struct RetestPlan;     // lib/check/retest.h
struct GpuRetestPlan;

// What a node is blamed for: the kind, given by whoever blames it, and the
// words the table prints.
struct Charge {
    VerdictKind kind = VerdictKind::Fault;
    std::string text;
};

struct NodeReport {
    uint32_t node = 0;
    std::string host;
    // The machine it runs on (its boot id; "" when its rank did not say):
    // nodes on one machine share its CPUs (lib/check/retest.h).
    std::string machine;
    std::vector<uint32_t> ranks;
    uint32_t gpus = 0;
    FabricSignature sig;
    std::string ifname;
    std::vector<Charge> problems;  // found on the node itself (GPU, HCA, its software)
    std::string inter_transport;        // NCCL's transport to other nodes, GPU path
    // Nodes this one only waited on (their failure held it up): evidence
    // that it is not to blame.
    std::vector<std::string> waited_on;
    // RDMA, or Google's A3 network (not RDMA: TCP through Google's plugin,
    // as fast a path that NCCL can silently leave for its own sockets).
    bool has_fast_fabric() const {
        return sig.fabric == "ib" || sig.fabric == "roce" || sig.fabric == "efa" || sig.fabric == "tcpx" ||
               sig.fabric == "tcpxo";
    }
    // Filled by judge().
    std::optional<double> pair_busbw;  // median of its pair tests
    std::string verdict;               // "ok", or what is wrong
    std::vector<Charge> charges;       // every blame, in the verdict's order
    // Its first charge's kind; Waited or Ok; Timeout for a culprit of a
    // check that ran out of time, Disturbed when strangers or ranks of
    // another release made it run out.
    VerdictKind kind = VerdictKind::Ok;
};

struct PairResult {
    uint32_t a = 0, b = 0;  // node indexes
    double busbw_gbps = 0;
    std::string error;      // the pair test failed or timed out
    // Strangers (connections without the step secret) at either node's data
    // port while the pair ran, as its ranks counted them: how many, and who
    // ("at node1: 8 connections from 10.250.0.11 (8 held ...)", bounded); 0 and
    // "" when none came. Such a pair's time may be theirs (lib/check/retest.h).
    unsigned strangers = 0;
    std::string strangers_seen;
    // The larger share of the timed test that either side's thread waited,
    // runnable, for a CPU; none when a side did not say (the GPU path, a
    // kernel without schedstat, an earlier build). A pair slowed by the
    // scheduler shows it here; one slowed by its link does not.
    std::optional<double> cpu_wait;
    // What TCP saw of the pair's path (the larger of its sides'): segments
    // sent again and the smoothed round trip in ms; none when a side did not
    // say. A throttled or lossy link shows here; the scheduler does not.
    std::optional<uint32_t> retrans;
    std::optional<double> rtt_ms;
    // A retest on a port its accepting side opened for it and closed once
    // its peer came: its timed test ran with no port of it open to
    // strangers (lib/check/retest.h).
    bool fresh_port = false;
};

// A pair test between two GPUs of one node (NVLink or PCIe between them).
struct GpuPairResult {
    uint32_t node = 0;          // index in the report
    std::string gpu_a, gpu_b;   // "GPU1 (0000:19:00.0)"
    double busbw_gbps = 0;
    std::string error;
};

struct CollectiveResult {
    std::string path;  // "gpu (NCCL)" or "cpu (TCP ring)"
    uint32_t nranks = 0;
    uint64_t bytes = 0;
    uint32_t iters = 0;
    double seconds = 0;  // per iteration, median
    double algbw_gbps = 0, busbw_gbps = 0;
    double init_seconds = 0;
    bool ran = false;
    bool correct = false;
    std::string error;
    std::string inter_transport, intra_transport;  // GPU path: NET/IB, NET/Socket, P2P/..., SHM
};

struct PreflightReport {
    std::vector<NodeReport> nodes;
    CollectiveResult coll;
    std::vector<PairResult> pairs;
    // Node pairs whose first rounds made suspects are retested against
    // proven-fast partners (lib/check/retest): a = the suspect, b = the
    // partner. With retests_ran, a node is named slow only on a slow retest.
    std::vector<PairResult> retests;
    bool retests_ran = false;
    // The plan the retests ran by, made once from the first rounds (by the
    // check that ran them); none in a report built without it, whose
    // plan retest_plan_of() makes from its pairs.
    std::shared_ptr<const RetestPlan> retest_plan;
    std::vector<GpuPairResult> gpu_pairs;
    // The same inside nodes: GPU pairs timed again for a GPU or a link that
    // looked slow (lib/check/retest); with gpu_retests_ran, a GPU or a link
    // is named slow only on a slow retest.
    std::vector<GpuPairResult> gpu_retests;
    bool gpu_retests_ran = false;
    std::shared_ptr<const GpuRetestPlan> gpu_retest_plan;  // as retest_plan
    std::optional<double> min_busbw;
    std::string timed_out;  // the phase that ran out of time, and who was missing
    // Strangers (connections without the step secret) came while the check
    // ran out of time: it fails, but no node is to blame for it.
    std::string disturbed;  // what they did, one line; "" when they did not disturb it
    // Who: strangers, or "load" (rank 0 starved of CPU long enough for the
    // ranks to give up on it).
    std::string disturbed_by = "strangers";
    // Ranks of the step came speaking another mn-preflight protocol (nodes
    // of another release, further apart than one protocol): it fails, but
    // no node is to blame. Who and which releases, one line; "" otherwise.
    std::string skew;
    std::vector<std::string> problems;
    std::vector<std::string> notes;
    double elapsed = 0;
    int code = kPass;
};

// Nodes whose fabric differs from the majority, with what differs.
std::vector<std::pair<uint32_t, std::string>> inconsistent_nodes(const std::vector<NodeReport>& nodes);

// A node is slow when every pair it is in runs below `floor`, or (without a
// floor) below half the median of the pairs without it. With two nodes and
// no floor nobody can be told apart, and nobody is named.
std::vector<std::pair<uint32_t, std::string>> slow_nodes(const std::vector<PairResult>& pairs, uint32_t nnodes,
                                                         std::optional<double> floor);


// Inside nodes: a GPU whose every pair runs below half the median of the
// pairs without it (over all nodes, the same hardware) is named slow; else
// a pair below half the median of the other pairs is named (its link); a
// pair whose test failed is named with its error. Fewer than three pairs
// in all: nothing to compare, nobody named (a failure still is).
struct SlowGpu {
    uint32_t node = 0;       // index in the report
    std::string gpu, other;  // a slow GPU: other is ""; a slow link or a failed pair: its two GPUs
    bool failed = false;     // the pair's test failed: evidence of its own, never retested
    std::string text;
};
std::vector<SlowGpu> slow_gpus(const std::vector<GpuPairResult>& pairs);

// Fills each node's verdict ("ok", "waited on NODE" or what is wrong
// there), the report's problems (the culprits only) and its exit code.
void judge(PreflightReport& r);
// Strangers or ranks of another release (r.disturbed, r.skew) made the check
// run out of time: its culprits' Timeout becomes Disturbed, no node's
// failure. judge() applies it; so does whoever sets either afterwards.
void excuse_timeouts(PreflightReport& r);

std::string report_table(const PreflightReport& r);
// The JSON report as an object (mn-preflight adds its "control" cost), and
// as the line --json prints.
nlohmann::ordered_json report_object(const PreflightReport& r);
std::string report_json(const PreflightReport& r);

// The transports in NCCL's INFO log ("Channel 00/0 : 0[0] -> 1[1] [send]
// via NET/IB/0/GDRDMA" -> "NET/IB"), distinct and sorted.
std::vector<std::string> nccl_transports(const std::string& log);

// The all-reduce test pattern, the same on both paths: rank r holds
// (1 + r % 64) * (1 + i % 7) at element i, so the sum over n ranks is
// exact in float32 up to about 73,000 ranks, whatever the order of the
// additions, and a chunk landing at the wrong offset shows.
void fill_pattern(std::vector<float>& v, uint32_t rank);
// What an all-reduce of nranks ranks' patterns holds: the sum of the ranks'
// multiples times (1 + i % 7).
void fill_sum(std::vector<float>& v, uint32_t nranks);
// "" when v holds the sum over ranks 0..nranks-1, else the first wrong element.
std::string check_pattern(const std::vector<float>& v, uint32_t nranks);
// "" when v holds rank's own pattern (a buffer read back after fill_pattern).
std::string check_fill(const std::vector<float>& v, uint32_t rank);
// "" when `got` (a piece read back from element `first` of a buffer) holds
// what `want` holds, else its first wrong element, numbered in the buffer,
// worded as check_pattern words it.
std::string first_difference(const std::vector<float>& got, const std::vector<float>& want, std::size_t first);

// The all-reduce's default size on the GPU path: the smallest that read
// busbw within 5 % of its plateau (all_reduce_perf on 2 H200 over NVLink,
// NCCL 2.28.9: 64 MiB 0.78 of 4 GiB's, 256 MiB 0.87, 1 GiB 0.95;
// scripts/gpu/bench-busbw.sh, mn-preflight(1)).
constexpr std::size_t kGpuBytes = std::size_t(1) << 30;

// The CPU path's default size per rank: a node's ranks together bring
// 4 MiB (tasks_per_node ranks of a quarter MiB at least). Its ranks add
// their buffers at the node's leader and only the leaders ring, so the
// network between nodes carries one buffer per pass whatever the tasks
// per node; 8 ranks a node of 4 MiB each made each pass move 2 GB through
// the leaders of 32 nodes on one 2-core machine (1.7 s a pass).
std::size_t cpu_default_bytes(uint32_t tasks_per_node);

// GPU buffers (1 GiB by default) are written and read back in pieces of
// this many floats, a multiple of the pattern's period (7): every piece
// holds the values of the buffer's start, so one tile on the host serves
// them all (7 MiB, not a whole copy of the buffer per rank).
constexpr std::size_t kPatternTile = std::size_t(7) << 18;

// "0-3,6" for a rank list.
std::string rank_ranges(std::vector<uint32_t> ranks);

// Whether a note of the report is about this node, by the node's name in
// the note's own place (history findings are tied to nodes so).
bool note_about(std::string note, const std::string& host);

}  // namespace mn
