// SPDX-License-Identifier: Apache-2.0
// The plugin's whole path in slurmstepd from Slurm's and the user's strings:
// SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, --mn-emulate-nodes,
// --mn-nccl-launch, MASTER_ADDR, MASTER_PORT, CUDA_VISIBLE_DEVICES and the
// command, on a fixed network (eth0 10.0.0.200). Input: those fields,
// '\n' between, then a byte for the node id and one that perturbs a count.
// Properties of a plan that is made: this node's name is its entry of the
// host list; every task of the node gets ranks inside the world; emulated
// nodes get disjoint GPU shares that together are the node's list.
#include <algorithm>
#include <map>
#include <set>

#include "tests/fuzz/fuzz.h"
#include "lib/plan/hostlist.h"
#include "lib/plan/step_plan.h"
#include "lib/util/text.h"

namespace {

struct FixedNetwork : mn::NetworkView {
    std::string self;
    std::vector<mn::Ipv4> resolve(const std::string& n, std::string& err) const override {
        if (n == self) return {*mn::Ipv4::parse("127.0.1.1")};  // Debian's own-name trap
        if (n.empty() || n.size() > 64) {
            err = "Name or service not known";
            return {};
        }
        unsigned h = 0;
        for (unsigned char c : n) h = h * 31 + c;
        return {*mn::Ipv4::parse("10.0.0." + std::to_string(1 + h % 199))};
    }
    std::vector<mn::Interface> interfaces() const override {
        return {{"lo", {*mn::Ipv4::parse("127.0.0.1")}, true, true},
                {"eth0", {*mn::Ipv4::parse("10.0.0.200")}, true, false},
                {"docker0", {*mn::Ipv4::parse("172.17.0.1")}, true, false}};
    }
    std::optional<mn::Ipv4> route_source(mn::Ipv4 dst) const override {
        if ((dst.value >> 8) == ((10u << 16) | 0)) return *mn::Ipv4::parse("10.0.0.200");  // 10.0.0.0/24
        return std::nullopt;
    }
    std::optional<mn::Ipv4> default_route(const std::vector<mn::Interface>&) const override {
        return *mn::Ipv4::parse("10.0.0.200");
    }
};

std::map<std::string, std::string> as_map(const std::vector<mn::EnvVar>& env) {
    std::map<std::string, std::string> m;
    for (const auto& v : env) m[v.name] = v.value;
    return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 1024) return 0;
    auto f = fuzz::fields(data, size, '\n', 10);
    f.resize(10);
    const std::string &nodelist = f[0], &tpn = f[1], &emulate = f[2], &launch = f[3], &master_addr = f[4],
                      &master_port = f[5], &cuda = f[6], &cmd = f[7], &ids = f[8];
    const uint8_t node_byte = ids.size() > 0 ? ids[0] : 0, perturb = ids.size() > 1 ? ids[1] : 0;

    auto hosts = mn::Hostlist::parse(nodelist);
    auto counts = mn::parse_tasks_per_node(tpn);
    if (!hosts || hosts->size() > 4096) return 0;
    mn::StepFacts facts;
    facts.job_id = 4242;
    facts.step_id = 3;
    facts.nodelist = nodelist;
    facts.tasks_per_node = tpn;
    facts.nnodes = static_cast<uint32_t>(hosts->size());
    facts.node_id = node_byte % facts.nnodes;
    if (counts) {
        uint64_t sum = 0;
        for (uint32_t c : *counts) sum += c;
        facts.total_tasks = static_cast<uint32_t>(std::min<uint64_t>(sum, 1u << 30));
        facts.local_tasks = facts.node_id < counts->size() ? (*counts)[facts.node_id] : 1;
    }
    // Now and then Slurm's facts disagree: the plan must refuse, not guess.
    switch (perturb % 8) {
        case 1: facts.nnodes += 1; break;
        case 2: facts.total_tasks += 1; break;
        case 3: facts.local_tasks += 1; break;
        case 4: facts.node_id = facts.nnodes; break;
    }
    facts.argv = mn::split_list(cmd, ' ');

