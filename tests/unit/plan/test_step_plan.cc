// SPDX-License-Identifier: Apache-2.0
#include <map>
#include <set>

#include "tests/unit/fake_network.h"
#include "lib/plan/step_plan.h"
#include "tests/unit/plan/task_facts.h"
#include "tests/unit/unit.h"

using namespace mn;

using Env = std::map<std::string, std::string>;

static Env as_map(const std::vector<EnvVar>& v) {
    Env m;
    for (const auto& e : v) {
        if (m.count(e.name)) fail_msg("%s set twice", e.name.c_str());
        m[e.name] = e.value;
    }
    return m;
}

// A cluster of n Debian nodes: nodeI at 10.0.0.(10+I), each resolving its
// own name to 127.0.1.1 and carrying docker0.
static FakeNetwork node_view(uint32_t self, uint32_t n) {
    std::string me = "node" + std::to_string(self);
    FakeNetwork net = debian_node(me.c_str(), ("10.0.0." + std::to_string(10 + self)).c_str());
    net.default_addr = ip(("10.0.0." + std::to_string(10 + self)).c_str());
    for (uint32_t j = 0; j < n; ++j) {
        if (j == self) continue;
        Ipv4 a = ip(("10.0.0." + std::to_string(10 + j)).c_str());
        net.names["node" + std::to_string(j)] = {a};
        net.routes[a.value] = ip(("10.0.0." + std::to_string(10 + self)).c_str());
    }
    return net;
}

static std::string tpn_string(const std::vector<uint32_t>& per_node) {
    std::string s;
    for (auto n : per_node) s += (s.empty() ? "" : ",") + std::to_string(n);
    return s;
}

enum class Dist { Block, Cyclic };

// Slurm's global task ids for each node's local tasks.
static std::vector<std::vector<uint32_t>> global_ids(const std::vector<uint32_t>& per_node, Dist d) {
    std::vector<std::vector<uint32_t>> ids(per_node.size());
    uint32_t next = 0;
    if (d == Dist::Block) {
        for (size_t n = 0; n < per_node.size(); ++n)
            for (uint32_t t = 0; t < per_node[n]; ++t) ids[n].push_back(next++);
    } else {
        bool placed = true;
        while (placed) {
            placed = false;
            for (size_t n = 0; n < per_node.size(); ++n)
                if (ids[n].size() < per_node[n]) {
                    ids[n].push_back(next++);
                    placed = true;
                }
        }
    }
    return ids;
}

static StepFacts facts_for(const std::vector<uint32_t>& per_node, uint32_t node) {
    const uint32_t n = static_cast<uint32_t>(per_node.size());
    uint32_t total = 0;
    for (auto t : per_node) total += t;
    StepFacts f;
    f.job_id = 4242;
    f.step_id = 1;
    f.nnodes = n;
    f.node_id = node;
    f.local_tasks = per_node[node];
    f.total_tasks = total;
    f.nodelist = "node[0-" + std::to_string(n - 1) + "]";
    f.tasks_per_node = tpn_string(per_node);
    return f;
}

static std::vector<Env> run_step(const std::vector<uint32_t>& per_node, Dist d, UserChoice choice,
                                 const Env& user_env = {}, const std::vector<std::string>& argv = {},
                                 const std::vector<std::string>& gpu_list = {}) {
    const uint32_t n = static_cast<uint32_t>(per_node.size());
    auto ids = global_ids(per_node, d);
    std::vector<Env> out;
    for (uint32_t node = 0; node < n; ++node) {
        StepFacts f = facts_for(per_node, node);
        f.argv = argv;
        FakeNetwork net = node_view(node, n);
        EnvLookup env = [&](const std::string& k) -> std::optional<std::string> {
            auto it = user_env.find(k);
            if (it == user_env.end()) return std::nullopt;
            return it->second;
        };
        auto plan = plan_step(f, choice, SiteConfig{}, env, net);
        if (!plan) fail_msg("node %u: %s", node, plan.problem().text().c_str());
        plan.value().fabric = *choose_fabric({}, choice.mode);  // a node without RDMA
        for (uint32_t t = 0; t < per_node[node]; ++t) {
            TaskFacts tf;
            tf.local_id = t;
            tf.global_id = ids[node][t];
            tf.gpus = gpu_list.empty() ? 4u : static_cast<uint32_t>(gpu_list.size());
            tf.gpu_list = gpu_list;
            if (auto p = emulation_problem(*plan, tf)) fail_msg("node %u: %s", node, p->text().c_str());
            out.push_back(as_map(task_environment(*plan, tf)));
        }
    }
    return out;
}

