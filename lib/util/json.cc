// SPDX-License-Identifier: Apache-2.0
#include "lib/util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mn {

std::string json_text(const std::string& bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (unsigned char c : bytes) {
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            out += static_cast<char>(0xC0 | c >> 6);
            out += static_cast<char>(0x80 | (c & 0x3F));
        }
    }
    return out;
}

std::string json_text_bytes(const std::string& utf8) {
    std::string out;
    out.reserve(utf8.size());
    for (std::size_t i = 0; i < utf8.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(utf8[i]);
        if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size()) {
            out += static_cast<char>((c & 0x03) << 6 | (static_cast<unsigned char>(utf8[++i]) & 0x3F));
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

Json json_texts(const std::vector<std::string>& texts) {
    Json list = Json::array();
    for (const auto& t : texts) list.push_back(json_text(t));
    return list;
}

Json json_number(double v) {
    if (!std::isfinite(v)) return nullptr;
    if (v == std::floor(v) && std::fabs(v) < 1e15) return static_cast<int64_t>(v);
    return v;  // nlohmann writes the shortest text that reads back the same
}

Json json_rounded(double v, int decimals) {
    if (!std::isfinite(v)) return nullptr;
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return std::strtod(buf, nullptr);
}

std::string json_line(const Json& j) {
    // Strings come through json_text(), so they are UTF-8; should one not
    // be, a replacement character beats an exception.
    return j.dump(-1, ' ', true, Json::error_handler_t::replace) + "\n";
}

}  // namespace mn
