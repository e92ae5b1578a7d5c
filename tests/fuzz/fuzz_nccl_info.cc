// SPDX-License-Identifier: Apache-2.0
// NCCL's INFO log as mn-preflight reads it for the transport
// (nccl_transports): each transport it returns is the kind/name after
// " via " on a Channel line of the log, the list is sorted and distinct,
// and every Channel line's transport is in it.
#include <algorithm>
#include <cctype>

#include "tests/fuzz/fuzz.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 16384) return 0;
    const std::string log(reinterpret_cast<const char*>(data), size);
    const auto t = mn::nccl_transports(log);
    FUZZ_CHECK(std::is_sorted(t.begin(), t.end()) && std::adjacent_find(t.begin(), t.end()) == t.end(),
               "not sorted and distinct");
    for (const auto& k : t) {
        FUZZ_CHECK(!k.empty() && k.find('\n') == std::string::npos && !std::isspace(static_cast<unsigned char>(k.back())),
                   "transport '%s'", k.c_str());
        FUZZ_CHECK(std::count(k.begin(), k.end(), '/') <= 1, "more than kind/name: '%s'", k.c_str());
        FUZZ_CHECK(log.find(" via " + k) != std::string::npos, "'%s' is not in the log", k.c_str());
    }
    for (const auto& line : mn::split_list(log, '\n')) {
        const std::size_t via = line.find(" via ");
        if (via == std::string::npos || line.find("Channel") == std::string::npos) continue;
        std::string rest = line.substr(via + 5);
        bool found = false;
        for (const auto& k : t) found |= rest.rfind(k, 0) == 0;
        const bool blank = std::all_of(rest.begin(), rest.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
        FUZZ_CHECK(found || blank, "the transport of '%s' is missing", line.c_str());
    }
    return 0;
}
