// SPDX-License-Identifier: Apache-2.0
// GPU to HCA locality: for each GPU of a node, the nearest HCA and how near.
// The model is plain data (filled from hwloc by topology.cc, or by tests), so
// the rules run without hwloc.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mn {

// Nearest first: the levels of `nvidia-smi topo -m` (NVML's
// nvmlGpuTopologyLevel_t), which NCCL's NCCL_NET_GDR_LEVEL also names.
enum class Nearness {
    Pix,   // through at most one PCIe switch
    Pxb,   // through several PCIe switches, never the host bridge
    Phb,   // through a PCIe host bridge (one root complex)
    Node,  // across host bridges within one NUMA node
    Sys,   // across the SMP interconnect between NUMA nodes or sockets
};

// "PIX" and "PIX: same PCIe switch" (no comma: the locality line is a
// comma-separated list that gpu_place reads back).
const char* level_name(Nearness n);
std::string to_string(Nearness n);

// A PCI device as hwloc places it.
struct PciPlace {
    std::string name;   // GPU0 or mlx5_0
    std::string busid;  // 0000:18:00.0
    // Bridges above the device, host bridge first, as stable ids: each
    // PCIe port (root port, a switch's upstream and downstream ports) is
    // a bridge of its own, as hwloc and sysfs show them.
    std::vector<std::string> bridges;
    int numa = -1;     // NUMA node of the nearest CPU-side object, -1 unknown
    int package = -1;  // socket, -1 unknown
};

struct PciTopology {
    std::vector<PciPlace> gpus;  // in PCI bus order: GPU0 is the lowest bus id
    std::vector<PciPlace> hcas;
};

Nearness nearness(const PciPlace& a, const PciPlace& b);

// How many bridges two devices share from the host bridge down: the depth
// of their deepest common PCIe ancestor (0: none, 1: the host bridge only).
// Within one level a deeper common switch is the nearer pair.
std::size_t shared_bridges(const PciPlace& a, const PciPlace& b);

struct GpuLocality {
    PciPlace gpu;
    std::string hca;  // empty: no candidate HCA on the node
    Nearness how = Nearness::Sys;
    bool across_sockets = false;  // Sys, and the two sit on different packages
};

// For each GPU (in topo.gpus' order) its nearest HCA among `candidates`
// (HCA names; empty = all): the best level, and within it the deepest
// common PCIe switch, so a GPU never leaves a nearer HCA for a less loaded
// one. The pairs are made over the whole tree, nearest first: a GPU whose
// nearest HCA is deeper in the tree picks before one with a shallower
// tie, whatever the GPU order. Ties go to the HCA serving the fewest GPUs
// so far, then natural order, so GPUs spread over equally near HCAs as
// NCCL spreads its rings; load never beats nearness.
std::vector<GpuLocality> nearest_hcas(const PciTopology& topo, const std::vector<std::string>& candidates);

// "GPU0>mlx5_0 (PIX: same PCIe switch), ..." and a warning for each GPU
// whose nearest candidate HCA is SYS (across NUMA nodes or sockets).
std::string locality_summary(const std::vector<GpuLocality>& l);
std::vector<std::string> locality_warnings(const std::vector<GpuLocality>& l);

}  // namespace mn