static void check_task_mode(const std::vector<uint32_t>& per_node, Dist d) {
    UserChoice c;
    c.mode = Mode::Auto;
    auto envs = run_step(per_node, d, c);
    std::set<std::string> ranks;
    std::map<std::string, std::set<std::string>> local_by_node;
    for (const auto& e : envs) {
        ranks.insert(e.at("RANK"));
        local_by_node[e.at("NODE_RANK")].insert(e.at("LOCAL_RANK"));
        assert_str(e.at("WORLD_SIZE"), std::to_string(envs.size()));
        assert_str(e.at("NNODES"), std::to_string(per_node.size()));
        assert_str(e.at("MASTER_ADDR"), "10.0.0.10");
        assert_str(e.at("MASTER_PORT"), envs[0].at("MASTER_PORT"));
        assert_str(e.at("NCCL_SOCKET_IFNAME"), "=eth0");
        assert_str(e.at("GLOO_SOCKET_IFNAME"), "eth0");
        assert_int_equal(e.count("PET_NNODES"), 0);
        uint32_t node = std::stoul(e.at("NODE_RANK"));
        assert_str(e.at("LOCAL_WORLD_SIZE"), std::to_string(per_node[node]));
    }
    assert_int_equal(ranks.size(), envs.size());
    for (size_t r = 0; r < envs.size(); ++r) assert_int_equal(ranks.count(std::to_string(r)), 1);
    for (size_t node = 0; node < per_node.size(); ++node) {
        const auto& locals = local_by_node[std::to_string(node)];
        assert_int_equal(locals.size(), per_node[node]);
        for (uint32_t l = 0; l < per_node[node]; ++l) assert_int_equal(locals.count(std::to_string(l)), 1);
    }
}

static void block_distribution(void**) { check_task_mode({4, 4, 4}, Dist::Block); }
static void cyclic_distribution(void**) { check_task_mode({4, 4, 4}, Dist::Cyclic); }
static void uneven_five_tasks_on_three_nodes(void**) {
    check_task_mode({2, 2, 1}, Dist::Block);
    check_task_mode({2, 2, 1}, Dist::Cyclic);
}
static void single_node_many_tasks(void**) { check_task_mode({8}, Dist::Block); }

static void cyclic_ranks_follow_slurm(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    auto envs = run_step({2, 2}, Dist::Cyclic, c);
    // node0 has tasks 0 and 2, node1 has 1 and 3
    assert_str(envs[0].at("RANK"), "0");
    assert_str(envs[1].at("RANK"), "2");
    assert_str(envs[2].at("RANK"), "1");
    assert_str(envs[3].at("RANK"), "3");
}

static void node_mode_sets_torchrun_variables(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    auto envs = run_step({1, 1, 1}, Dist::Block, c, {}, {"/usr/bin/torchrun", "train.py"});
    for (size_t i = 0; i < envs.size(); ++i) {
        const auto& e = envs[i];
        assert_int_equal(e.count("RANK"), 0);
        assert_int_equal(e.count("LOCAL_RANK"), 0);
        assert_int_equal(e.count("WORLD_SIZE"), 0);
        assert_str(e.at("PET_NNODES"), "3");
        assert_str(e.at("PET_NODE_RANK"), std::to_string(i));
        assert_str(e.at("PET_NPROC_PER_NODE"), "4");
        assert_str(e.at("GPUS_PER_NODE"), "4");
        assert_str(e.at("NPROC_PER_NODE"), "4");
        assert_str(e.at("PET_MASTER_ADDR"), "10.0.0.10");
        assert_str(e.at("PET_MASTER_PORT"), e.at("MASTER_PORT"));
        assert_str(e.at("PET_RDZV_ID"), "4242.1");
    }
}

