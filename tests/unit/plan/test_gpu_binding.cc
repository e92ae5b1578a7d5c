// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/gpu_binding.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "lib/plan/gpuprobe.h"
#include "lib/plan/step_plan.h"
#include "lib/util/text.h"
#include "tests/unit/unit.h"

using namespace mn;

// A node whose step has `visible` (CUDA_VISIBLE_DEVICES) and `ids`
// (SLURM_STEP_GPUS) as slurmstepd sees them before binding.
static NodeGpus node(const std::string& visible, const std::string& ids = "") {
    return node_gpus(ids.empty() ? visible : ids, visible, std::to_string(split_list(visible).size()));
}

// What Slurm hands task j of n under one srun: its binding and the
// CUDA_VISIBLE_DEVICES it left the task (nullopt: unset).
struct Step {
    NodeGpus gpus;
    std::string tres_bind;
    std::vector<std::optional<std::string>> bound;  // per local task
    std::optional<uint32_t> openable;
    unsigned emulate = 1;
    LaunchMode launch = LaunchMode::Task;
};

static TaskGpuFacts facts(const Step& s, uint32_t j) {
    TaskGpuFacts t;
    t.host = "node2";
    t.launch = s.launch;
    t.emulate = s.emulate;
    t.local_tasks = static_cast<uint32_t>(s.bound.size());
    t.local_id = j;
    t.bind = parse_gpu_bind(s.tres_bind);
    if (s.bound[j]) t.bound = split_list(*s.bound[j]);
    t.openable = s.openable;
    return t;
}

static std::vector<Outcome<TaskGpus>> run(const Step& s, GpuPolicy policy = GpuPolicy::LocalRank) {
    std::vector<Outcome<TaskGpus>> out;
    for (uint32_t j = 0; j < s.bound.size(); ++j) out.push_back(choose_task_gpus(s.gpus, policy, facts(s, j)));
    return out;
}

// Every task of the node agrees: either all are refused, or each has its
// own GPU at position LOCAL_RANK of a list that is its node's (or emulated
// node's) GPUs reordered, and no two tasks have the same GPU.
static std::vector<TaskGpus> all_ok(const Step& s) {
    auto r = run(s);
    std::vector<TaskGpus> out;
    std::set<std::string> devices;
    for (auto& g : r) {
        if (!g) fail_msg("refused: %s", g.problem().text().c_str());
        assert_true(g->managed);
        assert_str(g->visible.at(g->local_rank), g->device);
        std::multiset<std::string> a(g->visible.begin(), g->visible.end());
        assert_int_equal(a.size(), s.gpus.visible.size() / s.emulate);
        if (!devices.insert(g->device).second) fail_msg("GPU %s chosen twice", g->device.c_str());
        out.push_back(*g);
    }
    return out;
}

static std::string all_refused(const Step& s) {
    auto r = run(s);
    for (auto& g : r)
        if (g) fail_msg("task accepted with %s while another is refused", join_list(g->visible).c_str());
    for (auto& g : r) assert_str(g.problem().text(), r[0].problem().text());  // one message per node
    return r[0].problem().text();
}

static std::vector<std::optional<std::string>> each(std::initializer_list<const char*> lists) {
    std::vector<std::optional<std::string>> v;
    for (const char* l : lists) v.push_back(l ? std::optional<std::string>(l) : std::nullopt);
    return v;
}

static void reads_the_node(void**) {
    NodeGpus n = node_gpus("0,1", "0,1", "2");
    assert_true(n.from_slurm);
    assert_false(n.local_index());
    // ConstrainDevices: CUDA's names count from 0 inside the cgroup.
    n = node_gpus("4,5", "0,1", "2");
    assert_true(n.local_index());
    // A CUDA_VISIBLE_DEVICES without Slurm's GPUs is the user's.
    n = node_gpus("", "3", "");
    assert_false(n.from_slurm);
    n = node_gpus("0,1,2", "0,1", "3");  // does not align: no ids
    assert_int_equal(n.ids.size(), 0);
    assert_int_equal(node_gpus("", "NoDevFiles", "").visible.size(), 0);
}

