// SPDX-License-Identifier: Apache-2.0
// SLURM_STEP_NODELIST: Hostlist::parse. A list that parses expands to plain
// names; those names, compressed again into ranges, expand to the same list.
#include <cctype>

#include "tests/fuzz/fuzz.h"
#include "lib/plan/hostlist.h"

namespace {

// Slurm's way back: runs of names that differ only in a trailing number of
// one width become prefix[lo-hi].
std::string compress(const std::vector<std::string>& hosts) {
    std::string out;
    std::size_t i = 0;
    auto split = [](const std::string& h, std::string& prefix, std::string& digits) {
        std::size_t k = h.size();
        while (k > 0 && std::isdigit(static_cast<unsigned char>(h[k - 1]))) --k;
        prefix = h.substr(0, k);
        digits = h.substr(k);
        return !digits.empty() && digits.size() <= 9;
    };
    while (i < hosts.size()) {
        std::string prefix, digits;
        std::size_t j = i + 1;
        if (split(hosts[i], prefix, digits)) {
            unsigned long v = std::stoul(digits);
            while (j < hosts.size()) {
                std::string p2, d2;
                if (!split(hosts[j], p2, d2) || p2 != prefix || d2.size() != digits.size() ||
                    std::stoul(d2) != v + (j - i))
                    break;
                ++j;
            }
            out += (out.empty() ? "" : ",") + prefix + "[" + digits +
                   (j - i > 1 ? "-" + hosts[j - 1].substr(prefix.size()) : "") + "]";
        } else {
            out += (out.empty() ? "" : ",") + hosts[i];
        }
        i = j;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 512) return 0;
    const std::string expr(reinterpret_cast<const char*>(data), size);
    auto list = mn::Hostlist::parse(expr);
    if (!list) {
        FUZZ_CHECK(!list.problem().what.empty() && list.problem().what.find("host list") == 0,
                   "a refusal names the host list: %s", list.problem().what.c_str());
        return 0;
    }
    FUZZ_CHECK(list->size() > 0 && list->size() <= mn::Hostlist::kMaxHosts, "size %zu", list->size());
    if (list->size() > 4096) return 0;  // the round trips below are for lists a test can afford
    for (const auto& h : list->hosts()) {
        FUZZ_CHECK(!h.empty(), "an empty host name from '%s'", expr.c_str());
        for (char c : h)
            FUZZ_CHECK(c != ',' && c != '[' && c != ']' && !std::isspace(static_cast<unsigned char>(c)),
                       "host '%s' from '%s' holds a separator", h.c_str(), expr.c_str());
    }
    // The expanded names, written plainly, are a host list of themselves.
    std::string plain;
    for (const auto& h : list->hosts()) plain += (plain.empty() ? "" : ",") + h;
    auto again = mn::Hostlist::parse(plain);
    FUZZ_CHECK(again && again->hosts() == list->hosts(), "'%s' -> '%s' does not parse back", expr.c_str(),
               plain.c_str());
    // Compressed into ranges, they expand to the same list in the same order.
    const std::string packed = compress(list->hosts());
    auto unpacked = mn::Hostlist::parse(packed);
    FUZZ_CHECK(unpacked && unpacked->hosts() == list->hosts(), "'%s' compressed to '%s' expands differently%s",
               expr.c_str(), packed.c_str(), unpacked ? "" : (": " + unpacked.problem().what).c_str());
    return 0;
}
