// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/emulated_slurm.h"

#include <cctype>
#include <cstdlib>

#include "lib/plan/hostlist.h"
#include "lib/plan/step_layout.h"
#include "lib/util/text.h"

namespace mn {

const std::vector<std::string>& emulated_slurm_names() {
    static const std::vector<std::string> names = {
        "SLURM_NNODES",          "SLURM_JOB_NUM_NODES",      "SLURM_STEP_NUM_NODES",
        "SLURM_NODEID",          "SLURM_LOCALID",            "SLURM_NTASKS_PER_NODE",
        "SLURM_TASKS_PER_NODE",  "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODELIST",
        "SLURM_JOB_NODELIST",    "SLURM_STEP_NODELIST",      "SLURMD_NODENAME",
        "SLURM_TOPOLOGY_ADDR",   "SLURM_GTIDS",              "SLURM_GPUS_ON_NODE",
        "SLURM_STEP_GPUS",       "SLURM_JOB_GPUS",           "GPU_DEVICE_ORDINAL",
        "SLURM_CPUS_ON_NODE",    "SLURM_JOB_CPUS_PER_NODE",
    };
    return names;
}

std::string emulated_node_name(const std::string& real, unsigned group) {
    return group == 0 ? real : real + "-e" + std::to_string(group);
}

namespace {

// "node12" -> {"node", "12"}; no trailing digits -> {name, ""}.
std::pair<std::string, std::string> split_number(const std::string& name) {
    std::size_t i = name.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
    return {name.substr(0, i), name.substr(i)};
}

std::string padded(unsigned long v, std::size_t width) {
    std::string s = std::to_string(v);
    return s.size() < width ? std::string(width - s.size(), '0') + s : s;
}

std::optional<uint32_t> whole(const std::optional<std::string>& s) {
    if (!s || s->empty() || s->size() > 9) return std::nullopt;
    for (char c : *s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    return static_cast<uint32_t>(std::strtoul(s->c_str(), nullptr, 10));
}

// Share `group` of K contiguous shares of a comma list; nullopt when K does
// not divide it.
std::optional<std::string> share_of(const std::string& list, unsigned k, unsigned group) {
    auto items = split_list(list);
    if (items.empty() || items.size() % k != 0) return std::nullopt;
    const std::size_t per = items.size() / k;
    return join_list(std::vector<std::string>(items.begin() + group * per, items.begin() + (group + 1) * per));
}

Problem bad_list(const std::string& name, const std::string& value, const Problem& why) {
    return Problem{name + "='" + value + "' cannot be split into emulated nodes: " + why.what,
                   "this comes from Slurm; report it with the Slurm version, or run without --mn-emulate-nodes"};
}

}  // namespace

std::string compress_hostlist(const std::vector<std::string>& hosts) {
    std::string out;
    std::size_t i = 0;
    while (i < hosts.size()) {
        auto [prefix, digits] = split_number(hosts[i]);
        std::size_t j = i + 1;
        if (!digits.empty() && digits.size() <= 9) {
            const unsigned long first = std::strtoul(digits.c_str(), nullptr, 10);
            while (j < hosts.size()) {
                auto [p, d] = split_number(hosts[j]);
                if (p != prefix || d != padded(first + (j - i), digits.size())) break;
                ++j;
            }
        }
        if (!out.empty()) out += ",";
        if (j - i > 1)
            out += prefix + "[" + digits + "-" + split_number(hosts[j - 1]).second + "]";
        else
            out += hosts[i];
        i = j;
    }
    return out;
}

std::string compress_counts(const std::vector<uint32_t>& counts) {
    std::string out;
    std::size_t i = 0;
    while (i < counts.size()) {
        std::size_t j = i;
        while (j < counts.size() && counts[j] == counts[i]) ++j;
        if (!out.empty()) out += ",";
        out += std::to_string(counts[i]);
        if (j - i > 1) out += "(x" + std::to_string(j - i) + ")";
        i = j;
    }
    return out;
}

Outcome<std::vector<EnvVar>> emulated_slurm_env(const StepPlan& plan, const TaskFacts& task,
                                                const EnvLookup& slurm) {
    const unsigned k = plan.emulate;
    std::vector<EnvVar> out;
    if (k <= 1) return out;
    const StepFacts& f = plan.facts;
    const bool task_mode = plan.launch == LaunchMode::Task;
    const std::string emu = "--mn-emulate-nodes=" + std::to_string(k);

    // Each real node's tasks form K equal groups (task mode) or K launchers
    // (node mode); plan_step refuses other layouts, and so does this, for
    // callers that did not plan.
    std::vector<uint32_t> per_emulated;
    for (std::size_t i = 0; i < plan.tasks_per_node.size(); ++i) {
        const uint32_t n = plan.tasks_per_node[i];
        if (task_mode ? n % k != 0 : n != k)
            return Problem{emu + ": node " + std::to_string(i) + " of the step runs " + std::to_string(n) +
                               " tasks, which do not make " + std::to_string(k) + " emulated nodes",
                           task_mode ? "run a multiple of " + std::to_string(k) + " tasks on every node"
                                     : "run " + std::to_string(k) + " launchers on every node (--ntasks-per-node=" +
                                           std::to_string(k) + ")"};
        per_emulated.insert(per_emulated.end(), k, task_mode ? n / k : 1);
    }
    if (f.node_id >= plan.tasks_per_node.size() || task.local_id >= f.local_tasks)
        return Problem{emu + ": task " + std::to_string(task.local_id) + " of node " + std::to_string(f.node_id) +
                           " is outside the step's layout",
                       "this comes from Slurm; report it with the Slurm version"};
    const uint32_t per_group = task_mode ? f.local_tasks / k : 1;
    const uint32_t group = task.local_id / per_group;
    const uint32_t node_id = f.node_id * k + group;

    auto step_hosts = Hostlist::parse(f.nodelist);
    if (!step_hosts) return bad_list("SLURM_STEP_NODELIST", f.nodelist, step_hosts.problem());
    auto split_hosts = [&](const Hostlist& h) {
        std::vector<std::string> names;
        for (const auto& real : h.hosts())
            for (unsigned g = 0; g < k; ++g) names.push_back(emulated_node_name(real, g));
        return compress_hostlist(names);
    };
    const std::string step_list = split_hosts(*step_hosts);
    const std::string nnodes = std::to_string(f.nnodes * k);
    const std::string real_name = slurm("SLURMD_NODENAME").value_or(plan.host);
    const std::string name = emulated_node_name(real_name, group);

    // What a real cluster of the emulated nodes would give this task.
    std::vector<EnvVar> view;
    auto put = [&](const std::string& n, const std::string& v) { view.push_back({n, v, true}); };
    put("SLURM_NNODES", nnodes);
    put("SLURM_STEP_NUM_NODES", nnodes);
    put("SLURM_NODEID", std::to_string(node_id));
    put("SLURM_LOCALID", std::to_string(task_mode ? task.local_id % per_group : 0));
    // Slurm sets it only for --ntasks-per-node; Lightning refuses several
    // tasks without it, and every emulated node has its own count.
    put("SLURM_NTASKS_PER_NODE", std::to_string(per_emulated[node_id]));
    put("SLURM_TASKS_PER_NODE", compress_counts(per_emulated));
    put("SLURM_STEP_TASKS_PER_NODE", compress_counts(per_emulated));
    put("SLURM_NODELIST", step_list);
    put("SLURM_STEP_NODELIST", step_list);
    put("SLURMD_NODENAME", name);

    if (auto job = slurm("SLURM_JOB_NODELIST")) {
        auto hosts = Hostlist::parse(*job);
        if (!hosts) return bad_list("SLURM_JOB_NODELIST", *job, hosts.problem());
        put("SLURM_JOB_NODELIST", split_hosts(*hosts));
        put("SLURM_JOB_NUM_NODES", std::to_string(hosts->size() * k));
        // Each node's CPUs shared out, as if each emulated node had its part.
        if (auto cpus = slurm("SLURM_JOB_CPUS_PER_NODE")) {
            auto counts = parse_tasks_per_node(*cpus);
            if (counts && counts->size() == hosts->size()) {
                std::vector<uint32_t> split;
                for (uint32_t c : *counts) split.insert(split.end(), k, c / k ? c / k : 1);
                put("SLURM_JOB_CPUS_PER_NODE", compress_counts(split));
            }
        }
    } else if (auto n = whole(slurm("SLURM_JOB_NUM_NODES"))) {
        put("SLURM_JOB_NUM_NODES", std::to_string(*n * k));
    }
    if (auto topo = slurm("SLURM_TOPOLOGY_ADDR")) {
        // topology/tree writes switch.switch.node; topology/none just the node.
        if (*topo == real_name)
            put("SLURM_TOPOLOGY_ADDR", name);
        else if (topo->size() > real_name.size() &&
                 topo->compare(topo->size() - real_name.size() - 1, std::string::npos, "." + real_name) == 0)
            put("SLURM_TOPOLOGY_ADDR", topo->substr(0, topo->size() - real_name.size()) + name);
    }
    if (auto gtids = slurm("SLURM_GTIDS")) {
        auto ids = split_list(*gtids);
        if (ids.size() == f.local_tasks)
            put("SLURM_GTIDS", join_list(std::vector<std::string>(ids.begin() + group * per_group,
                                                                  ids.begin() + (group + 1) * per_group)));
    }
    if (auto g = whole(slurm("SLURM_GPUS_ON_NODE")); g && *g % k == 0) put("SLURM_GPUS_ON_NODE", std::to_string(*g / k));
    for (const char* list : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL"})
        if (auto v = slurm(list))
            if (auto s = share_of(*v, k, group)) put(list, *s);
    if (auto c = whole(slurm("SLURM_CPUS_ON_NODE"))) put("SLURM_CPUS_ON_NODE", std::to_string(*c / k ? *c / k : 1));

    for (const auto& n : emulated_slurm_names())
        if (auto real = slurm(n)) out.push_back({kRealPrefix + n, *real, true});
    for (auto& v : view) out.push_back(std::move(v));
    out.push_back({kEmulatedMarker, std::to_string(k), true});
    return out;
}

std::vector<EnvChange> real_slurm_env(const EnvLookup& env) {
    std::vector<EnvChange> out;
    if (!env(kEmulatedMarker)) return out;
    for (const auto& n : emulated_slurm_names()) {
        const std::string real = kRealPrefix + n;
        auto v = env(real);
        if (v) {
            out.push_back({n, *v});
            out.push_back({real, std::nullopt});
        } else if (env(n)) {
            out.push_back({n, std::nullopt});  // the emulation added it
        }
    }
    out.push_back({kEmulatedMarker, std::nullopt});
    return out;
}

}  // namespace mn
