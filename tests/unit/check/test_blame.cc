// SPDX-License-Identifier: Apache-2.0
// Blame by evidence, on cases recorded from real runs.
#include "lib/check/blame.h"
#include "lib/check/preflight.h"
#include "tests/unit/unit.h"

using namespace mn;

namespace {

RankEvidence ev(uint32_t rank, uint32_t node, RankState s, const std::string& e = "") { return {rank, node, s, e}; }

}  // namespace

// 4 H200s, one task each on 4 nodes: another process held GPU 1's memory.
// Rank 1 knew at once; the others sat in NCCL's init waiting for it and
// never reported. Only node 1 is to blame; the others waited on it.
static void fault_beats_silent_waiters(void**) {
    const Blame b = assign_blame({ev(0, 0, RankState::Silent, "never finished the all-reduce (stuck or stopped)"),
                                  ev(1, 1, RankState::Fault, "GPU1 (0000:2A:00.0): CUDA error 2 (out of memory)"),
                                  ev(2, 2, RankState::Silent, "never finished the all-reduce (stuck or stopped)"),
                                  ev(3, 3, RankState::Silent, "never finished the all-reduce (stuck or stopped)")});
    assert_int_equal(b.faults.size(), 1);
    assert_int_equal(b.faults.count(1), 1);
    assert_str(b.faults.at(1).front(), "rank 1: GPU1 (0000:2A:00.0): CUDA error 2 (out of memory)");
    assert_false(b.timed_out);
    assert_int_equal(b.waited_on.size(), 3);
    for (uint32_t n : {0u, 2u, 3u}) {
        assert_int_equal(b.waited_on.at(n).size(), 1);
        assert_int_equal(*b.waited_on.at(n).begin(), 1);
    }
}

// Readiness: rank 2's set-up failed; rank 0 stopped the others.
static void readiness_failure_stops_the_rest(void**) {
    const Blame b = assign_blame({ev(0, 0, RankState::Stopped), ev(1, 1, RankState::Stopped),
                                  ev(2, 2, RankState::Fault, "set-up failed on purpose"), ev(3, 0, RankState::Stopped)});
    assert_int_equal(b.faults.size(), 1);
    assert_int_equal(b.faults.count(2), 1);
    assert_int_equal(b.waited_on.size(), 2);  // nodes 0 and 1
    assert_int_equal(*b.waited_on.at(0).begin(), 2);
    assert_true(b.notes.empty());  // stopped ranks said nothing
}

// CPU ring, rank 2 stopped with SIGSTOP mid-transfer: its neighbours'
// transfers timed out. The silent rank is the culprit (a time-out); the
// neighbours' errors are kept as notes.
static void silent_rank_beats_peer_errors(void**) {
    const Blame b = assign_blame(
        {ev(0, 0, RankState::PeerError, "ring from rank 2 to rank 1: time ran out after 0 of 22369624 bytes sent"),
         ev(1, 1, RankState::PeerError, "ring from rank 0 to rank 2: time ran out after 1048576 of 22369624 bytes sent"),
         ev(2, 2, RankState::Silent, "never finished the all-reduce (stuck or stopped)")});
    assert_true(b.timed_out);
    assert_true(b.culprit == RankState::Silent);
    assert_int_equal(b.silent.size(), 1);
    assert_int_equal(b.silent[0], 2);
    assert_int_equal(b.faults.size(), 1);
    assert_contains(b.faults.at(2).front(), "rank 2: never finished the all-reduce");
    assert_int_equal(b.notes.size(), 2);
    assert_int_equal(b.waited_on.size(), 2);
}

// Only transfer errors, everyone reported: nothing tells them apart, each
// is named with what it saw.
static void peer_errors_alone_name_each(void**) {
    const Blame b = assign_blame({ev(0, 0, RankState::PeerError, "ncclAllReduce: NCCL error 6 (remote process exited)"),
                                  ev(1, 1, RankState::PeerError, "ncclAllReduce: NCCL error 2 (unhandled system error)")});
    assert_int_equal(b.faults.size(), 2);
    assert_false(b.timed_out);
    assert_true(b.waited_on.empty());
    // Which evidence named them: the verdict counts a failed link as
    // disturbed where strangers held the data ports (helper/check/verdict.cc).
    assert_true(b.culprit == RankState::PeerError);
}

static void healthy_blames_nobody(void**) {
    const Blame b = assign_blame({ev(0, 0, RankState::Done), ev(1, 1, RankState::Done)});
    assert_true(b.culprit == RankState::Done);
    assert_true(b.faults.empty());
    assert_true(b.waited_on.empty());
    assert_false(b.timed_out);
}

// Two ranks on one node, one faulty: the node is a culprit, not a waiter.
static void culprit_node_never_waits(void**) {
    const Blame b = assign_blame({ev(0, 0, RankState::Stopped), ev(1, 1, RankState::Fault, "GPU0: CUDA error 999"),
                                  ev(2, 1, RankState::Stopped)});
    assert_int_equal(b.waited_on.size(), 1);
    assert_int_equal(b.waited_on.count(1), 0);
}

