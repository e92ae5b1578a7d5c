// SPDX-License-Identifier: Apache-2.0
// Recognises a per-node launcher (torchrun, accelerate launch, deepspeed) in
// a step's command line, so that one started once per task, the classic
// wrong count, is refused, and so is one started once per node that would
// not join the other nodes (it would train alone and exit 0).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/util/outcome.h"

namespace mn {

enum class Launcher { None, Torchrun, Accelerate, Deepspeed };

// torchrun, python -m torch.distributed.run / .launch; accelerate launch,
// accelerate-launch, python -m accelerate.commands.launch; deepspeed,
// python -m deepspeed.launcher.runner: with any path, also as the command
// of apptainer|singularity exec|run [options] IMAGE.
Launcher launcher_in(const std::vector<std::string>& argv);
bool is_node_launcher(const std::vector<std::string>& argv);

// A launcher must run once per node. Returns the problem when the step
// would start it once per task instead (unless the user said
// --mn-nccl-launch=task on purpose).
std::optional<Problem> launcher_count_problem(const std::vector<std::string>& argv, LaunchMode asked,
                                              uint32_t nnodes, uint32_t ntasks);

// What a launcher started once per node can find out about the step.
struct LauncherView {
    uint32_t launchers = 1;  // one per (emulated) node
    uint32_t gpus = 0;       // GPUs each launcher sees
    // The step's environment (HOME, HF_HOME, XDG_CACHE_HOME, PWD) and a
    // reader of the user's files (accelerate's config).
    std::function<std::optional<std::string>(const std::string&)> env;
    std::function<std::optional<std::string>(const std::string&)> read;
};

// The problem when the launcher, started once on each of several nodes,
// would run each node on its own or give every node the same rank:
// accelerate launch without a multi-process mode (one GPU per node and no
// --multi_gpu, or a config whose distributed_type is NO), accelerate with a
// multi-machine config but no --machine_rank, and deepspeed's launcher,
// which takes nodes from its hostfile and ssh, never from Slurm.
std::optional<Problem> launcher_join_problem(const std::vector<std::string>& argv, const LauncherView& view);

}  // namespace mn
