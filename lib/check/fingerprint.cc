// SPDX-License-Identifier: Apache-2.0
#include "lib/check/fingerprint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <cmath>

#include "lib/util/text.h"

namespace mn {

std::string nccl_version_text(int code) {
    if (code <= 0) return "";
    // NCCL_VERSION(X,Y,Z): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9.
    const int major = code < 10000 ? code / 1000 : code / 10000;
    const int minor = code < 10000 ? code % 1000 / 100 : code % 10000 / 100;
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string pcie_generation(double gts) {
    const std::pair<double, const char*> gens[] = {{2.5, "Gen1"}, {5, "Gen2"}, {8, "Gen3"},
                                                   {16, "Gen4"}, {32, "Gen5"}, {64, "Gen6"}};
    for (const auto& [g, name] : gens)
        if (std::abs(gts - g) < 0.01) return name;
    return "";
}

std::string cuda_version_text(int code) {
    if (code <= 0) return "";
    return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

std::optional<Version> parse_version(const std::string& s) {
    std::size_t i = 0, end = s.size();
    while (i < end && s[i] == ' ') ++i;
    while (end > i && s[end - 1] == ' ') --end;
    const bool tuple = i < end && s[i] == '(';
    if (tuple) {
        if (s[end - 1] != ')') return std::nullopt;
        ++i;
        --end;
    }
    std::vector<int> parts;
    while (parts.size() < 3) {
        std::size_t j = i;
        while (j < end && j - i < 6 && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        if (j == i || (j < end && std::isdigit(static_cast<unsigned char>(s[j])))) return std::nullopt;
        parts.push_back(std::stoi(s.substr(i, j - i)));
        i = j;
        if (i == end) break;
        if (tuple) {
            if (s[i] != ',') return std::nullopt;
            for (++i; i < end && s[i] == ' ';) ++i;
        } else if (s[i] == '.') {
            ++i;
        } else {
            break;
        }
    }
    // After the numbers: nothing, or a build or package suffix ("+cuda12.4", "-1").
    if (parts.size() < 2 || (i < end && (tuple || (s[i] != '+' && s[i] != '-')))) return std::nullopt;
    return Version{parts[0], parts[1], parts.size() > 2 ? parts[2] : -1};
}

namespace {

bool provider_name(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_';
    });
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string verbs_provider_of_file(const std::string& file_name) {
    std::string name;
    if (ends_with(file_name, ".driver")) {
        name = file_name.substr(0, file_name.size() - 7);
    } else if (file_name.rfind("lib", 0) == 0 && ends_with(file_name, ".so")) {
        const std::size_t dash = file_name.rfind("-rdmav");
        if (dash == std::string::npos || dash < 3) return "";
        const std::string abi = file_name.substr(dash + 6, file_name.size() - 3 - dash - 6);
        if (abi.empty() || !std::all_of(abi.begin(), abi.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return "";
        name = file_name.substr(3, dash - 3);
    }
    return provider_name(name) ? name : "";
}

std::string verbs_provider_for_driver(const std::string& kernel_driver) {
    // rdma-core's providers and the kernel drivers whose devices they open.
    static const std::map<std::string, std::string> kProvider = {
        {"mlx5_core", "mlx5"}, {"mlx5_ib", "mlx5"},   {"mlx4_core", "mlx4"},   {"mlx4_ib", "mlx4"},
        {"bnxt_en", "bnxt_re"}, {"bnxt_re", "bnxt_re"}, {"irdma", "irdma"},   {"ice", "irdma"},
        {"i40e", "irdma"},      {"efa", "efa"},         {"rdma_rxe", "rxe"},  {"siw", "siw"},
        {"hns3", "hns"},        {"hns_roce_hw_v2", "hns"}, {"qede", "qedr"},  {"qedr", "qedr"},
        {"cxgb4", "cxgb4"},     {"iw_cxgb4", "cxgb4"},  {"vmw_pvrdma", "vmw_pvrdma"}, {"mana", "mana"},
        {"mana_ib", "mana"},    {"erdma", "erdma"},     {"hfi1", "hfi1verbs"}, {"ib_qib", "ipathverbs"},
        {"ib_mthca", "mthca"},  {"ocrdma", "ocrdma"},   {"be2net", "ocrdma"},
    };
    const auto it = kProvider.find(kernel_driver);
    return it == kProvider.end() ? "" : it->second;
}

namespace {

std::string trimmed(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
}

// The text after `marker` on the line, trimmed; "" when absent.
std::string after(const std::string& line, const std::string& marker) {
    const std::size_t at = line.find(marker);
    return at == std::string::npos ? "" : trimmed(line.substr(at + marker.size()));
}

}  // namespace

NetPlugin net_plugin_from_log(const std::string& nccl_log) {
    NetPlugin p;
    bool none_said = false;
    std::string using_net;
    for (const std::string& line : split_list(nccl_log, '\n')) {
        // "NET/Plugin: Loaded net plugin AWS Libfabric (v9)"
        std::string loaded = after(line, "Loaded net plugin ");
        const std::size_t paren = loaded.rfind(" (v");
        if (!loaded.empty() && paren != std::string::npos && loaded.back() == ')') {
            p.name = loaded.substr(0, paren);
            p.api = loaded.substr(paren + 2, loaded.size() - paren - 3);
        } else if (!loaded.empty()) {
            p.name = loaded;
        }
        // The library: "Plugin Path : /opt/hpcx/.../libnccl-net.so" (HPC-X),
        // "Successfully loaded external plugin libnccl-net.so" (2.2x).
        for (const char* m : {"Plugin Path : ", "Successfully loaded external plugin ",
                              "Successfully loaded external network plugin ", "Successfully loaded external net plugin "}) {
            const std::string path = after(line, m);
            if (!path.empty()) p.path = path;
        }
        const std::string p2p = after(line, "P2P plugin ");
        if (!p2p.empty() && p.name.empty()) p.name = p2p;
        const std::string net = after(line, "Using network ");
        if (!net.empty()) using_net = net;
        for (const char* m : {"No plugin found", "Could not find: libnccl-net", "Using internal network plugin",
                              "using internal implementation"})
            none_said |= line.find(m) != std::string::npos;
    }
    // NCCL's own networks are IB and Socket; any other network in use is a plugin's.
    if (p.name.empty() && !using_net.empty() && using_net != "IB" && using_net != "Socket") p.name = using_net;
    // A library named but no plugin name said: the library's file names it.
    if (!p.path.empty() && p.name.empty()) {
        p.name = p.path.substr(p.path.find_last_of('/') + 1);
        if (p.name.empty()) p.name = p.path;
    }
    p.known = !p.name.empty() || none_said || !using_net.empty();
    return p;
}

namespace {

// Bytes that would break a word of the line: %XX.
std::string escape(const std::string& v) {
    std::string out;
    for (unsigned char c : v) {
        if (c <= ' ' || c == '%' || c == '=' || c == ',' || c >= 0x7f) {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

std::optional<std::string> unescape(const std::string& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] != '%') {
            out += v[i];
            continue;
        }
        if (i + 2 >= v.size() || hex(v[i + 1]) < 0 || hex(v[i + 2]) < 0) return std::nullopt;
        out += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
        i += 2;
    }
    return out;
}

std::string escape_list(const std::vector<std::string>& items) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + escape(items[i]);
    return out;
}

}  // namespace

std::string encode_fingerprint(const Fingerprint& f) {
    std::vector<std::pair<std::string, std::string>> kv = {
        {"host", escape(f.host)},       {"nccl", escape(f.nccl)},           {"nccl_path", escape(f.nccl_path)},
        {"cuda", escape(f.cuda_driver)}, {"gpu_model", escape(f.gpu_model)}, {"torch_nccl", escape(f.torch_nccl)}};
    if (f.gpus) kv.push_back({"gpus", std::to_string(f.gpus)});
    if (f.gpus_requested) kv.push_back({"gpus_requested", std::to_string(f.gpus_requested)});
    // Present but empty says "known: none" for the plugin and the providers.
    if (f.net.known) {
        kv.push_back({"net", escape(f.net.name)});
        kv.push_back({"net_api", escape(f.net.api)});
        kv.push_back({"net_path", escape(f.net.path)});
    }
    if (f.verbs_known) kv.push_back({"verbs", escape_list(f.verbs)});
    kv.push_back({"verbs_needed", escape_list(f.verbs_needed)});
    std::vector<std::string> links;
    for (const auto& l : f.pcie)
        links.push_back(l.gpu + ";" + std::to_string(l.width) + ";" + std::to_string(l.max_width) + ";" + num(l.gts, -1) +
                        ";" + num(l.max_gts, -1));
    kv.push_back({"pcie", escape_list(links)});
    kv.push_back({"hca_fw", escape_list(f.hca_firmware)});
    kv.push_back({"verbs_lib", escape(f.verbs_library)});
    if (f.nccl_env_known) kv.push_back({"nccl_env", escape_list(f.nccl_env)});
    kv.push_back({"image", escape(f.image)});
    kv.push_back({"image_name", escape(f.image_name)});
    std::string out;
    for (const auto& [k, v] : kv) {
        if (v.empty() && k != "net" && k != "verbs" && k != "nccl_env") continue;
        out += (out.empty() ? "" : " ") + k + "=" + v;
    }
    return out;
}

namespace {

std::optional<unsigned> count(const std::string& v) {
    if (v.empty() || v.size() > 6 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    return static_cast<unsigned>(std::stoul(v));
}

std::optional<std::vector<std::string>> list(const std::string& v) {
    std::vector<std::string> out;
    for (const auto& item : split_list(v, ',')) {
        auto u = unescape(item);
        if (!u) return std::nullopt;
        out.push_back(*u);
    }
    return out;
}

std::optional<double> rate(const std::string& v) {
    if (v.empty() || v.size() > 8 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; }))
        return std::nullopt;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end != v.c_str() + v.size()) return std::nullopt;
    return d;
}

// "0000:19:00.0;16;16;32;32", as encode_fingerprint writes a link.
std::optional<PcieLink> pcie_link_word(const std::string& item) {
    const auto parts = split_list(item, ';');
    if (parts.size() != 5 || parts[0].empty()) return std::nullopt;
    const auto w = count(parts[1]), mw = count(parts[2]);
    const auto g = rate(parts[3]), mg = rate(parts[4]);
    if (!w || !mw || !g || !mg) return std::nullopt;
    return PcieLink{parts[0], *w, *mw, *g, *mg};
}

}  // namespace

Outcome<Fingerprint> decode_fingerprint(const std::string& text) {
    Fingerprint f;
    auto bad = [](const std::string& word, const std::string& why) {
        return Problem{"mn-preflight: a node's fingerprint is garbled: '" + word.substr(0, 80) + "' " + why,
                       "run the same mn-preflight on every node"};
    };
    for (const std::string& word : split_list(text, ' ')) {
        const std::size_t eq = word.find('=');
        if (eq == std::string::npos || eq == 0) return bad(word, "is not key=value");
        const std::string key = word.substr(0, eq), raw = word.substr(eq + 1);
        const auto value = unescape(raw);
        if (!value) return bad(word, "has a bad %-escape");
        std::string* text_field = key == "host" ? &f.host : key == "nccl" ? &f.nccl : key == "nccl_path" ? &f.nccl_path
                                : key == "cuda" ? &f.cuda_driver : key == "gpu_model" ? &f.gpu_model
                                : key == "torch_nccl" ? &f.torch_nccl : key == "net_api" ? &f.net.api
                                : key == "net_path" ? &f.net.path : key == "verbs_lib" ? &f.verbs_library
                                : key == "image" ? &f.image : key == "image_name" ? &f.image_name : nullptr;
        if (text_field) {
            *text_field = *value;
        } else if (key == "net") {
            f.net.known = true;
            f.net.name = *value;
        } else if (key == "gpus" || key == "gpus_requested") {
            const auto n = count(raw);
            if (!n) return bad(word, "is not a count");
            (key == "gpus" ? f.gpus : f.gpus_requested) = *n;
        } else if (key == "verbs" || key == "verbs_needed") {
            auto items = list(raw);
            if (!items) return bad(word, "has a bad %-escape");
            if (key == "verbs") f.verbs_known = true;
            (key == "verbs" ? f.verbs : f.verbs_needed) = *items;
        } else if (key == "hca_fw" || key == "nccl_env") {
            auto items = list(raw);
            if (!items) return bad(word, "has a bad %-escape");
            if (key == "nccl_env") f.nccl_env_known = true;
            (key == "hca_fw" ? f.hca_firmware : f.nccl_env) = *items;
        } else if (key == "pcie") {
            auto items = list(raw);
            if (!items) return bad(word, "has a bad %-escape");
            for (const auto& item : *items) {
                auto link = pcie_link_word(item);
                if (!link) return bad(word, "is not a list of GPU;WIDTH;MAX_WIDTH;GTS;MAX_GTS");
                f.pcie.push_back(*link);
            }
        }
        // Other keys: a newer mn-preflight's, skipped.
    }
    return f;
}

// ---- Comparison -------------------------------------------------------------

namespace {

// "2.28" of "2.28.9": the release, what NCCL's protocol goes by.
std::string release(const std::string& v) {
    if (v.empty()) return "";
    const auto p = parse_version(v);
    return p ? std::to_string(p->major) + "." + std::to_string(p->minor) : v;
}

}  // namespace

bool same_release(const std::string& a, const std::string& b) { return release(a) == release(b); }

namespace {

std::string hosts_text(const std::vector<Fingerprint>& nodes, const std::vector<uint32_t>& idx) {
    std::string out;
    for (std::size_t i = 0; i < idx.size() && i < 3; ++i) out += (i ? ", " : "") + nodes[idx[i]].host;
    if (idx.size() > 3) out += " and " + std::to_string(idx.size() - 3) + " more";
    return out + (idx.size() == 1 ? " has " : " have ");
}

// One field of the fingerprint, or one level of it (the release, then the
// patch), and whether a difference there fails the check.
struct FieldRule {
    int family;  // a node named at one level of a field is not named again at the next
    bool fail;
    std::string (*key)(const Fingerprint&);   // "" not known; equal keys are alike
    std::string (*mine)(const Fingerprint&);  // the odd node's value, as the text says it
    std::string (*ref)(const Fingerprint&);   // the others' value
    const char* fix;
};

struct Group {
    std::string key;
    std::vector<uint32_t> nodes;
};

// What a group holds, as the text says it: "2.28.9", "2.28.9 or 2.28.3".
std::string group_ref(const std::vector<Fingerprint>& nodes, const Group& g, const FieldRule& rule) {
    std::vector<std::string> seen;
    for (uint32_t i : g.nodes) {
        const std::string r = rule.ref(nodes[i]);
        if (std::find(seen.begin(), seen.end(), r) == seen.end()) seen.push_back(r);
    }
    std::string out;
    for (std::size_t i = 0; i < seen.size() && i < 3; ++i) out += (i ? " or " : "") + seen[i];
    return out + (seen.size() > 3 ? " or others" : "");
}

void compare_field(const std::vector<Fingerprint>& nodes, const FieldRule& rule, std::vector<bool>& named,
                   std::vector<FingerprintFinding>& out) {
    std::vector<Group> groups;
    for (uint32_t i = 0; i < nodes.size(); ++i) {
        const std::string k = named[i] ? "" : rule.key(nodes[i]);
        if (k.empty()) continue;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.key == k; });
        if (g == groups.end()) groups.push_back({k, {i}});
        else g->nodes.push_back(i);
    }
    if (groups.size() < 2) return;
    std::size_t top = 0;
    for (std::size_t g = 1; g < groups.size(); ++g)
        if (groups[g].nodes.size() > groups[top].nodes.size()) top = g;
    const bool tie = std::count_if(groups.begin(), groups.end(), [&](const Group& g) {
                         return g.nodes.size() == groups[top].nodes.size();
                     }) > 1;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        if (!tie && g == top) continue;
        std::string others;
        if (!tie) {
            others = (groups.size() == 2 ? "the others " : "most nodes ") + group_ref(nodes, groups[top], rule);
        } else {
            // No majority: each value is named against the others.
            for (std::size_t o = 0; o < groups.size(); ++o)
                if (o != g)
                    others += (others.empty() ? "" : "; ") + hosts_text(nodes, groups[o].nodes) +
                              group_ref(nodes, groups[o], rule);
        }
        for (uint32_t i : groups[g].nodes) {
            out.push_back({i, rule.fail, tie, std::string(kFingerprintTag) + rule.mine(nodes[i]) + ", " + others + "; fix: " + rule.fix});
            named[i] = true;
        }
    }
}

std::string nccl_with_path(const std::string& label, const std::string& version, const std::string& path) {
    return label + " " + version + (path.empty() ? "" : " (" + path + ")");
}

std::string plugin_ref(const Fingerprint& f) {
    if (f.net.none()) return "none";
    return f.net.name + (f.net.api.empty() ? "" : " (" + f.net.api + ")");
}

std::string plugin_mine(const Fingerprint& f) {
    if (f.net.none()) return "no network plugin";
    std::string detail = f.net.api;
    if (!f.net.path.empty()) detail += (detail.empty() ? "" : ", ") + f.net.path;
    return "network plugin " + f.net.name + (detail.empty() ? "" : " (" + detail + ")");
}

const char* const kNcclFix =
    "run one NCCL release on every node (MN_PREFLIGHT_LIBNCCL, LD_LIBRARY_PATH or the image): NCCL does not promise its "
    "wire protocol between releases (NVIDIA/nccl#286)";
const char* const kPatchFix = "patch releases of one NCCL work together; align them at the next maintenance";

// The rules, in order, each with its reason (mn-preflight(1), FINGERPRINT,
// says the same):
//  - NCCL's release (major.minor) differs: FAIL; NCCL does not promise its
//    wire protocol between releases (NVIDIA/nccl#286). The patch level
//    alone: WARN (bug fixes, one protocol).
//  - torch's own NCCL (where known) differs between nodes: the same rules.
//  - a network plugin on some nodes only, or another plugin: FAIL; ranks
//    with and without it take different transports and hang at connect
//    (NVIDIA/nccl#1634). The same plugin, another API version: WARN.
//  - CUDA driver differs: WARN; drivers are backward compatible, and a
//    driver too old for this NCCL fails the node's own readiness.
//  - GPU model differs: FAIL; every step waits for the slowest GPU and
//    shards sized for the larger memory fail on the smaller: a job that
//    mixes models is an allocation mistake (ask for a GPU type).
//  - GPU count differs where no request is known: WARN (against a known
//    request node_fingerprint_findings fails a short node).
//  - verbs providers differ: WARN; a provider that a node's own ACTIVE
//    RDMA ports need is node_fingerprint_findings' (FAIL).
// The weakest link the node's GPUs can reach: "x16 Gen5 (32 GT/s)".
std::string weakest_link(const Fingerprint& f) {
    if (f.pcie.empty()) return "";
    unsigned w = f.pcie.front().max_width;
    double g = f.pcie.front().max_gts;
    for (const auto& l : f.pcie) {
        w = std::min(w, l.max_width);
        g = std::min(g, l.max_gts);
    }
    const std::string gen = pcie_generation(g);
    return "x" + std::to_string(w) + " " + (gen.empty() ? num(g, -1) + " GT/s" : gen + " (" + num(g, -1) + " GT/s)");
}

// The distinct firmware versions of the node's HCAs ("mlx5_0 28.39.1002").
std::string firmware_versions(const Fingerprint& f) {
    std::vector<std::string> v;
    for (const auto& h : f.hca_firmware) {
        const std::string fw = h.substr(h.find(' ') == std::string::npos ? 0 : h.find(' ') + 1);
        if (std::find(v.begin(), v.end(), fw) == v.end()) v.push_back(fw);
    }
    std::sort(v.begin(), v.end());
    return join_list(v);
}

std::string firmware_mine(const Fingerprint& f) {
    std::vector<std::string> hcas;
    for (const auto& h : f.hca_firmware) hcas.push_back(h.substr(0, h.find(' ')));
    return "HCA firmware " + firmware_versions(f) + " (" + join_list(hcas) + ")";
}

const FieldRule kRules[] = {
    {0, true, [](const Fingerprint& f) { return release(f.nccl); },
     [](const Fingerprint& f) { return nccl_with_path("NCCL", f.nccl, f.nccl_path); },
     [](const Fingerprint& f) { return f.nccl; }, kNcclFix},
    {0, false, [](const Fingerprint& f) { return f.nccl; },
     [](const Fingerprint& f) { return nccl_with_path("NCCL", f.nccl, f.nccl_path); },
     [](const Fingerprint& f) { return f.nccl; }, kPatchFix},
    {1, true, [](const Fingerprint& f) { return release(f.torch_nccl); },
     [](const Fingerprint& f) { return "torch's NCCL " + f.torch_nccl; },
     [](const Fingerprint& f) { return f.torch_nccl; },
     "install one torch build on every node: its NCCL talks to the others' (NVIDIA/nccl#286)"},
    {1, false, [](const Fingerprint& f) { return f.torch_nccl; },
     [](const Fingerprint& f) { return "torch's NCCL " + f.torch_nccl; },
     [](const Fingerprint& f) { return f.torch_nccl; }, kPatchFix},
    {2, true,
     [](const Fingerprint& f) { return f.net.known ? (f.net.none() ? std::string("-") : "=" + f.net.name) : ""; },
     plugin_mine, plugin_ref,
     "install the same NCCL network plugin on every node, or none (NCCL_NET_PLUGIN, LD_LIBRARY_PATH): ranks with and "
     "without it take different transports and hang (NVIDIA/nccl#1634)"},
    {2, false, [](const Fingerprint& f) { return f.net.known ? f.net.name + "/" + f.net.api : ""; }, plugin_mine,
     plugin_ref, "install one release of the plugin on every node"},
    {3, false, [](const Fingerprint& f) { return f.cuda_driver; },
     [](const Fingerprint& f) { return "CUDA driver " + f.cuda_driver; },
     [](const Fingerprint& f) { return f.cuda_driver; },
     "drivers are backward compatible, so this runs; update the nodes to one driver at the next maintenance"},
    {4, true, [](const Fingerprint& f) { return f.gpu_model; },
     [](const Fingerprint& f) { return "GPU model " + f.gpu_model; },
     [](const Fingerprint& f) { return f.gpu_model; },
     "ask Slurm for one GPU type (--gres=gpu:TYPE:N or --constraint): every step waits for the slowest GPU"},
    {5, false, [](const Fingerprint& f) { return f.gpus && !f.gpus_requested ? std::to_string(f.gpus) : std::string(); },
     [](const Fingerprint& f) { return std::to_string(f.gpus) + " GPUs"; },
     [](const Fingerprint& f) { return std::to_string(f.gpus); },
     "check nvidia-smi on the node: a GPU may have fallen off the bus (dmesg: Xid 79)"},
    {6, false, [](const Fingerprint& f) { return f.verbs_known ? "[" + join_list(f.verbs) + "]" : std::string(); },
     [](const Fingerprint& f) { return "verbs providers " + (f.verbs.empty() ? std::string("none") : join_list(f.verbs)); },
     [](const Fingerprint& f) { return f.verbs.empty() ? std::string("none") : join_list(f.verbs); },
     "install the same rdma-core providers on every node (Debian: ibverbs-providers)"},
    {7, true, weakest_link, [](const Fingerprint& f) { return "GPU PCIe links that reach " + weakest_link(f) + " at most"; },
     weakest_link,
     "check the slot, riser or retimer and the BIOS's PCIe speed setting (lspci -vv: LnkCap of the GPU and of the port "
     "above it): a GPU short of its link is a slow node"},
    {8, false, firmware_versions, firmware_mine, firmware_versions,
     "flash one firmware on every HCA (mlxfwmanager, or the vendor's bundle) at the next maintenance"},
    {9, false, [](const Fingerprint& f) { return f.verbs_library; },
     [](const Fingerprint& f) { return "libibverbs " + f.verbs_library; },
     [](const Fingerprint& f) { return f.verbs_library; },
     "install one rdma-core (or MLNX_OFED / DOCA) release on every node and in every image"},
    {10, false, [](const Fingerprint& f) { return f.image; },
     [](const Fingerprint& f) { return "image " + f.image + (f.image_name.empty() ? "" : " (" + f.image_name + ")"); },
     [](const Fingerprint& f) { return f.image + (f.image_name.empty() ? "" : " (" + f.image_name + ")"); },
     "run one container image (or one system image) on every node: the step's software is the image's"},
};

// NCCL_* variables the step set itself, compared one by one: the value on
// most nodes (unset being one), and each node that differs named with its
// variables. A warning: NCCL may run either way, but not as tuned.
void compare_nccl_env(const std::vector<Fingerprint>& nodes, std::vector<FingerprintFinding>& out) {
    std::vector<uint32_t> known;
    std::map<std::string, std::vector<std::string>> values;  // name -> each known node's value ("" unset)
    for (uint32_t i = 0; i < nodes.size(); ++i)
        if (nodes[i].nccl_env_known) known.push_back(i);
    if (known.size() < 2) return;
    auto value_of = [](const Fingerprint& f, const std::string& name) {
        for (const auto& kv : f.nccl_env)
            if (kv.compare(0, name.size() + 1, name + "=") == 0) return kv.substr(name.size() + 1);
        return std::string();
    };
    std::set<std::string> names;
    for (uint32_t i : known)
        for (const auto& kv : nodes[i].nccl_env) names.insert(kv.substr(0, kv.find('=')));
    std::map<uint32_t, std::vector<std::string>> odd;
    std::map<uint32_t, bool> tied;
    for (const auto& name : names) {
        std::map<std::string, std::vector<uint32_t>> by_value;
        for (uint32_t i : known) by_value[value_of(nodes[i], name)].push_back(i);
        if (by_value.size() < 2) continue;
        std::size_t most = 0;
        for (const auto& [v, who] : by_value) most = std::max(most, who.size());
        const bool tie = std::count_if(by_value.begin(), by_value.end(),
                                       [&](const auto& e) { return e.second.size() == most; }) > 1;
        std::string common;
        for (const auto& [v, who] : by_value)
            if (who.size() == most && common.empty()) common = v;
        for (const auto& [v, who] : by_value) {
            if (!tie && who.size() == most) continue;
            for (uint32_t i : who) {
                odd[i].push_back((v.empty() ? name + " unset" : name + "=" + v) +
                                 (tie ? "" : " (most nodes " + (common.empty() ? std::string("unset") : common) + ")"));
                tied[i] = tied[i] || tie;
            }
        }
    }
    for (const auto& [i, diffs] : odd) {
        std::string text;
        for (std::size_t k = 0; k < diffs.size() && k < 4; ++k) text += (k ? ", " : "") + diffs[k];
        if (diffs.size() > 4) text += " and " + std::to_string(diffs.size() - 4) + " more";
        out.push_back({i, false, tied[i],
                       std::string(kFingerprintTag) + "NCCL environment " + text +
                           (tied[i] ? ", and no value holds a majority" : "") +
                           "; fix: set NCCL_* alike on every node (the batch script, a module or the image), or unset "
                           "them where they differ"});
    }
}

}  // namespace