// The verdict: waiters say "waited on NODE", problems list culprits only,
// the JSON carries the same.
static void judge_shows_waiters_not_as_problems(void**) {
    PreflightReport r;
    r.nodes.resize(3);
    for (uint32_t i = 0; i < 3; ++i) {
        r.nodes[i].node = i;
        r.nodes[i].host = "node" + std::to_string(i);
        r.nodes[i].ranks = {i};
        r.nodes[i].sig.fabric = "socket";
        r.nodes[i].sig.mtu = 1500;
    }
    r.nodes[1].problems.push_back({VerdictKind::Fault, "rank 1: set-up failed"});
    r.nodes[0].waited_on = {"node1"};
    r.nodes[2].waited_on = {"node1"};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_str(r.nodes[0].verdict, "waited on node1");
    assert_str(r.nodes[1].verdict, "rank 1: set-up failed");
    assert_int_equal(r.problems.size(), 1);
    assert_str(r.problems[0], "node1: rank 1: set-up failed");
    const std::string t = report_table(r);
    assert_contains(t, "waited on node1");
    assert_contains(t, "problem: node1: rank 1: set-up failed");
    const std::string j = report_json(r);
    assert_contains(j, "\"verdict\":\"waited on node1\",\"waited_on\":[\"node1\"]");
    assert_contains(j, "\"verdict\":\"rank 1: set-up failed\",\"waited_on\":[]");
}

namespace {

PreflightReport four_nodes() {
    PreflightReport r;
    r.nodes.resize(4);
    for (uint32_t i = 0; i < 4; ++i) {
        r.nodes[i].node = i;
        r.nodes[i].host = "node" + std::to_string(i);
        r.nodes[i].ranks = {i};
        r.nodes[i].sig.fabric = "socket";
        r.nodes[i].sig.mtu = 1500;
    }
    r.coll.ran = r.coll.correct = true;
    return r;
}

PairResult pair(uint32_t a, uint32_t b, double gbps) {
    PairResult p;
    p.a = a;
    p.b = b;
    p.busbw_gbps = gbps;
    return p;
}

}  // namespace

// Each blame's kind comes from where it was made, whatever its words say:
// a fault worded like a slow link stays a fault.
static void judge_records_each_blames_kind(void**) {
    PreflightReport r = four_nodes();
    r.nodes[1].problems.push_back({VerdictKind::Fault, "slow: worded like slowness, found as a fault"});
    r.nodes[2].problems.push_back({VerdictKind::Fingerprint, "NCCL 2.21.5, the others 2.28.9"});
    r.nodes[3].sig.mtu = 9000;  // the odd one out: its fabric differs
    r.nodes[0].waited_on = {"node1"};
    judge(r);
    assert_int_equal(r.nodes[0].kind, VerdictKind::Waited);
    assert_int_equal(r.nodes[1].kind, VerdictKind::Fault);
    assert_int_equal(r.nodes[2].kind, VerdictKind::Fingerprint);
    assert_int_equal(r.nodes[3].kind, VerdictKind::Fabric);
    assert_int_equal(r.nodes[1].charges.size(), 1);
    assert_str(kind_word(r.nodes[3].kind), "fabric");
    // The pairs: node2's every pair at a tenth of the others'.
    PreflightReport s = four_nodes();
    s.pairs = {pair(0, 1, 2.0), pair(0, 2, 0.2), pair(0, 3, 2.0), pair(1, 2, 0.2), pair(1, 3, 2.1), pair(2, 3, 0.2)};
    judge(s);
    assert_int_equal(s.nodes[2].kind, VerdictKind::Slow);
    assert_int_equal(s.nodes[0].kind, VerdictKind::Ok);
    assert_str(s.nodes[0].verdict, "ok");
}

// A culprit of a check that ran out of time is a time-out; when strangers
// made it run out, set before judge() or after it, nobody's failure.
static void time_outs_and_strangers(void**) {
    PreflightReport r = four_nodes();
    r.nodes[1].problems.push_back({VerdictKind::Fault, "rank 1: never reported (the all-reduce)"});
    r.timed_out = "the all-reduce: rank 1 did not report within --timeout 20 s";
    judge(r);
    assert_int_equal(r.code, kTimeout);
    assert_int_equal(r.nodes[1].kind, VerdictKind::Timeout);
    assert_int_equal(r.nodes[0].kind, VerdictKind::Ok);
    r.disturbed = "3 connections from 10.0.0.9 at MASTER_PORT";
    excuse_timeouts(r);
    assert_int_equal(r.nodes[1].kind, VerdictKind::Disturbed);
    assert_false(is_failure(kind_word(r.nodes[1].kind)));
    PreflightReport s = four_nodes();
    s.nodes[1].problems.push_back({VerdictKind::Fault, "rank 1: never reported (the all-reduce)"});
    s.timed_out = "the all-reduce: rank 1 did not report";
    s.skew = "rank 1 speaks protocol 9";
    judge(s);
    assert_int_equal(s.nodes[1].kind, VerdictKind::Disturbed);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fault_beats_silent_waiters),       cmocka_unit_test(readiness_failure_stops_the_rest),
        cmocka_unit_test(silent_rank_beats_peer_errors),    cmocka_unit_test(peer_errors_alone_name_each),
        cmocka_unit_test(healthy_blames_nobody),            cmocka_unit_test(culprit_node_never_waits),
        cmocka_unit_test(judge_shows_waiters_not_as_problems), cmocka_unit_test(judge_records_each_blames_kind),
        cmocka_unit_test(time_outs_and_strangers),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
