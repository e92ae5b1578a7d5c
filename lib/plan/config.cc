// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/config.h"

#include <cctype>
#include <cstdlib>

#include "lib/util/boolean.h"
#include "lib/util/text.h"

#include "lib/check/watch_request.h"

namespace mn {

const char* to_string(Mode m) {
    switch (m) {
        case Mode::Off: return "off";
        case Mode::Auto: return "auto";
        case Mode::Ib: return "ib";
        case Mode::Roce: return "roce";
        case Mode::Socket: return "socket";
    }
    return "?";
}

const char* to_string(LaunchMode m) {
    switch (m) {
        case LaunchMode::Detect: return "detect";
        case LaunchMode::Task: return "task";
        case LaunchMode::Node: return "node";
    }
    return "?";
}

Outcome<Mode> parse_mode(const std::string& value, const std::string& source) {
    std::string v = lower(value);
    if (v.empty() || v == "auto") return Mode::Auto;
    if (v == "off") return Mode::Off;
    if (v == "ib") return Mode::Ib;
    if (v == "roce") return Mode::Roce;
    if (v == "socket") return Mode::Socket;
    return Problem{source + "='" + value + "' is not a valid mode",
                   "use one of auto, ib, roce, socket, off"};
}

Outcome<LaunchMode> parse_launch(const std::string& value, const std::string& source) {
    std::string v = lower(value);
    if (v == "task") return LaunchMode::Task;
    if (v == "node") return LaunchMode::Node;
    return Problem{source + "='" + value + "' is not valid",
                   "use task (one task per GPU) or node (one launcher such as torchrun per node)"};
}

// Digits only, no sign, no overflow.
static bool parse_uint(const std::string& s, unsigned long max, unsigned long& out) {
    if (s.empty() || s.size() > 10) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    unsigned long v = std::strtoul(s.c_str(), nullptr, 10);
    if (v > max) return false;
    out = v;
    return true;
}

Outcome<unsigned> parse_emulate_nodes(const std::string& value, const std::string& source) {
    unsigned long k = 0;
    if (!parse_uint(value, 4096, k) || k < 1)
        return Problem{source + "='" + value + "' is not valid",
                       "give a whole number K >= 1 of emulated nodes per real node"};
    return static_cast<unsigned>(k);
}

Outcome<PortRange> parse_port_range(const std::string& value) {
    std::size_t dash = value.find('-');
    unsigned long lo = 0, hi = 0;
    if (dash == std::string::npos || !parse_uint(value.substr(0, dash), 65535, lo) ||
        !parse_uint(value.substr(dash + 1), 65535, hi))
        return Problem{"port_range='" + value + "' is not LO-HI", "write e.g. port_range=20000-29999"};
    if (lo < 1024 || hi < lo)
        return Problem{"port_range='" + value + "' must satisfy 1024 <= LO <= HI <= 65535",
                       "write e.g. port_range=20000-29999"};
    return PortRange{static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)};
}

Outcome<uint16_t> parse_user_port(const std::string& value) {
    unsigned long p = 0;
    if (!parse_uint(value, 65535, p) || p == 0)
        return Problem{"MASTER_PORT='" + value + "' is not a port number",
                       "set MASTER_PORT to a number from 1 to 65535, or unset it"};
    return static_cast<uint16_t>(p);
}

ParsedSiteConfig parse_site_config(const std::vector<std::string>& args) {
    static const char* const kKnown = "known: default, port_range, force, sysfs_root, user_sysfs_root, preflight, history, metrics_dir, watch";
    ParsedSiteConfig out;
    auto warn = [&](const std::string& what, const std::string& kept) {
        out.warnings.push_back("plugstack.conf: " + what + "; using " + kept);
    };
    for (const std::string& arg : args) {
        std::size_t eq = arg.find('=');
        // One spelling per key (underscores); metrics-dir= is read as metrics_dir=.
        std::string key = arg.substr(0, eq);
        for (char& c : key)
            if (c == '-') c = '_';
        std::string val = eq == std::string::npos ? "" : arg.substr(eq + 1);
        if (eq == std::string::npos) {
            warn("argument '" + arg + "' is not key=value (" + kKnown + ")", "nothing from it");
        } else if (key == "default") {
            auto m = parse_mode(val, "default");
            if (m && !val.empty()) out.config.default_mode = *m;
            else warn(val.empty() ? "default= is empty" : m.problem().text(), "default=off");
        } else if (key == "port_range") {
            auto r = parse_port_range(val);
            if (r) out.config.ports = *r;
            else warn(r.problem().text(), "port_range=20000-29999");
        } else if (key == "force") {
            auto f = parse_boolean(val, "force");
            if (f) out.config.force = *f;
            else warn(f.problem().text(), "force=no");
        } else if (key == "user_sysfs_root") {
            auto f = parse_boolean(val, "user_sysfs_root");
            if (f) out.config.user_sysfs_root = *f;
            else warn(f.problem().text(), "user_sysfs_root=no");
        } else if (key == "preflight") {
            if (!val.empty() && val[0] == '/') out.config.preflight = val;
            else warn("preflight='" + val + "' is not an absolute path", "the installed mn-preflight");
        } else if (key == "history" || key == "metrics_dir") {
            std::string& into = key == "history" ? out.config.history_dir : out.config.metrics_dir;
            if (!val.empty() && val[0] == '/') into = val;
            else warn(key + "='" + val + "' is not an absolute path", "no " + (key == "history" ? std::string("history") : "metrics files"));
        } else if (key == "watch") {
            auto w = parse_watch_request(val, "watch");
            if (w) {
                out.config.watch = *w;
                out.config.watch.source = kWatchSiteSource;
            } else {
                warn(w.problem().what, "watch=off");
            }
        } else if (key == "sysfs_root") {
            if (!val.empty() && val[0] == '/') out.config.sysfs_root = val;
            else warn("sysfs_root='" + val + "' is not an absolute path", "/sys");
        } else {
            warn("unknown argument '" + arg + "' (" + kKnown + ")", "nothing from it");
        }
    }
    return out;
}

}  // namespace mn
