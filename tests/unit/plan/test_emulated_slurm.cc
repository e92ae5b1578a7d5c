// SPDX-License-Identifier: Apache-2.0
#include <map>

#include "tests/unit/fake_network.h"
#include "lib/plan/emulated_slurm.h"
#include "lib/plan/hostlist.h"
#include "lib/plan/step_layout.h"
#include "lib/util/text.h"
#include "tests/unit/plan/task_facts.h"
#include "tests/unit/unit.h"

using namespace mn;

using Env = std::map<std::string, std::string>;

// Node I of a cluster of n at 10.0.0.(10+I), names resolving everywhere.
static FakeNetwork node_view(uint32_t self, uint32_t n) {
    FakeNetwork net = debian_node(("node" + std::to_string(self)).c_str(), ("10.0.0." + std::to_string(10 + self)).c_str());
    net.default_addr = ip(("10.0.0." + std::to_string(10 + self)).c_str());
    for (uint32_t j = 0; j < n; ++j) {
        Ipv4 a = ip(("10.0.0." + std::to_string(10 + j)).c_str());
        if (j != self) net.names["node" + std::to_string(j)] = {a};
        net.routes[a.value] = ip(("10.0.0." + std::to_string(10 + self)).c_str());
    }
    return net;
}

static EnvLookup lookup(const Env& e) {
    return [&e](const std::string& k) -> std::optional<std::string> {
        auto it = e.find(k);
        return it == e.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

// One real node (node0) running 2 tasks, planned with --mn-emulate-nodes=k
// (k = 1: no emulation) and Slurm's variables `env`.
static Outcome<StepPlan> two_tasks_on_node0(unsigned k, const Env& env) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.emulate = k;
    FakeNetwork net = node_view(0, 1);
    StepFacts f;
    f.nnodes = 1;
    f.local_tasks = f.total_tasks = 2;
    f.nodelist = "node0";
    f.tasks_per_node = "2";
    return plan_step(f, c, SiteConfig{}, lookup(env), net);
}

struct Task {
    Env slurm;    // as Slurm built it
    Env emulated; // after the plugin: Slurm's with the emulated view applied
    Env plugin;   // RANK, NODE_RANK, ... from task_environment
};

// A block-distributed step on real nodes node0.. with per_node tasks and
// `gpus` GPUs on each node, run through plan_step, task_environment and
// emulated_slurm_env as slurmstepd does. The job holds one more node than
// the step when extra_job_node.
static std::vector<Task> run_step(const std::vector<uint32_t>& per_node, unsigned k, uint32_t gpus,
                                  const std::vector<std::string>& argv = {"python3", "train.py"},
                                  bool extra_job_node = false) {
    const uint32_t n = static_cast<uint32_t>(per_node.size());
    uint32_t total = 0;
    for (auto t : per_node) total += t;
    std::vector<std::string> tpn;
    for (auto t : per_node) tpn.push_back(std::to_string(t));
    std::vector<std::string> gpu_ids;
    for (uint32_t g = 0; g < gpus; ++g) gpu_ids.push_back(std::to_string(g));
    const std::string nodelist = n == 1 ? "node0" : "node[0-" + std::to_string(n - 1) + "]";
    const uint32_t job_nodes = n + (extra_job_node ? 1 : 0);

    std::vector<Task> out;
    uint32_t next_rank = 0;
    for (uint32_t node = 0; node < n; ++node) {
        StepFacts f;
        f.job_id = 77;
        f.step_id = 0;
        f.nnodes = n;
        f.node_id = node;
        f.local_tasks = per_node[node];
        f.total_tasks = total;
        f.nodelist = nodelist;
        f.tasks_per_node = join_list(tpn);
        f.argv = argv;
        UserChoice c;
        c.mode = Mode::Auto;
        c.emulate = k;
        FakeNetwork net = node_view(node, n);
        Env none;
        auto plan = plan_step(f, c, SiteConfig{}, lookup(none), net);
        if (!plan) fail_msg("node %u: %s", node, plan.problem().text().c_str());
        std::vector<std::string> gtids;
        for (uint32_t t = 0; t < per_node[node]; ++t) gtids.push_back(std::to_string(next_rank + t));
        for (uint32_t t = 0; t < per_node[node]; ++t) {
            Task task;
            Env& s = task.slurm;
            s["SLURM_NNODES"] = s["SLURM_STEP_NUM_NODES"] = std::to_string(n);
            s["SLURM_JOB_NUM_NODES"] = std::to_string(job_nodes);
            s["SLURM_NODEID"] = std::to_string(node);
            s["SLURM_LOCALID"] = std::to_string(t);
            s["SLURM_PROCID"] = std::to_string(next_rank + t);
            s["SLURM_NTASKS"] = s["SLURM_NPROCS"] = std::to_string(total);
            s["SLURM_TASKS_PER_NODE"] = s["SLURM_STEP_TASKS_PER_NODE"] = compress_counts(per_node);
            s["SLURM_NODELIST"] = s["SLURM_STEP_NODELIST"] = nodelist;
            s["SLURM_JOB_NODELIST"] = extra_job_node ? "node[0-" + std::to_string(n) + "]" : nodelist;
            s["SLURMD_NODENAME"] = s["SLURM_TOPOLOGY_ADDR"] = "node" + std::to_string(node);
            s["SLURM_GTIDS"] = join_list(gtids);
            s["SLURM_CPUS_ON_NODE"] = "16";
            s["SLURM_JOB_CPUS_PER_NODE"] = "16(x" + std::to_string(job_nodes) + ")";
            if (gpus) {
                s["SLURM_GPUS_ON_NODE"] = std::to_string(gpus);
                s["SLURM_STEP_GPUS"] = s["SLURM_JOB_GPUS"] = s["GPU_DEVICE_ORDINAL"] = join_list(gpu_ids);
            }
            TaskFacts tf = facts(t, next_rank + t, gpus, gpu_ids);
            if (auto p = emulation_problem(*plan, tf)) fail_msg("%s", p->text().c_str());
            for (const auto& v : task_environment(*plan, tf)) task.plugin[v.name] = v.value;
            auto view = emulated_slurm_env(*plan, tf, lookup(s));
            if (!view) fail_msg("%s", view.problem().text().c_str());
            task.emulated = s;
            for (const auto& v : *view) {
                assert_true(v.replace);
                task.emulated[v.name] = v.value;
            }
            out.push_back(std::move(task));
        }
        next_rank += per_node[node];
    }
    return out;
}

// What Lightning's SLURMEnvironment checks and reads, re-stated: several
// tasks need SLURM_NTASKS_PER_NODE, which must equal devices, SLURM_NNODES
// must equal num_nodes; ranks come from SLURM_PROCID, SLURM_LOCALID,
// SLURM_NODEID. They must agree with the plugin's own variables.
static void lightning_agrees(const std::vector<Task>& tasks, uint32_t devices, uint32_t num_nodes) {
    for (const auto& t : tasks) {
        const Env& e = t.emulated;
        assert_true(std::stoul(e.at("SLURM_NTASKS")) <= 1 || e.count("SLURM_NTASKS_PER_NODE"));
        assert_str(e.at("SLURM_NTASKS_PER_NODE"), std::to_string(devices));
        assert_str(e.at("SLURM_NNODES"), std::to_string(num_nodes));
        assert_str(e.at("SLURM_NODEID"), t.plugin.at("NODE_RANK"));
        assert_str(e.at("SLURM_LOCALID"), t.plugin.at("LOCAL_RANK"));
        assert_str(e.at("SLURM_PROCID"), t.plugin.at("RANK"));
        assert_str(e.at("SLURM_NTASKS"), t.plugin.at("WORLD_SIZE"));
        // The node list's expansion has one host per node, this one at SLURM_NODEID.
        auto hosts = Hostlist::parse(e.at("SLURM_NODELIST"));
        assert_true(hosts.ok());
        assert_int_equal(hosts->size(), num_nodes);
        assert_str((*hosts)[std::stoul(e.at("SLURM_NODEID"))], e.at("SLURMD_NODENAME"));
        auto counts = parse_tasks_per_node(e.at("SLURM_TASKS_PER_NODE"));
        assert_true(counts.ok());
        assert_int_equal(counts->size(), num_nodes);
        // The first host keeps real node 0's name: it resolves, like MASTER_ADDR.
        assert_str((*hosts)[0], "node0");
    }
}

static void one_node_of_four_into_two_by_two(void**) {
    auto tasks = run_step({4}, 2, 4);
    assert_int_equal(tasks.size(), 4);
    lightning_agrees(tasks, 2, 2);
    const char* nodeid[] = {"0", "0", "1", "1"};
    const char* localid[] = {"0", "1", "0", "1"};
    const char* name[] = {"node0", "node0", "node0-e1", "node0-e1"};
    const char* gpus[] = {"0,1", "0,1", "2,3", "2,3"};
    const char* gtids[] = {"0,1", "0,1", "2,3", "2,3"};
    for (int i = 0; i < 4; ++i) {
        const Env& e = tasks[i].emulated;
        assert_str(e.at("SLURM_NODEID"), nodeid[i]);
        assert_str(e.at("SLURM_LOCALID"), localid[i]);
        assert_str(e.at("SLURMD_NODENAME"), name[i]);
        assert_str(e.at("SLURM_TOPOLOGY_ADDR"), name[i]);
        assert_str(e.at("SLURM_STEP_GPUS"), gpus[i]);
        assert_str(e.at("SLURM_JOB_GPUS"), gpus[i]);
        assert_str(e.at("GPU_DEVICE_ORDINAL"), gpus[i]);
        assert_str(e.at("SLURM_GTIDS"), gtids[i]);
        assert_str(e.at("SLURM_NNODES"), "2");
        assert_str(e.at("SLURM_JOB_NUM_NODES"), "2");
        assert_str(e.at("SLURM_STEP_NUM_NODES"), "2");
        assert_str(e.at("SLURM_NTASKS_PER_NODE"), "2");
        assert_str(e.at("SLURM_TASKS_PER_NODE"), "2(x2)");
        assert_str(e.at("SLURM_STEP_TASKS_PER_NODE"), "2(x2)");
        assert_str(e.at("SLURM_NODELIST"), "node0,node0-e1");
        assert_str(e.at("SLURM_JOB_NODELIST"), "node0,node0-e1");
        assert_str(e.at("SLURM_STEP_NODELIST"), "node0,node0-e1");
        assert_str(e.at("SLURM_GPUS_ON_NODE"), "2");
        assert_str(e.at("SLURM_CPUS_ON_NODE"), "8");
        assert_str(e.at("SLURM_JOB_CPUS_PER_NODE"), "8(x2)");
        // Unchanged: the task's global rank and the step's task count.
        assert_str(e.at("SLURM_PROCID"), std::to_string(i));
        assert_str(e.at("SLURM_NTASKS"), "4");
        assert_int_equal(e.count("MN_REAL_SLURM_PROCID"), 0);
        // The real values, under MN_REAL_.
        assert_str(e.at("MN_REAL_SLURM_NODEID"), "0");
        assert_str(e.at("MN_REAL_SLURM_LOCALID"), std::to_string(i));
        assert_str(e.at("MN_REAL_SLURMD_NODENAME"), "node0");
        assert_str(e.at("MN_REAL_SLURM_STEP_GPUS"), "0,1,2,3");
        assert_str(e.at("MN_REAL_SLURM_NNODES"), "1");
        assert_int_equal(e.count("MN_REAL_SLURM_NTASKS_PER_NODE"), 0);  // Slurm had not set it
        assert_str(e.at("MN_EMULATED_NODES"), "2");
    }
}

static void one_node_of_four_into_four_by_one(void**) {
    auto tasks = run_step({4}, 4, 4);
    lightning_agrees(tasks, 1, 4);
    for (int i = 0; i < 4; ++i) {
        const Env& e = tasks[i].emulated;
        assert_str(e.at("SLURM_NODEID"), std::to_string(i));
        assert_str(e.at("SLURM_LOCALID"), "0");
        assert_str(e.at("SLURM_STEP_GPUS"), std::to_string(i));
        assert_str(e.at("SLURM_GTIDS"), std::to_string(i));
        assert_str(e.at("SLURM_TASKS_PER_NODE"), "1(x4)");
        assert_str(e.at("SLURM_NODELIST"), "node0,node0-e[1-3]");
        assert_str(e.at("SLURM_CPUS_ON_NODE"), "4");
    }
    assert_str(tasks[3].emulated.at("SLURMD_NODENAME"), "node0-e3");
}

static void two_nodes_of_four_into_four_by_two(void**) {
    auto tasks = run_step({4, 4}, 2, 4, {"python3", "train.py"}, true);
    assert_int_equal(tasks.size(), 8);
    lightning_agrees(tasks, 2, 4);
    const char* name[] = {"node0", "node0", "node0-e1", "node0-e1", "node1", "node1", "node1-e1", "node1-e1"};
    for (int i = 0; i < 8; ++i) {
        const Env& e = tasks[i].emulated;
        assert_str(e.at("SLURM_NODEID"), std::to_string(i / 2));
        assert_str(e.at("SLURM_LOCALID"), std::to_string(i % 2));
        assert_str(e.at("SLURMD_NODENAME"), name[i]);
        assert_str(e.at("SLURM_NODELIST"), "node0,node0-e1,node1,node1-e1");
        assert_str(e.at("SLURM_TASKS_PER_NODE"), "2(x4)");
        // The job's third node (not in the step) is split too.
        assert_str(e.at("SLURM_JOB_NODELIST"), "node0,node0-e1,node1,node1-e1,node2,node2-e1");
        assert_str(e.at("SLURM_JOB_NUM_NODES"), "6");
        assert_str(e.at("SLURM_JOB_CPUS_PER_NODE"), "8(x6)");
        assert_str(e.at("SLURM_GTIDS"), i < 4 ? (i < 2 ? "0,1" : "2,3") : (i < 6 ? "4,5" : "6,7"));
        assert_str(e.at("MN_REAL_SLURM_NODEID"), i < 4 ? "0" : "1");
    }
}

static void uneven_real_nodes_give_uneven_emulated_nodes(void**) {
    // 4 and 2 tasks, K = 2: four emulated nodes of 2, 2, 1, 1 tasks.
    auto tasks = run_step({4, 2}, 2, 0);
    assert_int_equal(tasks.size(), 6);
    for (const auto& t : tasks) assert_str(t.emulated.at("SLURM_TASKS_PER_NODE"), "2(x2),1(x2)");
    assert_str(tasks[0].emulated.at("SLURM_NTASKS_PER_NODE"), "2");
    assert_str(tasks[5].emulated.at("SLURM_NTASKS_PER_NODE"), "1");
    assert_str(tasks[5].emulated.at("SLURM_NODEID"), "3");
    assert_str(tasks[5].emulated.at("SLURM_LOCALID"), "0");
    assert_int_equal(tasks[0].emulated.count("SLURM_GPUS_ON_NODE"), 0);  // no GPUs: nothing invented
}

static void node_mode_one_launcher_per_emulated_node(void**) {
    auto tasks = run_step({2}, 2, 4, {"torchrun", "train.py"});
    for (int i = 0; i < 2; ++i) {
        const Env& e = tasks[i].emulated;
        assert_str(e.at("SLURM_NODEID"), std::to_string(i));
        assert_str(e.at("SLURM_NODEID"), tasks[i].plugin.at("NODE_RANK"));
        assert_str(e.at("SLURM_NNODES"), tasks[i].plugin.at("PET_NNODES"));
        assert_str(e.at("SLURM_LOCALID"), "0");
        assert_str(e.at("SLURM_NTASKS_PER_NODE"), "1");
        assert_str(e.at("SLURM_GPUS_ON_NODE"), tasks[i].plugin.at("PET_NPROC_PER_NODE"));
        assert_str(e.at("SLURM_GTIDS"), std::to_string(i));
    }
}

static void uneven_layouts_are_refused(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.emulate = 2;
    FakeNetwork net = node_view(0, 1);
    Env none;
    StepFacts f;
    f.nnodes = 1;
    f.local_tasks = f.total_tasks = 2;
    f.nodelist = "node0";
    f.tasks_per_node = "2";
    auto plan = plan_step(f, c, SiteConfig{}, lookup(none), net);
    assert_true(plan.ok());
    // A plan whose layout K does not divide (plan_step would refuse it: 3
    // tasks in 2 groups) is refused here too, naming the node and the fix.
    StepPlan odd = *plan;
    odd.tasks_per_node = {3};
    odd.facts.local_tasks = odd.facts.total_tasks = 3;
    auto r = emulated_slurm_env(odd, facts(0, 0, 0, {}), lookup(none));
    assert_false(r.ok());
    assert_contains(r.problem().text(), "--mn-emulate-nodes=2: node 0 of the step runs 3 tasks");
    assert_contains(r.problem().text(), "run a multiple of 2 tasks on every node");
    f.local_tasks = f.total_tasks = 3;
    f.tasks_per_node = "3";
    assert_false(plan_step(f, c, SiteConfig{}, lookup(none), net).ok());
    // Node mode: one launcher per emulated node, so exactly K tasks a node.
    StepPlan launchers = *plan;
    launchers.launch = LaunchMode::Node;
    launchers.tasks_per_node = {4};
    launchers.facts.local_tasks = launchers.facts.total_tasks = 4;
    r = emulated_slurm_env(launchers, facts(0, 0, 0, {}), lookup(none));
    assert_false(r.ok());
    assert_contains(r.problem().text(), "runs 4 tasks, which do not make 2 emulated nodes");
    assert_contains(r.problem().text(), "run 2 launchers on every node (--ntasks-per-node=2)");
    // GPUs Slurm lists that K does not divide stay as Slurm wrote them
    // (emulation_problem refuses the step before; nothing half-split).
    Env s = {{"SLURM_STEP_GPUS", "0,1,2"}, {"SLURM_GPUS_ON_NODE", "3"}, {"SLURM_JOB_NODELIST", "node0"}};
    auto v = emulated_slurm_env(*plan, facts(1, 1, 0, {}), lookup(s));
    assert_true(v.ok());
    for (const auto& e : *v) {
        if (e.name == "SLURM_STEP_GPUS" || e.name == "SLURM_GPUS_ON_NODE") fail_msg("%s was split", e.name.c_str());
    }
    // A node list Slurm could not have written is named.
    Env bad = {{"SLURM_JOB_NODELIST", "node[1-"}};
    auto b = emulated_slurm_env(*plan, facts(0, 0, 0, {}), lookup(bad));
    assert_false(b.ok());
    assert_contains(b.problem().text(), "SLURM_JOB_NODELIST='node[1-' cannot be split into emulated nodes");
}

static void without_emulation_nothing_is_touched(void**) {
    Env s = {{"SLURM_NODEID", "0"}, {"SLURM_JOB_NODELIST", "node0"}};
    auto plan = two_tasks_on_node0(1, s);
    assert_true(plan.ok());
    auto v = emulated_slurm_env(*plan, facts(1, 1, 0, {}), lookup(s));
    assert_true(v.ok());
    assert_int_equal(v->size(), 0);
    assert_int_equal(real_slurm_env(lookup(s)).size(), 0);  // no marker: srun changes nothing
}

static void srun_inside_gets_the_real_values_back(void**) {
    for (unsigned k : {2u, 4u}) {
        auto tasks = run_step({4, 4}, k, 4, {"python3", "train.py"}, true);
        for (const auto& t : tasks) {
            Env e = t.emulated;
            for (const auto& c : real_slurm_env(lookup(t.emulated))) {
                if (c.value) e[c.name] = *c.value;
                else e.erase(c.name);
            }
            if (e != t.slurm) fail_msg("K=%u: restoring does not give Slurm's own environment back", k);
        }
    }
}

static void host_and_count_lists(void**) {
    assert_str(compress_hostlist({"a1", "a2", "a3", "b", "a5"}), "a[1-3],b,a5");
    assert_str(compress_hostlist({"n09", "n10", "n11"}), "n[09-11]");
    assert_str(compress_hostlist({"n9", "n10"}), "n[9-10]");
    assert_str(compress_hostlist({"n2", "n1"}), "n2,n1");  // order is the node ids: never sorted
    assert_str(compress_hostlist({}), "");
    // Round trip through Slurm's form, order kept.
    std::vector<std::string> names = {"gpu07", "gpu07-e1", "gpu07-e2", "gpu08", "gpu08-e1", "gpu08-e2", "x"};
    auto back = Hostlist::parse(compress_hostlist(names));
    assert_true(back.ok());
    assert_true(back->hosts() == names);
    assert_str(compress_counts({2, 2, 2, 1}), "2(x3),1");
    assert_str(compress_counts({1}), "1");
    auto counts = parse_tasks_per_node(compress_counts({3, 1, 1, 4, 4}));
    assert_true(counts.ok());
    assert_true(*counts == (std::vector<uint32_t>{3, 1, 1, 4, 4}));
    assert_str(emulated_node_name("node3", 0), "node3");
    assert_str(emulated_node_name("node3", 2), "node3-e2");
}

static void topology_tree_address_keeps_its_switches(void**) {
    auto plan = two_tasks_on_node0(2, Env{});
    assert_true(plan.ok());
    Env s = {{"SLURMD_NODENAME", "node0"}, {"SLURM_TOPOLOGY_ADDR", "s0.s1.node0"}};
    auto v = emulated_slurm_env(*plan, facts(1, 1, 0, {}), lookup(s));
    assert_true(v.ok());
    Env e;
    for (const auto& x : *v) e[x.name] = x.value;
    assert_str(e.at("SLURM_TOPOLOGY_ADDR"), "s0.s1.node0-e1");
    assert_str(e.at("MN_REAL_SLURM_TOPOLOGY_ADDR"), "s0.s1.node0");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_node_of_four_into_two_by_two),
        cmocka_unit_test(one_node_of_four_into_four_by_one),
        cmocka_unit_test(two_nodes_of_four_into_four_by_two),
        cmocka_unit_test(uneven_real_nodes_give_uneven_emulated_nodes),
        cmocka_unit_test(node_mode_one_launcher_per_emulated_node),
        cmocka_unit_test(uneven_layouts_are_refused),
        cmocka_unit_test(without_emulation_nothing_is_touched),
        cmocka_unit_test(srun_inside_gets_the_real_values_back),
        cmocka_unit_test(host_and_count_lists),
        cmocka_unit_test(topology_tree_address_keeps_its_switches),
    };
    return cmocka_run_group_tests_name("emulated_slurm", tests, nullptr, nullptr);
}
