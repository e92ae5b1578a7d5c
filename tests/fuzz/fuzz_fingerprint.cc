// SPDX-License-Identifier: Apache-2.0
// A node's fingerprint as another rank sends it (decode_fingerprint), the
// comparison over several of them (compare_fingerprints), and the parsers
// of what a node reads about itself (parse_version, net_plugin_from_log).
// Properties: a decoded fingerprint encodes to one line that decodes to
// the same; every finding names a node of the input and starts with the
// fingerprint tag; nodes that are all alike differ in nothing.
#include <algorithm>

#include "lib/check/fingerprint.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 16384) return 0;
    const auto lines = fuzz::fields(data, size, '\n', 8);
    std::vector<mn::Fingerprint> nodes;
    for (const auto& line : lines) {
        const auto f = mn::decode_fingerprint(line);
        if (!f) {
            FUZZ_CHECK(f.problem().what.find("fingerprint") != std::string::npos, "problem '%s'", f.problem().what.c_str());
            continue;
        }
        const std::string enc = mn::encode_fingerprint(*f);
        FUZZ_CHECK(enc.find('\n') == std::string::npos, "a newline in '%s'", enc.c_str());
        const auto again = mn::decode_fingerprint(enc);
        FUZZ_CHECK(again.ok(), "own line refused: %s", enc.c_str());
        FUZZ_CHECK(mn::encode_fingerprint(*again) == enc, "round trip of '%s'", enc.c_str());
        nodes.push_back(*again);
    }
    for (const auto& f : mn::compare_fingerprints(nodes)) {
        FUZZ_CHECK(f.node < nodes.size(), "finding for node %u of %zu", f.node, nodes.size());
        FUZZ_CHECK(f.text.rfind(mn::kFingerprintTag, 0) == 0, "text '%s'", f.text.c_str());
    }
    if (!nodes.empty()) {
        const std::vector<mn::Fingerprint> same(3, nodes.front());
        const auto f = mn::compare_fingerprints(same);
        FUZZ_CHECK(f.size() == 3 * mn::node_fingerprint_findings(nodes.front()).size(), "alike nodes differ");
    }
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto v = mn::parse_version(lines.front());
    if (v) FUZZ_CHECK(v->major >= 0 && v->minor >= 0 && v->patch >= -1, "version of '%s'", lines.front().c_str());
    const auto p = mn::net_plugin_from_log(text);
    FUZZ_CHECK(p.known || (p.name.empty() && p.path.empty()), "a plugin named but not known");
    return 0;
}
