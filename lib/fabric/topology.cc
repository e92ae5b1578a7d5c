// SPDX-License-Identifier: Apache-2.0
#include "lib/fabric/topology.h"

#include "build_config.h"  // the build's HAVE_HWLOC
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "lib/util/bounded_file.h"
#include "lib/util/privileges.h"

#ifdef HAVE_HWLOC
#include <dlfcn.h>
#include <hwloc.h>

#include "lib/util/symbols.h"

// hwloc's types come from its header; its calls from the library loaded at
// run time. The soname follows the API series the header is of: hwloc 2.x
// is libhwloc.so.15. hwloc 3 (its master branch; unreleased) changes what
// this file reads (an OS device's one type became the bitmask types) and
// has no soname of its own yet (its VERSION says libtool 0:0:0): the
// development link, or -DMN_HWLOC_SONAME=... . Another series is refused.
#if HWLOC_API_VERSION < 0x00020000 || HWLOC_API_VERSION >= 0x00040000
#error "mn-nccl reads hwloc 2.x's or 3.x's objects; this hwloc.h is of another series"
#endif
#ifndef MN_HWLOC_SONAME
#if HWLOC_API_VERSION >= 0x00030000
#define MN_HWLOC_SONAME "libhwloc.so"
#else
#define MN_HWLOC_SONAME "libhwloc.so.15"
#endif
#endif
#endif

namespace mn {

namespace {
// The hwloc series this build reads; XML files carry the series that wrote them.
#ifdef HAVE_HWLOC
constexpr unsigned kHwlocSeries = HWLOC_API_VERSION >> 16;
#else
constexpr unsigned kHwlocSeries = 2;
#endif
}  // namespace

std::optional<Problem> xml_format_problem(const std::string& xml, const std::string& xml_path) {
    // lstopo writes <topology version="2.0"> (hwloc 2) or "3.0" (hwloc 3)
    // near the top; hwloc 1.x wrote no version. hwloc 2 refuses 3.0 files
    // and hwloc 3 1.x files, both in words of its own on stderr only.
    const std::size_t at = xml.find("<topology");
    if (at == std::string::npos || at > 4096) return std::nullopt;  // hwloc's own message then
    const std::size_t end = xml.find('>', at);
    const std::string tag = xml.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const std::size_t v = tag.find(" version=\"");
    unsigned major = 1, minor = 0;
    if (v != std::string::npos && std::sscanf(tag.c_str() + v, " version=\"%u.%u\"", &major, &minor) != 2)
        return std::nullopt;
    const std::string series = std::to_string(kHwlocSeries) + ".x";
    if (major > kHwlocSeries)
        return Problem{"the topology file " + xml_path + " is in hwloc " + std::to_string(major) + "." +
                           std::to_string(minor) + "'s XML format, newer than the hwloc " + series +
                           " this mn-nccl was built against, which cannot read it",
                       "write it with hwloc " + series + "'s lstopo (lstopo --of xml), or rebuild mn-nccl against "
                       "hwloc " + std::to_string(major) + " (lib/fabric/topology.cc takes its headers)"};
    if (kHwlocSeries >= 3 && major < 2)
        return Problem{"the topology file " + xml_path + " is in hwloc 1.x's XML format, which hwloc " + series +
                           " no longer reads",
                       "write it again with a newer lstopo (lstopo --of xml)"};
    return std::nullopt;
}

std::optional<std::string> topology_xml_for(const std::string& sysfs_root) {
    if (sysfs_root.empty() || sysfs_root == "/sys") return std::string();
    const std::string xml = sysfs_root + "/topology.xml";
    struct stat st {};
    if (stat(xml.c_str(), &st) == 0) return xml;
    return std::nullopt;
}

#ifdef HAVE_HWLOC
namespace {

// libhwloc's calls used here, dlsym'd: mn-preflight runs in container
// images that may lack hwloc (locality is then unknown, and said so). The
// header's inline helpers call exported functions by name, so the few used
// are written out below over these.
struct Hwloc {
    std::string why;  // why not loaded
    decltype(&::hwloc_get_api_version) api_version = nullptr;
    decltype(&::hwloc_topology_init) init = nullptr;
    decltype(&::hwloc_topology_load) load = nullptr;
    decltype(&::hwloc_topology_destroy) destroy = nullptr;
    decltype(&::hwloc_topology_set_xmlbuffer) set_xmlbuffer = nullptr;
    decltype(&::hwloc_topology_set_io_types_filter) set_io_types_filter = nullptr;
    decltype(&::hwloc_topology_set_cache_types_filter) set_cache_types_filter = nullptr;
    decltype(&::hwloc_get_type_depth) type_depth = nullptr;
    decltype(&::hwloc_get_obj_by_depth) obj_by_depth = nullptr;
    decltype(&::hwloc_bitmap_weight) bitmap_weight = nullptr;
    decltype(&::hwloc_bitmap_first) bitmap_first = nullptr;
};

const Hwloc& hwloc() {
    static const Hwloc h = [] {
        Hwloc x;
        void* lib = dlopen(MN_HWLOC_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            x.why = HWLOC_API_VERSION >= 0x00030000 ? MN_HWLOC_SONAME " (hwloc 3) not found"
                                                    : MN_HWLOC_SONAME " not found (Debian: libhwloc15)";
            return x;
        }
        if (!(sym(lib, "hwloc_get_api_version", x.api_version) && sym(lib, "hwloc_topology_init", x.init) &&
              sym(lib, "hwloc_topology_load", x.load) && sym(lib, "hwloc_topology_destroy", x.destroy) &&
              sym(lib, "hwloc_topology_set_xmlbuffer", x.set_xmlbuffer) &&
              sym(lib, "hwloc_topology_set_io_types_filter", x.set_io_types_filter) &&
              sym(lib, "hwloc_topology_set_cache_types_filter", x.set_cache_types_filter) &&
              sym(lib, "hwloc_get_type_depth", x.type_depth) && sym(lib, "hwloc_get_obj_by_depth", x.obj_by_depth) &&
              sym(lib, "hwloc_bitmap_weight", x.bitmap_weight) && sym(lib, "hwloc_bitmap_first", x.bitmap_first))) {
            x.why = MN_HWLOC_SONAME " lacks a call mn-nccl uses";
            x.init = nullptr;
            return x;
        }
        // Same series as the header: the objects' layout is what this file reads.
        if ((x.api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
            char buf[96];
            std::snprintf(buf, sizeof buf, MN_HWLOC_SONAME " is hwloc API %x.%x, not the %x.x this build reads",
                          x.api_version() >> 16, (x.api_version() >> 8) & 0xff, HWLOC_API_VERSION >> 16);
            x.why = buf;
            x.init = nullptr;
        }
        return x;
    }();
    return h;
}

// hwloc's inline helpers, over the loaded calls.
hwloc_obj_t next_pcidev(const Hwloc& h, hwloc_topology_t topo, hwloc_obj_t prev) {
    const int depth = h.type_depth(topo, HWLOC_OBJ_PCI_DEVICE);
    if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) return nullptr;
    if (!prev) return h.obj_by_depth(topo, depth, 0);
    return prev->depth == depth ? prev->next_cousin : nullptr;
}

hwloc_obj_t non_io_ancestor(hwloc_obj_t o) {
    while (o && !o->cpuset) o = o->parent;
    return o;
}

hwloc_obj_t ancestor_of_type(hwloc_obj_type_t type, hwloc_obj_t o) {
    hwloc_obj_t a = o->parent;
    while (a && a->type != type) a = a->parent;
    return a;
}

std::string busid(hwloc_obj_t o) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus,
                  o->attr->pcidev.dev, o->attr->pcidev.func);
    return buf;
}

