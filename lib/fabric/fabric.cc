// SPDX-License-Identifier: Apache-2.0
#include "lib/fabric/fabric.h"

#include "lib/util/bounded_file.h"
#include "lib/util/mounts.h"
#include "lib/util/text.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

namespace mn {
namespace {

// A sysfs attribute is one short line (a page at most). The tree may be the
// user's (MN_NCCL_SYSFS_ROOT), read in slurmstepd: a FIFO or a link to
// /dev/zero there is refused, never waited on or read to the end.
constexpr std::size_t kAttributeMax = 4096;

Outcome<std::string> read_attribute(const std::string& path) {
    auto f = read_bounded_file(path, kAttributeMax);
    if (!f) return f.problem();
    std::string line = f->text.substr(0, f->text.find('\n'));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    return line;
}

std::optional<std::string> read_line(const std::string& path) {
    auto line = read_attribute(path);
    if (!line) return std::nullopt;
    return line.value();
}

// A tree the plugin reads as root may be a user's (user_sysfs_root=yes) or
// garbled: each listing whose entries cost reads of their own stops after
// `max` + 1 names (100,000 empty port directories once took 2.15 s and
// 120 MB of user_init). More than `max` means "too many": callers say so.
constexpr std::size_t kMaxHcas = 1024, kMaxPortsPerHca = 64, kMaxGids = 4096, kMaxNetdevs = 16384;

std::vector<std::string> list_dir(const std::string& path, std::size_t max) {
    std::vector<std::string> out;
    if (reads_may_hang(path)) return out;  // lib/util/mounts.h
    DIR* d = opendir(path.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        out.push_back(std::move(n));
        if (out.size() > max) break;
    }
    closedir(d);
    return out;
}

std::string too_many(const std::string& what, std::size_t max, const std::string& dir) {
    return "more than " + std::to_string(max) + " " + what + " in " + dir + ": not read (a node has far fewer; a garbled or forged tree)";
}

// mlx5_2 before mlx5_10.
bool natural_less(const std::string& a, const std::string& b) {
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
            std::size_t i2 = i, j2 = j;
            while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
            while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
            unsigned long x = std::strtoul(a.substr(i, i2 - i).c_str(), nullptr, 10);
            unsigned long y = std::strtoul(b.substr(j, j2 - j).c_str(), nullptr, 10);
            if (x != y) return x < y;
            i = i2;
            j = j2;
        } else {
            if (a[i] != b[j]) return a[i] < b[j];
            ++i;
            ++j;
        }
    }
    return a.size() - i < b.size() - j;
}

