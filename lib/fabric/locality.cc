#include "lib/fabric/locality.h"

#include <algorithm>
#include <map>

namespace mn {

std::string to_string(Nearness n) {
    switch (n) {
        case Nearness::PcieSwitch: return "same PCIe switch";
        case Nearness::HostBridge: return "same host bridge";
        case Nearness::Numa: return "same NUMA node";
        case Nearness::Socket: return "same socket";
        case Nearness::AcrossSockets: return "across sockets";
    }
    return "?";
}

Nearness nearness(const PciPlace& a, const PciPlace& b) {
    std::size_t common = 0;
    while (common < a.bridges.size() && common < b.bridges.size() && a.bridges[common] == b.bridges[common]) ++common;
    // bridges[0] is the host bridge; sharing anything below it means a
    // common PCIe switch (or root port), so traffic never reaches the CPU.
    if (common >= 2) return Nearness::PcieSwitch;
    if (common == 1) return Nearness::HostBridge;
    if (a.numa >= 0 && a.numa == b.numa) return Nearness::Numa;
    if (a.package >= 0 && a.package == b.package) return Nearness::Socket;
    return Nearness::AcrossSockets;
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
        if (!g.hca.empty() && g.how == Nearness::AcrossSockets)
            out.push_back(g.gpu.name + " (" + g.gpu.busid + ") reaches its nearest HCA " + g.hca +
                          " only across sockets; expect lower bandwidth from it (check the HCA cabling or "
                          "restrict the step to the GPUs near an active HCA)");
    return out;
}

}  // namespace mn
