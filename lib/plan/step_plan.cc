// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/step_plan.h"

#include <algorithm>
#include <cstdlib>

#include "lib/plan/containers.h"
#include "lib/plan/gpuprobe.h"
#include "lib/plan/hostlist.h"
#include "lib/plan/launcher.h"
#include "lib/plan/netprobe.h"
#include "lib/util/text.h"

namespace mn {

std::vector<Ipv4> SystemNetwork::resolve(const std::string& name, std::string& error) const {
    return resolve_ipv4(name, error);
}
std::vector<Interface> SystemNetwork::interfaces() const { return local_interfaces(); }
std::optional<Ipv4> SystemNetwork::route_source(Ipv4 dst) const { return mn::route_source(dst); }
std::optional<Ipv4> SystemNetwork::default_route(const std::vector<Interface>& ifs) const {
    return default_route_address(ifs);
}

namespace {

std::string given(const EnvLookup& env, const std::string& name) {
    auto v = env(name);
    return v ? *v : std::string();
}

// MASTER_ADDR may be a name or an address when the user gives it.
Outcome<Ipv4> address_of(const std::string& host, const NetworkView& net) {
    if (auto a = Ipv4::parse(host)) return *a;
    std::string err;
    auto addrs = net.resolve(host, err);
    for (const auto& a : addrs)
        if (!a.loopback()) return a;
    return Problem{"MASTER_ADDR='" + host + "' does not resolve to a usable address" +
                       (err.empty() ? "" : " (" + err + ")"),
                   "set MASTER_ADDR to node 0's cluster address, or unset it"};
}

// The node's GPUs as the step has them before any task is bound, and
// whether a per-node launcher would join the other nodes with them.
std::optional<Problem> plan_gpus(StepPlan& plan, const UserChoice& choice, const SiteConfig& site,
                                 const EnvLookup& env) {
    const std::string step_gpus = given(env, "SLURM_STEP_GPUS"), visible = given(env, "CUDA_VISIBLE_DEVICES"),
                      on_node = given(env, "SLURM_GPUS_ON_NODE");
    plan.gpus = node_gpus(step_gpus, visible, on_node);
    auto policy = parse_gpu_policy(given(env, "MN_NCCL_GPUS"));
    if (!policy) return policy.problem();
    plan.gpu_policy = *policy;
    if (auto dir = env("MN_NCCL_DEV_DIR"); dir && !dir->empty()) plan.dev_dir = *dir;
    if (choice.explain) plan.bus_ids = nvidia_bus_ids(sysfs_root(env, site));
    if (plan.launch != LaunchMode::Node) return std::nullopt;
    LauncherView view;
    view.launchers = plan.facts.nnodes * plan.emulate;
    view.gpus = count_gpus(step_gpus, visible, on_node) / plan.emulate;
    view.env = env;
    view.read = [](const std::string& path) { return read_text_file(path); };
    return launcher_join_problem(plan.facts.argv, view);
}

}  // namespace

Outcome<StepPlan> plan_step(const StepFacts& facts, const UserChoice& choice, const SiteConfig& site,
                            const EnvLookup& env, const NetworkView& net) {
    StepPlan plan;
    plan.mode = choice.mode;
    plan.force = site.force;
    plan.facts = facts;

    auto per_node = check_facts(facts);
    if (!per_node) return per_node.problem();
    plan.tasks_per_node = *per_node;

    const unsigned k = choice.emulate == 0 ? 1 : choice.emulate;
    plan.emulate = k;
    plan.launch = resolve_launch(choice.launch, facts);
    if (choice.launch != LaunchMode::Detect) {
        plan.why_launch = std::string("--mn-nccl-launch=") + to_string(choice.launch);
    } else if (k > 1) {
        // K tasks per node fit both modes, so the command decides.
        plan.launch = is_node_launcher(facts.argv) ? LaunchMode::Node : LaunchMode::Task;
        plan.why_launch = plan.launch == LaunchMode::Node ? "a launcher per emulated node" : "tasks per GPU";
    } else if (plan.launch == LaunchMode::Task) {
        plan.why_launch = "several tasks on a node";
    } else if (is_node_launcher(facts.argv)) {
        plan.why_launch = "one task on every node, and it is a per-node launcher";
    } else {
        plan.ranks_too = true;
        const std::string cmd = facts.argv.empty() ? std::string("the command") : "'" + facts.argv[0] + "'";
        plan.why_launch = "one task on every node; " + cmd +
                          " is not a per-node launcher, so RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE are "
                          "set too (a torchrun it starts gives its workers their own)";
    }
    const std::string emu = "--mn-emulate-nodes=" + std::to_string(k);
    if (k > 1) {
        for (std::size_t i = 0; i < plan.tasks_per_node.size(); ++i) {
            const uint32_t n = plan.tasks_per_node[i];
            if (plan.launch == LaunchMode::Node && n != k)
                return Problem{emu + " with a launcher per emulated node needs " + std::to_string(k) +
                                   " tasks on every node; node " + std::to_string(i) + " of the step runs " +
                                   std::to_string(n),
                               "run it with srun --ntasks-per-node=" + std::to_string(k) + " --ntasks=" +
                                   std::to_string(k * facts.nnodes)};
            if (plan.launch == LaunchMode::Task && n % k != 0)
                return Problem{emu + " splits each node's tasks into " + std::to_string(k) +
                                   " equal groups; node " + std::to_string(i) + " of the step runs " +
                                   std::to_string(n) + " tasks",
                               "use --ntasks-per-node=" + std::to_string((n / k + 1) * k) + " (a multiple of " +
                                   std::to_string(k) + ")" + (n >= k ? " or " + std::to_string(n / k * k) : "")};
        }
    } else if (plan.launch == LaunchMode::Node && facts.total_tasks != facts.nnodes) {
        return Problem{"--mn-nccl-launch=node needs exactly one task per node, the step has " +
                           std::to_string(facts.total_tasks) + " tasks on " + std::to_string(facts.nnodes) +
                           " nodes",
                       "add --ntasks-per-node=1, or use --mn-nccl-launch=task"};
    }
    if (auto p = launcher_count_problem(facts.argv, choice.launch, facts.nnodes * k, facts.total_tasks)) return *p;
    if (auto p = plan_gpus(plan, choice, site, env)) return *p;

    if (facts.nodelist.empty())
        return Problem{"SLURM_STEP_NODELIST is not in the step's environment",
                       "run the step with srun (and without --export=NONE hiding Slurm's variables)"};
    auto hosts = Hostlist::parse(facts.nodelist);
    if (!hosts) return hosts.problem();
    if (hosts->size() != facts.nnodes)
        return Problem{"SLURM_STEP_NODELIST='" + facts.nodelist + "' names " + std::to_string(hosts->size()) +
                           " hosts, the step has " + std::to_string(facts.nnodes) + " nodes",
                       "this comes from Slurm; report it with the Slurm version"};
    plan.node0 = (*hosts)[0];
    plan.host = (*hosts)[facts.node_id];

    const bool keep_user = !site.force;
    std::vector<Interface> ifs = net.interfaces();
    auto own_choice = [&]() -> Outcome<MasterChoice> {
        AddressFacts af;
        af.is_node0 = facts.node_id == 0;
        af.node0 = plan.node0;
        af.node0_resolved = net.resolve(plan.node0, af.resolve_error);
        af.interfaces = ifs;
        if (af.is_node0) {
            std::string peer = facts.nnodes > 1 ? (*hosts)[1] : given(env, "SLURM_LAUNCH_NODE_IPADDR");
            std::string err;
            std::vector<Ipv4> peer_addrs =
                Ipv4::parse(peer) ? std::vector<Ipv4>{*Ipv4::parse(peer)} : net.resolve(peer, err);
            for (const auto& p : peer_addrs) {
                if (p.loopback() || interface_holding(ifs, p)) continue;
                af.route_to_peer = net.route_source(p);
                af.peer = peer;
                break;
            }
            af.default_route_addr = net.default_route(ifs);
        }
        return choose_master_addr(af);
    };

    Ipv4 master{};
    std::string user_addr = keep_user ? given(env, "MASTER_ADDR") : "";
    if (!user_addr.empty()) {
        plan.master_addr = user_addr;
        plan.why_addr = "kept the user's MASTER_ADDR";
        auto a = address_of(user_addr, net);
        if (a) {
            master = *a;
        } else if (facts.node_id == 0) {
            // Node 0's own name may resolve to 127.0.1.1 here while the
            // others reach it fine: keep the user's value, take the
            // interface from node 0's own reachable address.
            auto m = own_choice();
            if (!m) return a.problem();
            master = m->addr;
        } else {
            return a.problem();
        }
    } else {
        auto m = own_choice();
        if (!m) return m.problem();
        master = m->addr;
        plan.master_addr = master.str();
        plan.why_addr = m->why;
    }

    std::string user_port = keep_user ? given(env, "MASTER_PORT") : "";
    if (!user_port.empty()) {
        auto p = parse_user_port(user_port);
        if (!p) return p.problem();
        plan.master_port = *p;
        plan.why_port = "kept the user's MASTER_PORT";
    } else {
        const uint32_t salt = port_salt(given(env, "MN_NCCL_STEP_SECRET"));
        plan.master_port = derive_port(site.ports, facts.job_id, facts.step_id, salt);
        plan.why_port = "job " + std::to_string(facts.job_id) + " step " + std::to_string(facts.step_id) +
                        (salt ? ", placed by the step's secret," : "") + " in " + std::to_string(site.ports.lo) +
                        "-" + std::to_string(site.ports.hi);
    }
    plan.rdzv = rdzv_id(facts.job_id, facts.step_id);
    plan.watch_port = derive_watch_port(site.ports, facts.job_id, facts.step_id, given(env, "MN_NCCL_STEP_SECRET"));
    if (plan.watch_port == plan.master_port) plan.watch_port = 0;

    auto ifc = choose_interface(master, ifs, net.route_source(master));
    if (!ifc) return ifc.problem();
    plan.ifname = ifc->name;
    plan.why_ifname = ifc->why;
    return plan;
}

void take_fabric(StepPlan& plan, FabricChoice fabric) {
    const std::string& control = fabric.control_netdev;
    if (!control.empty() && control != plan.ifname) {
        fabric.warnings.push_back("MASTER_ADDR " + plan.master_addr + " is reached through " + plan.ifname +
                                  ", not the control NIC " + control + ": NCCL's sockets go on " + control +
                                  " (Google's " + fabric.fabric + " plugin wants them there), the rendezvous still "
                                  "through " + plan.ifname);
        plan.why_ifname = "Google Cloud A3's control NIC for " + fabric.fabric + " (the route to MASTER_ADDR leaves "
                          "through " + plan.ifname + ")";
        plan.ifname = control;
    } else if (!control.empty()) {
        plan.why_ifname += "; the A3 control NIC, where Google puts NCCL's sockets";
    }
    plan.fabric = std::move(fabric);
}

std::vector<std::string> split_gpu_list(const std::string& cuda_visible) {
    // NoDevFiles is what Slurm writes when the step has no GPU.
    if (cuda_visible == "NoDevFiles") return {};
    return split_list(cuda_visible);
}

namespace {

// The step's GPUs on the node: the list slurmstepd had before binding any
// task, else what this task says.
uint32_t node_gpu_count(const StepPlan& plan, const TaskFacts& task) {
    return plan.gpus.from_slurm && !plan.gpus.visible.empty() ? static_cast<uint32_t>(plan.gpus.visible.size())
                                                               : task.gpus;
}

bool numbered(const std::vector<std::string>& gpus) {
    for (const auto& g : gpus)
        if (g.empty() || g.find_first_not_of("0123456789") != std::string::npos) return false;
    return true;
}

}  // namespace

std::optional<Problem> emulation_problem(const StepPlan& plan, const TaskFacts& task) {
    const unsigned k = plan.emulate;
    const uint32_t gpus = node_gpu_count(plan, task);
    if (k <= 1 || gpus % k == 0) return std::nullopt;
    return Problem{"--mn-emulate-nodes=" + std::to_string(k) + " gives each emulated node an equal share of the "
                       "node's GPUs, but the step has " + std::to_string(gpus) + " GPUs on " + plan.host,
                   "ask for a multiple of " + std::to_string(k) + " GPUs per node (e.g. --gres=gpu:" +
                       std::to_string(gpus < k ? k : gpus / k * k) + ")"};
}

void read_task_gpus(TaskFacts& task, const EnvLookup& env, const StepPlan& plan) {
    const auto visible = env("CUDA_VISIBLE_DEVICES");
    task.gpus = count_gpus(given(env, "SLURM_STEP_GPUS"), visible.value_or(""), given(env, "SLURM_GPUS_ON_NODE"));
    task.gpu_list = split_gpu_list(visible.value_or(""));
    task.gpu_list_unset = !visible;
    task.tres_bind = given(env, "SLURMD_TRES_BIND");
    task.rocr_same = visible && env("ROCR_VISIBLE_DEVICES") == visible;
    // Only a task that the plugin would point at a GPU needs to know which
    // it may open.
    if (plan.launch == LaunchMode::Task && plan.gpus.from_slurm && plan.gpus.visible.size() > 1)
        task.openable = openable_gpus(plan.dev_dir);
}

Outcome<TaskGpus> task_gpus(const StepPlan& plan, const TaskFacts& task) {
    TaskGpuFacts t;
    t.host = plan.host;
    t.launch = plan.launch;
    t.emulate = plan.emulate == 0 ? 1 : plan.emulate;
    t.local_tasks = plan.facts.local_tasks;
    t.local_id = task.local_id;
    t.bind = parse_gpu_bind(task.tres_bind);
    if (!task.gpu_list_unset) t.bound = task.gpu_list;
    t.openable = task.openable;
    return choose_task_gpus(plan.gpus, plan.gpu_policy, t);
}

std::optional<Problem> task_problem(const StepPlan& plan, const TaskFacts& task) {
    if (auto p = emulation_problem(plan, task)) return p;
    auto g = task_gpus(plan, task);
    if (!g) return g.problem();
    return std::nullopt;
}

namespace {

// CUDA_VISIBLE_DEVICES (and what goes with it) for a task whose GPUs the
// plugin chose; nothing when they are Slurm's list unchanged.
void put_gpus(std::vector<EnvVar>& env, const TaskGpus& g, const TaskFacts& task) {
    if (g.visible.empty()) return;
    const std::string list = join_list(g.visible);
    // Slurm's numbers are NVML's, in PCI bus order; CUDA numbers them so
    // only under PCI_BUS_ID (Slurm's gres documentation says as much).
    if (g.visible.size() > 1 && numbered(g.visible)) env.push_back({"CUDA_DEVICE_ORDER", "PCI_BUS_ID"});
    if (!task.gpu_list_unset && g.visible == task.gpu_list) return;
    env.push_back({"CUDA_VISIBLE_DEVICES", list, true});
    if (task.rocr_same) env.push_back({"ROCR_VISIBLE_DEVICES", list, true});
}

}  // namespace

std::vector<EnvVar> task_environment(const StepPlan& plan, const TaskFacts& task) {
    const StepFacts& f = plan.facts;
    const std::string port = std::to_string(plan.master_port);
    const unsigned k = plan.emulate == 0 ? 1 : plan.emulate;
    // Which emulated node this task belongs to, and its place in it. Without
    // emulation: group 0 of 1, i.e. the real node.
    const uint32_t per_group = plan.launch == LaunchMode::Task ? f.local_tasks / k : 1;
    const uint32_t group = per_group ? task.local_id / per_group : 0;
    const uint32_t nnodes = f.nnodes * k;
    const uint32_t node_rank = f.node_id * k + group;
    auto chosen = task_gpus(plan, task);
    const bool managed = chosen && chosen->managed;
    const uint32_t gpus = managed ? static_cast<uint32_t>(chosen->visible.size()) : task.gpus / k;
    std::vector<EnvVar> env;
    auto put = [&](const char* name, std::string value) { env.push_back({name, std::move(value)}); };
    put("MASTER_ADDR", plan.master_addr);
    put("MASTER_PORT", port);
    put("NNODES", std::to_string(nnodes));
    put("NODE_RANK", std::to_string(node_rank));
    if (plan.launch == LaunchMode::Task || plan.ranks_too) {
        put("RANK", std::to_string(task.global_id));
        put("LOCAL_RANK", std::to_string(task.local_id % (per_group ? per_group : 1)));
        put("WORLD_SIZE", std::to_string(f.total_tasks));
        put("LOCAL_WORLD_SIZE", std::to_string(per_group));
    }
    if (plan.launch == LaunchMode::Node) {
        // torchrun reads PET_<FLAG> for each of its flags.
        const std::string nproc = std::to_string(gpus == 0 ? 1 : gpus);
        put("GPUS_PER_NODE", nproc);
        put("NPROC_PER_NODE", nproc);
        put("PET_NNODES", std::to_string(nnodes));
        put("PET_NPROC_PER_NODE", nproc);
        put("PET_NODE_RANK", std::to_string(node_rank));
        put("PET_MASTER_ADDR", plan.master_addr);
        put("PET_MASTER_PORT", port);
        put("PET_RDZV_ID", plan.rdzv);
    }
    // Where rank 0's hang watch hears the other nodes' (mn-preflight watch),
    // whether the plugin or the user puts the watch in front of the program.
    if (plan.watch_port) put("MN_NCCL_WATCH_PORT", std::to_string(plan.watch_port));
    // NCCL takes '=' as "exactly this name", not a prefix.
    put("NCCL_SOCKET_IFNAME", "=" + plan.ifname);
    put("GLOO_SOCKET_IFNAME", plan.ifname);
    for (const auto& [name, value] : plan.fabric.env) env.push_back({name, value});
    if (managed) {
        put_gpus(env, *chosen, task);
    } else if (k > 1 && gpus > 0 && task.gpu_list.size() == task.gpus) {
        // Without the step's list (MN_NCCL_GPUS=slurm): a contiguous share
        // of the task's, as physical indices: with gpu:4 and K=2, 0,1 and 2,3.
        std::string share;
        for (uint32_t i = group * gpus; i < (group + 1) * gpus; ++i)
            share += (share.empty() ? "" : ",") + task.gpu_list[i];
        env.push_back({"CUDA_VISIBLE_DEVICES", share, true});
    }
    if (k > 1) {
        // NCCL treats ranks with different host ids as different hosts, so
        // traffic between emulated nodes takes its network transport.
        env.push_back({"NCCL_HOSTID", plan.host + "-emu" + std::to_string(group), true});
    }
    // apptainer exec IMAGE ...: the image's own variables win over the
    // host's, and --cleanenv drops the host's; APPTAINERENV_NAME wins over
    // both.
    if (auto c = apptainer_command(f.argv)) {
        const std::string prefix = apptainer_env_prefix(c->runtime);
        const std::size_t n = env.size();
        for (std::size_t i = 0; i < n; ++i) env.push_back({prefix + env[i].name, env[i].value, env[i].replace});
    }
    return env;
}

std::string explain_line(const StepPlan& plan, const std::string& hostname) {
    const StepFacts& f = plan.facts;
    std::string fabric;
    if (!plan.fabric.fabric.empty()) {
        fabric = "; fabric=" + plan.fabric.fabric;
        for (const auto& [name, value] : plan.fabric.env) fabric += " " + name + "=" + value;
        fabric += " (" + plan.fabric.why + ")";
    }
    const std::string emulated =
        plan.emulate > 1 ? ", split into " + std::to_string(plan.emulate) + " emulated nodes" : "";
    return "mn_nccl: " + hostname + " (node " + std::to_string(f.node_id) + " of " + std::to_string(f.nnodes) +
           emulated + "): mode=" + to_string(plan.mode) + " launch=" + to_string(plan.launch) + " (" + plan.why_launch +
           "); MASTER_ADDR=" + plan.master_addr + " (" + plan.why_addr + "); MASTER_PORT=" +
           std::to_string(plan.master_port) + " (" + plan.why_port + "); NCCL_SOCKET_IFNAME==" + plan.ifname +
           " (" + plan.why_ifname + ")" + fabric + (plan.locality.empty() ? "" : "; locality: " + plan.locality);
}

namespace {

// Where a GPU (a name in CUDA_VISIBLE_DEVICES) sits: its PCI bus id and
// nearest HCA, from Slurm's number of it (the PCI order place under
// AutoDetect=nvml and CUDA_DEVICE_ORDER=PCI_BUS_ID) and hwloc's locality
// line (GPUn>HCA (how), ...).
std::string gpu_place(const StepPlan& plan, const std::string& gpu) {
    const auto& v = plan.gpus.visible;
    const auto at = std::find(v.begin(), v.end(), gpu);
    const std::string id = at != v.end() && !plan.gpus.ids.empty() ? plan.gpus.ids[at - v.begin()] : gpu;
    std::string out = "GPU " + gpu;
    if (id != gpu) out += " (Slurm's " + id + ")";
    std::vector<std::string> where;
    if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos && id.size() < 6) {
        const std::size_t n = std::stoul(id);
        if (n < plan.bus_ids.size()) where.push_back("PCI " + plan.bus_ids[n]);
        const std::string key = "GPU" + id + ">";
        std::size_t pos = plan.locality.rfind(key, 0) == 0 ? 0 : plan.locality.find(", " + key);
        if (pos != std::string::npos) {
            pos += (pos == 0 ? 0 : 2) + key.size();
            const std::string hca = plan.locality.substr(pos, plan.locality.find(", ", pos) - pos);
            if (hca != "none") where.push_back("nearest HCA " + hca);
        }
    }
    std::string place;
    for (const auto& w : where) place += (place.empty() ? " [" : ", ") + w;
    return where.empty() ? out : out + place + "]";
}

}  // namespace