// Node 0's facts for a block layout of nnodes x per_node tasks.
static StepFacts node0_facts(uint32_t nnodes, uint32_t per_node) {
    StepFacts f;
    f.nnodes = nnodes;
    f.local_tasks = per_node;
    f.total_tasks = nnodes * per_node;
    f.nodelist = nnodes == 1 ? "node0" : "node[0-" + std::to_string(nnodes - 1) + "]";
    f.tasks_per_node = std::to_string(per_node) + "(x" + std::to_string(nnodes) + ")";
    return f;
}

// One task per node running a plain program (or a wrapper that may start
// torchrun): the ranks for the program and PET_* for a launcher it starts.
static void one_task_per_node_plain_program_gets_ranks_too(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    const std::vector<std::vector<std::string>> commands = {
        {"python3", "train.py"}, {"./train"}, {"bash", "-c", "exec torchrun train.py"}, {"python3", "-u", "x.py"}};
    for (const auto& argv : commands) {
        auto envs = run_step({1, 1, 1}, Dist::Block, c, {}, argv);
        for (size_t i = 0; i < envs.size(); ++i) {
            const auto& e = envs[i];
            assert_str(e.at("RANK"), std::to_string(i));
            assert_str(e.at("LOCAL_RANK"), "0");
            assert_str(e.at("WORLD_SIZE"), "3");
            assert_str(e.at("LOCAL_WORLD_SIZE"), "1");
            assert_str(e.at("NODE_RANK"), std::to_string(i));
            assert_str(e.at("NNODES"), "3");
            assert_str(e.at("PET_NNODES"), "3");
            assert_str(e.at("PET_NODE_RANK"), std::to_string(i));
            assert_str(e.at("PET_MASTER_PORT"), e.at("MASTER_PORT"));
        }
    }
    // Launchers named directly keep node mode alone; so does the option.
    for (const auto& argv : std::vector<std::vector<std::string>>{
             {"torchrun", "train.py"}, {"python3", "-m", "torch.distributed.run", "t.py"}}) {
        auto envs = run_step({1, 1}, Dist::Block, c, {}, argv);
        assert_int_equal(envs[1].count("RANK"), 0);
        assert_str(envs[1].at("PET_NODE_RANK"), "1");
    }
    c.launch = LaunchMode::Node;
    auto forced = run_step({1, 1}, Dist::Block, c, {}, {"python3", "train.py"});
    assert_int_equal(forced[1].count("RANK"), 0);

    c.launch = LaunchMode::Detect;
    StepFacts f = node0_facts(2, 1);
    f.argv = {"python3", "train.py"};
    auto plan = plan_step(f, c, SiteConfig{}, [](const std::string&) { return std::nullopt; }, node_view(0, 2));
    assert_true(plan.ok());
    const std::string line = explain_line(*plan, "node0");
    assert_contains(line, "launch=node (one task on every node; 'python3' is not a per-node launcher, so RANK");
    f.argv = {"torchrun", "train.py"};
    plan = plan_step(f, c, SiteConfig{}, [](const std::string&) { return std::nullopt; }, node_view(0, 2));
    assert_true(plan.ok());
    assert_contains(explain_line(*plan, "node0"), "launch=node (one task on every node, and it is a per-node launcher)");
}