// hwloc keeps whatever number an XML file gives for a bridge or OS device
// type, and loading a number outside an enum's values is undefined: read
// the bits as an int (found by fuzz_hwloc_xml with UBSan).
template <typename E>
int raw(const E& e) {
    static_assert(sizeof(E) == sizeof(int), "hwloc's enums are ints");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

// An OpenFabrics (verbs) OS device: hwloc 2 gives one type, hwloc 3 a
// bitmask of types (an EFA or mlx5 device may also be a network one).
bool openfabrics(hwloc_obj_t c) {
#if HWLOC_API_VERSION >= 0x00030000
    return (c->attr->osdev.types & HWLOC_OBJ_OSDEV_OPENFABRICS) != 0;
#else
    return raw(c->attr->osdev.type) == HWLOC_OBJ_OSDEV_OPENFABRICS;
#endif
}

bool is_gpu(hwloc_obj_t o) {
    const unsigned cls = o->attr->pcidev.class_id;
    // NVIDIA 3D or VGA controllers; AMD's accelerators (0x1200 / 0x0380).
    if (o->attr->pcidev.vendor_id == 0x10de) return cls == 0x0302 || cls == 0x0300;
    if (o->attr->pcidev.vendor_id == 0x1002) return cls == 0x0380 || cls == 0x1200;
    return false;
}

PciPlace place(const Hwloc& h, hwloc_obj_t o, const std::string& name) {
    PciPlace p;
    p.name = name;
    p.busid = busid(o);
    for (hwloc_obj_t a = o->parent; a && a->type == HWLOC_OBJ_BRIDGE; a = a->parent) {
        // A host bridge has no PCI address of its own: its bus range names it.
        const bool host = raw(a->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_HOST;
        char buf[48];
        if (host)
            std::snprintf(buf, sizeof buf, "host:%04x:%02x", a->attr->bridge.downstream.pci.domain,
                          a->attr->bridge.downstream.pci.secondary_bus);
        else
            std::snprintf(buf, sizeof buf, "pci:%s", busid(a).c_str());
        p.bridges.insert(p.bridges.begin(), buf);
    }
    hwloc_obj_t cpu_side = non_io_ancestor(o);
    if (cpu_side && cpu_side->nodeset && h.bitmap_weight(cpu_side->nodeset) == 1)
        p.numa = h.bitmap_first(cpu_side->nodeset);
    if (hwloc_obj_t pkg = cpu_side ? ancestor_of_type(HWLOC_OBJ_PACKAGE, cpu_side) : nullptr)
        p.package = static_cast<int>(pkg->logical_index);
    else if (cpu_side && cpu_side->type == HWLOC_OBJ_PACKAGE)
        p.package = static_cast<int>(cpu_side->logical_index);
    return p;
}

// lstopo's export of a large machine is a few MB; more is not a topology.
constexpr std::size_t kTopologyXmlMax = 16 << 20;

// xml_path empty: the running system. Otherwise `xml` holds the file's
// text, read by the caller as a bounded regular file: hwloc given the path
// would open a FIFO and wait, or read a link to /dev/zero until memory ends.
Outcome<PciTopology> load_here(const std::string& xml_path, const std::string& xml = "") {
    const Hwloc& h = hwloc();
    if (!h.init) return Problem{h.why + ", so GPU to HCA locality is unknown", "install hwloc on this node (or in the image)"};
    hwloc_topology_t topo;
    if (h.init(&topo) != 0) return Problem{"hwloc could not start", "check that libhwloc is installed"};
    struct Closer {
        const Hwloc& h;
        hwloc_topology_t t;
        ~Closer() { h.destroy(t); }
    } closer{h, topo};
    h.set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // OS devices (mlx5_N) and PCI devices are all we need: skip caches.
    h.set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    // Depending on hwloc's XML backend (libxml2 or its own), a garbled file
    // fails at set_xml or only at load: both are the same fault to the user.
    const bool from_xml = !xml_path.empty();
    if (from_xml)
        if (auto p = xml_format_problem(xml, xml_path)) return *p;
    // The size hwloc wants counts the ending NUL, as its own export gives it.
    if ((from_xml && h.set_xmlbuffer(topo, xml.c_str(), static_cast<int>(xml.size() + 1)) != 0) || h.load(topo) != 0) {
        if (from_xml)
            return Problem{"hwloc cannot read the topology file " + xml_path,
                           "give an XML written by 'lstopo --of xml' (or remove it to skip locality)"};
        return Problem{"hwloc could not load this node's topology", "run lstopo to see what hwloc reports on this node"};
    }
    PciTopology out;
    for (hwloc_obj_t o = next_pcidev(h, topo, nullptr); o; o = next_pcidev(h, topo, o)) {
        if (is_gpu(o)) out.gpus.push_back(place(h, o, ""));
        for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
            if (c->type == HWLOC_OBJ_OS_DEVICE && openfabrics(c) && c->name)
                out.hcas.push_back(place(h, o, c->name));
    }
    // CUDA (CUDA_DEVICE_ORDER=PCI_BUS_ID), nvidia-smi and Slurm number GPUs by bus id.
    std::sort(out.gpus.begin(), out.gpus.end(), [](const PciPlace& a, const PciPlace& b) { return a.busid < b.busid; });
    for (std::size_t i = 0; i < out.gpus.size(); ++i) out.gpus[i].name = "GPU" + std::to_string(i);
    std::sort(out.hcas.begin(), out.hcas.end(), [](const PciPlace& a, const PciPlace& b) {
        return a.name.size() != b.name.size() ? a.name.size() < b.name.size() : a.name < b.name;
    });
    return out;
}

// A child hands its result to the parent: length-prefixed strings and ints.
void put(std::string& out, const std::string& v) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += v;
}
void put(std::string& out, int v) { put(out, std::to_string(v)); }

std::string encode(const PciTopology& t) {
    std::string out;
    for (const auto* list : {&t.gpus, &t.hcas}) {
        put(out, static_cast<int>(list->size()));
        for (const auto& p : *list) {
            put(out, p.name);
            put(out, p.busid);
            put(out, p.numa);
            put(out, p.package);
            put(out, static_cast<int>(p.bridges.size()));
            for (const auto& b : p.bridges) put(out, b);
        }
    }
    return out;
}

struct Reader {
    const std::string& in;
    std::size_t at = 0;
    bool ok = true;
    std::string str() {
        uint32_t n = 0;
        if (!ok || in.size() - at < 4) return ok = false, "";
        std::memcpy(&n, in.data() + at, 4);
        at += 4;
        if (in.size() - at < n) return ok = false, "";
        at += n;
        return in.substr(at - n, n);
    }
    int num() {
        const std::string s = str();
        char* end = nullptr;
        const long v = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end || v < -1 || v > (1 << 20)) ok = false;
        return ok ? static_cast<int>(v) : 0;
    }
};

