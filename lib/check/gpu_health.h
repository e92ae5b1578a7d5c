// SPDX-License-Identifier: Apache-2.0
// GPU health as DCGM diag and NHC judge it, apart from NVML: what NVML
// said about each GPU (helper/gpu/nvml.cc reads it) -> findings, each fail or
// warn, naming the GPU, the node and the fix. mn-preflight(1) says why
// each kind is a fail or a warning.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mn {

struct GpuReadings {
    std::string gpu;  // "GPU1 (0000:19:00.0)"
    bool nvml = false;          // NVML answered for this GPU at all
    std::string nvml_error;     // why not
    struct Process {
        unsigned pid = 0;
        std::string name;
        uint64_t used_mib = 0;
    };
    std::vector<Process> processes;  // compute processes on the GPU, this check's included
    std::optional<uint64_t> ecc_uncorrected;  // volatile: since the last driver load or reset
    std::optional<bool> retirement_pending;   // page retirement (before Ampere)
    std::optional<bool> remap_pending;        // row remapping (Ampere and later)
    std::optional<bool> remap_failed;
    std::optional<unsigned> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
    int nvlinks = 0, nvlinks_up = 0;  // links that exist, links up
    // Clock event reasons (NVML's throttle reasons) in force now.
    bool hw_slowdown = false, hw_thermal = false, sw_thermal = false, power_brake = false;
    // ECC and MIG mode in force now; none where NVML does not say (a GPU
    // without ECC or MIG, an earlier build).
    std::optional<bool> ecc_enabled, mig_enabled;
    // The NVLink fabric of an NVL system (NVML's GPU fabric info): its
    // domain, "ClusterUUID clique N", once registered; or why it is not
    // ("registration in progress", "registration failed (...)"). Neither
    // where the GPU has no such fabric.
    std::optional<std::string> fabric_domain, fabric_unready;
};

struct GpuFinding {
    bool fail = false;  // else a warning
    std::string text;   // "node3 GPU1 (0000:19:00.0): ...; fix: ..."
};

// ECC and MIG mode against the step's other nodes, by majority of the
// nodes whose GPUs say (a node's GPUs that differ among themselves are a
// value of their own): ECC otherwise than on most nodes warns (its memory
// errors go unseen, or it has less memory than the others); MIG mode
// otherwise than on most nodes fails (its GPUs are slices of a GPU: every
// step waits for it). Alike nodes, or no majority: none. Per node of
// `nodes` (each its GPUs' readings), its findings.
std::vector<std::vector<GpuFinding>> gpu_modes_across(const std::vector<std::string>& hosts,
                                                      const std::vector<std::vector<GpuReadings>>& nodes);

// Every node's NVML findings: gpu_health() of each (`ours`: the step's
// own pids per node, shared by the nodes of one host: 1,024 emulated nodes
// of one machine each copying its 8,192 pids cost rank 0 a second) and
// gpu_modes_across() the nodes, per node of `nodes`.
std::vector<std::vector<GpuFinding>> gpu_findings(const std::vector<std::string>& hosts,
                                                  const std::vector<std::vector<GpuReadings>>& nodes,
                                                  const std::vector<const std::set<unsigned>*>& ours);

// The findings for one node's GPUs (those of the step there). `ours`: the
// pids of this check's own processes on the node, never foreign.
std::vector<GpuFinding> gpu_health(const std::string& node, const std::vector<GpuReadings>& gpus,
                                   const std::set<unsigned>& ours);

}  // namespace mn
