// SPDX-License-Identifier: Apache-2.0
#include "lib/check/gpu_health.h"

#include <algorithm>
#include <cstdlib>

#include "lib/util/text.h"

namespace mn {

std::vector<GpuFinding> gpu_health(const std::string& node, const std::vector<GpuReadings>& gpus,
                                   const std::set<unsigned>& ours) {
    std::vector<GpuFinding> out;
    // NVLink: compared with the node's best GPU, not with a model's table.
    int most_up = 0;
    for (const auto& g : gpus) most_up = std::max(most_up, g.nvlinks_up);
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
        if (g.sw_thermal)
            warn("clocks lowered by the driver for temperature (software thermal slowdown); fix: check cooling");
    }
    return out;
}

}  // namespace mn