std::optional<PciTopology> decode(const std::string& in) {
    Reader r{in};
    PciTopology t;
    for (auto* list : {&t.gpus, &t.hcas}) {
        const int n = r.num();
        for (int i = 0; r.ok && i < n; ++i) {
            PciPlace p;
            p.name = r.str();
            p.busid = r.str();
            p.numa = r.num();
            p.package = r.num();
            const int nb = r.num();
            for (int b = 0; r.ok && b < nb; ++b) p.bridges.push_back(r.str());
            list->push_back(std::move(p));
        }
    }
    if (!r.ok || r.at != in.size()) return std::nullopt;
    return t;
}

// hwloc's XML reader crashes on some malformed files (hwloc 2.9.0: the 21
// bytes '<topologyversion="2.0' do, tests/fuzz/corpus/hwloc_xml/regress-*),
// and the file can come from a tree the user names (MN_NCCL_SYSFS_ROOT): it
// is read in a child, so a bad file costs the locality line, never
// slurmstepd or mn-preflight. The child gives up root for good first
// (lib/util/privileges.h): slurmstepd's privileges are dropped only for a
// while, and a parser a file can crash is one a file might take over.
Outcome<PciTopology> load_in_child(const std::string& xml_path) {
    const Problem unreadable{"hwloc cannot read the topology file " + xml_path,
                             "give an XML written by 'lstopo --of xml' (or remove it to skip locality)"};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Problem{"cannot start reading " + xml_path + ": " + std::strerror(errno), ""};
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return Problem{"cannot start reading " + xml_path + ": " + std::strerror(errno), ""};
    }
    if (pid == 0) {
        // Die quietly on a fault or after 10 s: the parent reports it.
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_UNBLOCK, &all, nullptr);
        for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) signal(sig, SIG_DFL);
        const rlimit no_core{0, 0};  // and leave no core file in the step's directory
        setrlimit(RLIMIT_CORE, &no_core);
        alarm(10);
        close(fds[0]);
        // Before anything of the file is read: the ids become the
        // effective ones for good, and no exec regains privileges.
        Outcome<PciTopology> t = Problem{};
        if (auto dropped = drop_privileges_for_good()) {
            t = Problem{"hwloc was not let read " + xml_path + ": " + dropped->what, dropped->fix};
        } else if (auto xml = read_bounded_file(xml_path, kTopologyXmlMax); !xml) {
            t = xml.problem();
        } else {
            t = load_here(xml_path, xml->text);
        }
        // T and the topology, or P and why not (the parent keeps the file's name).
        const std::string out = t ? "T" + encode(*t) : "P" + t.problem().text();
        for (std::size_t done = 0; done < out.size();) {
            const ssize_t k = write(fds[1], out.data() + done, out.size() - done);
            if (k <= 0) break;
            done += static_cast<std::size_t>(k);
        }
        _exit(0);
    }
    close(fds[1]);
    std::string in;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    char buf[65536];
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        pollfd p{fds[0], POLLIN, 0};
        const int ready = left.count() <= 0 ? 0 : poll(&p, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            kill(pid, SIGKILL);
            in.clear();
            break;
        }
        const ssize_t k = read(fds[0], buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        in.append(buf, static_cast<std::size_t>(k));
        // A child the file took over gets no more of our memory than a
        // real topology needs (a few bytes per device).
        if (in.size() > kTopologyXmlMax) {
            kill(pid, SIGKILL);
            in.clear();
            break;
        }
    }
    close(fds[0]);
    // The process may have a reaper of its own (slurmstepd): the pipe, not
    // the exit status, says whether the child finished.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (in.size() > 1 && in[0] == 'P' && in.find(xml_path) != std::string::npos)
        return Problem{in.substr(1, 1024), ""};  // the reader's own words, naming the file
    if (in.empty() || in[0] != 'T') return unreadable;
    auto t = decode(in.substr(1));
    if (!t) return unreadable;
    return *t;
}

}  // namespace

Outcome<PciTopology> load_pci_topology(const std::string& xml_path) {
    return xml_path.empty() ? load_here(xml_path) : load_in_child(xml_path);
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
        if (v.chosen && !v.port.gvnic && std::find(chosen.begin(), chosen.end(), v.port.hca) == chosen.end())
            chosen.push_back(v.port.hca);
    r.known = true;
    r.note = chosen.empty() ? "no HCA chosen; nearest of all HCAs" : "nearest chosen HCA";
    r.gpus = nearest_hcas(*topo, chosen);
    if (!chosen.empty()) r.warnings = locality_warnings(r.gpus);
    return r;
}

}  // namespace mn