static void node_mode_without_gpus_runs_one_process(void**) {
    StepPlan p;
    p.launch = LaunchMode::Node;
    p.facts.nnodes = 2;
    p.master_addr = "10.0.0.10";
    p.ifname = "eth0";
    auto e = as_map(task_environment(p, TaskFacts{}));
    assert_str(e.at("PET_NPROC_PER_NODE"), "1");
}

static void forced_task_mode_with_one_task_per_node(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.launch = LaunchMode::Task;
    auto envs = run_step({1, 1}, Dist::Block, c);
    assert_str(envs[1].at("RANK"), "1");
    assert_int_equal(envs[1].count("PET_NNODES"), 0);
}

static void forced_node_mode_with_many_tasks_is_refused(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.launch = LaunchMode::Node;
    StepFacts f = node0_facts(2, 2);
    auto plan = plan_step(f, c, SiteConfig{}, [](const std::string&) { return std::nullopt; }, node_view(0, 2));
    assert_false(plan.ok());
    assert_contains(plan.problem().fix, "--ntasks-per-node=1");
}

static void users_master_port_is_used_everywhere(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    auto envs = run_step({1, 1}, Dist::Block, c, {{"MASTER_PORT", "31337"}});
    for (const auto& e : envs) {
        assert_str(e.at("MASTER_PORT"), "31337");
        assert_str(e.at("PET_MASTER_PORT"), "31337");
    }
}

// Every node's tasks get the one port their step secret places.
static void the_step_secret_places_master_port_everywhere(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    auto plain = run_step({1, 1}, Dist::Block, c, {});
    auto placed = run_step({1, 1}, Dist::Block, c, {{"MN_NCCL_STEP_SECRET", "000001f5" + std::string(56, 'a')}});
    const std::string port = placed.front().at("MASTER_PORT");
    for (const auto& e : placed) assert_str(e.at("MASTER_PORT"), port.c_str());
    // 0x1f5 = 501 blocks further along the range (of 625).
    const int moved = (std::stoi(port) - std::stoi(plain.front().at("MASTER_PORT")) + 10000) % 10000;
    assert_int_equal(moved, 501 * 16);
    StepFacts f = node0_facts(1, 1);
    auto plan = plan_step(f, c, SiteConfig{}, [](const std::string& k) -> std::optional<std::string> {
        if (k == "MN_NCCL_STEP_SECRET") return std::string("0badc0de");
        return std::nullopt;
    }, node_view(0, 1));
    assert_true(plan.ok());
    assert_contains(plan.value().why_port, "placed by the step's secret");
}

static void bad_user_master_port_is_named(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    StepFacts f = node0_facts(1, 1);
    FakeNetwork net = node_view(0, 1);
    auto plan = plan_step(f, c, SiteConfig{}, [](const std::string& k) -> std::optional<std::string> {
        if (k == "MASTER_PORT") return std::string("29a");
        return std::nullopt;
    }, net);
    assert_false(plan.ok());
    assert_contains(plan.problem().what, "MASTER_PORT='29a'");
}

static void missing_nodelist_is_named(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    StepFacts f = node0_facts(1, 1);
    f.nodelist.clear();
    auto plan = plan_step(f, c, SiteConfig{}, [](const std::string&) { return std::nullopt; }, node_view(0, 1));
    assert_false(plan.ok());
    assert_contains(plan.problem().what, "SLURM_STEP_NODELIST");
}

static void fabric_variables_reach_every_task(void**) {
    UserChoice c;
    c.mode = Mode::Socket;
    for (const auto& e : run_step({2, 1}, Dist::Block, c)) assert_str(e.at("NCCL_IB_DISABLE"), "1");
    c.mode = Mode::Auto;  // no RDMA on these nodes: sockets too
    for (const auto& e : run_step({2, 1}, Dist::Block, c)) assert_str(e.at("NCCL_IB_DISABLE"), "1");
    StepPlan p;
    p.master_addr = "10.0.0.10";
    p.ifname = "eth0";
    p.fabric.env = {{"NCCL_IB_HCA", "=mlx5_0:1"}};
    auto e = as_map(task_environment(p, TaskFacts{}));
    assert_str(e.at("NCCL_IB_HCA"), "=mlx5_0:1");
    assert_str(e.at("NCCL_SOCKET_IFNAME"), "=eth0");  // NCCL's bootstrap still needs it
    assert_int_equal(e.count("NCCL_IB_DISABLE"), 0);
}