std::vector<FingerprintFinding> node_fingerprint_findings(const Fingerprint& f, uint32_t index) {
    std::vector<FingerprintFinding> out;
    // Fewer GPUs than asked for under a working driver: one fell off the
    // bus. No driver at all is another matter (a node never set up for
    // GPUs, or a test cluster's GPUs without one): a node of the step
    // without it where others have one already fails the GPU path, and
    // where none has one the check runs on CPUs; say so, but the GPUs
    // themselves did not fail.
    if (f.gpus_requested && f.gpus < f.gpus_requested) {
        if (f.cuda_driver.empty())
            out.push_back({index, false, false,
                           std::string(kFingerprintTag) + "the step asked for " + std::to_string(f.gpus_requested) +
                               " GPUs here, but the node has no CUDA driver (libcuda.so.1 not loaded); fix: install "
                               "the NVIDIA driver, or ask Slurm for no GPUs on it"});
        else
            out.push_back({index, true, false,
                           std::string(kFingerprintTag) + std::to_string(f.gpus) + " GPUs usable, the step asked for " +
                               std::to_string(f.gpus_requested) +
                               " here; fix: check nvidia-smi and dmesg (Xid 79: fallen off the bus), drain the node"});
    }
    if (f.verbs_known)
        for (const auto& p : f.verbs_needed)
            if (std::find(f.verbs.begin(), f.verbs.end(), p) == f.verbs.end())
                out.push_back({index, true, false,
                               std::string(kFingerprintTag) + "libibverbs has no " + p + " provider, which its ACTIVE RDMA ports " +
                                   "need: NCCL cannot open them; fix: install it (Debian: ibverbs-providers, RHEL: "
                                   "libibverbs)"});
    for (const auto& l : f.pcie)
        if (l.max_width && l.width && l.width < l.max_width)
            out.push_back({index, true, false,
                           std::string(kFingerprintTag) + "GPU " + l.gpu + "'s PCIe link trained at x" +
                               std::to_string(l.width) + ", while the GPU and its port take x" +
                               std::to_string(l.max_width) +
                               ": a slow node; fix: reseat the GPU (or its riser or cable) and check the slot (lspci "
                               "-vv -s " + l.gpu + ": LnkSta against LnkCap), then drain the node until it trains at x" +
                               std::to_string(l.max_width)});
    if (!f.torch_nccl.empty() && !f.nccl.empty() && !same_release(f.torch_nccl, f.nccl))
        out.push_back({index, false, false,
                       std::string(kFingerprintTag) + "torch's NCCL " + f.torch_nccl + " is not the NCCL this check loaded (" +
                           nccl_with_path("NCCL", f.nccl, f.nccl_path) +
                           "): the check did not test the NCCL training will use (verl-project/verl#6621); fix: "
                           "MN_PREFLIGHT_LIBNCCL=torch's libnccl.so.2 (site-packages/nvidia/nccl/lib)"});
    return out;
}