std::string task_explain_line(const StepPlan& plan, const TaskFacts& task, const std::string& hostname) {
    if (!plan.gpus.from_slurm && task.gpu_list.empty()) return "";  // a step without GPUs: nothing to say
    std::string who = "mn_nccl: " + hostname + " task " + std::to_string(task.local_id) + " (";
    who += plan.launch == LaunchMode::Task || plan.ranks_too ? "RANK " + std::to_string(task.global_id)
                                                              : std::string("launcher");
    who += "): ";
    auto g = task_gpus(plan, task);
    if (!g) return who + g.problem().text();
    const std::string slurm = task.gpu_list_unset ? "unset" : join_list(task.gpu_list);
    if (!g->managed)
        return who + "CUDA_VISIBLE_DEVICES=" + (slurm.empty() ? "(none)" : slurm) + " as Slurm set it (" + g->why + ")";
    const std::string list = join_list(g->visible);
    const std::string given = list == slurm ? " (Slurm's)" : " (Slurm gave " + slurm + ")";
    if (plan.launch == LaunchMode::Node) {
        std::string gpus;
        for (const auto& x : g->visible) gpus += (gpus.empty() ? "" : ", ") + gpu_place(plan, x);
        return who + "NPROC_PER_NODE=" + std::to_string(g->visible.size()) + ": " + gpus + "; CUDA_VISIBLE_DEVICES=" +
               list + given + "; " + g->why;
    }
    return who + "LOCAL_RANK " + std::to_string(g->local_rank) + " selects " + gpu_place(plan, g->device) +
           "; CUDA_VISIBLE_DEVICES=" + list + given + "; " + g->why;
}

