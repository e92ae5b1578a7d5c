// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/gpu_binding.h"

#include <algorithm>
#include <cstdlib>

#include "lib/util/text.h"

namespace mn {

Outcome<GpuPolicy> parse_gpu_policy(const std::string& value) {
    if (value.empty() || value == "local-rank") return GpuPolicy::LocalRank;
    if (value == "slurm") return GpuPolicy::Slurm;
    return Problem{"MN_NCCL_GPUS='" + value + "' is not valid", "use local-rank (the default) or slurm"};
}

namespace {

// "" and "NoDevFiles" (Slurm's word for no GPU) are no list.
std::vector<std::string> gpu_list(const std::string& s) {
    return s == "NoDevFiles" ? std::vector<std::string>{} : split_list(s);
}

bool has(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

std::string or_none(const std::vector<std::string>& v) { return v.empty() ? "none" : join_list(v); }

}  // namespace

NodeGpus node_gpus(const std::string& step_gpus, const std::string& cuda_visible, const std::string& gpus_on_node) {
    NodeGpus n;
    n.from_slurm = !step_gpus.empty() || !gpus_on_node.empty();
    n.visible = gpu_list(cuda_visible);
    n.ids = gpu_list(step_gpus);
    if (n.ids.size() != n.visible.size()) n.ids.clear();
    return n;
}

GpuBind parse_gpu_bind(const std::string& s) {
    GpuBind b;
    const auto at = s.find("gpu:");
    if (at == std::string::npos) return b;
    std::string spec = s.substr(at + 4);
    spec = spec.substr(0, spec.find('+'));  // another resource's binding follows
    if (spec.rfind("verbose,", 0) == 0) spec = spec.substr(8);
    auto after = [&](const char* prefix) -> std::optional<std::string> {
        const std::string p = prefix;
        if (spec.rfind(p, 0) != 0) return std::nullopt;
        return spec.substr(p.size());
    };
    b.option = "--gpu-bind=" + spec;
    const auto per_task = after("per_task:"), single = after("single:");
    const auto map = after("map_gpu:") ? after("map_gpu:") : after("map:");
    const auto mask = after("mask_gpu:") ? after("mask_gpu:") : after("mask:");
    if (per_task) {
        b.kind = BindKind::PerTask;
        b.count = static_cast<unsigned>(std::strtoul(per_task->c_str(), nullptr, 10));
        b.option = "--gpus-per-task=" + *per_task;  // or --gpu-bind=per_task:N, rarer
    } else if (single) {
        b.kind = BindKind::Single;
        b.count = static_cast<unsigned>(std::strtoul(single->c_str(), nullptr, 10));
    } else if (spec.rfind("closest", 0) == 0) {
        b.kind = BindKind::Closest;
    } else if (map || mask) {
        b.kind = map ? BindKind::Map : BindKind::Mask;
        b.list = map ? *map : *mask;
    } else if (spec != "none") {
        b.kind = BindKind::Other;
    }
    return b;
}

namespace {

// The GPUs one task may choose among: the node's, or under
// --mn-emulate-nodes its emulated node's contiguous share.
struct Domain {
    std::vector<std::string> gpus;
    uint32_t rank = 0;  // LOCAL_RANK (task mode)
    uint32_t tasks = 1;
    std::string name;   // the (emulated) node, in messages
};

Domain domain_of(const NodeGpus& node, const TaskGpuFacts& t, uint32_t local_id) {
    const unsigned k = t.emulate == 0 ? 1 : t.emulate;
    Domain d;
    d.tasks = t.launch == LaunchMode::Task ? std::max<uint32_t>(1, t.local_tasks / k) : 1;
    const uint32_t group = local_id / d.tasks;
    d.rank = local_id % d.tasks;
    d.name = group == 0 ? t.host : t.host + "-e" + std::to_string(group);
    d.gpus = node.visible;
    if (k > 1 && node.visible.size() % k == 0) {
        const std::size_t per = node.visible.size() / k;
        d.gpus.assign(node.visible.begin() + group * per, node.visible.begin() + (group + 1) * per);
    }
    return d;
}

// A GPU number as map_gpu/mask_gpu write it: Slurm's own number, or with
// device cgroups its place among the step's GPUs.
std::optional<std::string> gpu_numbered(const NodeGpus& node, long v) {
    if (v < 0) return std::nullopt;
    if (node.local_index())
        return static_cast<std::size_t>(v) < node.visible.size() ? std::optional<std::string>(node.visible[v])
                                                                   : std::nullopt;
    const std::vector<std::string>& names = node.ids.empty() ? node.visible : node.ids;
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == std::to_string(v)) return node.visible[i];
    return std::nullopt;
}

// What map_gpu/mask_gpu bind local task j to, as Slurm computes it: the
// list's entry for j (NUM*REPEAT counts REPEAT tasks, the list wraps);
// nothing inside the step means Slurm's fallback, the step's first GPU.
std::vector<std::string> listed_gpus(const NodeGpus& node, const GpuBind& b, uint32_t j) {
    std::vector<std::pair<long, uint32_t>> entries;
    uint32_t total = 0;
    for (const auto& tok : split_list(b.list)) {
        const auto star = tok.find('*');
        const unsigned long repeat = star == std::string::npos ? 1 : std::strtoul(tok.c_str() + star + 1, nullptr, 10);
        const uint32_t times = static_cast<uint32_t>(std::max(1ul, repeat));
        entries.push_back({std::strtol(tok.c_str(), nullptr, 0), times});
        total += times;
    }
    std::vector<std::string> out;
    if (total > 0) {
        uint32_t at = j % total;
        for (const auto& [value, times] : entries) {
            if (at >= times) {
                at -= times;
                continue;
            }
            if (b.kind == BindKind::Map) {
                if (auto g = gpu_numbered(node, value)) out.push_back(*g);
            } else {
                for (long bit = 0; bit < 63; ++bit)
                    if ((value >> bit) & 1)
                        if (auto g = gpu_numbered(node, bit)) out.push_back(*g);
            }
            break;
        }
    }
    if (out.empty() && !node.visible.empty()) out.push_back(node.visible[0]);
    return out;
}

// The GPU LOCAL_RANK will select: the one Slurm bound the task to when it
// bound exactly one inside the task's (emulated) node, else the rank's own
// place among the step's GPUs. A map or mask binds every task knowably, so
// there the first GPU of its own mask wins over the rank's place, and
// binding_problem sees any two tasks that meet.
std::string pick(const Domain& d, const std::vector<std::string>& bound, bool listed = false) {
    if (bound.size() == 1 && has(d.gpus, bound[0])) return bound[0];
    if (listed && !bound.empty() && !has(bound, d.gpus[d.rank]) && has(d.gpus, bound[0])) return bound[0];
    return d.gpus[d.rank];
}

std::optional<Problem> binding_problem(const NodeGpus& node, const TaskGpuFacts& t) {
    const GpuBind& b = t.bind;
    const std::string fix = "give each task its own GPU: --gpus-per-task=1 or --gpu-bind=single:1";
    if (b.kind == BindKind::Single && b.count > 1)
        return Problem{b.option + " puts " + std::to_string(b.count) + " tasks on each GPU: tasks 0 and 1 of " +
                           t.host + " would both use GPU " + node.visible[0] + ", and NCCL needs one GPU per rank",
                       fix};
    if (b.kind != BindKind::Map && b.kind != BindKind::Mask) return std::nullopt;
    std::vector<std::pair<std::string, uint32_t>> used;
    for (uint32_t j = 0; j < t.local_tasks; ++j) {
        const Domain d = domain_of(node, t, j);
        if (d.rank >= d.gpus.size()) continue;  // reported as a task without a GPU
        const std::string g = pick(d, listed_gpus(node, b, j), true);
        for (const auto& [other, task] : used)
            if (other == g)
                return Problem{"tasks " + std::to_string(task) + " and " + std::to_string(j) + " of " + t.host +
                                   " would both use GPU " + g + " (" + b.option + ")",
                               fix};
        used.push_back({g, j});
    }
    return std::nullopt;
}

// Device cgroups that let a task open only its own GPU: CUDA then numbers
// that one GPU 0, LOCAL_RANK 1 names nothing, and NCCL loses the peers.
bool peers_hidden(const NodeGpus& node, const TaskGpuFacts& t, const Domain& d) {
    if (d.gpus.size() <= 1) return false;
    if (t.openable) return *t.openable < d.gpus.size();
    // No device files to ask (not NVIDIA's): Slurm numbering the step's GPUs
    // from 0 and narrowing each task says the same.
    return node.local_index() && t.bind.kind != BindKind::None && t.bound && t.bound->size() < d.gpus.size();
}

Problem hidden_problem(const TaskGpuFacts& t, const Domain& d) {
    const std::string how = t.bind.option.empty() ? "per-task GPU binding" : t.bind.option;
    return Problem{"Slurm's device cgroup lets each task of " + t.host +
                       " open only its own GPU (ConstrainDevices=yes with " + how +
                       "): LOCAL_RANK 1 and up would name no GPU the task can see (" +
                       std::to_string(d.gpus.size()) + " GPUs of the step there), and NCCL would lose P2P/NVLink "
                       "between them",
                   "add --gpu-bind=none (every task then sees the step's GPUs of its node, its own at LOCAL_RANK), "
                   "or on Slurm 24.05 or newer --gres-flags=allow-task-sharing; set MN_NCCL_GPUS=slurm only if the "
                   "program picks its GPU itself (cuda:0)"};
}

// More tasks than GPUs: every task of the node says so, not only those left
// without one (a task refused alone would leave the others waiting).
Problem no_gpu_problem(const TaskGpuFacts& t, const Domain& d) {
    const std::size_t g = d.gpus.size();
    const bool emulated = t.emulate > 1;
    const std::string n = std::to_string(g);
    return Problem{(emulated ? "each emulated node of " : "") + t.host + " runs " + std::to_string(d.tasks) +
                       " tasks of the step but has " + n + " GPU" + (g == 1 ? "" : "s") + " of it" +
                       (emulated ? "" : " (" + join_list(d.gpus) + ")") + ": task " + n +
                       " would have no GPU of its own (LOCAL_RANK " + n + " names none) and tasks 0 and " + n +
                       " would both use " + (emulated ? "one GPU" : "GPU " + d.gpus[0]),
                   "give every task a GPU: --gpus-per-task=1, or --gres=gpu:" + std::to_string(d.tasks * t.emulate) +
                       " (--gpus-per-node); or run " + std::to_string(g * t.emulate) + " tasks per node"};
}

TaskGpus rank_gpus(const TaskGpuFacts& t, const Domain& d, const std::vector<std::string>& bound, bool listed) {
    TaskGpus out;
    out.managed = true;
    out.device = pick(d, bound, listed);
    out.local_rank = d.rank;
    out.visible = d.gpus;
    std::iter_swap(out.visible.begin() + d.rank, std::find(out.visible.begin(), out.visible.end(), out.device));
    const std::string how = t.bind.option.empty() ? "" : " (" + t.bind.option + ")";
    if (bound == d.gpus)
        out.why = "the step's GPUs on " + d.name + " are " + join_list(d.gpus) + ", in LOCAL_RANK order";
    else if (has(bound, out.device))
        out.why = "Slurm bound " + or_none(bound) + " to this task" + how;
    else
        out.why = "Slurm bound " + or_none(bound) + how + "; LOCAL_RANK takes the step's GPU " + out.device +
                  " so that no two tasks share one";
    return out;
}

}  // namespace

Outcome<TaskGpus> choose_task_gpus(const NodeGpus& node, GpuPolicy policy, const TaskGpuFacts& t) {
    TaskGpus out;
    if (policy == GpuPolicy::Slurm) {
        out.why = "MN_NCCL_GPUS=slurm: Slurm's CUDA_VISIBLE_DEVICES kept";
        return out;
    }
    if (!node.from_slurm || node.visible.empty()) {
        out.why = node.from_slurm ? "Slurm set no CUDA_VISIBLE_DEVICES for the step"
                                  : "the step has no GPUs of Slurm's on this node";
        return out;
    }
    const Domain d = domain_of(node, t, t.local_id);
    const std::vector<std::string> bound = t.bound ? *t.bound : d.gpus;
    if (t.launch == LaunchMode::Node) {
        // The launcher's workers take LOCAL_RANK among its GPUs: all that
        // Slurm left it inside its (emulated) node.
        out.managed = true;
        for (const auto& g : bound)
            if (has(d.gpus, g)) out.visible.push_back(g);
        if (out.visible.empty()) out.visible = t.bound ? *t.bound : d.gpus;
        out.why = "the launcher's GPUs on " + d.name;
        return out;
    }
    if (t.bind.kind == BindKind::PerTask && t.bind.count > 1) {
        out.why = t.bind.option + ": each task has several GPUs, LOCAL_RANK does not choose among them; kept";
        return out;
    }
    if (peers_hidden(node, t, d)) return hidden_problem(t, d);
    if (auto p = binding_problem(node, t)) return *p;
    if (d.tasks > d.gpus.size()) return no_gpu_problem(t, d);
    const bool listed = t.bind.kind == BindKind::Map || t.bind.kind == BindKind::Mask;
    return rank_gpus(t, d, listed ? listed_gpus(node, t.bind, t.local_id) : bound, listed);
}

}  // namespace mn