std::vector<FingerprintFinding> compare_fingerprints(const std::vector<Fingerprint>& nodes) {
    std::vector<FingerprintFinding> out;
    for (uint32_t i = 0; i < nodes.size(); ++i)
        for (auto& f : node_fingerprint_findings(nodes[i], i)) out.push_back(std::move(f));
    std::vector<bool> named(nodes.size());
    int family = -1;
    for (const FieldRule& rule : kRules) {
        if (rule.family != family) named.assign(nodes.size(), false);
        family = rule.family;
        compare_field(nodes, rule, named, out);
    }
    compare_nccl_env(nodes, out);
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
    return out;
}

namespace {

// Closes a descriptor at the end of a scope.
struct FdCloser {
    int fd;
    ~FdCloser() {
        if (fd >= 0) close(fd);
    }
};

// The whole file from the start, or "" on any error.
std::string read_fd(int fd) {
    std::string out;
    char buf[4096];
    off_t at = 0;
    for (ssize_t n; (n = pread(fd, buf, sizeof buf, at)) > 0; at += n) out.append(buf, static_cast<std::size_t>(n));
    return out;
}

// `text` for `host`: the same fingerprint with that host, or "" when it
// does not decode.
std::string with_host(const std::string& text, const std::string& host) {
    auto got = decode_fingerprint(text);
    if (!got) return "";
    Fingerprint f = got.value();
    f.host = host;
    return encode_fingerprint(f);
}

}  // namespace