// pyxis --container-unshare=net: each node's container has a network of
// its own with a loopback alone. Across nodes the step is refused, never
// given lo; on one node its ranks meet on the loopback.
static void a_container_network_of_its_own(void**) {
    assert_true(unshares_network("net"));
    assert_true(unshares_network("ipc,net"));
    assert_false(unshares_network("ipc,uts"));
    assert_false(unshares_network("network"));
    StepPlan p;
    p.tasks_per_node = {4, 4};
    p.facts.nnodes = 2;
    p.master_addr = "10.0.0.10";
    p.ifname = "eth0";
    p.fabric.env = {{"NCCL_IB_HCA", "=mlx5_0:1"}};
    const auto refused = own_network(p, "pyxis --container-unshare=net");
    assert_true(refused.has_value());
    assert_str(refused->what, "pyxis --container-unshare=net gives each node's container a network of its own, with a "
                              "loopback alone inside: the step's ranks on 2 nodes cannot reach each other, and NCCL "
                              "would fail at its first connect");
    assert_contains(refused->fix, "drop --container-unshare=net");
    assert_str(p.ifname, "eth0");  // untouched: the step does not start
    StepPlan one;
    one.tasks_per_node = {8};
    one.facts.nnodes = 1;
    one.master_addr = "10.0.0.10";
    one.ifname = "eth0";
    one.fabric.env = {{"NCCL_IB_HCA", "=mlx5_0:1"}};
    assert_false(own_network(one, "pyxis, PYXIS_CONTAINER_UNSHARE=net").has_value());
    auto e = as_map(task_environment(one, TaskFacts{}));
    assert_str(e.at("MASTER_ADDR"), "127.0.0.1");
    assert_str(e.at("NCCL_SOCKET_IFNAME"), "=lo");
    assert_str(e.at("GLOO_SOCKET_IFNAME"), "lo");
    assert_str(e.at("NCCL_IB_DISABLE"), "1");
    assert_int_equal(e.count("NCCL_IB_HCA"), 0);
    assert_contains(one.why_ifname, "PYXIS_CONTAINER_UNSHARE=net");
}

// Google's A3 (tcpx, tcpxo): NCCL's sockets on the VM's control NIC, as
// Google documents, whichever interface the route to MASTER_ADDR takes; the
// plugin's NIC variables reach every task beside them.
static void a3_sockets_go_on_the_control_nic(void**) {
    FabricChoice tcpx;
    tcpx.fabric = "tcpx";
    tcpx.control_netdev = "eth0";
    tcpx.data_netdevs = {"eth1", "eth2", "eth3", "eth4"};
    tcpx.env = {{"NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1,eth2,eth3,eth4"}, {"NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"}};
    StepPlan p;
    p.master_addr = "10.0.0.10";
    p.ifname = "eth0";
    p.why_ifname = "route to 10.0.0.10";
    take_fabric(p, tcpx);
    assert_str(p.ifname, "eth0");
    assert_str(p.why_ifname, "route to 10.0.0.10; the A3 control NIC, where Google puts NCCL's sockets");
    assert_int_equal(p.fabric.warnings.size(), 0);
    auto e = as_map(task_environment(p, TaskFacts{}));
    assert_str(e.at("NCCL_SOCKET_IFNAME"), "=eth0");
    assert_str(e.at("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"), "eth1,eth2,eth3,eth4");
    assert_str(e.at("NCCL_GPUDIRECTTCPX_CTRL_DEV"), "eth0");
    assert_int_equal(e.count("NCCL_IB_DISABLE"), 0);
    assert_int_equal(e.count("NCCL_IB_HCA"), 0);
    // MASTER_ADDR on a data NIC's subnet: the sockets stay on eth0, said so.
    StepPlan q;
    q.master_addr = "10.1.0.10";
    q.ifname = "eth2";
    take_fabric(q, tcpx);
    assert_str(q.ifname, "eth0");
    assert_contains(q.why_ifname, "Google Cloud A3's control NIC for tcpx (the route to MASTER_ADDR leaves through eth2)");
    assert_int_equal(q.fabric.warnings.size(), 1);
    assert_contains(q.fabric.warnings[0], "MASTER_ADDR 10.1.0.10 is reached through eth2, not the control NIC eth0");
    e = as_map(task_environment(q, TaskFacts{}));
    assert_str(e.at("NCCL_SOCKET_IFNAME"), "=eth0");
    assert_str(e.at("GLOO_SOCKET_IFNAME"), "eth0");
    // Elsewhere the route's interface stays.
    StepPlan r;
    r.ifname = "ib0";
    take_fabric(r, *choose_fabric({}, Mode::Auto));
    assert_str(r.ifname, "ib0");
    assert_str(r.fabric.fabric, "socket");
}

