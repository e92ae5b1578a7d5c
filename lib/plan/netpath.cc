// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/netpath.h"

#include <arpa/inet.h>

namespace mn {

std::optional<Ipv4> Ipv4::parse(const std::string& dotted) {
    in_addr a{};
    if (inet_pton(AF_INET, dotted.c_str(), &a) != 1) return std::nullopt;
    return Ipv4{ntohl(a.s_addr)};
}

std::string Ipv4::str() const {
    return std::to_string(value >> 24) + "." + std::to_string((value >> 16) & 255) + "." +
           std::to_string((value >> 8) & 255) + "." + std::to_string(value & 255);
}

const Interface* interface_holding(const std::vector<Interface>& interfaces, Ipv4 addr) {
    for (const auto& i : interfaces)
        for (const auto& a : i.addrs)
            if (a == addr) return &i;
    return nullptr;
}

static bool usable_local(const std::vector<Interface>& ifs, Ipv4 a) {
    const Interface* i = interface_holding(ifs, a);
    return i && i->up && !i->loopback && !a.loopback() && !a.link_local();
}

static std::string list(const std::vector<Ipv4>& v) {
    std::string s;
    for (const auto& a : v) s += (s.empty() ? "" : ",") + a.str();
    return s.empty() ? "nothing" : s;
}

Outcome<MasterChoice> choose_master_addr(const AddressFacts& f) {
    if (f.is_node0) {
        for (const auto& a : f.node0_resolved)
            if (usable_local(f.interfaces, a))
                return MasterChoice{a, f.node0 + " resolves to " + a.str() + ", held by " +
                                           interface_holding(f.interfaces, a)->name};
        // Debian maps a host's own name to 127.0.1.1: take the address the
        // kernel would use towards the other nodes instead.
        std::string own = f.node0 + " resolves here to " + list(f.node0_resolved);
        if (f.route_to_peer && usable_local(f.interfaces, *f.route_to_peer))
            return MasterChoice{*f.route_to_peer, own + "; " + f.route_to_peer->str() +
                                                      " is this node's source address towards " + f.peer};
        if (f.default_route_addr && usable_local(f.interfaces, *f.default_route_addr))
            return MasterChoice{*f.default_route_addr,
                                own + "; " + f.default_route_addr->str() + " is on the default route"};
        return Problem{"node 0 (" + f.node0 + ") has no address the other nodes can reach: its name resolves to " +
                           list(f.node0_resolved) + " and no route to a peer or default route was found",
                       "map " + f.node0 + " to its cluster address in DNS or /etc/hosts, or set MASTER_ADDR"};
    }
    if (f.node0_resolved.empty())
        return Problem{"cannot resolve node 0's name '" + f.node0 + "'" +
                           (f.resolve_error.empty() ? "" : " (" + f.resolve_error + ")"),
                       "add " + f.node0 + " to DNS or /etc/hosts on every node, or set MASTER_ADDR"};
    for (const auto& a : f.node0_resolved)
        if (!a.loopback() && !a.link_local() && !a.unspecified())
            return MasterChoice{a, f.node0 + " resolves to " + a.str()};
    return Problem{"node 0's name '" + f.node0 + "' resolves here only to " + list(f.node0_resolved) +
                       ", a loopback or link-local address",
                   "map " + f.node0 + " to its cluster address in DNS or /etc/hosts, or set MASTER_ADDR"};
}

Outcome<InterfaceChoice> choose_interface(Ipv4 master, const std::vector<Interface>& interfaces,
                                          std::optional<Ipv4> route_source) {
    if (const Interface* i = interface_holding(interfaces, master))
        return InterfaceChoice{i->name, i->name + " holds " + master.str()};
    if (!route_source)
        return Problem{"no route to MASTER_ADDR " + master.str(),
                       "check this node's routes, or set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME"};
    if (const Interface* i = interface_holding(interfaces, *route_source))
        return InterfaceChoice{i->name, "the route to " + master.str() + " leaves by " + i->name};
    return Problem{"the route to MASTER_ADDR " + master.str() + " uses source " + route_source->str() +
                       ", which no interface holds",
                   "check this node's routes, or set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME"};
}

}  // namespace mn
