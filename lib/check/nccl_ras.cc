// SPDX-License-Identifier: Apache-2.0
#include "lib/check/nccl_ras.h"

#include <sstream>

namespace mn {

std::string ras_address(uint32_t job, uint32_t step) {
    // FNV-1a of the two numbers: neighbouring jobs land far apart.
    uint32_t h = 2166136261u;
    for (uint32_t v : {job, step})
        for (int i = 0; i < 4; ++i) {
            h ^= (v >> (8 * i)) & 0xffu;
            h *= 16777619u;
        }
    const unsigned a = 1 + h % 254, b = (h >> 8) & 0xffu, c = 1 + (h >> 16) % 254;  // never 127.0.0.x
    return "127." + std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c) + ":28028";
}

namespace {

std::string trimmed(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

bool underline(const std::string& s) { return !s.empty() && s.find_first_not_of('=') == std::string::npos; }

}  // namespace

RasSummary summarize_ras(const std::string& reply) {
    RasSummary out;
    std::vector<std::string> lines;
    std::istringstream in(reply.substr(0, 1 << 20));
    for (std::string l; std::getline(in, l) && lines.size() < 20000;) lines.push_back(trimmed(l));
    auto add = [&](std::string l) {
        if (out.lines.size() >= 16) return;
        if (l.size() > 300) l = l.substr(0, 297) + "...";
        out.lines.push_back(l);
    };
    std::string section;  // "Errors", "Warnings", "table" or ""
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        if (out.version.empty() && l.rfind("NCCL version ", 0) == 0) {
            out.version = l.substr(0, 120);
            continue;
        }
        const bool header = i + 1 < lines.size() && underline(lines[i + 1]) && !l.empty() && !underline(l);
        if (header) {
            section = (l == "Errors" || l == "Warnings") ? l : "";
            ++i;  // its underline
            continue;
        }
        if (l.rfind("Group ", 0) == 0 && l.find("Status") != std::string::npos) {
            section = "table";
            continue;
        }
        if (l.empty()) {
            if (section == "table") section = "";
            continue;
        }
        if (l == "No communicator data collected!") {
            add(l);
            continue;
        }
        if (section == "table") {
            if (l[0] == '#') continue;  // the header's second line
            // A communicator's row: its status and errors are its last words.
            std::istringstream w(l);
            std::vector<std::string> words;
            for (std::string x; w >> x && words.size() < 64;) words.push_back(x);
            if (words.size() < 3) continue;
            const std::string& status = words[words.size() - 2];
            const std::string& errors = words.back();
            if (status != "RUNNING" || errors != "OK") {
                out.troubled = true;
                add("communicators " + l);
            }
        } else if (section == "Errors" || section == "Warnings") {
            out.troubled = true;
            add(section + ": " + l);
        }
    }
    return out;
}

}  // namespace mn