static void sysfs_root_choice(void**) {
    SiteConfig site;
    auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    auto user = [](const std::string& k) -> std::optional<std::string> {
        if (k == "MN_NCCL_SYSFS_ROOT") return std::string("/fixtures/dgx");
        return std::nullopt;
    };
    // slurmstepd reads no user's tree unless the site opened it, and says so.
    assert_str(sysfs_root(none, site), "/sys");
    assert_str(sysfs_root(user, site), "/sys");
    assert_contains(unread_sysfs_root(user, site), "MN_NCCL_SYSFS_ROOT=/fixtures/dgx is not read here: the node's /sys is");
    assert_contains(unread_sysfs_root(user, site), "user_sysfs_root=yes");
    assert_str(unread_sysfs_root(none, site), "");
    site.user_sysfs_root = true;
    assert_str(sysfs_root(user, site), "/fixtures/dgx");
    assert_str(unread_sysfs_root(user, site), "");
    site.sysfs_root = "/srv/sys";  // the admin's pins it: the user's is not read
    assert_str(sysfs_root(none, site), "/srv/sys");
    assert_str(sysfs_root(user, site), "/srv/sys");
    assert_contains(unread_sysfs_root(user, site), "the node's /srv/sys is");
    // mn-preflight runs as the user: the user's tree is theirs to name.
    assert_str(user_sysfs_root(user), "/fixtures/dgx");
    assert_str(user_sysfs_root(none), "/sys");
}

static void explain_names_each_choice(void**) {
    StepPlan p;
    p.mode = Mode::Auto;
    p.facts.nnodes = 2;
    p.facts.node_id = 1;
    p.master_addr = "10.0.0.10";
    p.master_port = 20017;
    p.ifname = "eth0";
    p.why_addr = "node0 resolves to 10.0.0.10";
    p.fabric = *choose_fabric({}, Mode::Auto);
    std::string line = explain_line(p, "node1");
    assert_contains(line, "fabric=socket NCCL_IB_DISABLE=1 (no usable RDMA port (no RDMA ports at all))");
    assert_contains(line, "mn_nccl: node1 (node 1 of 2)");
    assert_contains(line, "MASTER_ADDR=10.0.0.10 (node0 resolves to 10.0.0.10)");
    assert_contains(line, "MASTER_PORT=20017");
    assert_contains(line, "NCCL_SOCKET_IFNAME==eth0");
}

