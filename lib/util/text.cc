// SPDX-License-Identifier: Apache-2.0
#include "lib/util/text.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace mn {

std::string num(double v, int precision) {
    char buf[48];
    if (precision < 0) std::snprintf(buf, sizeof buf, "%g", v);
    else std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf;
}

std::string pad(std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s + " ";
}

std::vector<std::string> split_list(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start < s.size()) {
        std::size_t end = s.find(sep, start);
        if (end == std::string::npos) end = s.size();
        if (end > start) out.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

std::optional<uint64_t> whole_number(const std::string& s) {
    if (s.empty() || s.size() > 20) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        const uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (UINT64_MAX - d) / 10) return std::nullopt;
        v = v * 10 + d;
    }
    return v;
}

std::string join_list(const std::vector<std::string>& v, char sep) {
    std::string out;
    for (const auto& x : v) {
        if (!out.empty()) out += sep;
        out += x;
    }
    return out;
}

}  // namespace mn

namespace mn {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string host_name() {
    char buf[256] = {0};
    return gethostname(buf, sizeof buf - 1) == 0 ? buf : "?";
}

std::string env_or(const char* name, const std::string& dflt) {
    const char* v = std::getenv(name);
    return v && *v ? v : dflt;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string to_hex(const void* data, std::size_t n) {
    static const char kDigits[] = "0123456789abcdef";
    const auto* b = static_cast<const unsigned char*>(data);
    std::string s;
    s.reserve(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        s.push_back(kDigits[b[i] >> 4]);
        s.push_back(kDigits[b[i] & 15]);
    }
    return s;
}

}  // namespace mn