EnvLookup process_env() {
    return [](const std::string& n) -> std::optional<std::string> {
        const char* v = std::getenv(n.c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
    };
}

std::string interface_towards(const std::string& master_addr, const NetworkView& net) {
    auto addr = Ipv4::parse(master_addr);
    if (!addr) return "";
    auto c = choose_interface(*addr, net.interfaces(), net.route_source(*addr));
    return c ? c->name : "";
}

bool unshares_network(const std::string& unshare) {
    for (const auto& ns : split_list(unshare, ','))
        if (ns == "net") return true;
    return false;
}

std::optional<Problem> own_network(StepPlan& plan, const std::string& source) {
    const std::size_t nodes = plan.tasks_per_node.size();
    if (nodes > 1)
        return Problem{source + " gives each node's container a network of its own, with a loopback alone inside: the "
                                "step's ranks on " + std::to_string(nodes) +
                           " nodes cannot reach each other, and NCCL would fail at its first connect",
                       "drop --container-unshare=net (or net from PYXIS_CONTAINER_UNSHARE) for a step of several "
                       "nodes; keep it for steps on one node"};
    plan.master_addr = "127.0.0.1";
    plan.why_addr = "the loopback: " + source + " leaves the container no other network, and the step has one node";
    plan.ifname = "lo";
    plan.why_ifname = "the loopback, the one interface in the container's network (" + source + ")";
    plan.fabric.fabric = "socket";
    plan.fabric.env = {{"NCCL_IB_DISABLE", "1"}};
    plan.fabric.why = "sockets on the loopback: the node's RDMA devices are not in the container's network (" +
                      source + ")";
    return std::nullopt;
}

std::string sysfs_root(const EnvLookup& env, const SiteConfig& site) {
    // The admin's choice is pinned, and a user's tree is read by root only
    // where the site opened it (doc/security.md): a root-run parser is not
    // every user's to feed.
    if (!site.sysfs_root.empty()) return site.sysfs_root;
    if (site.user_sysfs_root) return user_sysfs_root(env);
    return "/sys";
}

std::string user_sysfs_root(const EnvLookup& env) {
    if (auto v = env("MN_NCCL_SYSFS_ROOT"); v && !v->empty()) return *v;
    return "/sys";
}

std::string unread_sysfs_root(const EnvLookup& env, const SiteConfig& site) {
    const std::string asked = user_sysfs_root(env);
    if (asked == "/sys" || sysfs_root(env, site) == asked) return "";
    return "MN_NCCL_SYSFS_ROOT=" + asked + " is not read here: the node's " + sysfs_root(env, site) +
           " is (a site lets steps name the tree with plugstack.conf's user_sysfs_root=yes; unset it)";
}

}  // namespace mn
