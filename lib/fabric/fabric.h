// SPDX-License-Identifier: Apache-2.0
// RDMA fabric discovery and NCCL's network choice: which HCA ports go into
// NCCL_IB_HCA, which RoCE GID index, AWS EFA (through NCCL's aws-ofi-nccl
// net plugin), Google Cloud's GPUDirect-TCPX/TCPXO (gVNIC NICs, through
// Google's net plugins), or sockets only. Discovery reads sysfs under a root
// directory, so every rule runs on fixture trees.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/util/outcome.h"

namespace mn {

struct RdmaPort {
    std::string hca;         // mlx5_0
    unsigned port = 0;       // 1
    std::string state;       // ACTIVE, DOWN, INIT, ... ("" when unreadable)
    std::string phys_state;  // LinkUp, Disabled, Polling, ...
    std::string link_layer;  // InfiniBand, Ethernet, or Unknown (EFA)
    double rate_gbps = 0;    // 400 from "400 Gb/sec (4X NDR)"; 0: unknown (EFA only)
    std::string netdev;      // the Ethernet device of a RoCE port
    std::string netdev_state;  // operstate of netdev
    unsigned mtu = 0;          // of netdev
    std::optional<unsigned> gid_index;  // RoCE v2 GID holding an IPv4-mapped address
    std::string problem;     // why the port could not be read (skipped)
    // AWS EFA: its driver is efa (or, with no driver link to read, it is
    // named rdmapN... and its link layer is Unknown, as the kernel says of EFA).
    bool efa = false;
    std::string instance_type;  // EFA: the EC2 instance type (DMI product_name), "" unknown
    // Google Cloud: a gVNIC (driver gve, PCI 1ae0:0042) of an A3 High/Edge
    // or A3 Mega VM. No RDMA device: hca is the netdev's name, port 0,
    // state ACTIVE when its operstate is up, link_layer "gVNIC", the rate
    // from its speed. Only listed on a VM with exactly 5 or 9 gVNICs.
    bool gvnic = false;
    // Oracle Cloud (DMI chassis_asset_tag "OracleCloud.com").
    bool oci = false;

    bool roce() const { return !efa && !gvnic && link_layer == "Ethernet"; }
    std::string name() const { return gvnic ? hca : hca + ":" + std::to_string(port); }
};

// Reads ROOT/class/infiniband/*/ports/* and the netdevs they name under
// ROOT/class/net. A garbled or missing file marks that port with a problem;
// nothing throws. Ports come sorted by HCA name (natural order) and port.
std::vector<RdmaPort> read_sysfs_ports(const std::string& root);

// "400 Gb/sec (4X NDR)" -> 400; nullopt when it is not that form.
std::optional<double> parse_rate(const std::string& text);
// "4: ACTIVE" -> "ACTIVE"; "" when garbled.
std::string parse_state(const std::string& text);
// True for an IPv4-mapped GID: 0000:0000:0000:0000:0000:ffff:XXXX:XXXX.
bool ipv4_mapped_gid(const std::string& gid);

struct PortVerdict {
    RdmaPort port;
    bool chosen = false;
    std::string reason;
};

struct FabricChoice {
    std::string fabric;  // "ib", "roce", "efa", "tcpx", "tcpxo" or "socket"
    std::vector<PortVerdict> ports;
    // NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_DISABLE; for EFA, libfabric's FI_*
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<std::string> warnings;
    std::string why;
    // tcpx, tcpxo: the gVNIC that carries NCCL's own sockets and the
    // plugin's control channel (NCCL_SOCKET_IFNAME, *_CTRL_DEV: the step
    // plan puts NCCL_SOCKET_IFNAME there), and the data NICs, of which
    // those up are in the plugin's *_IFNAME.
    std::string control_netdev;
    std::vector<std::string> data_netdevs;
};

// Mode auto: ACTIVE AWS EFA devices (NCCL prefers a net plugin such as
// aws-ofi-nccl to its own transports); else ACTIVE InfiniBand ports of the
// fastest rate; else ACTIVE RoCE ports with a RoCE v2 IPv4-mapped GID (on
// Oracle Cloud only its cluster network's rdmaN ports); else Google's
// GPUDirect-TCPX (4 gVNIC data NICs) or -TCPXO (8), with the plugin's NIC
// variables (the rest are the site's); else sockets. Modes ib, roce and socket force the class; a forced class the
// node lacks is a problem that says what the node has instead.
Outcome<FabricChoice> choose_fabric(const std::vector<RdmaPort>& ports, Mode mode);

// A node with fabric hardware of which not one port is usable (it fell to
// sockets while it has RDMA ports or an A3 VM's gVNICs): what it lacks,
// each port with its reason; "" otherwise. A prolog fails such a node.
std::string unusable_fabric(const FabricChoice& c);

// tcpx, tcpxo: the plugin's NIC variables (and NCCL_SOCKET_IFNAME) as the
// site or user set them, which mn_nccl keeps: one per value that names
// other NICs than this node's control or data NICs. Empty elsewhere.
std::vector<std::string> plugin_variable_findings(
    const FabricChoice& c, const std::function<std::optional<std::string>(const std::string&)>& env);

}  // namespace mn
