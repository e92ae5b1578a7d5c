// SPDX-License-Identifier: Apache-2.0
// /proc/net/tcp as mn-preflight watch reads it (outside input: the kernel's
// format may differ, and a container may show another /proc). Properties:
// a text parses or is refused, never crashes; every address read is a
// dotted quad; the link rule never names a link before its window, and
// names this node's own link only behind an interface that is down.
#include "lib/check/link_watch.h"
#include "tests/fuzz/fuzz.h"

namespace {

bool dotted_quad(const std::string& a) {
    int dots = 0, digits = 0, value = 0;
    for (char c : a) {
        if (c == '.') {
            if (!digits) return false;
            ++dots;
            digits = value = 0;
        } else if (c >= '0' && c <= '9') {
            value = value * 10 + (c - '0');
            if (++digits > 3 || value > 255) return false;
        } else {
            return false;
        }
    }
    return dots == 3 && digits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 16384) return 0;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const auto parsed = mn::parse_proc_net_tcp(text);
    if (!parsed) {
        FUZZ_CHECK(parsed.problem().text().rfind("/proc/net/tcp line ", 0) == 0, "refusal without its line");
        return 0;
    }
    for (const auto& s : parsed.value())
        FUZZ_CHECK(dotted_quad(s.local) && dotted_quad(s.remote), "address %s -> %s", s.local.c_str(), s.remote.c_str());
    // Every local address of the text on an interface, the first one down.
    std::vector<mn::LocalInterface> ifs;
    for (const auto& s : parsed.value()) {
        mn::LocalInterface i;
        i.name = "if" + std::to_string(ifs.size());
        i.addr = s.local;
        i.up = !ifs.empty();
        ifs.push_back(i);
        if (ifs.size() == 4) break;
    }
    mn::LinkWatch w(5);
    for (double t = 0; t < 12; t += 1.5) {
        const auto named = w.look(t, parsed.value(), ifs);
        if (!named) continue;
        FUZZ_CHECK(named->seconds >= 5 && t >= 5, "named after %.1f s at %.1f", named->seconds, t);
        FUZZ_CHECK(!named->own || (!ifs.empty() && named->ifname == ifs[0].name), "own link behind an interface up");
        FUZZ_CHECK(named->connections > 0 && named->unacked > 0, "named with nothing waiting");
        FUZZ_CHECK(named->own || named->retransmits >= mn::kDownRetransmits, "a peer named after %u retransmissions",
                   named->retransmits);
        FUZZ_CHECK(!mn::link_stall_words(*named, "", "here").empty(), "no words");
    }
    return 0;
}
