// SPDX-License-Identifier: Apache-2.0
// StepPlan: everything one node decides once per step (launch mode, master
// address and port, socket interface), and the environment each task of the
// step gets from it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/fabric/fabric.h"
#include "lib/plan/gpu_binding.h"
#include "lib/plan/netpath.h"
#include "lib/util/outcome.h"
#include "lib/plan/step_layout.h"

namespace mn {

// The user's choices for this step, from the options or MN_NCCL.
struct UserChoice {
    Mode mode = Mode::Off;
    LaunchMode launch = LaunchMode::Detect;
    bool explain = false;
    unsigned emulate = 1;  // --mn-emulate-nodes=K: K emulated nodes per real node
};

// Looks a variable up in the step's environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
// This process's own environment (mn-preflight, outside slurmstepd).
EnvLookup process_env();

// The network as a node sees it; the real one is SystemNetwork, tests give
// their own.
class NetworkView {
public:
    virtual ~NetworkView() = default;
    virtual std::vector<Ipv4> resolve(const std::string& name, std::string& error) const = 0;
    virtual std::vector<Interface> interfaces() const = 0;
    virtual std::optional<Ipv4> route_source(Ipv4 dst) const = 0;
    virtual std::optional<Ipv4> default_route(const std::vector<Interface>& ifs) const = 0;
};

class SystemNetwork : public NetworkView {
public:
    std::vector<Ipv4> resolve(const std::string& name, std::string& error) const override;
    std::vector<Interface> interfaces() const override;
    std::optional<Ipv4> route_source(Ipv4 dst) const override;
    std::optional<Ipv4> default_route(const std::vector<Interface>& ifs) const override;
};

struct StepPlan {
    Mode mode = Mode::Off;
    LaunchMode launch = LaunchMode::Task;
    // Node mode found by the count (one task on every node) for a command
    // that is not a per-node launcher: a plain program needs RANK and
    // WORLD_SIZE, and a torchrun that a wrapper starts gives its workers
    // their own, so such a task gets both sets.
    bool ranks_too = false;
    bool force = false;
    StepFacts facts;
    std::vector<uint32_t> tasks_per_node;
    std::string node0;
    std::string host;  // this node's name in SLURM_STEP_NODELIST
    unsigned emulate = 1;
    std::string master_addr;
    uint16_t master_port = 0;
    uint16_t watch_port = 0;  // rank 0's hang watch (derive_watch_port); 0: none apart from MASTER_PORT
    std::string rdzv;
    std::string ifname;
    // Why each value was chosen, for --mn-nccl-explain.
    std::string why_addr, why_port, why_ifname, why_launch;
    // NCCL's network (NCCL_IB_HCA, NCCL_IB_GID_INDEX or NCCL_IB_DISABLE).
    FabricChoice fabric;
    // GPU to HCA locality, loaded (through hwloc) only for --mn-nccl-explain.
    std::string locality;
    // The step's GPUs on this node before any task is bound, how the plugin
    // treats Slurm's binding (MN_NCCL_GPUS), where the GPU device files are
    // (MN_NCCL_DEV_DIR, /dev), and their PCI bus ids (explain only).
    NodeGpus gpus;
    GpuPolicy gpu_policy = GpuPolicy::LocalRank;
    std::string dev_dir = "/dev";
    std::vector<std::string> bus_ids;
};

// Where the plugin's fabric discovery reads in slurmstepd (root): plugstack's
// sysfs_root, else a step's MN_NCCL_SYSFS_ROOT where plugstack's
// user_sysfs_root opened it (a test rig's fixtures), else /sys.
std::string sysfs_root(const EnvLookup& env, const SiteConfig& site);
// Where a process of the user's own (mn-preflight) reads: MN_NCCL_SYSFS_ROOT,
// else /sys.
std::string user_sysfs_root(const EnvLookup& env);
// The warning for a step whose MN_NCCL_SYSFS_ROOT slurmstepd did not read;
// "" where it read it or none was given.
std::string unread_sysfs_root(const EnvLookup& env, const SiteConfig& site);

// The interface that carries this node's route to MASTER_ADDR (an IPv4
// address), as the plugin chooses it; "" when there is none.
std::string interface_towards(const std::string& master_addr, const NetworkView& net);

Outcome<StepPlan> plan_step(const StepFacts& facts, const UserChoice& choice, const SiteConfig& site,
                            const EnvLookup& env, const NetworkView& net);

// The node's fabric into the plan. On Google's A3 (tcpx, tcpxo) NCCL's
// sockets go on the VM's control NIC, as Google documents, whichever
// interface the route to MASTER_ADDR takes (a warning says when they differ).
void take_fabric(StepPlan& plan, FabricChoice fabric);

// pyxis --container-unshare (or PYXIS_CONTAINER_UNSHARE): whether its list
// ("net", "net,ipc") gives the container a network namespace of its own.
bool unshares_network(const std::string& unshare);
// A step whose containers each have a network of their own: enroot gives
// that namespace a loopback alone, so no rank can reach another node's.
// Across nodes the step is refused (the problem says why and the fix;
// never NCCL_SOCKET_IFNAME=lo between nodes). On one node its ranks meet
// on the loopback: MASTER_ADDR 127.0.0.1, lo for NCCL's and gloo's
// sockets, NCCL's network off (the node's HCAs are not in that
// namespace); the plan's why-fields say so. `source`: how it was asked
// ("pyxis --container-unshare=net").
std::optional<Problem> own_network(StepPlan& plan, const std::string& source);

struct TaskFacts {
    uint32_t local_id = 0;
    uint32_t global_id = 0;
    uint32_t gpus = 0;  // the step's GPUs on this node (count_gpus)
    // The GPU indices Slurm gave the task (CUDA_VISIBLE_DEVICES), which
    // emulation splits between the emulated nodes.
    std::vector<std::string> gpu_list;
    // Slurm left the task no CUDA_VISIBLE_DEVICES (22.05 with --gpu-bind=none).
    bool gpu_list_unset = false;
    std::string tres_bind;  // SLURMD_TRES_BIND: Slurm's GPU binding of the task
    // GPU device files the task may open (gpuprobe); nullopt: none here.
    std::optional<uint32_t> openable;
    // ROCR_VISIBLE_DEVICES holds the same list (Slurm writes both): it follows.
    bool rocr_same = false;
};

// The task's GPU facts from its environment in task_init (after Slurm bound
// it) and the GPU device files it may open.
void read_task_gpus(TaskFacts& task, const EnvLookup& env, const StepPlan& plan);

// Everything that stops a task before the program: the emulated layout and
// Slurm's GPU binding (choose_task_gpus); the same answer on every task of a node.
std::optional<Problem> task_problem(const StepPlan& plan, const TaskFacts& task);

// The task's GPUs as the plugin gives them.
Outcome<TaskGpus> task_gpus(const StepPlan& plan, const TaskFacts& task);

struct EnvVar {
    std::string name;
    std::string value;
    // Replace what is there even without force: Slurm's CUDA_VISIBLE_DEVICES
    // must become the emulated node's share.
    bool replace = false;
};

// Under --mn-emulate-nodes=K: the node's GPUs must split evenly K ways.
std::optional<Problem> emulation_problem(const StepPlan& plan, const TaskFacts& task);

// "0,1,2,3" -> {"0","1","2","3"}; "" and Slurm's "NoDevFiles" -> {}.
std::vector<std::string> split_gpu_list(const std::string& cuda_visible);

// The variables a task gets, in a stable order. Whether a variable the user
// already set is kept is the caller's business (overwrite = plan.force).
std::vector<EnvVar> task_environment(const StepPlan& plan, const TaskFacts& task);

// One line for --mn-nccl-explain.
std::string explain_line(const StepPlan& plan, const std::string& hostname);

// --mn-nccl-explain's line for one task: the GPU it uses (LOCAL_RANK's in
// task mode, the launcher's in node mode), its PCI bus id and nearest HCA
// where known, and CUDA_VISIBLE_DEVICES; "" for a step without GPUs.
std::string task_explain_line(const StepPlan& plan, const TaskFacts& task, const std::string& hostname);

}  // namespace mn
