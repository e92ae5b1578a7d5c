// SPDX-License-Identifier: Apache-2.0
#include "lib/fabric/verbs.h"

#include "build_config.h"  // the build's HAVE_IBVERBS

#include <algorithm>

#ifdef HAVE_IBVERBS
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include "lib/util/symbols.h"
#endif

namespace mn {

std::optional<double> verbs_rate_gbps(unsigned active_speed, unsigned active_width) {
    double lane = 0;
    switch (active_speed) {
        case 1: lane = 2.5; break;   // SDR
        case 2: lane = 5; break;     // DDR
        case 4: lane = 10; break;    // QDR
        case 8: lane = 10; break;    // FDR10
        case 16: lane = 14; break;   // FDR
        case 32: lane = 25; break;   // EDR
        case 64: lane = 50; break;   // HDR
        case 128: lane = 100; break; // NDR
        default: return std::nullopt;
    }
    unsigned lanes = 0;
    switch (active_width) {
        case 1: lanes = 1; break;
        case 2: lanes = 4; break;
        case 4: lanes = 8; break;
        case 8: lanes = 12; break;
        case 16: lanes = 2; break;
        default: return std::nullopt;
    }
    return lane * lanes;
}

std::string verbs_state(unsigned state) {
    switch (state) {
        case 0: return "NOP";
        case 1: return "DOWN";
        case 2: return "INIT";
        case 3: return "ARMED";
        case 4: return "ACTIVE";
        case 5: return "ACTIVE_DEFER";
        default: return "";
    }
}

std::vector<RdmaPort> merge_verbs(std::vector<RdmaPort> sysfs, const VerbsListing& verbs) {
    if (!verbs.available) return sysfs;
    for (auto& p : sysfs) {
        if (!p.problem.empty()) continue;
        if (p.gvnic) continue;  // a netdev, no verbs device
        auto v = std::find_if(verbs.ports.begin(), verbs.ports.end(),
                              [&](const RdmaPort& q) { return q.hca == p.hca && q.port == p.port; });
        if (v == verbs.ports.end()) {
            p.problem = "libibverbs cannot open " + p.name() +
                        ", so NCCL could not either: install its verbs provider (Debian: ibverbs-providers) "
                        "and check that its driver is loaded";
            continue;
        }
        if (!v->state.empty()) p.state = v->state;
        if (!v->link_layer.empty()) p.link_layer = v->link_layer;
        if (v->rate_gbps > 0) p.rate_gbps = v->rate_gbps;
    }
    for (const auto& v : verbs.ports) {
        const bool known = std::any_of(sysfs.begin(), sysfs.end(),
                                       [&](const RdmaPort& p) { return p.hca == v.hca && p.port == v.port; });
        if (!known) sysfs.push_back(v);
    }
    return sysfs;
}

#ifdef HAVE_IBVERBS
namespace {

// libibverbs, loaded at run time (types from its header): mn-preflight
// runs in container images that may not have it, and a node without it
// still has its sysfs view.
struct Verbs {
    bool loaded = false;
    decltype(&::ibv_get_device_list) get_device_list = nullptr;
    decltype(&::ibv_free_device_list) free_device_list = nullptr;
    decltype(&::ibv_get_device_name) get_device_name = nullptr;
    decltype(&::ibv_open_device) open_device = nullptr;
    decltype(&::ibv_close_device) close_device = nullptr;
    decltype(&::ibv_query_device) query_device = nullptr;
    // The exported call behind verbs.h's ibv_query_port macro (providers
    // without the extended op).
    int (*query_port)(ibv_context*, uint8_t, _compat_ibv_port_attr*) = nullptr;
};

const Verbs& verbs() {
    static const Verbs v = [] {
        Verbs x;
        void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return x;
        x.loaded = sym(lib, "ibv_get_device_list", x.get_device_list) &&
                   sym(lib, "ibv_free_device_list", x.free_device_list) &&
                   sym(lib, "ibv_get_device_name", x.get_device_name) && sym(lib, "ibv_open_device", x.open_device) &&
                   sym(lib, "ibv_close_device", x.close_device) && sym(lib, "ibv_query_device", x.query_device) &&
                   sym(lib, "ibv_query_port", x.query_port);
        return x;
    }();
    return v;
}

// What verbs.h's ibv_query_port does: the provider's extended op where it
// has one, else the exported call.
int query_port(const Verbs& v, ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
    if (verbs_context* vctx = verbs_get_ctx_op(ctx, query_port)) return vctx->query_port(ctx, port, attr, sizeof *attr);
    *attr = ibv_port_attr{};
    return v.query_port(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

}  // namespace

VerbsListing list_verbs_ports() {
    VerbsListing out;
    const Verbs& v = verbs();
    if (!v.loaded) {
        out.problem = "libibverbs.so.1 not found (Debian: libibverbs1)";
        return out;
    }
    int n = 0;
    ibv_device** list = v.get_device_list(&n);
    if (!list) {
        out.problem = "ibv_get_device_list failed";
        return out;
    }
    out.available = true;
    for (int i = 0; i < n; ++i) {
        const char* name = v.get_device_name(list[i]);
        ibv_context* ctx = v.open_device(list[i]);
        if (!name) continue;
        if (!ctx) continue;  // merge_verbs reports it as unopenable
        ibv_device_attr dev{};
        if (v.query_device(ctx, &dev) == 0) {
            for (unsigned p = 1; p <= dev.phys_port_cnt; ++p) {
                ibv_port_attr attr{};
                if (query_port(v, ctx, static_cast<uint8_t>(p), &attr) != 0) continue;
                RdmaPort r;
                r.hca = name;
                r.port = p;
                r.state = verbs_state(attr.state);
                // UNSPECIFIED is EFA's (sysfs: "Unknown") and old kernels'
                // InfiniBand: "" keeps what sysfs says (merge_verbs).
                r.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET      ? "Ethernet"
                               : attr.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
                                                                               : "";
                r.rate_gbps = verbs_rate_gbps(attr.active_speed, attr.active_width).value_or(0);
                out.ports.push_back(r);
            }
        }
        v.close_device(ctx);
    }
    v.free_device_list(list);
    return out;
}
#else
VerbsListing list_verbs_ports() {
    VerbsListing out;
    out.problem = "built without libibverbs";
    return out;
}
#endif

std::vector<RdmaPort> discover_ports(const std::string& sysfs_root) {
    auto ports = read_sysfs_ports(sysfs_root);
    if (sysfs_root != "/sys") return ports;  // fixture trees never consult verbs
    // Without any RDMA device in sysfs there is nothing verbs could add that
    // NCCL would use; skip loading providers (and their stderr chatter).
    if (ports.empty()) return ports;
    return merge_verbs(std::move(ports), list_verbs_ports());
}

}  // namespace mn