static void reads_slurms_binding(void**) {
    struct Case {
        const char* env;
        BindKind kind;
        unsigned count;
        const char* list;
    } cases[] = {
        {"", BindKind::None, 0, ""},
        {"gpu:per_task:1", BindKind::PerTask, 1, ""},            // 22.05, --gpus-per-task=1
        {"gres/gpu:per_task:2", BindKind::PerTask, 2, ""},       // 24.11
        {"gpu:single:1", BindKind::Single, 1, ""},
        {"gres/gpu:verbose,single:2", BindKind::Single, 2, ""},
        {"gpu:closest", BindKind::Closest, 0, ""},
        {"gpu:map_gpu:1,0", BindKind::Map, 0, "1,0"},
        {"gres/gpu:map:0*2,1*2", BindKind::Map, 0, "0*2,1*2"},   // 26.05's syntax
        {"gpu:mask_gpu:0x3,0xc", BindKind::Mask, 0, "0x3,0xc"},
        {"gres/gpu:mask:0x1+gres/nic:closest", BindKind::Mask, 0, "0x1"},
        {"gpu:none", BindKind::None, 0, ""},
        {"gres/gpu:someday", BindKind::Other, 0, ""},
        {"gres/nic:closest", BindKind::None, 0, ""},
    };
    for (const auto& c : cases) {
        GpuBind b = parse_gpu_bind(c.env);
        if (b.kind != c.kind) fail_msg("%s: kind %d", c.env, static_cast<int>(b.kind));
        assert_int_equal(b.count, c.count);
        assert_str(b.list, c.list);
    }
    assert_contains(parse_gpu_bind("gpu:per_task:1").option, "--gpus-per-task=1");
    assert_str(parse_gpu_bind("gpu:map_gpu:0,0").option, "--gpu-bind=map_gpu:0,0");
}

static void gres_without_binding_keeps_slurms_order(void**) {
    // --gres=gpu:4 and --gpus-per-node=4: every task has the step's 4 GPUs.
    Step s{node("0,1,2,3"), "", each({"0,1,2,3", "0,1,2,3", "0,1,2,3", "0,1,2,3"}), 4u};
    auto g = all_ok(s);
    for (uint32_t j = 0; j < 4; ++j) {
        assert_str(join_list(g[j].visible), "0,1,2,3");
        assert_str(g[j].device, std::to_string(j));
    }
    // GPUs 4-7 of an 8-GPU node.
    s = Step{node("4,5,6,7"), "", each({"4,5,6,7", "4,5,6,7"}), 8u};
    g = all_ok(s);
    assert_str(g[1].device, "5");
    assert_str(join_list(g[1].visible), "4,5,6,7");
}

static void gpus_per_task_puts_the_own_gpu_at_local_rank(void**) {
    // The issue: task 1 got CUDA_VISIBLE_DEVICES=1, set_device(1) failed.
    Step s{node("0,1"), "gpu:per_task:1", each({"0", "1"}), 2u};
    auto g = all_ok(s);
    assert_str(join_list(g[0].visible), "0,1");
    assert_str(join_list(g[1].visible), "0,1");
    assert_str(g[1].device, "1");
    assert_contains(g[1].why, "Slurm bound 1 to this task (--gpus-per-task=1)");
    // 24.11 binds by CPU affinity first: task 0 may get GPU 1.
    s = Step{node("0,1,2,3"), "gres/gpu:per_task:1", each({"1", "0", "3", "2"}), 4u};
    g = all_ok(s);
    assert_str(join_list(g[0].visible), "1,0,2,3");
    assert_str(join_list(g[1].visible), "1,0,2,3");
    assert_str(join_list(g[2].visible), "0,1,3,2");
    assert_str(g[3].device, "2");
    // --gpu-bind=single:1 binds the same way.
    s = Step{node("2,3"), "gpu:single:1", each({"2", "3"}), 4u};
    g = all_ok(s);
    assert_str(g[0].device, "2");
    assert_str(g[1].device, "3");
}

