// SPDX-License-Identifier: Apache-2.0
#include "lib/util/machine.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "lib/util/bounded_file.h"

namespace mn {

std::optional<std::string> parse_boot_id(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    // 8-4-4-4-12 hexadecimal digits.
    if (text.size() != 36) return std::nullopt;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    }
    return std::string(text);
}

std::optional<std::string> boot_id() {
    const auto text = read_bounded_text("/proc/sys/kernel/random/boot_id", 128);
    return text ? parse_boot_id(*text) : std::nullopt;
}

std::optional<CpuTimes> parse_schedstat(std::string_view text) {
    uint64_t ns[2] = {0, 0};
    const char* p = text.data();
    const char* end = p + text.size();
    for (uint64_t& v : ns) {
        while (p < end && *p == ' ') ++p;
        const auto [next, ec] = std::from_chars(p, end, v);
        if (ec != std::errc() || next == p) return std::nullopt;
        p = next;
    }
    return CpuTimes{ns[0] / 1e9, ns[1] / 1e9};
}

std::optional<CpuTimes> thread_cpu_times() {
    const auto text = read_bounded_text("/proc/thread-self/schedstat", 256);
    return text ? parse_schedstat(*text) : std::nullopt;
}

std::optional<double> cpu_wait_share(const std::optional<CpuTimes>& before, const std::optional<CpuTimes>& after,
                                     double wall) {
    if (!before || !after || !(wall > 0) || after->waited < before->waited) return std::nullopt;
    return std::clamp((after->waited - before->waited) / wall, 0.0, 1.0);
}

}  // namespace mn
