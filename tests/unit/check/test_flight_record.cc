// SPDX-License-Identifier: Apache-2.0
// The Flight Recorder's dumps (lib/check/flight_record), as torch 2.11
// wrote them on the device tool's H100 (NCCL 2.28.9, the watch's loop of
// 1 MiB all-reduces on two ranks): rank 0's asked for through its pipe
// while both ran, and while rank 1 was stopped (its entries cut and
// re-pickled by Python's pickler, a second writer).
#include "lib/check/flight_record.h"
#include "tests/unit/unit.h"

#include <cstdlib>

using namespace mn;

namespace {

std::string fixture(const char* name) {
    const char* src = std::getenv("MN_SRCDIR");
    if (!src) fail_msg("MN_SRCDIR is not set (make check sets it)");
    const std::string bytes = file_text(std::string(src) + "/tests/fixtures/flight_record/" + name);
    if (bytes.empty()) fail_msg("no fixture %s", name);
    return bytes;
}

}  // namespace

// Both ranks running: every entry completed, rank 0 nine collectives
// behind what it enqueued (NCCL runs them in order on the stream).
static void a_healthy_dump(void**) {
    auto s = read_flight_record(fixture("healthy_rank0.pickle"));
    if (!s) fail_msg("%s", s.problem().text().c_str());
    assert_str(s->version, "2.10");
    assert_str(s->comm_lib, "2.28.9");
    assert_int_equal(s->entries, 328);
    assert_int_equal(s->groups.size(), 1);
    const FlightGroup& g = s->groups[0];
    assert_str(g.id, "0");
    assert_str(g.desc, "default_pg");
    assert_int_equal(g.enqueued, 328);
    assert_int_equal(g.completed, 319);
    assert_int_equal(g.started, -1);  // no start events without timing
    assert_int_equal(g.waiting_seq, -1);
    assert_str(flight_words(*s)[0], "default_pg: completed #319, enqueued to #328");
}

// Rank 1 stopped: rank 0 completed #1289 and waits in #1290, with 510
// more enqueued behind it.
static void a_dump_while_a_peer_is_stopped(void**) {
    auto s = read_flight_record(fixture("waiting_rank0.pickle"));
    if (!s) fail_msg("%s", s.problem().text().c_str());
    const FlightGroup& g = s->groups.at(0);
    assert_int_equal(g.completed, 1289);
    assert_int_equal(g.enqueued, 1800);
    assert_int_equal(g.waiting_seq, 1290);
    assert_str(g.waiting_op, "nccl:all_reduce");
    assert_str(g.waiting_state, "scheduled");
    assert_str(g.waiting_input, "Float [262144]");
    assert_str(flight_words(*s)[0],
               "default_pg: completed #1289, enqueued to #1800; waits in nccl:all_reduce #1290 (Float [262144], scheduled)");
    // Its last calls, oldest first, for the comparison across ranks (the
    // cut dump's last entry, #1801, is marked completed).
    assert_int_equal(g.recent.size(), kRecentCalls);
    assert_int_equal(g.recent.front().seq, 1291);
    assert_int_equal(g.recent[6].seq, 1800);
    assert_str(g.recent[6].op, "nccl:all_reduce");
    assert_str(g.recent[6].input, "Float [262144]");
    assert_str(g.recent[6].state, "scheduled");
    assert_int_equal(g.recent.back().seq, 1801);
}

// What is not a dump, or one cut short, or one made to hurt the reader, is
// refused with the dump named.
static void what_is_not_a_dump(void**) {
    const std::string good = fixture("healthy_rank0.pickle");
    for (const std::string& bad : {std::string(), std::string("not a pickle"), good.substr(0, good.size() / 2),
                                   good.substr(0, good.size() - 1), std::string("\x80\x02}.", 4),  // no pg_status
                                   std::string("\x80\x02]q\x00h\x00" "a.", 8),                    // a list in itself
                                   std::string("\x80\x02h\x07.", 5),                              // a memo never put
                                   std::string("\x80\x02" "c" "os\nsystem\n.", 14)}) {            // GLOBAL: code
        auto s = read_flight_record(bad);
        assert_false(s.ok());
        assert_contains(s.problem().text(), "Flight Recorder dump: ");
    }
    // Nesting without end (a tuple in a tuple, 100,000 times) is refused,
    // not followed.
    std::string deep = "\x80\x02)";
    for (int i = 0; i < 100000; ++i) deep += "\x85";
    deep += ".";
    auto s = read_flight_record(deep);
    assert_false(s.ok());
    assert_contains(s.problem().text(), "nested deeper");
    // A container placed in another and filled after (how a cycle would
    // form) is refused.
    auto c = read_flight_record(std::string("\x80\x02]q\x00]q\x01h\x01" "ah\x01h\x00" "a.", 17));
    assert_false(c.ok());
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_healthy_dump),
        cmocka_unit_test(a_dump_while_a_peer_is_stopped),
        cmocka_unit_test(what_is_not_a_dump),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
