// SPDX-License-Identifier: Apache-2.0
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
    Json j;
    j["host"] = json_text(r.host);
    j["mode"] = json_text(to_string(r.mode));
    j["sysfs_root"] = json_text(r.sysfs_root);
    j["fabric"] = json_text(r.choice.fabric);
    j["why"] = json_text(r.choice.why);
    j["fingerprint"] = json_text(r.fingerprint);
    j["env"] = Json::object();
    for (const auto& [k, v] : r.env) j["env"][json_text(k)] = json_text(v);
    j["ports"] = Json::array();
    for (const auto& v : r.choice.ports) {
        const RdmaPort& p = v.port;
        j["ports"].push_back({{"hca", json_text(p.hca)},
                              {"port", p.port},
                              {"state", json_text(p.state)},
                              {"link_layer", json_text(p.link_layer)},
                              {"rate_gbps", json_number(p.rate_gbps)},
                              {"netdev", json_text(p.netdev)},
                              {"mtu", p.mtu},
                              {"gid_index", p.gid_index ? Json(*p.gid_index) : Json(nullptr)},
                              {"chosen", v.chosen},
                              {"reason", json_text(v.reason)}});
    }
    Json gpus = Json::array();
    for (const auto& g : r.locality.gpus)
        gpus.push_back({{"gpu", json_text(g.gpu.name)},
                        {"busid", json_text(g.gpu.busid)},
                        {"hca", g.hca.empty() ? Json(nullptr) : Json(json_text(g.hca))},
                        {"level", g.hca.empty() ? Json(nullptr) : Json(json_text(level_name(g.how)))},
                        {"nearness", g.hca.empty() ? Json(nullptr) : Json(json_text(to_string(g.how)))}});
    j["locality"] = {{"known", r.locality.known}, {"note", json_text(r.locality.note)}, {"gpus", std::move(gpus)}};
    std::vector<std::string> warnings = r.choice.warnings;
    warnings.insert(warnings.end(), r.locality.warnings.begin(), r.locality.warnings.end());
    j["warnings"] = json_texts(warnings);
    return json_line(j);
}

}  // namespace mn