static void maps_and_masks(void**) {
    Step s{node("0,1"), "gpu:map_gpu:1,0", each({"1", "0"}), 2u};
    auto g = all_ok(s);
    assert_str(join_list(g[0].visible), "1,0");
    assert_str(join_list(g[1].visible), "1,0");
    assert_str(g[0].device, "1");
    // Repetition counts and a list shorter than the tasks (it wraps).
    s = Step{node("0,1,2,3"), "gres/gpu:map:3*2,2*2", each({"3", "3", "2", "2"}), 4u};
    assert_contains(all_refused(s), "tasks 0 and 1 of node2 would both use GPU 3 (--gpu-bind=map:3*2,2*2)");
    s = Step{node("0,1,2,3"), "gpu:map_gpu:3,2", each({"3", "2", "3", "2"}), 4u};
    assert_contains(all_refused(s), "tasks 0 and 2 of node2 would both use GPU 3");
    // The brief's case.
    s = Step{node("0,1"), "gpu:map_gpu:0,0", each({"0", "0"}), 2u};
    std::string p = all_refused(s);
    assert_contains(p, "tasks 0 and 1 of node2 would both use GPU 0");
    assert_contains(p, "--gpus-per-task=1 or --gpu-bind=single:1");
    // An id outside the step: Slurm falls back to the step's first GPU.
    s = Step{node("0,1"), "gpu:map_gpu:7,0", each({"0", "0"}), 2u};
    assert_contains(all_refused(s), "would both use GPU 0");
    // Masks of one GPU each, and masks of two: each task takes its own.
    s = Step{node("0,1"), "gpu:mask_gpu:0x2,0x1", each({"1", "0"}), 2u};
    g = all_ok(s);
    assert_str(g[0].device, "1");
    s = Step{node("0,1,2,3"), "gpu:mask_gpu:0x3,0xc", each({"0,1", "2,3"}), 4u};
    g = all_ok(s);
    assert_str(g[0].device, "0");
    assert_str(g[1].device, "2");
    assert_str(join_list(g[1].visible), "0,2,1,3");
    s = Step{node("0,1"), "gpu:mask_gpu:0x1", each({"0", "0"}), 2u};
    assert_contains(all_refused(s), "tasks 0 and 1 of node2 would both use GPU 0");
}

static void closest_keeps_every_task_on_its_own_gpu(void**) {
    // Without Cores= in gres.conf every GPU is closest to every task.
    Step s{node("0,1,2,3"), "gpu:closest", each({"0,1,2,3", "0,1,2,3", "0,1,2,3", "0,1,2,3"}), 4u};
    auto g = all_ok(s);
    assert_str(g[2].device, "2");
    // Two sockets, tasks 0-1 near GPUs 0-1, 2-3 near 2-3: LOCAL_RANK's GPU is near.
    s = Step{node("0,1,2,3"), "gpu:closest", each({"0,1", "0,1", "2,3", "2,3"}), 4u};
    g = all_ok(s);
    for (uint32_t j = 0; j < 4; ++j) assert_str(g[j].device, std::to_string(j));
    assert_contains(g[2].why, "Slurm bound 2,3 to this task (--gpu-bind=closest)");
    // Tasks placed across the sockets (cyclic): each still gets a GPU of its
    // own, and the explanation says it is not among the near ones.
    s = Step{node("0,1,2,3"), "gpu:closest", each({"0,1", "2,3", "0,1", "2,3"}), 4u};
    g = all_ok(s);
    assert_str(g[1].device, "1");
    assert_contains(g[1].why, "LOCAL_RANK takes the step's GPU 1 so that no two tasks share one");
    // A task that closest bound to one GPU gets it.
    s = Step{node("0,1"), "gpu:closest", each({"1", "0"}), 2u};
    g = all_ok(s);
    assert_str(g[0].device, "1");
}

