// SPDX-License-Identifier: Apache-2.0
#include "lib/check/gpu_health.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "lib/util/text.h"

namespace mn {

std::vector<GpuFinding> gpu_health(const std::string& node, const std::vector<GpuReadings>& gpus,
                                   const std::set<unsigned>& ours) {
    std::vector<GpuFinding> out;
    // NVLink: compared with the node's best GPU, not with a model's table.
    int most_up = 0;
    for (const auto& g : gpus) most_up = std::max(most_up, g.nvlinks_up);
    // A node's GPUs are in one NVLink domain: the first's is the node's.
    // Nodes differ by design (one domain per rack): not compared across.
    std::string domain;
    for (const auto& g : gpus)
        if (g.fabric_domain && domain.empty()) domain = *g.fabric_domain;
    for (const auto& g : gpus) {
        const std::string who = node + " " + g.gpu + ": ";
        auto fail = [&](const std::string& t) { out.push_back({true, who + t}); };
        auto warn = [&](const std::string& t) { out.push_back({false, who + t}); };
        if (!g.nvml) {
            if (!g.nvml_error.empty()) warn("GPU health not read (" + g.nvml_error + ")");
            continue;
        }
        for (const auto& p : g.processes) {
            if (ours.count(p.pid)) continue;
            fail("another process is on this GPU: pid " + std::to_string(p.pid) + " (" +
                 (p.name.empty() ? "?" : p.name) + "), " + std::to_string(p.used_mib) +
                 " MiB; fix: end it or drain the node (a job's GPU must be its own)");
        }
        if (g.ecc_uncorrected && *g.ecc_uncorrected > 0)
            fail(std::to_string(*g.ecc_uncorrected) +
                 " uncorrectable ECC errors since the driver loaded; fix: drain, reset the GPU (nvidia-smi -r) and "
                 "run DCGM diag level 3; replace it if they return");
        if (g.remap_failed.value_or(false))
            fail("a row remap failed (no spare rows left); fix: drain and replace the GPU");
        else if (g.remap_pending.value_or(false))
            fail("a row remap is pending; fix: drain and reset the GPU (nvidia-smi -r) so the remap takes effect");
        if (g.retirement_pending.value_or(false))
            fail("page retirement is pending; fix: drain and reset the GPU (nvidia-smi -r) so the pages retire");
        if (g.pcie_gen && g.pcie_gen_max && *g.pcie_gen < *g.pcie_gen_max)
            warn("PCIe link at gen " + std::to_string(*g.pcie_gen) + ", the slot and GPU can do gen " +
                 std::to_string(*g.pcie_gen_max) + "; fix: reseat the GPU or check the riser and BIOS link settings");
        // A link narrower than its maximum is the fingerprint's to fail
        // (lib/check/fingerprint: node_fingerprint_findings), from sysfs:
        // one line for it, on every path.
        if (g.nvlinks > 0 && g.nvlinks_up < most_up)
            fail(std::to_string(g.nvlinks_up) + " NVLink links up where the node's other GPUs have " +
                 std::to_string(most_up) + "; fix: nvidia-smi nvlink -s; drain and reset the GPU, reseat or replace it");
        if (g.hw_slowdown || g.power_brake || g.hw_thermal) {
            std::vector<std::string> why;
            if (g.hw_slowdown) why.push_back("hardware slowdown");
            if (g.hw_thermal) why.push_back("hardware thermal slowdown");
            if (g.power_brake) why.push_back("power brake");
            fail("clocks held down by " + join_list(why, '/') +
                 "; fix: check cooling, power supply and nvidia-smi -q -d PERFORMANCE; drain until it clears");
        }
        if (g.fabric_unready) {
            const bool failed = g.fabric_unready->rfind("registration failed", 0) == 0;
            out.push_back({failed, who + "its NVLink fabric " + *g.fabric_unready +
                                       " (NCCL cannot use NVLink across the domain); fix: " +
                                       (failed ? "check nvidia-fabricmanager's log and the NVSwitch trays, drain the "
                                                 "node until the GPU registers"
                                               : "wait for nvidia-fabricmanager to register the GPUs (systemctl status "
                                                 "nvidia-fabricmanager), or drain the node")});
        }
        if (g.fabric_domain && *g.fabric_domain != domain)
            warn("in NVLink domain " + *g.fabric_domain + ", the node's other GPUs in " + domain +
                 "; fix: check the fabric manager's partition for this node (nvidia-smi -q | grep -A4 Fabric)");
        if (g.sw_thermal)
            warn("clocks lowered by the driver for temperature (software thermal slowdown); fix: check cooling");
    }
    return out;
}

namespace {

// A node's mode: "on", "off", "mixed"; "" when none of its GPUs says.
std::string node_mode(const std::vector<GpuReadings>& gpus, std::optional<bool> GpuReadings::*mode) {
    std::string out;
    for (const auto& g : gpus) {
        if (!(g.*mode)) continue;
        const std::string v = *(g.*mode) ? "on" : "off";
        if (out.empty()) out = v;
        else if (out != v) return "mixed";
    }
    return out;
}

}  // namespace

std::vector<std::vector<GpuFinding>> gpu_modes_across(const std::vector<std::string>& hosts,
                                                      const std::vector<std::vector<GpuReadings>>& nodes) {
    std::vector<std::vector<GpuFinding>> out(nodes.size());
    struct Mode {
        std::optional<bool> GpuReadings::*field;
        const char* name;
        bool fail;
        const char* fix;
    };
    const Mode modes[] = {
        {&GpuReadings::ecc_enabled, "ECC", false,
         "set ECC alike on every node (nvidia-smi -e 1, then a GPU reset) at the next maintenance"},
        {&GpuReadings::mig_enabled, "MIG mode", true,
         "turn MIG mode off on its GPUs (nvidia-smi -mig 0, then a GPU reset), or ask Slurm for nodes alike "
         "(--constraint)"},
    };
    for (const Mode& m : modes) {
        std::map<std::string, std::vector<std::size_t>> by;
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (const std::string v = node_mode(nodes[i], m.field); !v.empty()) by[v].push_back(i);
        if (by.size() < 2) continue;
        std::size_t most = 0;
        std::string common;
        for (const auto& [v, who] : by)
            if (who.size() > most) most = who.size(), common = v;
        if (std::count_if(by.begin(), by.end(), [&](const auto& e) { return e.second.size() == most; }) > 1)
            continue;  // no majority: nobody is the odd one
        for (const auto& [v, who] : by) {
            if (v == common) continue;
            for (std::size_t i : who)
                out[i].push_back({m.fail, (i < hosts.size() ? hosts[i] : "node" + std::to_string(i)) + " GPUs: " +
                                              m.name + " " + v + ", most nodes " + common + "; fix: " + m.fix});
        }
    }
    return out;
}

std::vector<std::vector<GpuFinding>> gpu_findings(const std::vector<std::string>& hosts,
                                                  const std::vector<std::vector<GpuReadings>>& nodes,
                                                  const std::vector<const std::set<unsigned>*>& ours) {
    auto out = gpu_modes_across(hosts, nodes);
    const std::set<unsigned> none;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        auto own = gpu_health(i < hosts.size() ? hosts[i] : "node" + std::to_string(i), nodes[i],
                              i < ours.size() && ours[i] ? *ours[i] : none);
        out[i].insert(out[i].begin(), own.begin(), own.end());
    }
    return out;
}

}  // namespace mn
