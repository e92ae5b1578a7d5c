// SPDX-License-Identifier: Apache-2.0
// Which address other nodes reach node 0 by (MASTER_ADDR), and which local
// interface carries the route to it (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME).
// The choice is a pure function of facts; netprobe.h gathers the facts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

struct Ipv4 {
    uint32_t value = 0;  // host byte order
    static std::optional<Ipv4> parse(const std::string& dotted);
    std::string str() const;
    bool loopback() const { return (value >> 24) == 127; }
    bool link_local() const { return (value >> 16) == 0xa9fe; }
    bool unspecified() const { return value == 0; }
    bool operator==(const Ipv4& o) const { return value == o.value; }
};

struct Interface {
    std::string name;
    std::vector<Ipv4> addrs;
    bool up = false;
    bool loopback = false;
    bool running = false;  // IFF_RUNNING: its carrier is there (the hang watch's link rule)
};

struct AddressFacts {
    bool is_node0 = false;
    std::string node0;                  // node 0's host name
    std::vector<Ipv4> node0_resolved;   // what node0 resolves to here
    std::string resolve_error;          // why it did not resolve, if so
    std::vector<Interface> interfaces;  // this node's
    // Node 0 only, for when its own name resolves to no local address: the
    // source address of the route to a peer (another node of the step, or
    // the launching host), and the address of the default route's interface.
    std::optional<Ipv4> route_to_peer;
    std::string peer;
    std::optional<Ipv4> default_route_addr;
};

struct MasterChoice {
    Ipv4 addr;
    std::string why;
};

Outcome<MasterChoice> choose_master_addr(const AddressFacts& f);

struct InterfaceChoice {
    std::string name;
    std::string why;
};

// route_source: the local source address the kernel would use to reach
// master (absent when there is no route).
Outcome<InterfaceChoice> choose_interface(Ipv4 master, const std::vector<Interface>& interfaces,
                                          std::optional<Ipv4> route_source);

const Interface* interface_holding(const std::vector<Interface>& interfaces, Ipv4 addr);

}  // namespace mn
