// SPDX-License-Identifier: Apache-2.0
// Where the ranks stand, compared (lib/check/rank_positions): who holds
// the step when no process is stopped, dead or cut off. The waiting rank
// is the H100's real dump (tests/fixtures/flight_record/waiting_rank0.pickle:
// rank 0 waits in all-reduce #1290 with 510 more enqueued behind it); the
// others are built beside it.
#include "lib/check/rank_positions.h"
#include "lib/check/gpu_events.h"
#include "tests/unit/unit.h"

#include <cstdlib>

using namespace mn;

namespace {

FlightSummary real_waiting() {
    const char* src = std::getenv("MN_SRCDIR");
    if (!src) fail_msg("MN_SRCDIR is not set (make check sets it)");
    auto s = read_flight_record(file_text(std::string(src) + "/tests/fixtures/flight_record/waiting_rank0.pickle"));
    if (!s) fail_msg("%s", s.problem().text().c_str());
    return *s;
}

FlightGroup group(int64_t enqueued, int64_t completed, int64_t waiting, const std::string& state = "scheduled",
                  const std::string& input = "Float [262144]") {
    FlightGroup g;
    g.id = "0";
    g.desc = "default_pg";
    g.enqueued = enqueued;
    g.completed = completed;
    g.waiting_seq = waiting;
    if (waiting >= 0) {
        g.waiting_op = "nccl:all_reduce";
        g.waiting_state = state;
        g.waiting_input = input;
    }
    return g;
}

RankPosition rank(const std::string& r, const std::string& host, FlightGroup g, double cpu = 1.0) {
    RankPosition p;
    p.rank = r;
    p.host = host;
    p.local_rank = "0";
    p.pid = 1000 + std::atoi(r.c_str());
    p.comm = "python3";
    p.gpu = "0";
    p.still = 31;
    p.cpu = cpu;
    p.flight.groups = {g};
    return p;
}

}  // namespace

// Rank 1 never calls #1290 and sleeps: named, an application desync, its
// last collective and its idle CPU in the evidence; the waiting rank (the
// real dump) is not named, nor is any node blamed.
static void a_rank_that_never_calls(void**) {
    RankPosition r0 = rank("0", "n0", {});
    r0.flight = real_waiting();
    auto v = compare_positions({r0, rank("1", "n1", group(1289, 1289, -1), 0.004), rank("2", "n2", group(1800, 1289, 1290))});
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "application desync");
    assert_str(v[0].rank, "1");
    assert_str(v[0].host, "n1");
    assert_int_equal(v[0].pid, 1001);
    assert_contains(v[0].detail, "has not called collective #1290 of default_pg (nccl:all_reduce (Float [262144])), in which ranks 0, 2 wait: its last is #1289");
    assert_contains(v[0].evidence[0], "Flight Recorder: default_pg: completed #1289, enqueued to #1289; nothing waiting");
    assert_contains(v[0].evidence[1], "cpu 0.4 % of a core over the 31 s");
    assert_false(v[0].host_evidence);
}

// The same rank busy in its own code (rank 0 alone writing a checkpoint
// while the others wait in the next collective): not named, until it has
// been so for busy_after.
static void a_busy_rank_is_named_only_late(void**) {
    std::vector<RankPosition> ps = {rank("0", "n0", group(41, 41, -1), 0.98), rank("1", "n1", group(42, 41, 42)),
                                    rank("2", "n2", group(42, 41, 42))};
    assert_true(compare_positions(ps).empty());
    ps[0].still = 601;
    auto v = compare_positions(ps);
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "busy outside collectives");
    assert_str(v[0].rank, "0");
    assert_contains(v[0].detail, "for 601 s, in which ranks 1, 2 wait");
}

// Every rank at the same place: nothing waiting (a checkpoint every rank
// writes, an evaluation), or all in the same collective (a peer beyond
// the step: a link the link rule names, or slowness): nobody named.
static void a_shared_pause_names_nobody(void**) {
    assert_true(compare_positions({rank("0", "n0", group(7, 7, -1), 0), rank("1", "n1", group(7, 7, -1), 0)}).empty());
    assert_true(compare_positions({rank("0", "n0", group(9, 7, 8)), rank("1", "n1", group(9, 7, 8))}).empty());
    // One position alone says nothing.
    assert_true(compare_positions({rank("1", "n1", group(7, 7, -1), 0)}).empty());
    assert_true(compare_positions({}).empty());
}

