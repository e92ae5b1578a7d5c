// SPDX-License-Identifier: Apache-2.0
#include "lib/check/exclude_list.h"

#include <cctype>
#include <map>

#include "lib/plan/hostlist.h"
#include "lib/util/json.h"

namespace mn {
namespace {

// The step host a verdict row's label stands for; "" when none.
std::string host_of(const std::string& label, const std::vector<std::string>& hosts) {
    for (const auto& h : hosts)
        if (label == h) return h;
    const std::size_t emu = label.rfind("-emu");
    if (emu == std::string::npos || emu + 4 >= label.size()) return "";
    for (std::size_t i = emu + 4; i < label.size(); ++i)
        if (!std::isdigit(static_cast<unsigned char>(label[i]))) return "";
    const std::string base = label.substr(0, emu);
    for (const auto& h : hosts)
        if (base == h) return h;
    return "";
}

bool healthy(std::string verdict) {
    while (!verdict.empty() && std::isspace(static_cast<unsigned char>(verdict.back()))) verdict.pop_back();
    return verdict == "ok" || verdict.rfind("waited on ", 0) == 0;
}

// label -> healthy, from the "nodes" array of mn-preflight --json: the
// first line of the output that is such an object (progress lines may
// come before it).
void json_rows(const std::string& out, std::vector<std::pair<std::string, bool>>& rows, bool* blameless) {
    for (std::size_t at = 0; at < out.size();) {
        const std::size_t nl = out.find('\n', at);
        const std::string line = out.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        at = nl == std::string::npos ? out.size() : nl + 1;
        if (line.empty() || line[0] != '{') continue;
        const Json j = Json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) continue;
        if (j.contains("disturbed") || j.contains("skew")) *blameless = true;
        for (const auto& n : j["nodes"]) {
            if (!n.is_object() || !n.contains("host") || !n["host"].is_string() || !n.contains("verdict") ||
                !n["verdict"].is_string())
                continue;
            rows.push_back({json_text_bytes(n["host"].get<std::string>()),
                            healthy(json_text_bytes(n["verdict"].get<std::string>()))});
        }
        return;
    }
}

// Table rows: "HOST  RANKS GPUS FABRIC  PAIR-BUSBW  VERDICT", the verdict
// ending the line.
void table_rows(const std::string& out, const std::vector<std::string>& hosts,
                std::vector<std::pair<std::string, bool>>& rows) {
    std::size_t pos = 0;
    bool in_table = false;
    while (pos < out.size()) {
        std::size_t nl = out.find('\n', pos);
        const std::string line = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? out.size() : nl + 1;
        if (line.rfind("host ", 0) == 0 && line.find(" verdict") != std::string::npos) {
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        const std::string label = line.substr(0, line.find(' '));
        if (host_of(label, hosts).empty()) {
            in_table = false;  // the rows end where the summary lines start
            continue;
        }
        // Both healthy verdicts are whole words after the last column.
        std::string rest = line;
        while (!rest.empty() && rest.back() == ' ') rest.pop_back();
        const bool ok = (rest.size() > 3 && rest.compare(rest.size() - 3, 3, " ok") == 0) ||
                        rest.find(" waited on ") != std::string::npos;
        rows.push_back({label, ok});
    }
}

}  // namespace

ExcludeList nodes_to_exclude(const std::string& check_output, const std::vector<std::string>& step_hosts) {
    std::vector<std::pair<std::string, bool>> rows;
    bool blameless = false;
    json_rows(check_output, rows, &blameless);
    if (rows.empty()) {
        table_rows(check_output, step_hosts, rows);
        // The verdict's last line: "FAIL (5.1 s, time-out, disturbed by strangers: no node is to blame)".
        blameless = check_output.find(": no node is to blame)\n") != std::string::npos;
    }
    ExcludeList r;
    std::map<std::string, bool> bad, seen;
    for (const auto& [label, ok] : rows) {
        const std::string h = host_of(label, step_hosts);
        if (h.empty()) continue;
        seen[h] = true;
        if (!ok) bad[h] = true;
    }
    r.known = !seen.empty();
    if (!r.known) return r;
    for (const auto& h : step_hosts)
        if (bad.count(h) || (!seen.count(h) && !blameless)) r.nodes.push_back(h);
    return r;
}

Outcome<std::string> add_to_exclude(const std::string& existing, const std::string& node) {
    std::string text = existing;
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
    std::vector<std::string> nodes;
    if (!text.empty()) {
        auto there = Hostlist::parse(text);
        if (!there || text.find('\n') != std::string::npos)
            return Problem{"it holds '" + text.substr(0, 80) + "', not a Slurm host list",
                           "remove it, or name another file"};
        nodes = there->hosts();
    }
    nodes.push_back(node);
    return Hostlist::compress(nodes) + "\n";
}

}  // namespace mn