static void emulate_task_mode_splits_each_node(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.emulate = 2;
    // 2 real nodes x 4 tasks, 4 GPUs each -> 4 emulated nodes of 2 tasks, 2 GPUs.
    auto envs = run_step({4, 4}, Dist::Block, c, {}, {"python3", "train.py"}, {"0", "1", "2", "3"});
    assert_int_equal(envs.size(), 8);
    const char* node_rank[] = {"0", "0", "1", "1", "2", "2", "3", "3"};
    const char* local_rank[] = {"0", "1", "0", "1", "0", "1", "0", "1"};
    const char* cvd[] = {"0,1", "0,1", "2,3", "2,3", "0,1", "0,1", "2,3", "2,3"};
    for (int i = 0; i < 8; ++i) {
        assert_str(envs[i]["RANK"], std::to_string(i));
        assert_str(envs[i]["WORLD_SIZE"], "8");
        assert_str(envs[i]["NNODES"], "4");
        assert_str(envs[i]["NODE_RANK"], node_rank[i]);
        assert_str(envs[i]["LOCAL_RANK"], local_rank[i]);
        assert_str(envs[i]["LOCAL_WORLD_SIZE"], "2");
        assert_str(envs[i]["CUDA_VISIBLE_DEVICES"], cvd[i]);
        assert_str(envs[i]["MASTER_ADDR"], "10.0.0.10");  // real node 0 stays the master
    }
    assert_str(envs[0]["NCCL_HOSTID"], "node0-emu0");
    assert_str(envs[2]["NCCL_HOSTID"], "node0-emu1");
    assert_str(envs[7]["NCCL_HOSTID"], "node1-emu1");
    assert_str(envs[0]["NCCL_SOCKET_IFNAME"], "=eth0");
}

static void emulate_node_mode_one_launcher_per_emulated_node(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.emulate = 2;
    auto envs = run_step({2}, Dist::Block, c, {}, {"torchrun", "train.py"}, {"4", "5", "6", "7"});
    assert_int_equal(envs.size(), 2);
    for (int i = 0; i < 2; ++i) {
        assert_str(envs[i]["PET_NNODES"], "2");
        assert_str(envs[i]["PET_NODE_RANK"], std::to_string(i));
        assert_str(envs[i]["NODE_RANK"], std::to_string(i));
        assert_str(envs[i]["PET_NPROC_PER_NODE"], "2");
        assert_str(envs[i]["GPUS_PER_NODE"], "2");
        assert_false(envs[i].count("RANK"));
    }
    // Physical indices as Slurm gave them, split contiguously.
    assert_str(envs[0]["CUDA_VISIBLE_DEVICES"], "4,5");
    assert_str(envs[1]["CUDA_VISIBLE_DEVICES"], "6,7");
    assert_str(envs[1]["NCCL_HOSTID"], "node0-emu1");
}

static void emulate_without_gpus_splits_tasks_only(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.emulate = 3;
    StepFacts f = facts_for({6}, 0);
    FakeNetwork net = node_view(0, 1);
    auto plan = plan_step(f, c, SiteConfig{}, [](const std::string&) { return std::nullopt; }, net);
    assert_true(plan.ok());
    TaskFacts t = facts(5, 5, 0, {});
    assert_false(emulation_problem(*plan, t).has_value());
    auto e = as_map(task_environment(*plan, t));
    assert_str(e["NODE_RANK"], "2");
    assert_str(e["LOCAL_RANK"], "1");
    assert_str(e["LOCAL_WORLD_SIZE"], "2");
    assert_false(e.count("CUDA_VISIBLE_DEVICES"));
    assert_str(e["NCCL_HOSTID"], "node0-emu2");
}