// Rank 2 calls a 4-byte all-reduce where ranks 0, 1 and 3 call the 1 MiB
// one: the minority is named; with timing, a rank whose collective was
// scheduled but never started while the others started theirs: GPU stuck.
static void another_call_and_a_stuck_gpu(void**) {
    auto v = compare_positions({rank("0", "n0", group(9, 7, 8)), rank("1", "n0", group(9, 7, 8)),
                                rank("2", "n1", group(9, 7, 8, "scheduled", "Float [1]")), rank("3", "n1", group(9, 7, 8))});
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "application desync");
    assert_str(v[0].rank, "2");
    assert_contains(v[0].detail, "calls nccl:all_reduce (Float [1]) as collective #8 of default_pg, where ranks 0, 1, 3 call nccl:all_reduce (Float [262144])");

    v = compare_positions({rank("0", "n0", group(9, 7, 8, "started")), rank("1", "n1", group(9, 7, 8, "scheduled")),
                           rank("2", "n2", group(9, 7, 8, "started"))});
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "GPU stuck");
    assert_str(v[0].rank, "1");
    assert_contains(v[0].detail, "scheduled on its GPU and has not started for 31 s, while ranks 0, 2 started theirs");
    assert_contains(v[0].evidence[2], "CUDA_VISIBLE_DEVICES=0");
    // Rank 1 called the 4-byte one as #8 and it completed (its peer's
    // data let it): rank 0 waits on in the 1 MiB #8. Rank 1 is named by
    // what its entries say it called there.
    FlightGroup done = group(8, 8, -1);
    done.recent = {{7, "nccl:all_reduce", "Float [262144]", "completed"}, {8, "nccl:all_reduce", "Float [1]", "completed"}};
    FlightGroup waits = group(9, 7, 8, "started");
    waits.recent = {{8, "nccl:all_reduce", "Float [262144]", "started"}};
    v = compare_positions({rank("0", "n0", waits), rank("1", "n1", done, 0.001)});
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "application desync");
    assert_str(v[0].rank, "1");
    assert_contains(v[0].detail, "called nccl:all_reduce (Float [1]) as collective #8 of default_pg (completed), where rank 0 wait in nccl:all_reduce (Float [262144])");
    // The same call there, completed: that rank is past it, nobody named.
    done.recent.back().input = "Float [262144]";
    done.enqueued = done.completed = 9;
    assert_true(compare_positions({rank("0", "n0", waits), rank("1", "n1", done, 0.001)}).empty());

    // Without timing every one is "scheduled": nothing to tell them apart.
    assert_true(compare_positions({rank("0", "n0", group(9, 7, 8)), rank("1", "n1", group(9, 7, 8))}).empty());
}

// A GPU stuck is blamed on its node only where that node's GPUs said they
// are at fault (a hardware Xid, lib/check/gpu_events): two signals. The
// node's first task's watch carries them; another node's Xid, or the
// program's own Xid (never passed on as hardware), blames nobody.
static void a_stuck_gpu_with_a_hardware_xid(void**) {
    assert_true(xid_meaning(79).hardware);
    assert_true(xid_meaning(95).hardware);
    assert_false(xid_meaning(13).hardware);
    assert_false(xid_meaning(31).hardware);
    assert_false(xid_meaning(999999).hardware);
    const std::string xid = xid_words("0000:3b:00.0", 79, 1796574000);
    assert_str(xid, "Xid 79 on GPU 0000:3b:00.0 at 2026-12-06T16:20:00Z: the GPU has fallen off the bus (the GPU's own "
                    "fault: reset the GPU or drain the node)");

    RankPosition first = rank("2", "n1", group(9, 7, 8, "started"));
    first.gpu_events = {xid};
    auto v = compare_positions({rank("0", "n0", group(9, 7, 8, "started")), rank("1", "n1", group(9, 7, 8, "scheduled")),
                                first});
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "GPU stuck");
    assert_str(v[0].rank, "1");
    assert_true(v[0].host_evidence);
    assert_contains(v[0].detail, "and n1's GPUs reported a hardware fault (NVML)");
    assert_str(v[0].evidence.back(), "NVML: " + xid);

    // The Xid came from n2: n1 is not blamed for it.
    first.host = "n2";
    v = compare_positions({rank("0", "n0", group(9, 7, 8, "started")), rank("1", "n1", group(9, 7, 8, "scheduled")),
                           first});
    assert_int_equal(v.size(), 1);
    assert_false(v[0].host_evidence);
    // An application desync on a node with an Xid stays the program's.
    RankPosition idle = rank("1", "n1", group(7, 7, -1), 0.0);
    idle.gpu_events = {xid};
    v = compare_positions({rank("0", "n0", group(9, 7, 8, "started")), idle});
    assert_int_equal(v.size(), 1);
    assert_str(v[0].kind, "application desync");
    assert_false(v[0].host_evidence);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_rank_that_never_calls),
        cmocka_unit_test(a_busy_rank_is_named_only_late),
        cmocka_unit_test(a_shared_pause_names_nobody),
        cmocka_unit_test(another_call_and_a_stuck_gpu),
        cmocka_unit_test(a_stuck_gpu_with_a_hardware_xid),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