    mn::UserChoice choice;
    choice.mode = mn::Mode::Socket;
    if (!emulate.empty()) {
        auto k = mn::parse_emulate_nodes(emulate, "--mn-emulate-nodes");
        if (!k) return 0;
        choice.emulate = *k;
    }
    if (!launch.empty()) {
        auto l = mn::parse_launch(launch, "--mn-nccl-launch");
        if (!l) return 0;
        choice.launch = *l;
    }
    mn::SiteConfig site;
    std::map<std::string, std::string> env_in;
    if (!master_addr.empty()) env_in["MASTER_ADDR"] = master_addr;
    if (!master_port.empty()) env_in["MASTER_PORT"] = master_port;
    const mn::EnvLookup env = [&](const std::string& n) -> std::optional<std::string> {
        auto it = env_in.find(n);
        return it == env_in.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    FixedNetwork net;
    net.self = facts.node_id < hosts->size() ? (*hosts)[facts.node_id] : "";

    auto plan = mn::plan_step(facts, choice, site, env, net);
    if (!plan) {
        FUZZ_CHECK(!plan.problem().what.empty() && !plan.problem().fix.empty(), "a refusal without a fix: %s",
                   plan.problem().what.c_str());
        return 0;
    }
    FUZZ_CHECK(counts && (perturb % 8 == 0 || perturb % 8 > 4), "a plan from facts that disagree (perturbation %d)",
               perturb % 8);
    FUZZ_CHECK(plan->host == (*hosts)[facts.node_id] && plan->node0 == (*hosts)[0], "host '%s' node0 '%s'",
               plan->host.c_str(), plan->node0.c_str());
    FUZZ_CHECK(plan->ifname == "eth0", "interface '%s'", plan->ifname.c_str());
    if (master_port.empty())
        FUZZ_CHECK(plan->master_port >= site.ports.lo && plan->master_port <= site.ports.hi, "port %u", plan->master_port);
    else
        FUZZ_CHECK(std::to_string(plan->master_port) == master_port.substr(master_port.find_first_not_of('0')),
                   "MASTER_PORT '%s' became %u", master_port.c_str(), plan->master_port);

    // Every task of this node, as slurmstepd would set them up.
    const unsigned k = plan->emulate;
    const uint32_t gpus = mn::count_gpus("", cuda, "");
    const auto gpu_list = mn::split_gpu_list(cuda);
    std::vector<std::string> shares(k);
    std::set<uint32_t> ranks;
    const uint32_t local = std::min<uint32_t>(facts.local_tasks, 64);
    for (uint32_t id = 0; id < local; ++id) {
        mn::TaskFacts t;
        t.local_id = id;
        t.global_id = id;  // this node's first task is rank 0 here
        t.gpus = gpus;
        t.gpu_list = gpu_list;
        if (mn::emulation_problem(*plan, t)) return 0;
        auto e = as_map(mn::task_environment(*plan, t));
        const unsigned long nnodes = std::stoul(e["NNODES"]), node_rank = std::stoul(e["NODE_RANK"]);
        FUZZ_CHECK(nnodes == uint64_t(facts.nnodes) * k && node_rank < nnodes, "NODE_RANK %lu of %lu", node_rank, nnodes);
        FUZZ_CHECK(e["MASTER_PORT"] == std::to_string(plan->master_port) && e["NCCL_SOCKET_IFNAME"] == "=eth0",
                   "port or interface differ between plan and task");
        if (plan->launch == mn::LaunchMode::Task) {
            const unsigned long lr = std::stoul(e["LOCAL_RANK"]), lws = std::stoul(e["LOCAL_WORLD_SIZE"]);
            FUZZ_CHECK(lr < lws || lws == 0, "LOCAL_RANK %lu of %lu", lr, lws);
            FUZZ_CHECK(std::stoul(e["WORLD_SIZE"]) == facts.total_tasks, "WORLD_SIZE");
        }
        if (k > 1) {
            const unsigned long group = node_rank - uint64_t(facts.node_id) * k;
            FUZZ_CHECK(group < k && e["NCCL_HOSTID"] == plan->host + "-emu" + std::to_string(group), "NCCL_HOSTID '%s'",
                       e["NCCL_HOSTID"].c_str());
            if (e.count("CUDA_VISIBLE_DEVICES")) {
                FUZZ_CHECK(shares[group].empty() || shares[group] == e["CUDA_VISIBLE_DEVICES"],
                           "two tasks of emulated node %lu see different GPUs", group);
                shares[group] = e["CUDA_VISIBLE_DEVICES"];
            }
        }
    }
    // The emulated nodes' shares split the node's GPUs: disjoint, complete.
    if (k > 1 && gpus > 0 && gpu_list.size() == gpus && local >= k && local == facts.local_tasks) {
        std::vector<std::string> all;
        for (const auto& s : shares)
            for (const auto& g : mn::split_list(s)) all.push_back(g);
        FUZZ_CHECK(all == gpu_list, "the shares (%zu GPUs) are not the node's list (%zu)", all.size(), gpu_list.size());
    }
    return 0;
}
