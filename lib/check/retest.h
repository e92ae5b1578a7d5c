// SPDX-License-Identifier: Apache-2.0
// Blame on confirmed evidence: the first pair rounds only make suspects.
// A node whose every pair looked slow is retested, within the same check,
// against partners this run has proven fast, and named only if those
// retests are slow too. One unlucky pair on a busy machine (seen: healthy
// pairs of one cluster spread over a factor 50 while a build ran beside
// it) must not drain a node.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/check/preflight.h"

namespace mn {

// Each suspect meets this many distinct proven-fast partners: a node that
// is really slow is slow with anyone, a healthy one rarely draws two slow
// retests in a row.
constexpr std::size_t kRetestsPerSuspect = 2;
// Control pairs per retest round where nodes are free for them: their
// best reading is what healthy ran at then, so all of them must be unlucky
// to lower it by chance.
constexpr std::size_t kControlsPerRound = 2;
// At most this many retest rounds (each round runs every suspect at once
// with distinct partners, so the cost is rounds, not suspects).
constexpr std::size_t kMaxRetestRounds = 4;

struct RetestPlan {
    std::vector<uint32_t> suspects;  // node indexes, in the order of slow_nodes()
    std::vector<std::string> why;    // what made each one a suspect
    // Rounds of disjoint (suspect, partner) pairs, and control pairs: two
    // proven-fast nodes (.first is no suspect) timed among the retests.
    // Load that comes and goes (a build beside the job, a busy switch)
    // slows every pair while it lasts, so a suspect is judged against
    // what healthy nodes ran at the same time, not only at the start.
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> rounds;
    // More suspects than proven-fast partners (or none proven fast): the
    // first rounds' evidence is all there is, and suspects are named on it.
    bool unconfirmable = false;
    std::string unconfirmable_why;
};

// From the first rounds' pairs: the suspects and their retest rounds. With
// two nodes there is no third to compare with: no retest (the floor rule of
// slow_nodes() stands alone).
RetestPlan plan_retests(const std::vector<PairResult>& pairs, uint32_t nnodes, std::optional<double> floor);

// A retest that is a control pair (no suspect in it), not a suspect's.
bool is_control(const RetestPlan& plan, const PairResult& retest);

// Nodes proven fast by this run: no suspect, and at least one pair at or
// above the median of all pairs; fastest first.
std::vector<uint32_t> proven_fast(const std::vector<PairResult>& pairs, uint32_t nnodes,
                                  const std::vector<uint32_t>& suspects);

struct RetestVerdict {
    uint32_t node = 0;
    bool named = false;
    bool disturbed = false;  // not named for strangers at the data ports (disturbed_slowness)
    std::string text;  // the verdict ("slow (confirmed ...)") or the note
};

// Judges each suspect on its retests (PairResult.a is the suspect, .b the
// partner; a pair whose .a is no suspect is a control): named when every
// retest that ran is slow, below half of what healthy ran at (the lower of
// the first rounds' median between non-suspects and the best control),
// or below `floor`; cleared when one ran fast, or when the controls ran as
// slow; "could not confirm" (not named) when none ran. A suspect whose
// slow first pairs were all with a named node is cleared with that said.
// One that would be named on pairs or retests that strangers disturbed
// (disturbed_slowness) is not named: its text is that note.
// One that shares its machine with another node and whose pairs do not
// clear the scheduler (shared_machine_slowness) is not named either.
std::vector<RetestVerdict> judge_retests(const RetestPlan& plan, const std::vector<PairResult>& pairs,
                                         const std::vector<PairResult>& retests, uint32_t nnodes,
                                         std::optional<double> floor, const std::vector<std::string>& hosts,
                                         const std::vector<std::string>& machines = {});

// ---- strangers at the data ports ------------------------------------------
// Another user who holds connections to a node's data port while its pairs
// run (and opens them again as they are closed) takes that node's time:
// its pairs run slow, and its retests too while the stranger stays (seen:
// 0.47 GB/s against a median of 1.8 on a loaded machine, confirmed by the
// retest). Blaming the node would let anyone on the network drain a
// healthy one. So a slow node is judged only on pairs no stranger
// disturbed: when any of its pairs or its retests saw strangers at either
// node's data port (PairResult.strangers), it is not named, nor a failure
// in its history, and a note says so. A node whose pairs and retests saw
// none is named as ever: a stranger cannot hide a node it did not touch.
//
// Nor one it did touch: its retests run on a port the partner opens for
// each (PairResult.fresh_port) and closes once the suspect came, so the
// timed test runs with no port of it open to strangers (the suspect's own
// data port is not used). A suspect whose retests all ran so is judged on
// them as any other: slow there, it is named; fast, cleared. Only one
// retested on its data port (a partner of a build before fresh ports)
// keeps the rule above. Strangers that find a fresh port before the
// suspect comes are counted and noted, not judged: they are gone before
// the test.

// The note for slow node x (without its host: judge() puts it first) when
// any of its first pairs or of its retests (.a == x) saw strangers; none
// when none did, or when every retest of x ran on a fresh port. `floor`: --min-busbw, what it was judged against.
std::optional<std::string> disturbed_slowness(uint32_t x, const std::vector<PairResult>& pairs,
                                              const std::vector<PairResult>& retests, std::optional<double> floor,
                                              const std::vector<std::string>& hosts);

// ---- nodes that share a machine -------------------------------------------
// Nodes on one machine (the same boot id: the local test clusters, the
// emulated nodes of --mn-nccl-emulate-nodes, a site that packs several
// slurmd on a host) share its CPUs. A process the scheduler gives less CPU
// for a second is slow in every pair it is in, its retests included, while
// the control pair beside it is not (seen: 3 healthy checks of 60 on one
// quiet 2-core machine named a node so). A difference between such nodes
// says nothing of a node's hardware, unless the pairs show it is not the
// scheduler's: a throttled link makes both sides of its pairs sleep, a
// starved process waits, runnable, for a CPU (PairResult.cpu_wait).
//
// The scheduler's part cannot be measured away: two communicating
// processes put on one CPU, each waiting half the time, ran a pair 14
// times slower than the control beside them. The node's own evidence is
// its link's, as TCP saw it (PairResult.rtt_ms): a throttled link queues,
// and its round trips grow (tc tbf on the local cluster: 3.7 to 84 ms, at
// 20 Mbit/s to 2 Gbit/s), while the kernel acknowledges for a process the
// scheduler holds back and the round trip stays short (at most 0.45 ms
// with three ranks pinned to one CPU). Retransmissions are no such
// evidence: healthy pairs between namespaces of one machine showed 0 to
// 135 (PairResult.retrans is reported, not judged).
//
// So a slow node that shares its machine with another node of the step is
// named only when most of its pairs and retests that ran had a round trip
// of kLinkRttMs or more and every one said what TCP saw; else it is not
// judged, and a note says why (with the longest its sides waited,
// runnable, for a CPU: PairResult.cpu_wait). This is the CPU path's rule
// (judge() gives the machines only there): on GPUs, NCCL and the node's
// own devices and links carry the pairs.
constexpr double kLinkRttMs = 2;

// The note for slow node x (without its host) when it shares its machine
// with another node and its pairs and retests (.a == x) do not show its
// link (see above); none otherwise. `machines`: each node's boot id (""
// unknown).
std::optional<std::string> shared_machine_slowness(uint32_t x, const std::vector<PairResult>& pairs,
                                                   const std::vector<PairResult>& retests,
                                                   const std::vector<std::string>& machines,
                                                   const std::vector<std::string>& hosts);

// One line on the strangers at the data ports over all pair tests and
// retests (their connections in all, the first few pairs' texts); "" when
// none came.
std::string data_port_strangers(const std::vector<PairResult>& pairs, const std::vector<PairResult>& retests);

// ---- inside nodes: GPUs and the links between them ------------------------
// The same rule for a node's GPUs: what slow_gpus() finds in the first GPU
// pair rounds (a slow GPU, a slow link) is timed again within the check,
// and named only if that is slow too. A failed pair is evidence of its own
// and is not retested.
struct GpuRetestPlan {
    std::vector<SlowGpu> suspects;  // slow_gpus()'s findings that are not failures
    // Rounds of GPU pairs to time again, no GPU twice in a round: a slow
    // GPU (gpu_a) with up to kRetestsPerSuspect GPUs of its node that
    // this run has proven fast; a slow link (both ends fine) on its own,
    // as often; and in each node a round retests in, a control pair of two
    // of its GPUs that no suspect is (a round of its own when the retests
    // leave none free). busbw_gbps and error are not used.
    std::vector<std::vector<GpuPairResult>> rounds;
    // Suspects with no GPU of their node to retest with (every other one
    // a suspect too): named on the first rounds' evidence, with that said.
    std::vector<std::size_t> unconfirmable;  // indexes into suspects
};
GpuRetestPlan plan_gpu_retests(const std::vector<GpuPairResult>& pairs);
// The report's plans: the ones its check carried, else made now from its
// first rounds (the same plan: made from the same pairs and floor).
std::shared_ptr<const RetestPlan> retest_plan_of(const PreflightReport& r);
std::shared_ptr<const GpuRetestPlan> gpu_retest_plan_of(const PreflightReport& r);
// A GPU retest that is a control pair, not a suspect's.
bool is_gpu_control(const GpuRetestPlan& plan, const GpuPairResult& retest);

// Judges each GPU suspect (RetestVerdict.node: the report's node index)
// on its retests, as judge_retests() does a node: named when every retest
// that ran is below half the lower of the median of the first pairs
// without a suspect and the best control of its node; cleared (a note)
// when one ran at speed or the controls ran as slow, "could not confirm"
// when none ran. `hosts`: the report's hosts, by node index.
std::vector<RetestVerdict> judge_gpu_retests(const GpuRetestPlan& plan, const std::vector<GpuPairResult>& pairs,
                                             const std::vector<GpuPairResult>& retests,
                                             const std::vector<std::string>& hosts);

}  // namespace mn