bool all_digits(const std::string& s) {
    return !s.empty() && s.size() < 6 &&
           std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// The last part of a link such as DIR/device/driver, into /sys/bus/*/drivers:
// "efa", "mlx5_core", "gve"; "" without one. Only the link is read, never followed.
std::string link_base(const std::string& path) {
    char buf[256];
    const ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return "";
    const std::string target(buf, static_cast<std::size_t>(n));
    return target.substr(target.rfind('/') + 1);
}

std::string driver_of(const std::string& root, const std::string& hca) {
    return link_base(root + "/class/infiniband/" + hca + "/device/driver");
}

// Google's gVNIC: its driver is gve; with no driver link to read, its PCI
// ids say it (vendor 0x1ae0 Google, device 0x0042: the gve driver's
// gve_id_table in drivers/net/ethernet/google/gve).
bool gvnic_netdev(const std::string& root, const std::string& netdev) {
    const std::string dev = root + "/class/net/" + netdev + "/device";
    const std::string driver = link_base(dev + "/driver");
    if (!driver.empty()) return driver == "gve";
    return read_line(dev + "/vendor").value_or("") == "0x1ae0" && read_line(dev + "/device").value_or("") == "0x0042";
}

// Oracle Cloud names itself in the DMI chassis asset tag (cloud-init's
// Oracle datasource reads the same).
bool oracle_cloud(const std::string& root) {
    return read_line(root + "/class/dmi/id/chassis_asset_tag").value_or("") == "OracleCloud.com";
}

// Google Cloud's A3 VMs: one gVNIC for the VM's own traffic and 4 (A3
// High, A3 Edge: GPUDirect-TCPX) or 8 (A3 Mega: GPUDirect-TCPXO) for GPU
// data. Any other count is some other VM, whose gVNICs are not listed.
void read_gvnics(const std::string& root, std::vector<RdmaPort>& out) {
    std::vector<std::string> names;
    const auto netdevs = list_dir(root + "/class/net", kMaxNetdevs);
    if (netdevs.size() > kMaxNetdevs) return;  // no A3 VM has so many
    for (const auto& n : netdevs)
        if (gvnic_netdev(root, n)) names.push_back(n);
    if (names.size() != 5 && names.size() != 9) return;
    std::sort(names.begin(), names.end(), natural_less);
    for (const auto& n : names) {
        RdmaPort p;
        p.hca = n;
        p.gvnic = true;
        p.link_layer = "gVNIC";
        p.netdev = n;
        const std::string dir = root + "/class/net/" + n;
        auto state = read_attribute(dir + "/operstate");
        if (!state) {
            p.problem = state.problem().what;
        } else {
            p.netdev_state = *state;
            p.state = *state == "up" ? "ACTIVE" : "DOWN";
        }
        auto mtu = read_line(dir + "/mtu");
        if (mtu && all_digits(*mtu)) p.mtu = static_cast<unsigned>(std::strtoul(mtu->c_str(), nullptr, 10));
        // Mb/s; "-1" or absent when the driver does not say.
        auto speed = read_line(dir + "/speed");
        if (speed && !speed->empty() && speed->size() <= 7 &&
            std::all_of(speed->begin(), speed->end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
            p.rate_gbps = static_cast<double>(std::strtoul(speed->c_str(), nullptr, 10)) / 1000.0;
        out.push_back(p);
    }
}

// EC2 names the instance type in the DMI product name ("p4d.24xlarge").
std::string instance_type(const std::string& root) {
    auto name = read_line(root + "/class/dmi/id/product_name");
    if (!name || name->size() > 64 || name->find_first_of(" ,;") != std::string::npos) return "";
    return *name;
}

void read_port(const std::string& root, RdmaPort& p) {
    const std::string dir = root + "/class/infiniband/" + p.hca + "/ports/" + std::to_string(p.port);
    auto state = read_attribute(dir + "/state");
    if (!state) {
        p.problem = state.problem().what;  // "cannot read DIR/state: ...", "... is a FIFO, ..."
        return;
    }
    p.state = parse_state(*state);
    if (p.state.empty()) {
        p.problem = "state '" + *state + "' is not like '4: ACTIVE'";
        return;
    }
    if (auto phys = read_line(dir + "/phys_state")) p.phys_state = parse_state(*phys);
    // ibstatus reads a missing link_layer as InfiniBand.
    p.link_layer = read_line(dir + "/link_layer").value_or("InfiniBand");
    // The kernel calls EFA's link layer "Unknown" (it is neither: AWS's SRD
    // over the EC2 network); its driver's name says what it is.
    const std::string driver = driver_of(root, p.hca);
    p.efa = driver == "efa" || (driver.empty() && p.hca.rfind("rdmap", 0) == 0 && p.link_layer == "Unknown");
    if (p.efa) {
        p.instance_type = instance_type(root);
        // The efa driver reports a rate of its own choosing (4X EDR in the
        // kernels read); one missing or unlike that is unknown, not a fault.
        if (auto rate = read_line(dir + "/rate")) p.rate_gbps = parse_rate(*rate).value_or(0);
        auto nets = list_dir(root + "/class/infiniband/" + p.hca + "/device/net", kMaxNetdevs);
        std::sort(nets.begin(), nets.end(), natural_less);
        if (!nets.empty()) p.netdev = nets.front();
        return;
    }
    if (p.link_layer != "InfiniBand" && p.link_layer != "Ethernet") {
        p.problem = "link_layer '" + p.link_layer + "' is neither InfiniBand nor Ethernet";
        return;
    }
    auto rate_text = read_attribute(dir + "/rate");
    auto rate = rate_text ? parse_rate(*rate_text) : std::nullopt;
    if (!rate) {
        p.problem = rate_text ? "rate '" + *rate_text + "' is not like '400 Gb/sec (4X NDR)'" : rate_text.problem().what;
        return;
    }
    p.rate_gbps = *rate;

    auto nets = list_dir(root + "/class/infiniband/" + p.hca + "/device/net", kMaxNetdevs);
    std::sort(nets.begin(), nets.end(), natural_less);
    auto read_netdev = [&] {
        if (p.netdev.empty()) return;
        p.netdev_state = read_line(root + "/class/net/" + p.netdev + "/operstate").value_or("");
        auto mtu = read_line(root + "/class/net/" + p.netdev + "/mtu");
        if (mtu && all_digits(*mtu)) p.mtu = static_cast<unsigned>(std::strtoul(mtu->c_str(), nullptr, 10));
    };
    if (!p.roce()) {
        if (!nets.empty()) p.netdev = nets.front();  // IPoIB, for the report
        read_netdev();
        return;
    }

    // RoCE: the v2 GID with an IPv4-mapped address, lowest index first.
    std::string gid_netdev;
    std::vector<unsigned> indexes;
    const auto gids = list_dir(dir + "/gids", kMaxGids);
    if (gids.size() > kMaxGids) {
        p.problem = too_many("GIDs", kMaxGids, dir + "/gids");
        return;
    }
    for (const auto& n : gids)
        if (all_digits(n)) indexes.push_back(static_cast<unsigned>(std::strtoul(n.c_str(), nullptr, 10)));
    std::sort(indexes.begin(), indexes.end());
    for (unsigned i : indexes) {
        auto gid = read_line(dir + "/gids/" + std::to_string(i));
        if (!gid) continue;
        auto type = read_line(dir + "/gid_attrs/types/" + std::to_string(i));
        if (!type || !ipv4_mapped_gid(*gid)) continue;
        if (lower(*type) != "roce v2") continue;
        p.gid_index = i;
        gid_netdev = read_line(dir + "/gid_attrs/ndevs/" + std::to_string(i)).value_or("");
        break;
    }
    p.netdev = !gid_netdev.empty() ? gid_netdev : (nets.empty() ? "" : nets.front());
    read_netdev();
}

std::string rate_str(double g) {
    std::string s = std::to_string(g);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

std::string summary(const std::vector<RdmaPort>& ports) {
    std::map<std::string, std::vector<std::string>> by;
    for (const auto& p : ports) {
        std::string k = p.problem.empty()
                            ? (p.efa ? "AWS EFA " : p.gvnic ? "gVNIC " : p.roce() ? "RoCE " : "InfiniBand ") + p.state
                                          : "unreadable";
        by[k].push_back(p.name());
    }
    if (by.empty()) return "no RDMA ports at all";
    std::string s;
    for (const auto& [k, names] : by) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
        s += (s.empty() ? "" : "; ") + k + " " + list;
    }
    return s;
}

}  // namespace

std::string parse_state(const std::string& text) {
    auto colon = text.find(':');
    if (colon == std::string::npos || colon == 0 || !all_digits(text.substr(0, colon))) return "";
    std::string name = text.substr(colon + 1);
    name.erase(0, name.find_first_not_of(' '));
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        }))
        return "";
    return name;
}