static void single_with_several_tasks_per_gpu_is_refused(void**) {
    Step s{node("0,1"), "gres/gpu:single:2", each({"0", "0", "1", "1"}), 2u};
    std::string p = all_refused(s);
    assert_contains(p, "--gpu-bind=single:2 puts 2 tasks on each GPU: tasks 0 and 1 of node2 would both use GPU 0");
    assert_contains(p, "--gpu-bind=single:1");
}

static void more_tasks_than_gpus_is_refused_on_every_task(void**) {
    Step s{node("0"), "", each({"0", "0"}), 4u};
    std::string p = all_refused(s);
    assert_contains(p, "node2 runs 2 tasks of the step but has 1 GPU of it (0)");
    assert_contains(p, "tasks 0 and 1 would both use GPU 0");
    assert_contains(p, "--gpus-per-task=1, or --gres=gpu:2");
    s = Step{node("0,1"), "", each({"0,1", "0,1", "0,1"}), 4u};
    assert_contains(all_refused(s), "task 2 would have no GPU of its own (LOCAL_RANK 2 names none)");
}

static void device_cgroups_that_hide_peers_are_refused(void**) {
    // ConstrainDevices=yes and --gpus-per-task=1 on 22.05: each task may
    // open one GPU, which CUDA calls 0, and Slurm says 0 to every task.
    Step s{node("0,1", "4,5"), "gpu:per_task:1", each({"0", "0"}), 1u};
    std::string p = all_refused(s);
    assert_contains(p, "Slurm's device cgroup lets each task of node2 open only its own GPU");
    assert_contains(p, "--gpu-bind=none");
    assert_contains(p, "--gres-flags=allow-task-sharing");
    assert_contains(p, "MN_NCCL_GPUS=slurm");
    // Without device files to ask, Slurm's numbering says the same.
    s.openable = std::nullopt;
    assert_contains(all_refused(s), "open only its own GPU");
    // --gpu-bind=none with ConstrainDevices: the step's GPUs, all openable
    // (22.05 unsets the task's CUDA_VISIBLE_DEVICES).
    s = Step{node("0,1", "4,5"), "gpu:none", each({nullptr, nullptr}), 2u};
    auto g = all_ok(s);
    assert_str(join_list(g[1].visible), "0,1");
    assert_str(g[1].device, "1");
    // --gres=gpu:2 with ConstrainDevices: the step's cgroup, no task's.
    s = Step{node("0,1", "2,3"), "", each({"0,1", "0,1"}), 2u};
    g = all_ok(s);
    assert_str(g[0].device, "0");
    // allow-task-sharing (24.05+): bound, but every GPU of the step openable.
    s = Step{node("0,1", "2,3"), "gres/gpu:per_task:1", each({"0", "1"}), 2u};
    g = all_ok(s);
    assert_str(g[1].device, "1");
    // One task per node needs no peers.
    s = Step{node("0", "3"), "gpu:per_task:1", each({"0"}), 1u};
    g = all_ok(s);
    assert_str(join_list(g[0].visible), "0");
}

static void several_gpus_per_task_are_left_to_slurm(void**) {
    Step s{node("0,1,2,3"), "gpu:per_task:2", each({"0,1", "2,3"}), 4u};
    for (auto& g : run(s)) {
        assert_true(g.ok());
        assert_false(g->managed);
        assert_contains(g->why, "LOCAL_RANK does not choose among them");
    }
}