std::string shared_node_read(const std::string& dir, const std::string& key, const std::string& host,
                             const std::function<std::string()>& read) {
    struct stat ds {};
    const uid_t me = geteuid();
    // Only a directory of this user's that nobody else may write to: no
    // one else can leave a fingerprint of theirs (or a link) there.
    if (dir.empty() || key.empty() || key.find('/') != std::string::npos || lstat(dir.c_str(), &ds) != 0 ||
        !S_ISDIR(ds.st_mode) || ds.st_uid != me || (ds.st_mode & (S_IWGRP | S_IWOTH)))
        return read();
    FdCloser f{open((dir + "/" + key).c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)};
    struct stat fs {};
    if (f.fd < 0 || fstat(f.fd, &fs) != 0 || !S_ISREG(fs.st_mode) || fs.st_uid != me || flock(f.fd, LOCK_EX) != 0)
        return read();
    // Under the lock: what the first wrote, or this one reads and writes.
    // A line counts only whole, with its newline: a write cut short (a
    // full disk) leaves none, and the next one reads for itself.
    std::string had = read_fd(f.fd);
    if (!had.empty() && had.back() == '\n') {
        had.pop_back();
        if (std::string got = with_host(had, host); !got.empty()) return got;
    }
    const std::string mine = read();
    const std::string line = mine + "\n";
    if (ftruncate(f.fd, 0) == 0) {
        const ssize_t n = pwrite(f.fd, line.data(), line.size(), 0);
        (void)n;  // cut short, it has no newline: the next one reads for itself
    }
    return mine;  // the lock ends with the descriptor
}

}  // namespace mn