std::optional<double> parse_rate(const std::string& text) {
    auto pos = text.find(" Gb/sec");
    if (pos == std::string::npos || pos == 0) return std::nullopt;
    const std::string num = text.substr(0, pos);
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || !(v > 0) || v > 100000) return std::nullopt;
    return v;
}

bool ipv4_mapped_gid(const std::string& gid) {
    const std::string prefix = "0000:0000:0000:0000:0000:ffff:";
    if (gid.size() != prefix.size() + 9 || gid.compare(0, prefix.size(), prefix) != 0) return false;
    for (std::size_t i = prefix.size(); i < gid.size(); ++i)
        if (i - prefix.size() == 4 ? gid[i] != ':' : !std::isxdigit(static_cast<unsigned char>(gid[i]))) return false;
    return gid.compare(prefix.size(), 9, "0000:0000") != 0;
}

std::vector<RdmaPort> read_sysfs_ports(const std::string& root) {
    std::vector<RdmaPort> out;
    auto hcas = list_dir(root + "/class/infiniband", kMaxHcas);
    if (hcas.size() > kMaxHcas) {
        RdmaPort p;
        p.hca = "class/infiniband";
        p.problem = too_many("devices", kMaxHcas, root + "/class/infiniband");
        out.push_back(p);
        return out;
    }
    std::sort(hcas.begin(), hcas.end(), natural_less);
    for (const auto& hca : hcas) {
        auto ports = list_dir(root + "/class/infiniband/" + hca + "/ports", kMaxPortsPerHca);
        if (ports.size() > kMaxPortsPerHca) {
            RdmaPort p;
            p.hca = hca;
            p.problem = too_many("ports", kMaxPortsPerHca, root + "/class/infiniband/" + hca + "/ports");
            out.push_back(p);
            continue;
        }
        std::sort(ports.begin(), ports.end(), natural_less);
        if (ports.empty()) {
            RdmaPort p;
            p.hca = hca;
            p.problem = "no ports directory";
            out.push_back(p);
        }
        for (const auto& num : ports) {
            RdmaPort p;
            p.hca = hca;
            if (!all_digits(num)) continue;
            p.port = static_cast<unsigned>(std::strtoul(num.c_str(), nullptr, 10));
            read_port(root, p);
            out.push_back(p);
        }
    }
    if (oracle_cloud(root))
        for (auto& p : out) p.oci = true;
    read_gvnics(root, out);
    return out;
}

