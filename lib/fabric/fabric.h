// RDMA fabric discovery and NCCL's network choice: which HCA ports go into
// NCCL_IB_HCA, which RoCE GID index, AWS EFA (through NCCL's aws-ofi-nccl
// net plugin), or sockets only. Discovery reads sysfs under a root
// directory, so every rule runs on fixture trees.
#pragma once

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

    bool roce() const { return !efa && link_layer == "Ethernet"; }
    std::string name() const { return hca + ":" + std::to_string(port); }
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
    std::string fabric;  // "ib", "roce", "efa" or "socket"
    std::vector<PortVerdict> ports;
    // NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_DISABLE; for EFA, libfabric's FI_*
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<std::string> warnings;
    std::string why;
};

// Mode auto: ACTIVE AWS EFA devices (NCCL prefers a net plugin such as
// aws-ofi-nccl to its own transports); else ACTIVE InfiniBand ports of the
// fastest rate; else ACTIVE RoCE ports with a RoCE v2 IPv4-mapped GID; else
// sockets. Modes ib, roce and socket force the class; a forced class the
// node lacks is a problem that says what the node has instead.
Outcome<FabricChoice> choose_fabric(const std::vector<RdmaPort>& ports, Mode mode);

}  // namespace mn