static void the_users_list_and_policy_slurm_are_kept(void**) {
    // No Slurm GPUs on the node: a CUDA_VISIBLE_DEVICES there is the user's.
    Step s{node_gpus("", "3,2", ""), "", each({"3,2", "3,2"}), 4u};
    for (auto& g : run(s)) assert_false(g->managed);
    // MN_NCCL_GPUS=slurm: Slurm's binding as it is, no refusal either.
    s = Step{node("0,1", "4,5"), "gpu:per_task:1", each({"0", "0"}), 1u};
    for (auto& g : run(s, GpuPolicy::Slurm)) {
        assert_true(g.ok());
        assert_false(g->managed);
    }
    assert_true(parse_gpu_policy("").ok());
    assert_true(*parse_gpu_policy("slurm") == GpuPolicy::Slurm);
    assert_contains(parse_gpu_policy("bound").problem().text(), "MN_NCCL_GPUS='bound' is not valid");
}

static void emulated_nodes_take_their_share(void**) {
    Step s{node("0,1,2,3"), "gpu:per_task:1", each({"0", "1", "2", "3"}), 4u, 2};
    auto g = all_ok(s);
    assert_str(join_list(g[0].visible), "0,1");
    assert_str(join_list(g[2].visible), "2,3");
    assert_str(g[3].device, "3");
    assert_int_equal(g[3].local_rank, 1);
    s = Step{node("0,1,2,3"), "", each({"0,1,2,3", "0,1,2,3", "0,1,2,3", "0,1,2,3"}), 4u, 2};
    g = all_ok(s);
    assert_str(join_list(g[1].visible), "0,1");
    assert_str(g[2].device, "2");
    // A map that sends task 0 to the other emulated node's GPU: each task
    // stays inside its emulated node, and says why.
    s = Step{node("0,1,2,3"), "gpu:map_gpu:2,1,0,3", each({"2", "1", "0", "3"}), 4u, 2};
    g = all_ok(s);
    assert_str(g[0].device, "0");
    assert_str(g[2].device, "2");
    assert_contains(g[0].why, "Slurm bound 2 (--gpu-bind=map_gpu:2,1,0,3); LOCAL_RANK takes the step's GPU 0");
    s = Step{node("0,1"), "", each({"0,1", "0,1", "0,1", "0,1"}), 4u, 2};
    assert_contains(all_refused(s), "each emulated node of node2 runs 2 tasks of the step but has 1 GPU of it: task 1");
}

static void launchers_get_their_nodes_gpus(void**) {
    Step s{node("0,1,2,3"), "", each({"0,1,2,3"}), 4u, 1, LaunchMode::Node};
    auto g = run(s);
    assert_true(g[0]->managed);
    assert_str(join_list(g[0]->visible), "0,1,2,3");
    // Two launchers of two emulated nodes.
    s = Step{node("4,5,6,7"), "", each({"4,5,6,7", "4,5,6,7"}), 8u, 2, LaunchMode::Node};
    g = run(s);
    assert_str(join_list(g[0]->visible), "4,5");
    assert_str(join_list(g[1]->visible), "6,7");
    // A launcher Slurm bound to one GPU runs one process.
    s = Step{node("0,1"), "gpu:single:1", each({"1"}), 2u, 1, LaunchMode::Node};
    g = run(s);
    assert_str(join_list(g[0]->visible), "1");
    // 22.05 --gpu-bind=none: no list in the task, the step's.
    s = Step{node("0,1"), "gpu:none", each({nullptr}), 2u, 1, LaunchMode::Node};
    assert_str(join_list(run(s)[0]->visible), "0,1");
}

static void gpu_uuids_reorder_too(void**) {
    Step s{node("GPU-a,GPU-b", "0,1"), "gpu:per_task:1", each({"GPU-b", "GPU-a"}), 2u};
    auto g = all_ok(s);
    assert_str(join_list(g[0].visible), "GPU-b,GPU-a");
    assert_str(g[1].device, "GPU-a");
}

