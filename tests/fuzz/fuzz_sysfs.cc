// SPDX-License-Identifier: Apache-2.0
// Fabric discovery on a generated sysfs tree: the input gives the contents
// of each file of two HCA ports (state, phys_state, link_layer, rate, two
// GID entries with their types and netdevs, the IPoIB/RoCE netdev and its
// operstate and mtu), '|' between files, "-" for a missing file; then the
// clouds' marks: each HCA's driver link (efa: AWS EFA), the DMI product name
// (the EC2 instance type) and chassis asset tag (OracleCloud.com), and a
// count of Google gVNICs (driver gve) with each one's operstate, speed and
// mtu. The tree's layout is fixed. read_sysfs_ports only reports ports of
// the tree (gVNICs only as an A3 VM's 5 or 9), and choose_fabric, in every
// mode, only chooses ports that are ACTIVE and readable, of one class, and
// names exactly them in NCCL_IB_HCA, EFA's FI_* or Google's plugin variables
// (the control NIC never among the data NICs).
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>

#include "tests/fuzz/fuzz.h"
#include "lib/fabric/fabric.h"

namespace {

const std::string& root() {
    static const std::string r = [] {
        const char* t = std::getenv("TMPDIR");
        std::string base = std::string(t && *t ? t : "/tmp") + "/mn-fuzz-sysfs." + std::to_string(getpid());
        return base;
    }();
    return r;
}

int remove_one(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
void remove_tree(const std::string& p) { nftw(p.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS); }

void mkdirs(const std::string& p) {
    for (std::size_t i = 1; i <= p.size(); ++i)
        if (i == p.size() || p[i] == '/') ::mkdir(p.substr(0, i).c_str(), 0755);
}

void put(const std::string& path, const std::string& content) {
    if (content == "-") return;
    mkdirs(path.substr(0, path.rfind('/')));
    std::ofstream(path, std::ios::binary) << content << "\n";
}

// A name usable as one path component of the tree.
bool component(const std::string& s) {
    return !s.empty() && s.size() < 32 && s != "." && s != ".." && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
}

struct TreePort {
    std::string hca;
    unsigned port;
};
const TreePort kPorts[] = {{"mlx5_0", 1}, {"mlx5_1", 1}};
constexpr std::size_t kFieldsPerPort = 13;
// After the ports: driver of mlx5_0, of mlx5_1, product_name, chassis_asset_tag,
// gVNIC count, then operstate, speed and mtu of each gVNIC.
constexpr std::size_t kCloud = 2 * kFieldsPerPort;
constexpr std::size_t kMaxGvnics = 10;
constexpr std::size_t kFields = kCloud + 5 + 3 * kMaxGvnics;

// As the reader takes an attribute: its first line, trailing space dropped.
std::string first_line(const std::string& s) {
    std::string l = s.substr(0, s.find('\n'));
    while (!l.empty() && std::isspace(static_cast<unsigned char>(l.back()))) l.pop_back();
    return l;
}

bool rdma_netdev(const std::string& n) {
    return n.size() > 4 && n.compare(0, 4, "rdma") == 0 &&
           std::all_of(n.begin() + 4, n.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

void check_choice(const std::vector<mn::RdmaPort>& ports, mn::Mode mode) {
    auto c = mn::choose_fabric(ports, mode);
    bool any_ib = false, any_roce = false, any_efa = false, any_gcp = false;
    std::vector<const mn::RdmaPort*> gvnics;
    for (const auto& p : ports)
        if (p.gvnic) gvnics.push_back(&p);
    // Oracle Cloud: where the cluster network's rdmaN ports are, the host's
    // front-end RoCE ports are not NCCL's, usable or not (regress-oci-front-end).
    bool oci_cluster = false;
    for (const auto& p : ports) oci_cluster |= p.oci && p.roce() && rdma_netdev(p.netdev);
    for (const auto& p : ports)
        if (p.problem.empty() && p.state == "ACTIVE") {
            if (oci_cluster && p.oci && p.roce() && !rdma_netdev(p.netdev)) continue;
            if (p.gvnic) any_gcp |= &p != gvnics.front();
            else if (p.efa) any_efa = true;
            else if (!p.roce()) any_ib = true;
            else if (p.gid_index && (p.netdev_state.empty() || p.netdev_state == "up")) any_roce = true;
        }
    if (!c) {
        FUZZ_CHECK((mode == mn::Mode::Ib && !any_ib) || (mode == mn::Mode::Roce && !any_roce),
                   "mode %s refused with ports usable: %s", mn::to_string(mode), c.problem().what.c_str());
        return;
    }
    FUZZ_CHECK(c->ports.size() == ports.size(), "a verdict per port");
    std::string hca_list;
    double fastest = 0;
    for (const auto& p : ports)
        if (p.problem.empty() && p.state == "ACTIVE" && !p.roce() && !p.efa && !p.gvnic)
            fastest = std::max(fastest, p.rate_gbps);
    std::set<unsigned> gids;
    for (std::size_t i = 0; i < ports.size(); ++i) {
        const auto& v = c->ports[i];
        FUZZ_CHECK(v.port.name() == ports[i].name() && !v.reason.empty(), "verdict %zu", i);
        if (!v.chosen) continue;
        hca_list += (hca_list.empty() ? "=" : ",") + v.port.name();
        FUZZ_CHECK(v.port.problem.empty() && v.port.state == "ACTIVE", "chose %s: state '%s' problem '%s'",
                   v.port.name().c_str(), v.port.state.c_str(), v.port.problem.c_str());
        if (c->fabric == "ib")
            FUZZ_CHECK(!v.port.roce() && !v.port.efa && !v.port.gvnic && v.port.rate_gbps == fastest, "ib chose %s",
                       v.port.name().c_str());
        else if (c->fabric == "tcpx" || c->fabric == "tcpxo")
            FUZZ_CHECK(v.port.gvnic && &ports[i] != gvnics.front(), "%s chose %s", c->fabric.c_str(), v.port.name().c_str());
        else if (c->fabric == "efa")
            FUZZ_CHECK(v.port.efa, "efa chose %s", v.port.name().c_str());
        else if (c->fabric == "roce") {
            FUZZ_CHECK(v.port.roce() && v.port.gid_index, "roce chose %s", v.port.name().c_str());
            gids.insert(*v.port.gid_index);
        } else
            FUZZ_CHECK(false, "fabric %s chose %s", c->fabric.c_str(), v.port.name().c_str());
    }
    auto env = [&](const char* name) -> std::string {
        for (const auto& [k, val] : c->env)
            if (k == name) return val;
        return "<unset>";
    };
    const bool ib_vars = env("NCCL_IB_HCA") != "<unset>" || env("NCCL_IB_GID_INDEX") != "<unset>" ||
                         env("NCCL_IB_DISABLE") != "<unset>";
    if (c->fabric == "socket") {
        FUZZ_CHECK(hca_list.empty() && env("NCCL_IB_DISABLE") == "1", "socket");
        FUZZ_CHECK(mode == mn::Mode::Socket || mode == mn::Mode::Off ||
                       (!any_ib && !(mode == mn::Mode::Auto && (any_efa || any_gcp)) && (mode == mn::Mode::Ib || !any_roce)),
                   "socket although usable ports exist in mode %s", mn::to_string(mode));
        // A net plugin ignores NCCL_IB_DISABLE: with EFA or gVNICs NCCL_NET stops it.
        if (any_efa || !gvnics.empty()) FUZZ_CHECK(env("NCCL_NET") == "Socket", "socket on a plugin's node");
        // An A3 VM without RDMA is not said to lack RDMA.
        bool rdma_hw = false;
        for (const auto& p : ports) rdma_hw |= !p.gvnic;
        if (!rdma_hw) FUZZ_CHECK(c->why.find("RDMA") == std::string::npos, "why: %s", c->why.c_str());
    } else if (c->fabric == "tcpx" || c->fabric == "tcpxo") {
        // Google's plugin: only in auto, only where no RDMA is usable, its
        // NIC variables this node's (the control NIC first, the rest data).
        FUZZ_CHECK(mode == mn::Mode::Auto && !any_ib && !any_roce && !any_efa && any_gcp, "gcp in mode %s",
                   mn::to_string(mode));
        FUZZ_CHECK(c->fabric == (gvnics.size() == 5 ? "tcpx" : "tcpxo"), "%s with %zu gVNICs", c->fabric.c_str(),
                   gvnics.size());
        const bool tcpx = c->fabric == "tcpx";
        const std::string ctrl = env(tcpx ? "NCCL_GPUDIRECTTCPX_CTRL_DEV" : "NCCL_FASTRAK_CTRL_DEV");
        const std::string data = env(tcpx ? "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" : "NCCL_FASTRAK_IFNAME");
        FUZZ_CHECK(ctrl == gvnics.front()->netdev && c->control_netdev == ctrl, "control %s", ctrl.c_str());
        FUZZ_CHECK("=" + data == hca_list, "data '%s', chosen '%s'", data.c_str(), hca_list.c_str());
        FUZZ_CHECK(!ib_vars && c->data_netdevs.size() == gvnics.size() - 1, "gcp env");
    } else if (c->fabric == "efa") {
        // The net plugin, not NCCL's InfiniBand transport, carries EFA.
        FUZZ_CHECK(!hca_list.empty() && !ib_vars && env("FI_PROVIDER") == "efa", "efa env");
        // GPUDirect RDMA asked for on p4 and p5 only.
        std::string type;
        for (const auto& v : c->ports)
            if (v.chosen) type = v.port.instance_type;
        const bool p45 = type.rfind("p4", 0) == 0 || type.rfind("p5", 0) == 0;
        FUZZ_CHECK(env("FI_EFA_USE_DEVICE_RDMA") == (p45 ? "1" : "<unset>"), "FI_EFA_USE_DEVICE_RDMA on '%s'",
                   type.c_str());
    } else {
        FUZZ_CHECK(!hca_list.empty() && env("NCCL_IB_HCA") == hca_list, "NCCL_IB_HCA='%s', chosen '%s'",
                   env("NCCL_IB_HCA").c_str(), hca_list.c_str());
        if (c->fabric == "roce") {
            FUZZ_CHECK(gids.count(static_cast<unsigned>(std::stoul(env("NCCL_IB_GID_INDEX")))) == 1,
                       "NCCL_IB_GID_INDEX=%s is no chosen port's", env("NCCL_IB_GID_INDEX").c_str());
            // Oracle Cloud: once a cluster-network port (rdmaN) is chosen, no front-end one is.
            bool cluster = false;
            for (const auto& v : c->ports) cluster |= v.chosen && v.port.oci && rdma_netdev(v.port.netdev);
            for (const auto& v : c->ports)
                if (cluster && v.chosen) FUZZ_CHECK(rdma_netdev(v.port.netdev), "OCI front end %s chosen", v.port.name().c_str());
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 4096) return 0;
    auto f = fuzz::fields(data, size, '|', kFields);
    f.resize(kFields, "-");
    const std::string r = root();
    static const bool cleanup = std::atexit([] { remove_tree(root()); }) == 0;  // replays leave nothing in /tmp
    (void)cleanup;
    remove_tree(r);
    std::vector<std::string> gid_files;
    for (std::size_t k = 0; k < 2; ++k) {
        const std::string* x = &f[k * kFieldsPerPort];
        const std::string dev = r + "/class/infiniband/" + kPorts[k].hca;
        const std::string dir = dev + "/ports/" + std::to_string(kPorts[k].port);
        mkdirs(dir);
        put(dir + "/state", x[0]);
        put(dir + "/phys_state", x[1]);
        put(dir + "/link_layer", x[2]);
        put(dir + "/rate", x[3]);
        // GID entries at indexes 0 and 3, as on a RoCE port.
        const unsigned idx[2] = {0, 3};
        for (int g = 0; g < 2; ++g) {
            put(dir + "/gids/" + std::to_string(idx[g]), x[4 + 3 * g]);
            put(dir + "/gid_attrs/types/" + std::to_string(idx[g]), x[5 + 3 * g]);
            put(dir + "/gid_attrs/ndevs/" + std::to_string(idx[g]), x[6 + 3 * g]);
        }
        if (component(x[10]) && x[10].rfind("gvnic", 0) != 0) {  // the gVNICs' names are theirs
            mkdirs(dev + "/device/net/" + x[10]);
            put(r + "/class/net/" + x[10] + "/operstate", x[11]);
            put(r + "/class/net/" + x[10] + "/mtu", x[12]);
        }
        // The driver link is read, never followed.
        if (component(f[kCloud + k])) {
            mkdirs(dev + "/device");
            if (symlink(("../../../../bus/pci/drivers/" + f[kCloud + k]).c_str(), (dev + "/device/driver").c_str()) != 0) {
            }
        }
    }
    put(r + "/class/dmi/id/product_name", f[kCloud + 2]);
    put(r + "/class/dmi/id/chassis_asset_tag", f[kCloud + 3]);
    const std::string count = first_line(f[kCloud + 4]);
    const std::size_t gvnics =
        count.size() == 1 && std::isdigit(static_cast<unsigned char>(count[0])) ? static_cast<std::size_t>(count[0] - '0') : 0;
    for (std::size_t g = 0; g < gvnics; ++g) {
        const std::string dir = r + "/class/net/gvnic" + std::to_string(g);
        mkdirs(dir + "/device");
        if (symlink("../../../bus/pci/drivers/gve", (dir + "/device/driver").c_str()) != 0) {
        }
        const std::string* y = &f[kCloud + 5 + 3 * g];
        put(dir + "/operstate", y[0]);
        put(dir + "/speed", y[1]);
        put(dir + "/mtu", y[2]);
    }
    const bool a3 = gvnics == 5 || gvnics == 9;
    const bool oci = first_line(f[kCloud + 3]) == "OracleCloud.com";

    const auto ports = mn::read_sysfs_ports(r);
    FUZZ_CHECK(ports.size() == 2 + (a3 ? gvnics : 0), "%zu ports read from a tree of 2 and %zu gVNICs", ports.size(),
               gvnics);
    for (std::size_t k = 2; k < ports.size(); ++k) {
        const mn::RdmaPort& p = ports[k];
        FUZZ_CHECK(p.gvnic && p.port == 0 && p.hca == p.netdev && !p.roce() && !p.efa, "gVNIC %s", p.name().c_str());
        const std::string op = first_line(f[kCloud + 5 + 3 * (k - 2)]);
        if (p.problem.empty()) FUZZ_CHECK(p.state == (op == "up" ? "ACTIVE" : "DOWN"), "%s operstate '%s'", p.name().c_str(), op.c_str());
    }
    for (std::size_t k = 0; k < 2 && k < ports.size(); ++k) {
        FUZZ_CHECK(ports[k].oci == oci, "%s oci", ports[k].name().c_str());
        if (ports[k].problem.empty())
            FUZZ_CHECK(ports[k].efa == (first_line(f[kCloud + k]) == "efa" && component(f[kCloud + k])), "%s efa",
                       ports[k].name().c_str());
    }
    for (std::size_t k = 0; k < 2 && k < ports.size(); ++k) {
        const mn::RdmaPort& p = ports[k];
        const std::string* x = &f[k * kFieldsPerPort];
        FUZZ_CHECK(p.hca == kPorts[k].hca && p.port == kPorts[k].port, "port %zu is %s", k, p.name().c_str());
        if (!p.problem.empty() || p.efa) continue;
        FUZZ_CHECK(!p.state.empty() && (p.link_layer == "InfiniBand" || p.link_layer == "Ethernet"), "%s",
                   p.name().c_str());
        FUZZ_CHECK(p.rate_gbps > 0 && p.rate_gbps <= 100000, "rate %g", p.rate_gbps);
        if (p.gid_index) {
            // The chosen GID is a RoCE v2 IPv4-mapped entry of the tree.
            FUZZ_CHECK(p.roce() && (*p.gid_index == 0 || *p.gid_index == 3), "gid index %u", *p.gid_index);
            const int g = *p.gid_index == 0 ? 0 : 1;
            std::string gid = x[4 + 3 * g], type = x[5 + 3 * g];
            gid = gid.substr(0, gid.find('\n'));
            type = type.substr(0, type.find('\n'));
            while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back()))) type.pop_back();
            while (!gid.empty() && std::isspace(static_cast<unsigned char>(gid.back()))) gid.pop_back();
            FUZZ_CHECK(mn::ipv4_mapped_gid(gid) && lower(type) == "roce v2", "gid %u: '%s' '%s'", *p.gid_index,
                       gid.c_str(), type.c_str());
        }
    }
    for (mn::Mode m : {mn::Mode::Auto, mn::Mode::Ib, mn::Mode::Roce, mn::Mode::Socket}) check_choice(ports, m);
    return 0;
}
