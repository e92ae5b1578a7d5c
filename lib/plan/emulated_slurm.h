// SPDX-License-Identifier: Apache-2.0
// Under --mn-emulate-nodes=K: Slurm's own variables as a task would see them
// on a real cluster whose nodes are the emulated ones, so that frameworks
// that read Slurm (Lightning's SLURMEnvironment, submitit) agree with
// NODE_RANK and NNODES. Plain values: the SPANK glue reads and writes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"
#include "lib/plan/step_plan.h"

namespace mn {

// The real value of each variable below stays under this prefix
// (MN_REAL_SLURM_NODEID, ...), set exactly when Slurm had set the variable.
inline constexpr const char* kRealPrefix = "MN_REAL_";
// Set to K in every task of an emulated step; srun inside the step looks for it.
inline constexpr const char* kEmulatedMarker = "MN_EMULATED_NODES";

// Every variable the emulated view may change, in the order it is written.
const std::vector<std::string>& emulated_slurm_names();

// Emulated node g of a real node: the real name for g = 0 (so that the first
// host of a node list still resolves), NAME-eG for the others.
std::string emulated_node_name(const std::string& real, unsigned group);

// Slurm's host list form of an ordered list, merging adjacent runs only
// (node1-e1,node1-e2 -> node1-e[1-2]), so the order, which gives the node
// ids, is kept.
std::string compress_hostlist(const std::vector<std::string>& hosts);

// {2,2,2,1} -> "2(x3),1", Slurm's per-node count form.
std::string compress_counts(const std::vector<uint32_t>& counts);

// The variables one task gets under emulation: MN_REAL_<name> for each name
// Slurm set, then the emulated values (all with replace = true), then the
// marker. Empty for K = 1: without emulation nothing of Slurm's is touched.
// `slurm` reads the task's environment as Slurm built it.
Outcome<std::vector<EnvVar>> emulated_slurm_env(const StepPlan& plan, const TaskFacts& task,
                                                const EnvLookup& slurm);

// For srun, sbatch or salloc started inside an emulated step: the changes
// that give Slurm's tools the real variables back (value nullopt: unset),
// and drop the MN_REAL_ copies and the marker. Empty outside emulation.
struct EnvChange {
    std::string name;
    std::optional<std::string> value;
};
std::vector<EnvChange> real_slurm_env(const EnvLookup& env);

}  // namespace mn