// Every option the brief lists, on 1-8 GPUs and 1-8 tasks: whatever Slurm
// did, the node's tasks agree (all refused, or distinct GPUs at LOCAL_RANK).
static void many_layouts_agree(void**) {
    const char* binds[] = {"", "gpu:per_task:1", "gpu:single:1", "gpu:closest", "gpu:none", "gpu:map_gpu:0,1,2,3,4,5,6,7"};
    int accepted = 0, refused = 0;
    for (unsigned gpus = 1; gpus <= 8; ++gpus)
        for (unsigned tasks = 1; tasks <= 8; ++tasks)
            for (const char* b : binds) {
                std::vector<std::string> all;
                for (unsigned i = 0; i < gpus; ++i) all.push_back(std::to_string(i));
                Step s{node(join_list(all)), b, {}, gpus};
                const GpuBind bind = parse_gpu_bind(b);
                for (unsigned j = 0; j < tasks; ++j) {
                    // What Slurm leaves each task: its block share when bound.
                    if (bind.kind == BindKind::PerTask || bind.kind == BindKind::Single || bind.kind == BindKind::Map)
                        s.bound.push_back(std::to_string(j % gpus));
                    else if (bind.kind == BindKind::None && *b)
                        s.bound.push_back(std::nullopt);
                    else
                        s.bound.push_back(join_list(all));
                }
                auto r = run(s);
                const bool ok = r[0].ok();
                for (auto& g : r) assert_true(g.ok() == ok);
                if (ok) {
                    all_ok(s);
                    ++accepted;
                } else {
                    assert_true(tasks > gpus);  // the only reason here
                    ++refused;
                }
            }
    assert_true(accepted > 100 && refused > 100);
}

// ---- through StepPlan: the variables, the facts from the environment ----

using Env = std::map<std::string, std::string>;

static EnvLookup lookup(const Env& e) {
    return [e](const std::string& k) -> std::optional<std::string> {
        auto it = e.find(k);
        return it == e.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

static StepPlan plan_for(LaunchMode launch, uint32_t local_tasks, const std::string& visible) {
    StepPlan p;
    p.launch = launch;
    p.host = "node1";
    p.master_addr = "10.0.0.10";
    p.ifname = "eth0";
    p.facts.nnodes = 2;
    p.facts.node_id = 1;
    p.facts.local_tasks = local_tasks;
    p.facts.total_tasks = local_tasks * 2;
    p.gpus = node(visible);
    p.dev_dir = "/nonexistent";
    return p;
}

static Env vars(const StepPlan& p, const TaskFacts& t, std::set<std::string>* replaced = nullptr) {
    Env m;
    for (const auto& v : task_environment(p, t)) {
        m[v.name] = v.value;
        if (v.replace && replaced) replaced->insert(v.name);
    }
    return m;
}

static void the_task_environment(void**) {
    StepPlan p = plan_for(LaunchMode::Task, 2, "0,1");
    TaskFacts t;
    t.local_id = 1;
    t.global_id = 3;
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "1"}, {"ROCR_VISIBLE_DEVICES", "1"}, {"SLURM_STEP_GPUS", "1"},
                              {"SLURM_GPUS_ON_NODE", "2"}, {"SLURMD_TRES_BIND", "gpu:per_task:1"}}),
                   p);
    assert_false(task_problem(p, t).has_value());
    std::set<std::string> replaced;
    Env e = vars(p, t, &replaced);
    assert_str(e.at("LOCAL_RANK"), "1");
    assert_str(e.at("CUDA_VISIBLE_DEVICES"), "0,1");  // Slurm's "1" replaced, even without force
    assert_str(e.at("ROCR_VISIBLE_DEVICES"), "0,1");
    assert_str(e.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    assert_true(replaced.count("CUDA_VISIBLE_DEVICES"));
    assert_false(replaced.count("CUDA_DEVICE_ORDER"));  // the user's own order is kept
    // --gres=gpu:2: Slurm's list is already right, so it is not rewritten.
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_STEP_GPUS", "0,1"}}), p);
    e = vars(p, t);
    assert_false(e.count("CUDA_VISIBLE_DEVICES"));
    assert_str(e.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    // A refused layout: the problem, and no task of the node starts.
    p = plan_for(LaunchMode::Task, 3, "0,1");
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_STEP_GPUS", "0,1"}}), p);
    assert_contains(task_problem(p, t)->text(), "node1 runs 3 tasks of the step but has 2 GPUs");
}

static void the_launchers_environment(void**) {
    StepPlan p = plan_for(LaunchMode::Node, 1, "0,1,2,3");
    TaskFacts t;
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"SLURM_STEP_GPUS", "0,1,2,3"}}), p);
    Env e = vars(p, t);
    assert_str(e.at("NPROC_PER_NODE"), "4");
    assert_str(e.at("PET_NPROC_PER_NODE"), "4");
    assert_false(e.count("CUDA_VISIBLE_DEVICES"));
    // Bound to one GPU (--gpus-per-task=1 with one task per node).
    p = plan_for(LaunchMode::Node, 1, "2");
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "2"}, {"SLURM_STEP_GPUS", "2"}, {"SLURMD_TRES_BIND", "gpu:per_task:1"}}), p);
    e = vars(p, t);
    assert_str(e.at("GPUS_PER_NODE"), "1");
    assert_false(e.count("CUDA_DEVICE_ORDER"));
}

