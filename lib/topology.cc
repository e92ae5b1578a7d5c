#include "topology.h"

#include <config.h>  // the build's HAVE_HWLOC (lib/config.h is the mode parser)
#include <sys/stat.h>

#include <algorithm>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

namespace mn {

std::optional<std::string> topology_xml_for(const std::string& sysfs_root) {
    if (sysfs_root.empty() || sysfs_root == "/sys") return std::string();
    const std::string xml = sysfs_root + "/topology.xml";
    struct stat st {};
    if (stat(xml.c_str(), &st) == 0) return xml;
    return std::nullopt;
}

#ifdef HAVE_HWLOC
namespace {

std::string busid(hwloc_obj_t o) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus,
                  o->attr->pcidev.dev, o->attr->pcidev.func);
    return buf;
}

bool is_gpu(hwloc_obj_t o) {
    const unsigned cls = o->attr->pcidev.class_id;
    // NVIDIA 3D or VGA controllers; AMD's accelerators (0x1200 / 0x0380).
    if (o->attr->pcidev.vendor_id == 0x10de) return cls == 0x0302 || cls == 0x0300;
    if (o->attr->pcidev.vendor_id == 0x1002) return cls == 0x0380 || cls == 0x1200;
    return false;
}

PciPlace place(hwloc_topology_t topo, hwloc_obj_t o, const std::string& name) {
    PciPlace p;
    p.name = name;
    p.busid = busid(o);
    for (hwloc_obj_t a = o->parent; a && a->type == HWLOC_OBJ_BRIDGE; a = a->parent) {
        // A host bridge has no PCI address of its own: its bus range names it.
        const bool host = a->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
        char buf[48];
        if (host)
            std::snprintf(buf, sizeof buf, "host:%04x:%02x", a->attr->bridge.downstream.pci.domain,
                          a->attr->bridge.downstream.pci.secondary_bus);
        else
            std::snprintf(buf, sizeof buf, "pci:%s", busid(a).c_str());
        p.bridges.insert(p.bridges.begin(), buf);
    }
    hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topo, o);
    if (cpu_side && cpu_side->nodeset && hwloc_bitmap_weight(cpu_side->nodeset) == 1)
        p.numa = hwloc_bitmap_first(cpu_side->nodeset);
    if (hwloc_obj_t pkg = cpu_side ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, cpu_side) : nullptr)
        p.package = static_cast<int>(pkg->logical_index);
    else if (cpu_side && cpu_side->type == HWLOC_OBJ_PACKAGE)
        p.package = static_cast<int>(cpu_side->logical_index);
    return p;
}

}  // namespace

Outcome<PciTopology> load_pci_topology(const std::string& xml_path) {
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return Problem{"hwloc could not start", "check that libhwloc is installed"};
    struct Closer {
        hwloc_topology_t t;
        ~Closer() { hwloc_topology_destroy(t); }
    } closer{topo};
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // OS devices (mlx5_N) and PCI devices are all we need: skip caches.
    hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    // Depending on hwloc's XML backend (libxml2 or its own), a garbled file
    // fails at set_xml or only at load: both are the same fault to the user.
    const bool from_xml = !xml_path.empty();
    if ((from_xml && hwloc_topology_set_xml(topo, xml_path.c_str()) != 0) || hwloc_topology_load(topo) != 0) {
        if (from_xml)
            return Problem{"hwloc cannot read the topology file " + xml_path,
                           "give an XML written by 'lstopo --of xml' (or remove it to skip locality)"};
        return Problem{"hwloc could not load this node's topology", "run lstopo to see what hwloc reports on this node"};
    }
    PciTopology out;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o; o = hwloc_get_next_pcidev(topo, o)) {
        if (is_gpu(o)) out.gpus.push_back(place(topo, o, ""));
        for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
            if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && c->name)
                out.hcas.push_back(place(topo, o, c->name));
    }
    // CUDA (CUDA_DEVICE_ORDER=PCI_BUS_ID), nvidia-smi and Slurm number GPUs by bus id.
    std::sort(out.gpus.begin(), out.gpus.end(), [](const PciPlace& a, const PciPlace& b) { return a.busid < b.busid; });
    for (std::size_t i = 0; i < out.gpus.size(); ++i) out.gpus[i].name = "GPU" + std::to_string(i);
    std::sort(out.hcas.begin(), out.hcas.end(), [](const PciPlace& a, const PciPlace& b) {
        return a.name.size() != b.name.size() ? a.name.size() < b.name.size() : a.name < b.name;
    });
    return out;
}

#else

Outcome<PciTopology> load_pci_topology(const std::string&) {
    return Problem{"built without hwloc, so GPU to HCA locality is unknown",
                   "install hwloc's development files (Debian: libhwloc-dev) and rebuild"};
}

#endif

LocalityReport gpu_locality(const std::string& sysfs_root, const FabricChoice& choice) {
    LocalityReport r;
    const auto xml = topology_xml_for(sysfs_root);
    if (!xml) {
        r.note = "unknown: " + sysfs_root + " has no topology.xml";
        return r;
    }
    auto topo = load_pci_topology(*xml);
    if (!topo) {
        r.note = "unknown: " + topo.problem().text();
        return r;
    }
    std::vector<std::string> chosen;
    for (const auto& v : choice.ports)
        if (v.chosen && std::find(chosen.begin(), chosen.end(), v.port.hca) == chosen.end())
            chosen.push_back(v.port.hca);
    r.known = true;
    r.note = chosen.empty() ? "no HCA chosen; nearest of all HCAs" : "nearest chosen HCA";
    r.gpus = nearest_hcas(*topo, chosen);
    if (!chosen.empty()) r.warnings = locality_warnings(r.gpus);
    return r;
}

}  // namespace mn