static void emulate_refuses_what_does_not_divide(void**) {
    UserChoice c;
    c.mode = Mode::Auto;
    c.emulate = 2;
    FakeNetwork net = node_view(0, 1);
    auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    // 3 tasks cannot split in 2.
    auto p = plan_step(facts_for({3}, 0), c, SiteConfig{}, none, net);
    assert_false(p.ok());
    assert_contains(p.problem().text(), "--mn-emulate-nodes=2 splits each node's tasks into 2 equal groups");
    assert_contains(p.problem().text(), "node 0 of the step runs 3 tasks");
    assert_contains(p.problem().text(), "--ntasks-per-node=4 (a multiple of 2) or 2");
    // torchrun needs exactly K launchers per node.
    StepFacts f = facts_for({1}, 0);
    f.argv = {"torchrun", "t.py"};
    p = plan_step(f, c, SiteConfig{}, none, net);
    assert_false(p.ok());
    assert_contains(p.problem().text(), "needs 2 tasks on every node");
    assert_contains(p.problem().text(), "srun --ntasks-per-node=2 --ntasks=2");
    // 3 GPUs cannot split in 2.
    auto ok = plan_step(facts_for({2}, 0), c, SiteConfig{}, none, net);
    assert_true(ok.ok());
    auto g = emulation_problem(*ok, facts(0, 0, 3, {"0", "1", "2"}));
    assert_true(g.has_value());
    assert_contains(g->text(), "the step has 3 GPUs on node0");
    assert_contains(g->text(), "--gres=gpu:2");
    // K = 1 is no emulation: no NCCL_HOSTID.
    c.emulate = 1;
    auto plain = plan_step(facts_for({2}, 0), c, SiteConfig{}, none, net);
    assert_false(as_map(task_environment(*plain, facts(0, 0, 4, {"0", "1", "2", "3"}))).count("NCCL_HOSTID"));
}

static void interface_towards_master(void**) {
    FakeNetwork net = node_view(1, 3);
    assert_str(interface_towards("10.0.0.10", net), "eth0");  // the route to node 0
    assert_str(interface_towards("node0", net), "");          // an address, not a name
    assert_str(interface_towards("", net), "");
}

static void gpu_lists(void**) {
    assert_int_equal(split_gpu_list("0,1,2,3").size(), 4);
    assert_str(split_gpu_list("2,3")[1], "3");
    assert_int_equal(split_gpu_list("NoDevFiles").size(), 0);
    assert_int_equal(split_gpu_list("").size(), 0);
    assert_int_equal(split_gpu_list("0,,1").size(), 2);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(block_distribution),
        cmocka_unit_test(cyclic_distribution),
        cmocka_unit_test(uneven_five_tasks_on_three_nodes),
        cmocka_unit_test(single_node_many_tasks),
        cmocka_unit_test(cyclic_ranks_follow_slurm),
        cmocka_unit_test(node_mode_sets_torchrun_variables),
        cmocka_unit_test(one_task_per_node_plain_program_gets_ranks_too),
        cmocka_unit_test(node_mode_without_gpus_runs_one_process),
        cmocka_unit_test(forced_task_mode_with_one_task_per_node),
        cmocka_unit_test(forced_node_mode_with_many_tasks_is_refused),
        cmocka_unit_test(users_master_port_is_used_everywhere),
        cmocka_unit_test(bad_user_master_port_is_named),
        cmocka_unit_test(the_step_secret_places_master_port_everywhere),
        cmocka_unit_test(missing_nodelist_is_named),
        cmocka_unit_test(fabric_variables_reach_every_task),
        cmocka_unit_test(a_container_network_of_its_own),
        cmocka_unit_test(a3_sockets_go_on_the_control_nic),
        cmocka_unit_test(sysfs_root_choice),
        cmocka_unit_test(explain_names_each_choice),
        cmocka_unit_test(emulate_task_mode_splits_each_node),
        cmocka_unit_test(emulate_node_mode_one_launcher_per_emulated_node),
        cmocka_unit_test(emulate_without_gpus_splits_tasks_only),
        cmocka_unit_test(emulate_refuses_what_does_not_divide),
        cmocka_unit_test(gpu_lists),
        cmocka_unit_test(interface_towards_master),
    };
    return cmocka_run_group_tests_name("step_plan", tests, nullptr, nullptr);
}