static void explains_each_task(void**) {
    StepPlan p = plan_for(LaunchMode::Task, 2, "0,1");
    p.bus_ids = {"0000:18:00.0", "0000:2a:00.0"};
    p.locality = "GPU0>mlx5_0 (PIX: same PCIe switch), GPU1>mlx5_1 (PIX: same PCIe switch)";
    TaskFacts t;
    t.local_id = 1;
    t.global_id = 3;
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "1"}, {"SLURM_STEP_GPUS", "1"}, {"SLURMD_TRES_BIND", "gpu:per_task:1"}}), p);
    const std::string line = task_explain_line(p, t, "node1");
    assert_contains(line, "mn_nccl: node1 task 1 (RANK 3): LOCAL_RANK 1 selects GPU 1 [PCI 0000:2a:00.0, nearest HCA mlx5_1 (PIX: same PCIe switch)]");
    assert_contains(line, "CUDA_VISIBLE_DEVICES=0,1 (Slurm gave 1)");
    // No NVIDIA GPUs known: the index only.
    p.bus_ids.clear();
    p.locality = "no GPUs in the topology";
    assert_contains(task_explain_line(p, t, "node1"), "LOCAL_RANK 1 selects GPU 1; CUDA_VISIBLE_DEVICES=0,1");
    // Device cgroups: CUDA's 0 is Slurm's 4.
    p.gpus = node("0,1", "4,5");
    p.bus_ids = {"a", "b", "c", "d", "0000:9a:00.0", "0000:ab:00.0"};
    read_task_gpus(t, lookup({{"SLURM_STEP_GPUS", "4,5"}, {"SLURMD_TRES_BIND", "gpu:none"}}), p);
    assert_contains(task_explain_line(p, t, "node1"), "selects GPU 1 (Slurm's 5) [PCI 0000:ab:00.0]");
    // The launcher's line.
    p = plan_for(LaunchMode::Node, 1, "0,1");
    t.local_id = 0;
    read_task_gpus(t, lookup({{"CUDA_VISIBLE_DEVICES", "0,1"}, {"SLURM_STEP_GPUS", "0,1"}}), p);
    assert_contains(task_explain_line(p, t, "node1"), "task 0 (launcher): NPROC_PER_NODE=2: GPU 0, GPU 1; CUDA_VISIBLE_DEVICES=0,1 (Slurm's)");
}

// ---- the node's own files ----

static void write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