namespace {

// AWS: "only p4 and p5 instances support both EFA and NVIDIA GPUDirect
// RDMA", and there aws-ofi-nccl 1.6 needs FI_EFA_USE_DEVICE_RDMA=1 (later
// versions set it themselves; it does no harm). Elsewhere it would ask
// libfabric for RDMA the device lacks. (aws-ofi-nccl's doc/efa-env-var.md)
bool efa_rdma_instance(const std::string& type) {
    return type.rfind("p4", 0) == 0 || type.rfind("p5", 0) == 0;
}

// rdma0, rdma15: the netdevs of an OCI GPU shape's cluster network ports
// (OCI's images name them so; the front-end ports keep ethN).
bool oci_cluster_netdev(const std::string& n) {
    return n.size() > 4 && n.compare(0, 4, "rdma") == 0 &&
           std::all_of(n.begin() + 4, n.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

Outcome<FabricChoice> choose_fabric(const std::vector<RdmaPort>& ports, Mode mode) {
    FabricChoice c;
    std::vector<const RdmaPort*> ib, roce, efa, gvnics;
    for (const auto& p : ports)
        if (p.gvnic) gvnics.push_back(&p);
    // Oracle Cloud: its GPU shapes' cluster network ports have netdevs
    // rdma0.., the host's front-end ports (RoCE too) ethN; OCI's NCCL_IB_HCA
    // lists only the former.
    bool oci_cluster = false;
    for (const auto& p : ports)
        if (p.oci && p.roce() && oci_cluster_netdev(p.netdev)) oci_cluster = true;
    auto oci_front_end = [&](const RdmaPort& p) { return oci_cluster && p.oci && p.roce() && !oci_cluster_netdev(p.netdev); };
    for (const auto& p : ports) {
        if (!p.problem.empty()) continue;
        if (p.state != "ACTIVE") continue;
        if (p.gvnic) continue;
        if (p.efa) {
            efa.push_back(&p);
        } else if (p.roce()) {
            if (p.gid_index && (p.netdev_state.empty() || p.netdev_state == "up") && !oci_front_end(p))
                roce.push_back(&p);
        } else {
            ib.push_back(&p);
        }
    }
    // Google's A3: the first gVNIC (eth0, enp0s12) is the VM's own NIC, the
    // others carry GPU data; TCPX/TCPXO needs one of those up.
    const RdmaPort* control = gvnics.empty() ? nullptr : gvnics.front();
    std::vector<const RdmaPort*> data_up;
    for (std::size_t i = 1; i < gvnics.size(); ++i)
        if (gvnics[i]->problem.empty() && gvnics[i]->state == "ACTIVE") data_up.push_back(gvnics[i]);
    const std::string gcp = gvnics.size() == 9 ? "tcpxo" : "tcpx";
    double fastest = 0;
    for (auto* p : ib) fastest = std::max(fastest, p->rate_gbps);

    const bool want_efa = mode == Mode::Auto && !efa.empty();
    const bool want_ib = !want_efa && (mode == Mode::Auto || mode == Mode::Ib) && !ib.empty();
    const bool want_roce = !want_efa && !want_ib && (mode == Mode::Auto || mode == Mode::Roce) && !roce.empty();
    const bool want_gcp = mode == Mode::Auto && !want_efa && !want_ib && !want_roce && !data_up.empty();
    const std::string gcp_name = gcp == "tcpx" ? "Google Cloud's GPUDirect-TCPX" : "Google Cloud's GPUDirect-TCPXO";
    std::string data_list;
    for (std::size_t i = 1; i < gvnics.size(); ++i) data_list += (data_list.empty() ? "" : ",") + gvnics[i]->name();
    const Problem gcp_instead{"--mn-nccl=" + std::string(to_string(mode)) + ": this node's network is " + gcp_name +
                                  " (gVNIC data NICs " + data_list + "), which NCCL reaches through Google's " +
                                  (gcp == "tcpx" ? "GPUDirect-TCPX" : "GPUDirect-TCPXO") + " plugin, not through its " +
                                  (mode == Mode::Ib ? "InfiniBand" : "RoCE") + " transport",
                              "use --mn-nccl=auto"};
    std::string efa_list;
    for (auto* p : efa) efa_list += (efa_list.empty() ? "" : ",") + p->name();
    const Problem efa_instead{"--mn-nccl=" + std::string(to_string(mode)) + ": this node's RDMA is AWS EFA (" +
                                  efa_list + "), which NCCL reaches through the aws-ofi-nccl plugin, not through its " +
                                  (mode == Mode::Ib ? "InfiniBand" : "RoCE") + " transport",
                              "use --mn-nccl=auto"};
    if (mode == Mode::Ib && ib.empty()) {
        if (!efa.empty()) return efa_instead;
        if (!data_up.empty()) return gcp_instead;
        return Problem{"--mn-nccl=ib: this node has no ACTIVE InfiniBand port (it has: " + summary(ports) + ")",
                       "use --mn-nccl=auto to take what the node has, or have the admins check the HCAs"};
    }
    if (mode == Mode::Roce && roce.empty()) {
        if (!efa.empty()) return efa_instead;
        if (!data_up.empty()) return gcp_instead;
        return Problem{"--mn-nccl=roce: this node has no ACTIVE RoCE port with a RoCE v2 IPv4 GID (it has: " +
                           summary(ports) + ")",
                       "use --mn-nccl=auto to take what the node has, or have the admins check the NICs"};
    }

    std::map<unsigned, unsigned> gid_votes;
    for (const auto& p : ports) {
        PortVerdict v{p, false, ""};
        if (!p.problem.empty()) v.reason = "skipped: " + p.problem;
        else if (p.gvnic && p.state != "ACTIVE") v.reason = "operstate " + p.netdev_state;
        else if (p.state != "ACTIVE") v.reason = "state " + p.state + (p.phys_state.empty() ? "" : " (" + p.phys_state + ")");
        else if (p.roce() && !p.gid_index) v.reason = "RoCE port without a RoCE v2 IPv4-mapped GID";
        else if (p.roce() && !p.netdev_state.empty() && p.netdev_state != "up")
            v.reason = "netdev " + p.netdev + " is " + p.netdev_state;
        else if (oci_front_end(p))
            v.reason = "Oracle Cloud front-end NIC (netdev " + p.netdev + "), not the cluster network's rdmaN ports";
        else if (mode == Mode::Socket) v.reason = "--mn-nccl=socket";
        else if (p.gvnic && !want_gcp)
            v.reason = mode != Mode::Auto ? "gVNIC, which only --mn-nccl=auto takes (through Google's plugin)"
                       : data_up.empty()  ? "gVNIC, while no data NIC is up"
                                          : "gVNIC, unused while RDMA ports are ACTIVE";
        else if (want_gcp && !p.gvnic) v.reason = "not a gVNIC, while " + gcp_name + " data NICs are up";
        else if (want_gcp && &p == control)
            v.reason = "control NIC: NCCL_SOCKET_IFNAME and the plugin's control channel, no GPU data";
        else if (want_efa && !p.efa) v.reason = "not EFA, while AWS EFA devices are ACTIVE";
        else if (!want_efa && p.efa) v.reason = "AWS EFA, which only --mn-nccl=auto takes";
        else if (want_ib && p.roce()) v.reason = "RoCE, while InfiniBand ports are ACTIVE";
        else if (want_ib && p.rate_gbps < fastest)
            v.reason = rate_str(p.rate_gbps) + " Gb/s, slower than the fastest " + rate_str(fastest) + " Gb/s";
        else if (want_roce && !p.roce()) v.reason = "not RoCE";
        else {
            v.chosen = true;
            if (want_efa)
                v.reason = "ACTIVE AWS EFA, " + (p.rate_gbps > 0 ? rate_str(p.rate_gbps) : std::string("?")) + " Gb/s";
            else if (want_gcp)
                v.reason = std::string(gcp == "tcpx" ? "GPUDirect-TCPX" : "GPUDirect-TCPXO") + " data NIC, " +
                           (p.rate_gbps > 0 ? rate_str(p.rate_gbps) : std::string("?")) + " Gb/s";
            else
                v.reason = want_ib ? "ACTIVE InfiniBand, " + rate_str(p.rate_gbps) + " Gb/s"
                                   : "ACTIVE RoCE, GID index " + std::to_string(*p.gid_index);
            if (p.roce()) ++gid_votes[*p.gid_index];
        }
        c.ports.push_back(v);
    }

    std::string hca_list;
    for (const auto& v : c.ports)
        if (v.chosen) hca_list += (hca_list.empty() ? "=" : ",") + v.port.name();

    if (want_efa) {
        // NCCL_IB_* would be read by NCCL's own InfiniBand transport, which
        // EFA does not serve: the net plugin (libnccl-net.so or
        // libnccl-net-ofi.so) reaches EFA through libfabric's efa provider.
        c.fabric = "efa";
        const std::string type = efa.front()->instance_type;
        c.env.push_back({"FI_PROVIDER", "efa"});  // aws-ofi-nccl <= 1.5 needs it; later ones pick efa anyway
        if (efa_rdma_instance(type)) c.env.push_back({"FI_EFA_USE_DEVICE_RDMA", "1"});
        c.why = std::to_string(efa.size()) + " ACTIVE AWS EFA device" + (efa.size() == 1 ? "" : "s") +
                (type.empty() ? "" : " on " + type) +
                ", which NCCL reaches through the aws-ofi-nccl plugin" +
                (efa_rdma_instance(type) ? " with GPUDirect RDMA" : "");
    } else if (want_gcp) {
        // Google documents, for each A3 machine type, NCCL's own sockets and
        // the plugin's control channel on the VM's first gVNIC and the
        // plugin's data on the others (GKE's "Maximize GPU network bandwidth
        // with GPUDirect-TCPX", NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,
        // eth3,eth4, NCCL_GPUDIRECTTCPX_CTRL_DEV=eth0, NCCL_SOCKET_IFNAME=eth0;
        // Cluster Toolkit's a3-megagpu-8g run-nccl-tests.sh, NCCL_FASTRAK_IFNAME
        // =enp6s0,...,enp142s0, NCCL_FASTRAK_CTRL_DEV=enp0s12, NCCL_SOCKET_IFNAME
        // =enp0s12). Those names are this node's, read here. The plugin's
        // other variables (CPU bindings, the RxDM socket, tuner and chunk
        // sizes: Google's nccl-env-profile.sh) depend on its build and stay
        // the site's.
        c.fabric = gcp;
        c.control_netdev = control->netdev;
        for (std::size_t i = 1; i < gvnics.size(); ++i) c.data_netdevs.push_back(gvnics[i]->netdev);
        std::string data, up;
        for (const auto& n : c.data_netdevs) data += (data.empty() ? "" : ",") + n;
        for (auto* p : data_up) up += (up.empty() ? "" : ",") + p->netdev;
        const bool tcpx = gcp == "tcpx";
        c.env.push_back({tcpx ? "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" : "NCCL_FASTRAK_IFNAME", up});
        c.env.push_back({tcpx ? "NCCL_GPUDIRECTTCPX_CTRL_DEV" : "NCCL_FASTRAK_CTRL_DEV", c.control_netdev});
        c.why = gcp_name + " (" + (tcpx ? "A3 High/Edge" : "A3 Mega") + "): control NIC " + c.control_netdev + ", " +
                std::to_string(c.data_netdevs.size()) + " gVNIC data NICs " + data +
                ", which NCCL reaches only through Google's " + (tcpx ? "GPUDirect-TCPX" : "GPUDirect-TCPXO") +
                " plugin; NCCL_SOCKET_IFNAME and the plugin's control channel on " + c.control_netdev +
                ", its data on the NICs that are up, as Google documents; the plugin's other variables (" +
                (tcpx ? "NCCL_GPUDIRECTTCPX_TX_BINDINGS, _RX_BINDINGS, _UNIX_CLIENT_PREFIX"
                      : "nccl-env-profile.sh: NCCL_FASTRAK_*, the tuner") +
                ") are the site's";
        if (control->problem.empty() && control->state != "ACTIVE")
            c.warnings.push_back("the control NIC " + c.control_netdev + " is " + control->netdev_state +
                                 ": NCCL's bootstrap and the plugin's control channel use it");
        for (std::size_t i = 1; i < gvnics.size(); ++i)
            if (!gvnics[i]->problem.empty() || gvnics[i]->state != "ACTIVE")
                c.warnings.push_back("data NIC " + gvnics[i]->netdev + " is " +
                                     (gvnics[i]->problem.empty() ? gvnics[i]->netdev_state : "unreadable") +
                                     ": the plugin expects all " + std::to_string(gvnics.size() - 1) +
                                     "; have the admins check it");
    } else if (want_ib) {
        c.fabric = "ib";
        c.env.push_back({"NCCL_IB_HCA", hca_list});
        c.why = "ACTIVE InfiniBand ports at " + rate_str(fastest) + " Gb/s";
    } else if (want_roce) {
        c.fabric = "roce";
        unsigned best = gid_votes.begin()->first, votes = 0;
        for (const auto& [idx, n] : gid_votes)
            if (n > votes) best = idx, votes = n;
        if (gid_votes.size() > 1)
            c.warnings.push_back("the chosen RoCE ports have their RoCE v2 IPv4 GID at different indexes; "
                                 "NCCL_IB_GID_INDEX=" + std::to_string(best) +
                                 " is right for most of them: have the admins align the GID tables");
        c.env.push_back({"NCCL_IB_HCA", hca_list});
        c.env.push_back({"NCCL_IB_GID_INDEX", std::to_string(best)});
        c.why = "no ACTIVE InfiniBand; ACTIVE RoCE v2 ports";
        if (oci_cluster) c.why += " (Oracle Cloud: the cluster network's, not the front end's)";
    } else {
        c.fabric = "socket";
        c.env.push_back({"NCCL_IB_DISABLE", "1"});
        // NCCL_IB_DISABLE leaves a net plugin alone: on an EFA node
        // aws-ofi-nccl would still carry the traffic.
        if (!efa.empty() || !gvnics.empty()) c.env.push_back({"NCCL_NET", "Socket"});
        // An A3 VM has no RDMA at all: what it lacks is a data NIC that is up.
        const bool rdma_hw = std::any_of(ports.begin(), ports.end(), [](const RdmaPort& p) { return !p.gvnic; });
        c.why = mode == Mode::Socket ? "--mn-nccl=socket"
                : !rdma_hw && !gvnics.empty()
                    ? gcp_name + " without a data NIC up (" + summary(ports) + "): NCCL's own sockets"
                    : "no usable RDMA port (" + summary(ports) + ")";
    }
    return c;
}

std::string unusable_fabric(const FabricChoice& c) {
    if (c.fabric != "socket" || c.ports.empty()) return "";
    const bool gcp = std::all_of(c.ports.begin(), c.ports.end(), [](const PortVerdict& v) { return v.port.gvnic; });
    std::string why;
    for (const auto& v : c.ports)
        why += (why.empty() ? "" : ", ") + v.port.name() + " " + (v.port.problem.empty() ? v.reason : v.port.problem);
    return (gcp ? "no GPUDirect-TCPX/TCPXO data NIC is up (" : "no usable RDMA port (") + why + ")";
}

std::vector<std::string> plugin_variable_findings(
    const FabricChoice& c, const std::function<std::optional<std::string>(const std::string&)>& env) {
    std::vector<std::string> out;
    if (c.control_netdev.empty()) return out;
    // What the site or user set is kept (mn_nccl sets only what is unset);
    // a value that names other NICs than this node's is a mistake Google's
    // plugins do not forgive: the bootstrap on a data NIC, or data NICs
    // the VM does not have.
    auto names = [](std::string v) {
        std::vector<std::string> n;
        if (!v.empty() && v[0] == '=') v.erase(0, 1);
        for (std::size_t at = 0; at <= v.size();) {
            const std::size_t comma = std::min(v.find(',', at), v.size());
            if (comma > at) n.push_back(v.substr(at, comma - at));
            at = comma + 1;
        }
        return n;
    };
    const bool tcpx = c.fabric == "tcpx";
    const std::string ctrl_var = tcpx ? "NCCL_GPUDIRECTTCPX_CTRL_DEV" : "NCCL_FASTRAK_CTRL_DEV";
    const std::string data_var = tcpx ? "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" : "NCCL_FASTRAK_IFNAME";
    for (const std::string& var : {std::string("NCCL_SOCKET_IFNAME"), ctrl_var}) {
        const auto v = env(var);
        if (!v) continue;
        const auto n = names(*v);
        if (n.size() != 1 || n[0] != c.control_netdev)
            out.push_back(var + "=" + *v + " is set, but this node's control NIC is " + c.control_netdev +
                          " (Google: NCCL_SOCKET_IFNAME and " + ctrl_var + " on the VM's first gVNIC); unset it or "
                          "set it to " + c.control_netdev);
    }
    if (const auto v = env(data_var)) {
        std::string wrong;
        for (const auto& n : names(*v))
            if (std::find(c.data_netdevs.begin(), c.data_netdevs.end(), n) == c.data_netdevs.end())
                wrong += (wrong.empty() ? "" : ",") + n;
        std::string data;
        for (const auto& n : c.data_netdevs) data += (data.empty() ? "" : ",") + n;
        if (!wrong.empty() || names(*v).empty())
            out.push_back(data_var + "=" + *v + " is set, but " + (wrong.empty() ? "names no NIC" : wrong +
                          " is no data NIC of this node") + " (its data NICs: " + data + "); unset it or list those");
    }
    return out;
}

}  // namespace mn
