// SPDX-License-Identifier: Apache-2.0
// Reads this node's network facts from the kernel and the resolver. No
// packet is sent: routes are asked of the kernel with an unconnected
// datagram socket's connect().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lib/plan/netpath.h"

namespace mn {

std::vector<Ipv4> resolve_ipv4(const std::string& name, std::string& error);
std::vector<Interface> local_interfaces();
std::optional<Ipv4> route_source(Ipv4 dst);
// Address of the interface that carries the default route (/proc/net/route).
std::optional<Ipv4> default_route_address(const std::vector<Interface>& interfaces,
                                          const std::string& proc_route = "/proc/net/route");

}  // namespace mn
