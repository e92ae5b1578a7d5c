#include "lib/fabric/fabric.h"

#include "lib/util/bounded_file.h"
#include "lib/util/text.h"

#include <dirent.h>

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

std::vector<std::string> list_dir(const std::string& path) {
    std::vector<std::string> out;
    DIR* d = opendir(path.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
    return out;
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

    auto nets = list_dir(root + "/class/infiniband/" + p.hca + "/device/net");
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
    for (const auto& n : list_dir(dir + "/gids"))
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
        std::string k = p.problem.empty() ? (p.roce() ? "RoCE " : "InfiniBand ") + p.state : "unreadable";
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
    auto hcas = list_dir(root + "/class/infiniband");
    std::sort(hcas.begin(), hcas.end(), natural_less);
    for (const auto& hca : hcas) {
        auto ports = list_dir(root + "/class/infiniband/" + hca + "/ports");
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
    return out;
}

Outcome<FabricChoice> choose_fabric(const std::vector<RdmaPort>& ports, Mode mode) {
    FabricChoice c;
    std::vector<const RdmaPort*> ib, roce;
    for (const auto& p : ports) {
        if (!p.problem.empty()) continue;
        if (p.state != "ACTIVE") continue;
        if (p.roce()) {
            if (p.gid_index && (p.netdev_state.empty() || p.netdev_state == "up")) roce.push_back(&p);
        } else {
            ib.push_back(&p);
        }
    }
    double fastest = 0;
    for (auto* p : ib) fastest = std::max(fastest, p->rate_gbps);

    const bool want_ib = (mode == Mode::Auto || mode == Mode::Ib) && !ib.empty();
    const bool want_roce = !want_ib && (mode == Mode::Auto || mode == Mode::Roce) && !roce.empty();
    if (mode == Mode::Ib && ib.empty())
        return Problem{"--mn-nccl=ib: this node has no ACTIVE InfiniBand port (it has: " + summary(ports) + ")",
                       "use --mn-nccl=auto to take what the node has, or have the admins check the HCAs"};
    if (mode == Mode::Roce && roce.empty())
        return Problem{"--mn-nccl=roce: this node has no ACTIVE RoCE port with a RoCE v2 IPv4 GID (it has: " +
                           summary(ports) + ")",
                       "use --mn-nccl=auto to take what the node has, or have the admins check the NICs"};

    std::map<unsigned, unsigned> gid_votes;
    for (const auto& p : ports) {
        PortVerdict v{p, false, ""};
        if (!p.problem.empty()) v.reason = "skipped: " + p.problem;
        else if (p.state != "ACTIVE") v.reason = "state " + p.state + (p.phys_state.empty() ? "" : " (" + p.phys_state + ")");
        else if (p.roce() && !p.gid_index) v.reason = "RoCE port without a RoCE v2 IPv4-mapped GID";
        else if (p.roce() && !p.netdev_state.empty() && p.netdev_state != "up")
            v.reason = "netdev " + p.netdev + " is " + p.netdev_state;
        else if (mode == Mode::Socket) v.reason = "--mn-nccl=socket";
        else if (want_ib && p.roce()) v.reason = "RoCE, while InfiniBand ports are ACTIVE";
        else if (want_ib && p.rate_gbps < fastest)
            v.reason = rate_str(p.rate_gbps) + " Gb/s, slower than the fastest " + rate_str(fastest) + " Gb/s";
        else if (want_roce && !p.roce()) v.reason = "not RoCE";
        else {
            v.chosen = true;
            v.reason = want_ib ? "ACTIVE InfiniBand, " + rate_str(p.rate_gbps) + " Gb/s"
                               : "ACTIVE RoCE, GID index " + std::to_string(*p.gid_index);
            if (p.roce()) ++gid_votes[*p.gid_index];
        }
        c.ports.push_back(v);
    }

    std::string hca_list;
    for (const auto& v : c.ports)
        if (v.chosen) hca_list += (hca_list.empty() ? "=" : ",") + v.port.name();

    if (want_ib) {
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
    } else {
        c.fabric = "socket";
        c.env.push_back({"NCCL_IB_DISABLE", "1"});
        c.why = mode == Mode::Socket ? "--mn-nccl=socket" : "no usable RDMA port (" + summary(ports) + ")";
    }
    return c;
}

}  // namespace mn
