// GPU to HCA locality: for each GPU of a node, the nearest HCA and how near.
// The model is plain data (filled from hwloc by topology.cc, or by tests), so
// the rules run without hwloc.
#pragma once

#include <string>
#include <vector>

namespace mn {

// Nearest first. NCCL's own PIX/PXB, PHB, NODE and SYS levels, roughly.
enum class Nearness { PcieSwitch, HostBridge, Numa, Socket, AcrossSockets };

std::string to_string(Nearness n);

// A PCI device as hwloc places it.
struct PciPlace {
    std::string name;   // GPU0 or mlx5_0
    std::string busid;  // 0000:18:00.0
    // Bridges above the device, host bridge first, as stable ids.
    std::vector<std::string> bridges;
    int numa = -1;     // NUMA node of the nearest CPU-side object, -1 unknown
    int package = -1;  // socket, -1 unknown
};

struct PciTopology {
    std::vector<PciPlace> gpus;  // in PCI bus order: GPU0 is the lowest bus id
    std::vector<PciPlace> hcas;
};

Nearness nearness(const PciPlace& a, const PciPlace& b);

struct GpuLocality {
    PciPlace gpu;
    std::string hca;  // empty: no candidate HCA on the node
    Nearness how = Nearness::AcrossSockets;
};

// For each GPU the nearest HCA among `candidates` (HCA names; empty = all).
// Ties go to the HCA serving the fewest GPUs so far, then to natural order,
// so GPUs spread over equally near HCAs as NCCL spreads its rings.
std::vector<GpuLocality> nearest_hcas(const PciTopology& topo, const std::vector<std::string>& candidates);

// "GPU0>mlx5_0 (same PCIe switch), ..." and a warning for each GPU whose
// nearest candidate HCA sits across the socket link.
std::string locality_summary(const std::vector<GpuLocality>& l);
std::vector<std::string> locality_warnings(const std::vector<GpuLocality>& l);

}  // namespace mn
