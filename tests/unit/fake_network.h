// SPDX-License-Identifier: Apache-2.0
// A node's network as the tests describe it.
#pragma once

#include <map>

#include "lib/plan/step_plan.h"

struct FakeNetwork : mn::NetworkView {
    std::map<std::string, std::vector<mn::Ipv4>> names;
    std::vector<mn::Interface> ifs;
    // destination -> source address the kernel would pick
    std::map<uint32_t, mn::Ipv4> routes;
    std::optional<mn::Ipv4> default_addr;

    std::vector<mn::Ipv4> resolve(const std::string& n, std::string& err) const override {
        auto it = names.find(n);
        if (it == names.end()) {
            err = "Name or service not known";
            return {};
        }
        return it->second;
    }
    std::vector<mn::Interface> interfaces() const override { return ifs; }
    std::optional<mn::Ipv4> route_source(mn::Ipv4 dst) const override {
        for (const auto& i : ifs)
            for (const auto& a : i.addrs)
                if (a == dst) return a;
        auto it = routes.find(dst.value);
        if (it == routes.end()) return std::nullopt;
        return it->second;
    }
    std::optional<mn::Ipv4> default_route(const std::vector<mn::Interface>&) const override { return default_addr; }
};

inline mn::Ipv4 ip(const char* s) { return *mn::Ipv4::parse(s); }

// A Debian cluster node: lo, eth0 with its address, docker0 with 172.17.0.1.
inline FakeNetwork debian_node(const char* self, const char* addr) {
    FakeNetwork n;
    n.ifs = {{"lo", {ip("127.0.0.1")}, true, true},
             {"eth0", {ip(addr)}, true, false},
             {"docker0", {ip("172.17.0.1")}, true, false}};
    n.names[self] = {ip("127.0.1.1")};
    return n;
}
