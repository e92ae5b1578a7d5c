// SPDX-License-Identifier: Apache-2.0
// An RDMA port's counter files as mn-preflight watch reads them, look after
// look (outside input: sysfs as a driver writes it, or a container's).
// The input: one look a line, each "STATE|WAITS|RCV|TIMEOUTS|ERRORS" with
// the files' texts (STATE as sysfs writes it, "4: ACTIVE"; WAITS "1" when
// the ranks hold in a collective). Properties: a counter reads as a whole
// number below 2^32-1 or as nothing; a port is never named before the
// window, nor while ACTIVE unless the ranks wait and it took in nothing
// with kSilentTimeouts time-outs or link errors over the window.
#include "lib/check/link_watch.h"
#include "lib/fabric/fabric.h"
#include "lib/util/text.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 8192) return 0;
    const std::string text(reinterpret_cast<const char*>(data), size);
    mn::PortWatch w(5);
    double now = 0;
    for (const std::string& line : mn::split_list(text, '\n')) {
        const auto f = mn::split_list(line, '|');
        if (f.size() != 5) continue;
        mn::PortReading p;
        p.name = "mlx5_0:1";
        p.state = mn::parse_state(f[0]);
        p.rcv_packets = mn::port_counter(f[2]);
        p.ack_timeouts = mn::port_counter(f[3]);
        p.link_errors = mn::port_counter(f[4]);
        for (const auto& c : {p.rcv_packets, p.ack_timeouts, p.link_errors})
            FUZZ_CHECK(!c || *c != 0xffffffffULL, "a saturated counter read as a number");
        const bool waits = f[1] == "1";
        const auto named = w.look(now, {p}, waits);
        if (named) {
            FUZZ_CHECK(named->seconds >= 5 && now >= 5, "named after %.1f s at %.1f", named->seconds, now);
            if (named->fault != mn::PortFault::NotActive) {
                FUZZ_CHECK(p.state == "ACTIVE" && waits, "an ACTIVE port named while the ranks did not wait");
                FUZZ_CHECK(p.rcv_packets.has_value(), "named silent without its packets read");
                FUZZ_CHECK(named->ack_timeouts >= mn::kSilentTimeouts || named->link_errors >= mn::kSilentTimeouts,
                           "named with %llu time-outs and %llu errors", (unsigned long long)named->ack_timeouts,
                           (unsigned long long)named->link_errors);
            } else {
                FUZZ_CHECK(!p.state.empty() && p.state != "ACTIVE", "named down while %s", p.state.c_str());
            }
            FUZZ_CHECK(!mn::port_stall_words(*named, "here").empty(), "no words");
        }
        now += 1.5;
    }
    return 0;
}
