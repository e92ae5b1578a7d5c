// SPDX-License-Identifier: Apache-2.0
#include "lib/fabric/locality.h"

#include <algorithm>

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

std::size_t shared_bridges(const PciPlace& a, const PciPlace& b) {
    std::size_t common = 0;
    while (common < a.bridges.size() && common < b.bridges.size() && a.bridges[common] == b.bridges[common]) ++common;
    return common;
}

Nearness nearness(const PciPlace& a, const PciPlace& b) {
    const std::size_t common = shared_bridges(a, b);
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

namespace {

// How near a GPU-HCA pair is: the level, then within it the depth of the
// deepest common ancestor. PXB alone cannot tell a GPU's own lower switch
// from the top switch it shares with every HCA of a multi-level tree; the
// depth can. (In a real PCIe tree, where each port holds one device, the
// deeper pair is never at a worse level; the level comes first for models
// that are not.)
struct Reach {
    Nearness how = Nearness::Sys;
    std::size_t depth = 0;
    bool nearer_than(const Reach& o) const { return how != o.how ? how < o.how : depth > o.depth; }
    bool same_as(const Reach& o) const { return how == o.how && depth == o.depth; }
};

}  // namespace

std::vector<GpuLocality> nearest_hcas(const PciTopology& topo, const std::vector<std::string>& candidates) {
    std::vector<const PciPlace*> hcas;
    for (const auto& h : topo.hcas)
        if (candidates.empty() || std::find(candidates.begin(), candidates.end(), h.name) != candidates.end())
            hcas.push_back(&h);
    const std::size_t ngpus = topo.gpus.size();
    std::vector<GpuLocality> out(ngpus);
    for (std::size_t g = 0; g < ngpus; ++g) out[g].gpu = topo.gpus[g];
    if (hcas.empty()) return out;

    // Each GPU's best reach and the HCAs (in natural order) that give it.
    std::vector<Reach> best(ngpus);
    std::vector<std::vector<std::size_t>> nearest(ngpus);
    for (std::size_t g = 0; g < ngpus; ++g) {
        for (std::size_t h = 0; h < hcas.size(); ++h) {
            const Reach r{nearness(topo.gpus[g], *hcas[h]), shared_bridges(topo.gpus[g], *hcas[h])};
            if (nearest[g].empty() || r.nearer_than(best[g])) {
                best[g] = r;
                nearest[g].assign(1, h);
            } else if (r.same_as(best[g])) {
                nearest[g].push_back(h);
            }
        }
    }

    // The nearest pairs of the whole tree first: which GPU picks first
    // only matters at a tie, and there the deeper pair has already taken
    // its HCA, so the shallower GPU spreads to another. The GPUs' order
    // only among GPUs exactly as near.
    std::vector<std::size_t> order(ngpus);
    for (std::size_t g = 0; g < ngpus; ++g) order[g] = g;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return best[a].nearer_than(best[b]); });
    std::vector<std::size_t> load(hcas.size(), 0);
    for (std::size_t g : order) {
        std::size_t pick = nearest[g].front();
        for (std::size_t h : nearest[g])
            if (load[h] < load[pick]) pick = h;
        ++load[pick];
        GpuLocality& l = out[g];
        l.hca = hcas[pick]->name;
        l.how = best[g].how;
        l.across_sockets = l.how == Nearness::Sys && l.gpu.package >= 0 && hcas[pick]->package >= 0 &&
                           l.gpu.package != hcas[pick]->package;
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
