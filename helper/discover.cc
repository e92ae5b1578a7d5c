#include "helper/discover.h"

#include <cstdio>

#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn {


std::string discover_text(const DiscoverReport& r) {
    std::string out = "# mn-preflight discover on " + r.host + " (mode " + to_string(r.mode) + ", sysfs " +
                      r.sysfs_root + ")\n";
    out += "# " + pad("port", 11) + pad("state", 7) + pad("link", 10) + pad("Gb/s", 5) + pad("netdev", 12) +
           pad("mtu", 5) + pad("gid", 3) + pad("chosen", 6) + "reason\n";
    for (const auto& v : r.choice.ports) {
        const RdmaPort& p = v.port;
        out += "  " + pad(p.name(), 11) + pad(p.state.empty() ? "?" : p.state, 7) +
               pad(p.link_layer.empty() ? "?" : p.link_layer, 10) + pad(p.rate_gbps > 0 ? num(p.rate_gbps, -1) : "?", 5) +
               pad(p.netdev.empty() ? "-" : p.netdev, 12) + pad(p.mtu ? std::to_string(p.mtu) : "-", 5) +
               pad(p.gid_index ? std::to_string(*p.gid_index) : "-", 3) + pad(v.chosen ? "yes" : "no", 6) + v.reason +
               "\n";
    }
    if (r.choice.ports.empty()) out += "  (no RDMA ports)\n";
    out += "fabric: " + r.choice.fabric + " (" + r.choice.why + ")\n";
    out += "GPU to HCA locality (" + r.locality.note + "):\n";
    for (const auto& g : r.locality.gpus)
        out += "  " + pad(g.gpu.name, 6) + pad(g.gpu.busid, 13) +
               (g.hca.empty() ? std::string("no HCA") : pad(g.hca, 8) + to_string(g.how)) + "\n";
    if (r.locality.known && r.locality.gpus.empty()) out += "  (no GPUs)\n";
    for (const auto& w : r.choice.warnings) out += "warning: " + w + "\n";
    for (const auto& w : r.locality.warnings) out += "warning: " + w + "\n";
    out += "would set:\n";
    for (const auto& [k, v] : r.env) out += "  " + k + "=" + v + "\n";
    if (!r.fingerprint.empty()) out += "software (the check compares it across nodes): " + r.fingerprint + "\n";
    return out;
}

std::string discover_json(const DiscoverReport& r) {
    std::string out = "{\"host\":" + json_string(r.host) + ",\"mode\":" + json_string(to_string(r.mode)) +
                      ",\"sysfs_root\":" + json_string(r.sysfs_root) + ",\"fabric\":" + json_string(r.choice.fabric) +
                      ",\"why\":" + json_string(r.choice.why) + ",\"fingerprint\":" + json_string(r.fingerprint) +
                      ",\"env\":{";
    bool first = true;
    for (const auto& [k, v] : r.env) {
        out += (first ? "" : ",") + json_string(k) + ":" + json_string(v);
        first = false;
    }
    out += "},\"ports\":[";
    first = true;
    for (const auto& v : r.choice.ports) {
        const RdmaPort& p = v.port;
        out += std::string(first ? "" : ",") + "{\"hca\":" + json_string(p.hca) + ",\"port\":" + std::to_string(p.port) +
               ",\"state\":" + json_string(p.state) + ",\"link_layer\":" + json_string(p.link_layer) +
               ",\"rate_gbps\":" + num(p.rate_gbps, -1) + ",\"netdev\":" + json_string(p.netdev) +
               ",\"mtu\":" + std::to_string(p.mtu) +
               ",\"gid_index\":" + (p.gid_index ? std::to_string(*p.gid_index) : "null") +
               ",\"chosen\":" + (v.chosen ? "true" : "false") + ",\"reason\":" + json_string(v.reason) + "}";
        first = false;
    }
    out += "],\"locality\":{\"known\":" + std::string(r.locality.known ? "true" : "false") +
           ",\"note\":" + json_string(r.locality.note) + ",\"gpus\":[";
    first = true;
    for (const auto& g : r.locality.gpus) {
        out += std::string(first ? "" : ",") + "{\"gpu\":" + json_string(g.gpu.name) +
               ",\"busid\":" + json_string(g.gpu.busid) + ",\"hca\":" + (g.hca.empty() ? "null" : json_string(g.hca)) +
               ",\"level\":" + (g.hca.empty() ? "null" : json_string(level_name(g.how))) +
               ",\"nearness\":" + (g.hca.empty() ? "null" : json_string(to_string(g.how))) + "}";
        first = false;
    }
    out += "]},\"warnings\":[";
    first = true;
    std::vector<std::string> warnings = r.choice.warnings;
    warnings.insert(warnings.end(), r.locality.warnings.begin(), r.locality.warnings.end());
    for (const auto& w : warnings) {
        out += (first ? "" : ",") + json_string(w);
        first = false;
    }
    return out + "]}\n";
}

}  // namespace mn
