// SPDX-License-Identifier: Apache-2.0
#include "lib/fabric/locality.h"

#include <algorithm>
#include <map>

namespace mn {

const char* level_name(Nearness n) {
    switch (n) {
        case Nearness::Pix: return "PIX";
        case Nearness::Pxb: return "PXB";
        case Nearness::Phb: return "PHB";
        case Nearness::Node: return "NODE";
        case Nearness::Sys: return "SYS";
    }
    return "?";
}

std::string to_string(Nearness n) {
    switch (n) {
        case Nearness::Pix: return "PIX: same PCIe switch";
        case Nearness::Pxb: return "PXB: through several PCIe switches";
        case Nearness::Phb: return "PHB: through the PCIe host bridge";
        case Nearness::Node: return "NODE: across host bridges in one NUMA node";
        case Nearness::Sys: return "SYS: across NUMA nodes";
    }
    return "?";
}

Nearness nearness(const PciPlace& a, const PciPlace& b) {
    std::size_t common = 0;
    while (common < a.bridges.size() && common < b.bridges.size() && a.bridges[common] == b.bridges[common]) ++common;
    if (common >= 2) {
        // They meet below the host bridge, at a switch's upstream port (or
        // the one bridge a flat model gives a switch). One switch when each
        // hangs at most one port below it, its own downstream port: any
        // deeper and the path crosses further switches. Sharing only the
        // top of a multi-level tree is PXB, as nvidia-smi says, not PIX.
        return a.bridges.size() - common <= 1 && b.bridges.size() - common <= 1 ? Nearness::Pix : Nearness::Pxb;
    }
    if (common == 1) return Nearness::Phb;  // bridges[0] is the host bridge
    if (a.numa >= 0 && a.numa == b.numa) return Nearness::Node;
    return Nearness::Sys;  // unknown NUMA never claims nearness
}

std::vector<GpuLocality> nearest_hcas(const PciTopology& topo, const std::vector<std::string>& candidates) {
    std::vector<const PciPlace*> hcas;
    for (const auto& h : topo.hcas)
        if (candidates.empty() || std::find(candidates.begin(), candidates.end(), h.name) != candidates.end())
            hcas.push_back(&h);
    std::map<std::string, int> load;
    std::vector<GpuLocality> out;
    for (const auto& g : topo.gpus) {
        GpuLocality l;
        l.gpu = g;
        const PciPlace* best = nullptr;
        for (const PciPlace* h : hcas) {
            const Nearness n = nearness(g, *h);
            if (!best || n < l.how || (n == l.how && load[h->name] < load[best->name])) {
                best = h;
                l.how = n;
            }
        }
        if (best) {
            l.hca = best->name;
            l.across_sockets = l.how == Nearness::Sys && g.package >= 0 && best->package >= 0 && g.package != best->package;
            ++load[best->name];
        }
        out.push_back(l);
    }
    return out;
}

std::string locality_summary(const std::vector<GpuLocality>& l) {
    if (l.empty()) return "no GPUs in the topology";
    std::string out;
    for (const auto& g : l) {
        if (!out.empty()) out += ", ";
        out += g.gpu.name + ">" + (g.hca.empty() ? "none" : g.hca + " (" + to_string(g.how) + ")");
    }
    return out;
}

std::vector<std::string> locality_warnings(const std::vector<GpuLocality>& l) {
    std::vector<std::string> out;
    for (const auto& g : l)
        if (!g.hca.empty() && g.how == Nearness::Sys)
            out.push_back(g.gpu.name + " (" + g.gpu.busid + ") reaches its nearest HCA " + g.hca + " only across " +
                          (g.across_sockets ? "sockets" : "NUMA nodes") +
                          " (SYS); expect lower bandwidth from it (check the HCA cabling or "
                          "restrict the step to the GPUs near an active HCA)");
    return out;
}

}  // namespace mn