static void reads_bus_ids_from_sysfs(void**) {
    const std::string root = scratch_dir("gpuprobe"), drv = root + "/bus/pci/drivers/nvidia";
    assert_int_equal(system(("mkdir -p " + drv + "/0000:2a:00.0 " + drv + "/0000:18:00.0 " + drv + "/0000:05:00.0 " + drv + "/module").c_str()), 0);
    write(drv + "/0000:2a:00.0/class", "0x030200\n");
    write(drv + "/0000:18:00.0/class", "0x030000\n");
    write(drv + "/0000:05:00.0/class", "0x068000\n");  // an NVSwitch: same driver, not a GPU
    auto ids = nvidia_bus_ids(root);
    assert_int_equal(ids.size(), 2);
    assert_str(ids[0], "0000:18:00.0");
    assert_str(ids[1], "0000:2a:00.0");
    assert_int_equal(nvidia_bus_ids(root + "/none").size(), 0);
    // No device files: nothing to ask.
    assert_false(openable_gpus(root).has_value());
    write(root + "/nvidia0", "");  // a plain file is no device
    assert_false(openable_gpus(root).has_value());
    assert_false(read_text_file(drv + "/0000:2a:00.0/class", 4).has_value());  // over the limit
    assert_str(*read_text_file(drv + "/0000:2a:00.0/class"), "0x030200\n");
    assert_int_equal(system(("rm -rf " + root).c_str()), 0);
}

// A tree the user names (MN_NCCL_SYSFS_ROOT) or a launcher config path:
// a FIFO or a link to /dev/zero reads as nothing, at once, in slurmstepd.
static void files_of_the_user_never_hang_or_exhaust(void**) {
    const std::string root = scratch_dir("gpuprobe"), drv = root + "/bus/pci/drivers/nvidia";
    assert_int_equal(system(("mkdir -p " + drv + "/0000:18:00.0 " + drv + "/0000:2a:00.0").c_str()), 0);
    assert_int_equal(mkfifo((drv + "/0000:18:00.0/class").c_str(), 0644), 0);
    assert_int_equal(symlink("/dev/zero", (drv + "/0000:2a:00.0/class").c_str()), 0);
    alarm(10);  // a blocked read ends the test (SIGALRM) instead of make check
    assert_int_equal(nvidia_bus_ids(root).size(), 0);
    assert_false(read_text_file(drv + "/0000:18:00.0/class").has_value());
    assert_false(read_text_file(drv + "/0000:2a:00.0/class").has_value());
    assert_false(read_text_file(root).has_value());  // a directory
    alarm(0);
    assert_int_equal(system(("rm -rf " + root).c_str()), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(files_of_the_user_never_hang_or_exhaust),
        cmocka_unit_test(reads_the_node),
        cmocka_unit_test(reads_slurms_binding),
        cmocka_unit_test(gres_without_binding_keeps_slurms_order),
        cmocka_unit_test(gpus_per_task_puts_the_own_gpu_at_local_rank),
        cmocka_unit_test(maps_and_masks),
        cmocka_unit_test(closest_keeps_every_task_on_its_own_gpu),
        cmocka_unit_test(single_with_several_tasks_per_gpu_is_refused),
        cmocka_unit_test(more_tasks_than_gpus_is_refused_on_every_task),
        cmocka_unit_test(device_cgroups_that_hide_peers_are_refused),
        cmocka_unit_test(several_gpus_per_task_are_left_to_slurm),
        cmocka_unit_test(the_users_list_and_policy_slurm_are_kept),
        cmocka_unit_test(emulated_nodes_take_their_share),
        cmocka_unit_test(launchers_get_their_nodes_gpus),
        cmocka_unit_test(gpu_uuids_reorder_too),
        cmocka_unit_test(many_layouts_agree),
        cmocka_unit_test(the_task_environment),
        cmocka_unit_test(the_launchers_environment),
        cmocka_unit_test(explains_each_task),
        cmocka_unit_test(reads_bus_ids_from_sysfs),
    };
    return cmocka_run_group_tests_name("gpu_binding", tests, nullptr, nullptr);
}
