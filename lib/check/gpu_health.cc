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
        if (g.pcie_width && g.pcie_width_max && *g.pcie_width < *g.pcie_width_max)
            warn("PCIe link at x" + std::to_string(*g.pcie_width) + " of x" + std::to_string(*g.pcie_width_max) +
                 "; fix: reseat the GPU or check the riser");
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

namespace {

// Separators no GPU name, process name or number carries: ASCII's unit,
// record and group separators.
constexpr char kField = '\x1f', kGpu = '\x1e', kItem = '\x1d';

std::string clean(std::string s) {
    for (char& c : s)
        if (c == kField || c == kGpu || c == kItem || c == '\n' || c == '=') c = '_';
    return s;
}

template <typename T>
std::string opt(const std::optional<T>& v) {
    return v ? std::to_string(static_cast<unsigned long long>(*v)) : "";
}

std::vector<std::string> split_keep(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur.push_back(c);
        }
    }
    out.push_back(cur);
    return out;
}

}  // namespace

std::string encode_readings(const std::vector<GpuReadings>& gpus) {
    std::string out;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        const GpuReadings& g = gpus[i];
        std::string procs;
        for (const auto& p : g.processes)
            procs += (procs.empty() ? "" : std::string(1, kItem)) + std::to_string(p.pid) + ":" +
                     std::to_string(p.used_mib) + ":" + clean(p.name);
        const std::vector<std::string> f = {clean(g.gpu),
                                            g.nvml ? "1" : "0",
                                            clean(g.nvml_error),
                                            procs,
                                            opt(g.ecc_uncorrected),
                                            opt(g.retirement_pending),
                                            opt(g.remap_pending),
                                            opt(g.remap_failed),
                                            opt(g.pcie_gen),
                                            opt(g.pcie_gen_max),
                                            opt(g.pcie_width),
                                            opt(g.pcie_width_max),
                                            std::to_string(g.nvlinks),
                                            std::to_string(g.nvlinks_up),
                                            std::string(g.hw_slowdown ? "s" : "") + (g.hw_thermal ? "t" : "") +
                                                (g.sw_thermal ? "w" : "") + (g.power_brake ? "p" : "")};
        if (i) out.push_back(kGpu);
        for (std::size_t k = 0; k < f.size(); ++k) out += (k ? std::string(1, kField) : "") + f[k];
    }
    return out;
}

std::vector<GpuReadings> decode_readings(const std::string& text) {
    std::vector<GpuReadings> out;
    if (text.empty()) return out;
    for (const std::string& one : split_keep(text, kGpu)) {
        const auto f = split_keep(one, kField);
        if (f.size() < 15) continue;
        GpuReadings g;
        auto num_opt = [](const std::string& s) -> std::optional<unsigned long long> {
            if (s.empty()) return std::nullopt;
            return std::strtoull(s.c_str(), nullptr, 10);
        };
        g.gpu = f[0];
        g.nvml = f[1] == "1";
        g.nvml_error = f[2];
        for (const std::string& p : split_keep(f[3], kItem)) {
            if (p.empty()) continue;
            const auto a = p.find(':'), b = p.find(':', a + 1);
            if (a == std::string::npos || b == std::string::npos) continue;
            g.processes.push_back({static_cast<unsigned>(std::strtoul(p.substr(0, a).c_str(), nullptr, 10)),
                                   p.substr(b + 1), std::strtoull(p.substr(a + 1, b - a - 1).c_str(), nullptr, 10)});
        }
        if (auto v = num_opt(f[4])) g.ecc_uncorrected = *v;
        if (auto v = num_opt(f[5])) g.retirement_pending = *v != 0;
        if (auto v = num_opt(f[6])) g.remap_pending = *v != 0;
        if (auto v = num_opt(f[7])) g.remap_failed = *v != 0;
        if (auto v = num_opt(f[8])) g.pcie_gen = static_cast<unsigned>(*v);
        if (auto v = num_opt(f[9])) g.pcie_gen_max = static_cast<unsigned>(*v);
        if (auto v = num_opt(f[10])) g.pcie_width = static_cast<unsigned>(*v);
        if (auto v = num_opt(f[11])) g.pcie_width_max = static_cast<unsigned>(*v);
        g.nvlinks = std::atoi(f[12].c_str());
        g.nvlinks_up = std::atoi(f[13].c_str());
        g.hw_slowdown = f[14].find('s') != std::string::npos;
        g.hw_thermal = f[14].find('t') != std::string::npos;
        g.sw_thermal = f[14].find('w') != std::string::npos;
        g.power_brake = f[14].find('p') != std::string::npos;
        out.push_back(g);
    }
    return out;
}

}  // namespace mn
