// SPDX-License-Identifier: Apache-2.0
// Which GPU each task of a step uses, whatever way Slurm handed the GPUs out
// (--gres=gpu:N, --gpus-per-node, --gpus-per-task, --gpu-bind, device
// cgroups), and the CUDA_VISIBLE_DEVICES that makes the usual
// torch.cuda.set_device(LOCAL_RANK) select it while NCCL still sees the
// step's other GPUs of the node. Plain values: the glue reads Slurm's
// variables, lib/plan/gpuprobe the devices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/util/outcome.h"

namespace mn {

// MN_NCCL_GPUS: local-rank (the default: LOCAL_RANK selects the task's GPU)
// or slurm (Slurm's per-task GPU variables stay exactly as Slurm set them).
enum class GpuPolicy { LocalRank, Slurm };
Outcome<GpuPolicy> parse_gpu_policy(const std::string& value);

// The step's GPUs on one node, from the step's environment before any task
// is bound (slurmstepd's user_init).
struct NodeGpus {
    // Slurm gave the step GPUs on this node (SLURM_STEP_GPUS or
    // SLURM_GPUS_ON_NODE): CUDA_VISIBLE_DEVICES is Slurm's, and the plugin may
    // reorder it. Otherwise a CUDA_VISIBLE_DEVICES there is the user's.
    bool from_slurm = false;
    std::vector<std::string> visible;  // CUDA_VISIBLE_DEVICES: CUDA's names for them
    std::vector<std::string> ids;      // SLURM_STEP_GPUS, in the same order; empty when it does not align
    // Slurm numbers the GPUs relative to the step (0..n-1) because device
    // cgroups hide the others (ConstrainDevices=yes): visible differs from ids.
    bool local_index() const { return !ids.empty() && ids != visible; }
};
NodeGpus node_gpus(const std::string& step_gpus, const std::string& cuda_visible, const std::string& gpus_on_node);

// Slurm's GPU binding of the tasks (SLURMD_TRES_BIND in a task: "gpu:single:1"
// on 22.05, "gres/gpu:per_task:1" from 23.02 on).
enum class BindKind { None, PerTask, Single, Closest, Map, Mask, Other };
struct GpuBind {
    BindKind kind = BindKind::None;
    unsigned count = 0;  // per_task:N, single:N
    std::string list;    // map_gpu / mask_gpu list
    std::string option;  // the srun option, for messages ("--gpus-per-task=1")
};
GpuBind parse_gpu_bind(const std::string& slurmd_tres_bind);

// One task, as task_init sees it.
struct TaskGpuFacts {
    std::string host;  // the node's name (in messages)
    LaunchMode launch = LaunchMode::Task;
    unsigned emulate = 1;
    uint32_t local_tasks = 1;
    uint32_t local_id = 0;
    GpuBind bind;
    // The task's CUDA_VISIBLE_DEVICES as Slurm bound it; nullopt when unset
    // (22.05 unsets it for --gpu-bind=none).
    std::optional<std::vector<std::string>> bound;
    // How many GPU device files (/dev/nvidiaN) the task may open; nullopt
    // when the node has none.
    std::optional<uint32_t> openable;
};

struct TaskGpus {
    // The plugin chose (task mode) or passed on (node mode) this task's
    // GPUs; false leaves Slurm's variables alone.
    bool managed = false;
    std::vector<std::string> visible;  // CUDA_VISIBLE_DEVICES to give
    std::string device;                // task mode: the GPU LOCAL_RANK selects
    uint32_t local_rank = 0;           // its position in `visible`
    std::string why;                   // for --mn-nccl-explain
};

// The GPUs of one task; a problem (the same on every task of the node) when
// Slurm's binding leaves LOCAL_RANK no GPU of its own or two tasks one GPU.
Outcome<TaskGpus> choose_task_gpus(const NodeGpus& node, GpuPolicy policy, const TaskGpuFacts& task);

}  // namespace mn
