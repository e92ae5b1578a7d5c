// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/netprobe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

#include "lib/util/bounded_file.h"

namespace mn {

std::vector<Ipv4> resolve_ipv4(const std::string& name, std::string& error) {
    std::vector<Ipv4> out;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
        error = gai_strerror(rc);
        return out;
    }
    for (addrinfo* p = res; p; p = p->ai_next) {
        auto* sin = reinterpret_cast<sockaddr_in*>(p->ai_addr);
        Ipv4 a{ntohl(sin->sin_addr.s_addr)};
        bool seen = false;
        for (const auto& b : out) seen = seen || b == a;
        if (!seen) out.push_back(a);
    }
    freeaddrinfo(res);
    return out;
}

std::vector<Interface> local_interfaces() {
    std::vector<Interface> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (ifaddrs* p = list; p; p = p->ifa_next) {
        Interface* iface = nullptr;
        for (auto& i : out)
            if (i.name == p->ifa_name) iface = &i;
        if (!iface) {
            out.push_back(Interface{p->ifa_name, {}, (p->ifa_flags & IFF_UP) != 0, (p->ifa_flags & IFF_LOOPBACK) != 0,
                                    (p->ifa_flags & IFF_RUNNING) != 0});
            iface = &out.back();
        }
        if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET)
            iface->addrs.push_back(Ipv4{ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr)});
    }
    freeifaddrs(list);
    return out;
}

std::optional<Ipv4> route_source(Ipv4 dst) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);  // any port: connect() on UDP only picks a route
    to.sin_addr.s_addr = htonl(dst.value);
    std::optional<Ipv4> out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
        sockaddr_in me{};
        socklen_t len = sizeof me;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0 && me.sin_addr.s_addr != 0)
            out = Ipv4{ntohl(me.sin_addr.s_addr)};
    }
    close(fd);
    return out;
}

std::optional<Ipv4> default_route_address(const std::vector<Interface>& interfaces,
                                          const std::string& proc_route) {
    // /proc reports a size of 0, so the reader goes by the limit alone: 128
    // bytes a route, far more routes than a compute node has.
    constexpr std::size_t kRouteTableMax = 16 << 20;
    std::istringstream in(read_bounded_text(proc_route, kRouteTableMax).value_or(""));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string iface, dest;
        fields >> iface >> dest;
        if (dest != "00000000") continue;
        for (const auto& i : interfaces)
            if (i.name == iface && i.up && !i.addrs.empty()) return i.addrs.front();
    }
    return std::nullopt;
}

}  // namespace mn
