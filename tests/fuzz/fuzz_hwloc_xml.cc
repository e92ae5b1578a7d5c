// SPDX-License-Identifier: Apache-2.0
// hwloc XML (a fixture tree's topology.xml, lstopo --of xml) as
// load_pci_topology reads it: garbled XML is a problem, not a crash; what
// loads has GPUs named GPU0.. in bus id order, well-formed bus ids, host
// bridges first; and GPU to HCA locality over it only names HCAs of the
// topology, never one with a nearer HCA left aside (a better level, or at
// the same level a deeper common switch), at the level it reports.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "tests/fuzz/fuzz.h"
#include "lib/fabric/locality.h"
#include "lib/fabric/topology.h"

namespace {

bool busid_form(const std::string& b) {
    // dddd:bb:dd.f in hex.
    if (b.size() != 12 || b[4] != ':' || b[7] != ':' || b[10] != '.') return false;
    for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
        if (!std::isxdigit(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

}  // namespace

// hwloc 2.9.0 itself leaks an object when an XML file fails half-way (a
// plain init/set_xml/load/destroy shows it; corpus/hwloc_xml/regress-hwloc-leak):
// not ours to fix; the file is read in a child that exits at once anyway.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhwloc.so\n"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("HWLOC_HIDE_ERRORS", "2", 1);  // garbled input is expected here
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 65536) return 0;
    const char* t = std::getenv("TMPDIR");
    static const std::string path = std::string(t && *t ? t : "/tmp") + "/mn-fuzz-hwloc." + std::to_string(getpid()) + ".xml";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
    auto topo = mn::load_pci_topology(path);
    ::unlink(path.c_str());
    if (!topo) {
        FUZZ_CHECK(topo.problem().what.find(path) != std::string::npos, "the refusal names the file: %s",
                   topo.problem().what.c_str());
        return 0;
    }
    for (std::size_t i = 0; i < topo->gpus.size(); ++i) {
        const auto& g = topo->gpus[i];
        FUZZ_CHECK(g.name == "GPU" + std::to_string(i), "GPU %zu named %s", i, g.name.c_str());
        FUZZ_CHECK(busid_form(g.busid), "bus id '%s'", g.busid.c_str());
        if (i) FUZZ_CHECK(topo->gpus[i - 1].busid <= g.busid, "GPUs out of bus order");
    }
    std::vector<std::string> names;
    for (const auto& h : topo->hcas) {
        FUZZ_CHECK(!h.name.empty() && busid_form(h.busid), "HCA '%s' at '%s'", h.name.c_str(), h.busid.c_str());
        names.push_back(h.name);
    }
    for (const auto* list : {&topo->gpus, &topo->hcas})
        for (const auto& p : *list)
            for (std::size_t b = 0; b < p.bridges.size(); ++b)
                FUZZ_CHECK(p.bridges[b].rfind("host:", 0) == 0 || p.bridges[b].rfind("pci:", 0) == 0, "bridge '%s'",
                           p.bridges[b].c_str());
    const auto loc = mn::nearest_hcas(*topo, {});
    FUZZ_CHECK(loc.size() == topo->gpus.size(), "a locality per GPU");
    for (const auto& l : loc) {
        FUZZ_CHECK(l.hca.empty() ? names.empty() : std::find(names.begin(), names.end(), l.hca) != names.end(),
                   "%s's HCA '%s' is not in the topology", l.gpu.name.c_str(), l.hca.c_str());
        if (l.hca.empty()) continue;
        // The nearest reach of any HCA: the best level, the deepest common
        // switch within it. An HCA of that name (names may repeat in a
        // file) must have it.
        mn::Nearness best = mn::Nearness::Sys;
        std::size_t depth = 0;
        for (const auto& h : topo->hcas) {
            const mn::Nearness n = mn::nearness(l.gpu, h);
            const std::size_t d = mn::shared_bridges(l.gpu, h);
            if (n < best || (n == best && d > depth)) best = n, depth = d;
        }
        bool nearest = false;
        for (const auto& h : topo->hcas)
            nearest |= h.name == l.hca && mn::nearness(l.gpu, h) == best && mn::shared_bridges(l.gpu, h) == depth;
        FUZZ_CHECK(nearest && l.how == best, "%s took %s, not a nearest HCA", l.gpu.name.c_str(), l.hca.c_str());
    }
    return 0;
}
