// SPDX-License-Identifier: Apache-2.0
// Blame on confirmed evidence: suspects from the first pair rounds,
// retests against proven-fast partners, and the verdict on them; with
// cases from real runs and a noisy cluster model.
#include "lib/check/retest.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "lib/check/history.h"
#include "lib/check/preflight.h"
#include "tests/unit/unit.h"

using namespace mn;

namespace {

PairResult pr(uint32_t a, uint32_t b, double bw, const std::string& err = "") { return {a, b, bw, err, 0, "", std::nullopt, std::nullopt, std::nullopt}; }

std::vector<std::string> hosts(uint32_t n) {
    std::vector<std::string> h;
    for (uint32_t i = 0; i < n; ++i) h.push_back("n" + std::to_string(i));
    return h;
}

// The retests a run would give: the plan's pairs at speed `bw(a, b)`.
template <typename F>
std::vector<PairResult> run_plan(const RetestPlan& plan, F bw) {
    std::vector<PairResult> out;
    for (const auto& round : plan.rounds)
        for (const auto& [s, p] : round) out.push_back(pr(s, p, bw(s, p)));
    return out;
}

std::vector<uint32_t> named(const std::vector<RetestVerdict>& v) {
    std::vector<uint32_t> out;
    for (const auto& x : v)
        if (x.named) out.push_back(x.node);
    return out;
}

std::size_t named_count(const std::vector<RetestVerdict>& v) { return named(v).size(); }

}  // namespace

// 3 healthy nodes while a build ran beside them (issue 18): one pair
// against one pair, a factor 3 of noise, made gpu-a07 look slow.
static void factor_three_noise_is_cleared_by_a_retest(void**) {
    const std::vector<PairResult> first{pr(0, 1, 0.1924), pr(0, 2, 0.1810), pr(1, 2, 0.6489)};
    const RetestPlan plan = plan_retests(first, 3, std::nullopt);
    assert_int_equal(plan.suspects.size(), 1);
    assert_int_equal(plan.suspects[0], 0);
    assert_false(plan.unconfirmable);
    // Partners n1 and n2, one each round, and between them the control:
    // n1 - n2 timed on its own (three nodes leave no pair free beside a retest).
    assert_int_equal(plan.rounds.size(), 3);
    assert_int_equal(plan.rounds[1].size(), 1);
    assert_true(plan.rounds[1][0] == std::make_pair(1u, 2u));
    const auto v = judge_retests(plan, first, run_plan(plan, [](uint32_t, uint32_t) { return 0.61; }), 3,
                                 std::nullopt, hosts(3));
    assert_int_equal(v.size(), 1);
    assert_false(v[0].named);
    assert_contains(v[0].text, "ran at speed; not named");
}

static void a_slow_node_is_confirmed_by_its_retests(void**) {
    const std::vector<PairResult> first{pr(0, 1, 0.6), pr(0, 2, 0.0021), pr(1, 2, 0.0020)};
    const RetestPlan plan = plan_retests(first, 3, std::nullopt);
    assert_int_equal(plan.suspects.size(), 1);
    assert_int_equal(plan.suspects[0], 2);
    const auto v = judge_retests(plan, first, run_plan(plan, [](uint32_t s, uint32_t) { return s == 2 ? 0.0022 : 0.58; }),
                                 3, std::nullopt, hosts(3));
    assert_int_equal(named(v).size(), 1);
    assert_contains(v[0].text, "slow: its pairs run at 0.0021 GB/s at best");
    assert_contains(v[0].text, "confirmed by retests with n");
    assert_contains(v[0].text, "n0: 0.0022 GB/s and n1: 0.0022 GB/s against a median of 0.6000 GB/s "
                               "(a control n0 - n1: 0.5800 GB/s timed beside them)");
}

// Load that arrives after the first round (a build starting beside the
// job): n2's pairs, in the later rounds, and its retests are all slow, and
// so is the control of two healthy nodes timed among them. Nobody is named.
static void load_during_the_retests_blames_nobody(void**) {
    const std::vector<PairResult> first{pr(0, 1, 0.6), pr(0, 2, 0.09), pr(1, 2, 0.08)};
    const RetestPlan plan = plan_retests(first, 3, std::nullopt);
    assert_int_equal(plan.suspects.size(), 1);
    assert_int_equal(plan.suspects[0], 2);
    const auto v = judge_retests(plan, first, run_plan(plan, [](uint32_t s, uint32_t) { return s == 2 ? 0.1 : 0.12; }),
                                 3, std::nullopt, hosts(3));
    assert_int_equal(named_count(v), 0);
    assert_contains(v[0].text, "and so did its retests (n0: 0.1000 GB/s and n1: 0.1000 GB/s), but so did a control "
                               "n0 - n1: 0.1200 GB/s timed beside them: the healthy nodes ran slow then too");
    // The control itself failed: the first rounds' median stands alone.
    auto retests = run_plan(plan, [](uint32_t, uint32_t) { return 0.1; });
    for (auto& t : retests)
        if (t.a != 2) t.error = "rank 2 did not report";
    const auto w = judge_retests(plan, first, retests, 3, std::nullopt, hosts(3));
    assert_int_equal(named_count(w), 1);
    assert_contains(w[0].text, "against a median of 0.6000 GB/s");
}

// Controls beside the retests in a larger cluster: each round keeps two
// free proven-fast nodes for each control. One unlucky control among fast
// ones is noise (their best counts), so the throttled node is still named.
static void one_slow_control_is_noise(void**) {
    std::vector<PairResult> first;
    for (uint32_t a = 0; a < 6; ++a)
        for (uint32_t b = a + 1; b < 6; ++b) first.push_back(pr(a, b, a == 4 || b == 4 ? 0.004 : 0.5));
    const RetestPlan plan = plan_retests(first, 6, std::nullopt);
    assert_int_equal(plan.rounds.size(), kRetestsPerSuspect);
    std::size_t controls = 0;
    for (const auto& round : plan.rounds)
        for (const auto& [a, b] : round)
            if (a != 4) ++controls;
    assert_int_equal(controls, kRetestsPerSuspect * kControlsPerRound);  // 4 nodes free in each round
    bool first_control = true;
    const auto v = judge_retests(plan, first, run_plan(plan, [&](uint32_t s, uint32_t) {
                                     if (s == 4) return 0.004;
                                     const bool unlucky = first_control;
                                     first_control = false;
                                     return unlucky ? 0.006 : 0.5;
                                 }),
                                 6, std::nullopt, hosts(6));
    assert_int_equal(named_count(v), 1);
    assert_contains(v[0].text, "confirmed by retests");
    assert_contains(v[0].text, "(controls n");
}

// Partners are proven fast, distinct within a round, never a suspect, and
// a suspect meets a different partner in each round.
static void the_plan_pairs_suspects_with_distinct_fast_partners(void**) {
    // 8 nodes in all pairs; n3 and n6 slow.
    std::vector<PairResult> first;
    for (uint32_t a = 0; a < 8; ++a)
        for (uint32_t b = a + 1; b < 8; ++b)
            first.push_back(pr(a, b, (a == 3 || b == 3 || a == 6 || b == 6) ? 0.01 : 0.5 + 0.01 * (a + b)));
    const RetestPlan plan = plan_retests(first, 8, std::nullopt);
    assert_int_equal(plan.suspects.size(), 2);
    assert_int_equal(plan.rounds.size(), kRetestsPerSuspect);
    std::map<uint32_t, std::set<uint32_t>> met;
    for (const auto& round : plan.rounds) {
        std::set<uint32_t> used;
        std::size_t controls = 0;
        for (const auto& [s, p] : round) {
            assert_true(p != 3 && p != 6);
            assert_true(used.insert(p).second);
            if (s != 3 && s != 6) {  // the round's control: two fast nodes no suspect meets in it
                ++controls;
                assert_true(used.insert(s).second);
                continue;
            }
            assert_true(met[s].insert(p).second);
        }
        assert_int_equal(controls, kControlsPerRound);
    }
    // The fastest partner comes first.
    const auto fast = proven_fast(first, 8, plan.suspects);
    assert_true(fast.front() == 5 || fast.front() == 7);  // their pair, 0.62, is the fastest
}

// A neighbour of the slow node with one more unlucky pair: a suspect, its
// retest runs at speed, and the note says it was slow with the culprit.
static void a_neighbour_slow_only_with_the_culprit_is_ok(void**) {
    // Ring of 6 (each node with its two neighbours); n3 slow; n2's other
    // pair (with n1) unlucky.
    std::vector<PairResult> first{pr(0, 1, 0.20), pr(1, 2, 0.03), pr(2, 3, 0.002), pr(3, 4, 0.002),
                                  pr(4, 5, 0.21), pr(5, 0, 0.19)};
    const RetestPlan plan = plan_retests(first, 6, std::nullopt);
    assert_int_equal(plan.suspects.size(), 2);  // n2 and n3
    const auto retests = run_plan(plan, [](uint32_t s, uint32_t) { return s == 3 ? 0.002 : 0.2; });
    const auto v = judge_retests(plan, first, retests, 6, std::nullopt, hosts(6));
    assert_int_equal(named(v).size(), 1);
    assert_int_equal(named(v)[0], 3);
    for (const auto& x : v)
        if (x.node == 2) assert_contains(x.text, "ran at speed; not named");
}

static void a_failed_retest_confirms_nothing(void**) {
    const std::vector<PairResult> first{pr(0, 1, 0.6), pr(0, 2, 0.0021), pr(1, 2, 0.0020)};
    const RetestPlan plan = plan_retests(first, 3, std::nullopt);
    std::vector<PairResult> retests;
    for (const auto& round : plan.rounds)
        for (const auto& [s, p] : round) retests.push_back(pr(s, p, 0, "rank 4 did not report"));
    const auto v = judge_retests(plan, first, retests, 3, std::nullopt, hosts(3));
    assert_int_equal(named(v).size(), 0);
    assert_contains(v[0].text, "no retest could confirm it: ");
    assert_contains(v[0].text, "rank 4 did not report");
    const auto none = judge_retests(plan, first, {}, 3, std::nullopt, hosts(3));
    assert_contains(none[0].text, "(none ran in time)");
}

// --min-busbw: a suspect below the floor is named only if its retest is
// below the floor too.
static void the_floor_judges_retests_too(void**) {
    const std::vector<PairResult> first{pr(0, 1, 400), pr(0, 2, 250), pr(1, 2, 280), pr(2, 3, 240), pr(0, 3, 390),
                                        pr(1, 3, 410)};
    const RetestPlan plan = plan_retests(first, 4, 300.0);
    assert_int_equal(plan.suspects.size(), 1);
    assert_int_equal(plan.suspects[0], 2);
    auto v = judge_retests(plan, first, run_plan(plan, [](uint32_t, uint32_t) { return 260.0; }), 4, 300.0, hosts(4));
    assert_true(v[0].named);
    assert_contains(v[0].text, "against --min-busbw 300.00 GB/s");
    v = judge_retests(plan, first, run_plan(plan, [](uint32_t, uint32_t) { return 390.0; }), 4, 300.0, hosts(4));
    assert_false(v[0].named);
}

// Two nodes: no third to retest with; the floor rule alone, as before.
static void two_nodes_are_not_retested(void**) {
    const std::vector<PairResult> first{pr(0, 1, 100)};
    RetestPlan plan = plan_retests(first, 2, std::nullopt);
    assert_true(plan.suspects.empty());
    plan = plan_retests(first, 2, 300.0);
    assert_int_equal(plan.suspects.size(), 2);
    assert_true(plan.unconfirmable);
    assert_true(plan.rounds.empty());
    const auto v = judge_retests(plan, first, {}, 2, 300.0, hosts(2));
    assert_int_equal(named(v).size(), 2);
    assert_contains(v[0].text, "(not retested: two nodes, no third to retest with)");
}

// Most nodes look slow: too few proven fast to retest against; named on
// the first rounds, saying so (failing beats a silent pass).
static void a_slow_majority_is_named_unconfirmed(void**) {
    const std::vector<PairResult> first{pr(0, 1, 100), pr(0, 2, 100), pr(0, 3, 100), pr(1, 2, 100), pr(1, 3, 100),
                                        pr(2, 3, 400)};
    const RetestPlan plan = plan_retests(first, 4, 300.0);
    assert_int_equal(plan.suspects.size(), 2);  // n0, n1: below the floor in every pair
    assert_true(plan.rounds.empty() == plan.unconfirmable);
}

// judge() over a report whose retests ran: the verdict rests on them, the
// table and the JSON say so; a cleared suspect becomes a note.
static void judge_uses_the_retests(void**) {
    PreflightReport r;
    for (uint32_t i = 0; i < 3; ++i) {
        NodeReport n;
        n.node = i;
        n.host = "n" + std::to_string(i);
        n.ranks = {i};
        r.nodes.push_back(n);
    }
    r.coll.ran = r.coll.correct = true;
    r.pairs = {pr(0, 1, 0.6), pr(0, 2, 0.0021), pr(1, 2, 0.0020)};
    r.retests = {pr(2, 0, 0.0019), pr(2, 1, 0.0023)};
    r.retests_ran = true;
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_int_equal(r.problems.size(), 1);
    assert_contains(r.problems[0], "n2: slow: ");
    assert_contains(r.nodes[2].verdict, "confirmed by retests with n0: 0.0019 GB/s and n1: 0.0023 GB/s");
    assert_str(r.nodes[0].verdict, "ok");
    std::string j = report_json(r);
    assert_contains(j, "\"retests\":[{\"suspect\":\"n2\",\"partner\":\"n0\",\"busbw_gbps\":0.0019,\"error\":\"\"}");
    assert_contains(j, "\"retest_controls\":[]");
    // With the control timed between them: listed apart, a and b.
    r.retests = {pr(2, 0, 0.0019), pr(0, 1, 0.59), pr(2, 1, 0.0023)};
    r.problems.clear();
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_contains(r.nodes[2].verdict, "(a control n0 - n1: 0.5900 GB/s timed beside them)");
    j = report_json(r);
    assert_contains(j, "\"retests\":[{\"suspect\":\"n2\",\"partner\":\"n0\",\"busbw_gbps\":0.0019,\"error\":\"\"},"
                       "{\"suspect\":\"n2\",\"partner\":\"n1\"");
    // Numbers as nlohmann-json writes them: no trailing zeros (0.59, not 0.5900).
    assert_contains(j, "\"retest_controls\":[{\"a\":\"n0\",\"b\":\"n1\",\"busbw_gbps\":0.59,\"error\":\"\"}]");
    // The same first rounds, but the retests ran at speed: PASS, with a note.
    r.retests = {pr(2, 0, 0.55), pr(2, 1, 0.57)};
    r.problems.clear();
    r.notes.clear();
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_str(r.nodes[2].verdict, "ok");
    assert_int_equal(r.notes.size(), 1);
    assert_contains(r.notes[0], "n2: its first pairs looked slow");
}

// ---- strangers at the data ports ----------------------------------------------

namespace {

// A pair that strangers disturbed, as rank 0 records it (helper/check/pairs.cc).
PairResult disturbed(uint32_t a, uint32_t b, double bw, unsigned n, const std::string& host) {
    PairResult p = pr(a, b, bw);
    p.strangers = n;
    p.strangers_seen = "at " + host + ": " + std::to_string(n) + " connections from 10.250.0.11 (" + std::to_string(n) +
                       " held a connection without a word)";
    return p;
}

PreflightReport three_nodes() {
    PreflightReport r;
    for (uint32_t i = 0; i < 3; ++i) {
        NodeReport n;
        n.node = i;
        n.host = "node" + std::to_string(i);
        n.ranks = {i};
        r.nodes.push_back(n);
    }
    r.coll.ran = r.coll.correct = true;
    r.retests_ran = true;
    return r;
}

std::size_t notes_with(const PreflightReport& r, const std::string& text) {
    return static_cast<std::size_t>(std::count_if(r.notes.begin(), r.notes.end(), [&](const std::string& n) {
        return n.find(text) != std::string::npos;
    }));
}

}  // namespace

// The CI run that named node1 slow: another user on node1 held idle
// connections to its data port, its pairs ran at 0.47 GB/s against a
// median of 1.8 and its retests too while the stranger stayed. Not named,
// not a failure in its history: a note says why and where to look.
static void a_slow_node_that_strangers_disturbed_is_not_judged(void**) {
    PreflightReport r = three_nodes();
    r.pairs = {disturbed(0, 1, 0.47, 8, "node1"), pr(0, 2, 1.8), pr(1, 2, 0.45)};
    r.retests = {pr(1, 0, 0.46), pr(0, 2, 1.7), disturbed(1, 2, 0.44, 8, "node1")};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(r.problems.size(), 0);
    for (const auto& n : r.nodes) assert_str(n.verdict, "ok");
    assert_int_equal(r.nodes[1].kind, VerdictKind::Ok);
    assert_int_equal(notes_with(r, "not judged"), 1);
    const std::string note = r.notes[0];
    assert_true(note.rfind("node1: its pairs and retests ran at 0.4700 GB/s at best (the others' median 1.80 GB/s) "
                           "while strangers held connections to the data ports (16 connections in 2 of its 4 pairs "
                           "and retests: at node1: 8 connections from 10.250.0.11 (8 held a connection without a word)"
                           "): not judged; if it persists, find who connects to node1's data port (ss -tnp",
                           0) == 0);
    assert_true(note_about(note, "node1"));  // in node1's history line, as a finding
    assert_false(note_about(note, "node0"));
    // No second line on the same strangers.
    assert_int_equal(r.notes.size(), 1);
    const std::string j = report_json(r);
    assert_contains(j, "\"verdict\":\"PASS\"");
    assert_contains(j, "\"strangers\":8,\"strangers_seen\":\"at node1: 8 connections from 10.250.0.11");
    assert_contains(report_table(r), "note: node1: its pairs and retests ran at 0.4700 GB/s");
    // Strangers in its first pairs only, its retests slow and clean: its
    // evidence was disturbed all the same (a suspect made by them).
    r = three_nodes();
    r.pairs = {disturbed(0, 1, 0.47, 8, "node1"), pr(0, 2, 1.8), disturbed(1, 2, 0.45, 3, "node1")};
    r.retests = {pr(1, 0, 0.46), pr(0, 2, 1.7), pr(1, 2, 0.44)};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(notes_with(r, "node1: its pairs and retests ran at 0.4700 GB/s at best"), 1);
}

// The same slow node with no stranger at any of its pairs or retests is
// named exactly as before, whatever strangers did elsewhere: a stranger
// cannot hide a node it did not touch.
static void an_undisturbed_slow_node_is_named_as_before(void**) {
    PreflightReport clean = three_nodes();
    clean.pairs = {pr(0, 1, 0.47), pr(0, 2, 1.8), pr(1, 2, 0.45)};
    clean.retests = {pr(1, 0, 0.46), pr(0, 2, 1.7), pr(1, 2, 0.44)};
    judge(clean);
    assert_int_equal(clean.code, kCheckFailed);
    assert_int_equal(clean.problems.size(), 1);
    assert_contains(clean.problems[0], "node1: slow: its pairs run at 0.4700 GB/s at best");
    assert_contains(clean.nodes[1].verdict, "confirmed by retests with node0: 0.4600 GB/s and node2: 0.4400 GB/s");
    assert_int_equal(clean.nodes[1].kind, VerdictKind::Slow);
    assert_int_equal(notes_with(clean, "strangers"), 0);
    // Strangers at node0 and node2 in the control between them: node1's
    // pairs and retests saw none. Named, word for word as without them.
    PreflightReport r = three_nodes();
    r.pairs = clean.pairs;
    r.retests = {pr(1, 0, 0.46), disturbed(0, 2, 1.7, 30, "node2"), pr(1, 2, 0.44)};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_true(r.problems == clean.problems);
    assert_str(r.nodes[1].verdict, clean.nodes[1].verdict);
    assert_int_equal(notes_with(r, "not judged"), 0);
    assert_int_equal(notes_with(r, "strangers at the data ports: 30 connections in 1 of the 6 pair tests"), 1);
    // Without retests (two nodes under --min-busbw): the first pairs decide,
    // and strangers in them leave both unjudged.
    PreflightReport two;
    for (uint32_t i = 0; i < 2; ++i) {
        NodeReport n;
        n.node = i;
        n.host = "node" + std::to_string(i);
        n.ranks = {i};
        two.nodes.push_back(n);
    }
    two.coll.ran = two.coll.correct = true;
    two.coll.busbw_gbps = 2.0;
    two.min_busbw = 1.0;
    two.pairs = {pr(0, 1, 0.3)};
    judge(two);
    assert_int_equal(two.code, kCheckFailed);
    assert_int_equal(two.problems.size(), 2);
    two.pairs = {disturbed(0, 1, 0.3, 5, "node0")};
    two.problems.clear();
    judge(two);
    assert_int_equal(two.code, kPass);
    assert_int_equal(notes_with(two, "(against --min-busbw 1.00 GB/s) while strangers held connections"), 2);
}

// Retests on fresh ports (helper/check/pairs.cc): the partner opens a port
// for each and closes it once the suspect came, so a stranger at the
// suspect's data port cannot reach the timed test. A suspect whose every
// retest ran so is judged on them, strangers in its first pairs or not.
static void a_suspect_retested_on_fresh_ports_is_judged_on_them(void**) {
    auto fresh = [](PairResult p) {
        p.fresh_port = true;
        return p;
    };
    // Slow on fresh ports: named, and the strangers still said.
    PreflightReport r = three_nodes();
    r.pairs = {disturbed(0, 1, 0.47, 8, "node1"), pr(0, 2, 1.8), disturbed(1, 2, 0.45, 8, "node1")};
    r.retests = {fresh(pr(1, 0, 0.46)), fresh(pr(0, 2, 1.7)), fresh(pr(1, 2, 0.44))};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_int_equal(r.nodes[1].kind, VerdictKind::Slow);
    assert_contains(r.nodes[1].verdict, "confirmed by retests with node0: 0.4600 GB/s and node2: 0.4400 GB/s");
    assert_str(r.nodes[0].verdict, "ok");
    assert_str(r.nodes[2].verdict, "ok");
    assert_int_equal(notes_with(r, "not judged"), 0);
    assert_int_equal(notes_with(r, "strangers at the data ports: 16 connections in 2 of the 6 pair tests"), 1);
    // Strangers met at a fresh port before the suspect came: noted, and the
    // test, run after the port closed, still judged.
    r = three_nodes();
    r.pairs = {disturbed(0, 1, 0.47, 8, "node1"), pr(0, 2, 1.8), pr(1, 2, 0.45)};
    r.retests = {fresh(disturbed(1, 0, 0.46, 2, "node0")), fresh(pr(0, 2, 1.7)), fresh(pr(1, 2, 0.44))};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_int_equal(r.nodes[1].kind, VerdictKind::Slow);
    assert_int_equal(notes_with(r, "strangers at the data ports: 10 connections in 2 of the 6 pair tests"), 1);
    // Fast on fresh ports: cleared, nobody named.
    r = three_nodes();
    r.pairs = {disturbed(0, 1, 0.47, 8, "node1"), pr(0, 2, 1.8), disturbed(1, 2, 0.45, 8, "node1")};
    r.retests = {fresh(pr(1, 0, 1.75)), fresh(pr(0, 2, 1.7)), fresh(pr(1, 2, 1.72))};
    judge(r);
    assert_int_equal(r.code, kPass);
    for (const auto& n : r.nodes) assert_str(n.verdict, "ok");
    assert_int_equal(notes_with(r, "ran at speed; not named"), 1);
    // One retest on its data port (a partner of an earlier build): the
    // strangers' rule, not judged.
    r = three_nodes();
    r.pairs = {disturbed(0, 1, 0.47, 8, "node1"), pr(0, 2, 1.8), disturbed(1, 2, 0.45, 8, "node1")};
    r.retests = {fresh(pr(1, 0, 0.46)), fresh(pr(0, 2, 1.7)), pr(1, 2, 0.44)};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(notes_with(r, "node1: its pairs and retests ran at 0.4700 GB/s at best"), 1);
    assert_true(disturbed_slowness(1, r.pairs, {fresh(pr(1, 0, 0.46))}, std::nullopt, hosts(3)) == std::nullopt);
}

// Strangers at a node whose pairs ran at speed: nothing about slowness,
// only the line that says they came.
static void strangers_at_a_node_that_is_not_slow_say_nothing_of_slowness(void**) {
    PreflightReport r = three_nodes();
    r.pairs = {disturbed(0, 1, 1.75, 8, "node1"), pr(0, 2, 1.8), disturbed(1, 2, 1.7, 8, "node1")};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(r.notes.size(), 1);
    assert_str(r.notes[0], "strangers at the data ports: 16 connections in 2 of the 3 pair tests: at node1: 8 "
                           "connections from 10.250.0.11 (8 held a connection without a word)");
    assert_false(note_about(r.notes[0], "node1"));
    assert_int_equal(notes_with(r, "slow"), 0);
    assert_int_equal(notes_with(r, "not judged"), 0);
    for (const auto& n : r.nodes) assert_str(n.verdict, "ok");
    assert_false(disturbed_slowness(1, r.pairs, {}, std::nullopt, hosts(3)) == std::nullopt);  // had it been slow
    assert_true(disturbed_slowness(2, {r.pairs[0], pr(0, 2, 1.8)}, {}, std::nullopt, hosts(3)) == std::nullopt);
}

// The cluster model of issue 18: 32 nodes, ring-neighbour rounds (as
// pair_rounds gives above 16 nodes); most pairs within a factor 2, and
// with probability 0.15 a pair is unlucky (a factor 5 to 50 slower: the
// 2-core machine's scheduler). Over 500 seeded runs, the first-round rule
// names healthy nodes in many runs; confirmed blame almost never, and the
// Issue 41: three healthy nodes on one quiet 2-core machine, ranks by hand
// on 127.0.0.1. The scheduler gave node2's process less CPU for a second:
// its pairs ran at 1.18 GB/s against a median of 2.89, and its retests
// "confirmed" it (0.91, 1.1) while the control beside them ran at speed.
// TCP saw nothing of a link: round trips of 0.05 ms.
namespace {
PairResult seen(uint32_t a, uint32_t b, double bw, std::optional<double> wait, std::optional<uint32_t> retrans,
                std::optional<double> rtt_ms) {
    PairResult p = pr(a, b, bw);
    p.cpu_wait = wait;
    p.retrans = retrans;
    p.rtt_ms = rtt_ms;
    return p;
}
// A pair of one machine's scheduler: short round trips, even with segments
// sent again (healthy pairs between namespaces of one machine: 0 to 135).
PairResult sched(uint32_t a, uint32_t b, double bw, double wait = 0.1) { return seen(a, b, bw, wait, 45u, 0.05); }
// A pair through a throttled link (tc tbf): its queue delays.
PairResult throttled(uint32_t a, uint32_t b, double bw) { return seen(a, b, bw, 0.02, 0u, 3.7); }
PreflightReport one_machine(const std::string& boot0, const std::string& boot1, const std::string& boot2) {
    PreflightReport r = three_nodes();
    r.nodes[0].machine = boot0;
    r.nodes[1].machine = boot1;
    r.nodes[2].machine = boot2;
    r.coll.path = "cpu, TCP ring on eth0";
    return r;
}
const std::string kBoot = "0f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60";
}  // namespace

static void nodes_of_one_machine_are_not_blamed_for_its_scheduler(void**) {
    PreflightReport r = one_machine(kBoot, kBoot, kBoot);
    r.pairs = {sched(0, 1, 2.89, 0.01), sched(0, 2, 1.18, 0.31), sched(1, 2, 1.15, 0.34)};
    r.retests = {sched(2, 0, 0.9072, 0.36), sched(0, 1, 2.7, 0.0), sched(2, 1, 1.1, 0.29)};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(r.problems.size(), 0);
    for (const auto& n : r.nodes) assert_str(n.verdict, "ok");
    assert_int_equal(notes_with(r, "not judged"), 1);
    assert_contains(r.notes[0], "node2: its first pairs looked slow");
    assert_contains(r.notes[0], "but it shares one machine (the same boot id) with node0 and node1, and 4 of its 4 "
                                "pair tests show nothing of its link (round trips under 2 ms: no queue), a side waiting for "
                                "a CPU up to 36 % of the time");
    assert_contains(r.notes[0], "not judged (to judge it, check it with nodes of other machines)");
    // Seen on this machine: two processes put on one CPU ran a pair 14
    // times slower than the control, each waiting about half the time.
    // Still nothing of a link: not judged.
    r = one_machine(kBoot, kBoot, kBoot);
    r.pairs = {sched(0, 1, 3.56, 0.02), sched(0, 2, 0.249, 0.48), sched(1, 2, 0.26, 0.51)};
    r.retests = {sched(2, 0, 0.2434, 0.5), sched(0, 1, 3.62, 0.01), sched(2, 1, 0.3578, 0.47)};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(notes_with(r, "node2: its first pairs looked slow"), 1);
    // The same figures from nodes that did not say what TCP saw (an
    // earlier build): nothing shows the link, so still not judged.
    PreflightReport u = one_machine(kBoot, kBoot, kBoot);
    u.pairs = {pr(0, 1, 2.89), pr(0, 2, 1.18), pr(1, 2, 1.15)};
    u.retests = {pr(2, 0, 0.9072), pr(0, 1, 2.7), pr(2, 1, 1.1)};
    judge(u);
    assert_int_equal(u.code, kPass);
    assert_contains(u.notes[0], "a side did not say what TCP saw of the path in 4 of its 4 pair tests");
    // On the GPU path NCCL and the GPUs carry the pairs: the evidence is the
    // node's own devices and links, judged as before (emulated nodes of one
    // GPU machine, a GPU stalled on purpose: scripts/gpu/gpu-retest.sh).
    u = one_machine(kBoot, kBoot, kBoot);
    u.coll.path = "gpu, NCCL 2.28.9";
    u.pairs = {pr(0, 1, 2.89), pr(0, 2, 0.118), pr(1, 2, 0.115)};
    u.retests = {pr(2, 0, 0.09), pr(0, 1, 2.7), pr(2, 1, 0.11)};
    judge(u);
    assert_int_equal(u.code, kCheckFailed);
    assert_contains(u.problems[0], "node2: slow");
}

// What a node of a shared machine is still named for: a throttled link
// (tc tbf in its namespace) queues and drops; TCP sees retransmissions and
// long round trips in its pairs. Its own evidence.
static void a_throttled_link_on_a_shared_machine_is_named(void**) {
    PreflightReport r = one_machine(kBoot, kBoot, kBoot);
    r.pairs = {throttled(0, 1, 0.0061), sched(0, 2, 2.4), throttled(1, 2, 0.0059)};
    r.retests = {throttled(1, 0, 0.006), sched(0, 2, 2.3), throttled(1, 2, 0.0058)};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_int_equal(r.problems.size(), 1);
    assert_contains(r.problems[0], "node1: slow: its pairs run at 0.0061 GB/s at best");
    assert_int_equal(notes_with(r, "not judged"), 0);
    // Most of its tests show the link (3 of 4: one retest's round trips
    // were short): named.
    r = one_machine(kBoot, kBoot, kBoot);
    r.pairs = {throttled(0, 1, 0.0061), sched(0, 2, 2.4), throttled(1, 2, 0.0059)};
    r.retests = {throttled(1, 0, 0.006), sched(0, 2, 2.3), seen(1, 2, 0.0058, 0.0, 0u, 1.9)};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_contains(r.problems[0], "node1: slow");
    // Half of them: not most; not judged.
    r = one_machine(kBoot, kBoot, kBoot);
    r.pairs = {throttled(0, 1, 0.0061), sched(0, 2, 2.4), throttled(1, 2, 0.0059)};
    r.retests = {sched(1, 0, 0.006), sched(0, 2, 2.3), seen(1, 2, 0.0058, 0.0, 0u, 1.9)};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_int_equal(notes_with(r, "2 of its 4 pair tests show nothing of its link"), 1);
}

static void nodes_of_their_own_machines_are_judged_as_before(void**) {
    for (const auto& boots : std::vector<std::vector<std::string>>{
             {kBoot, "1f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60", "2f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60"}, {"", "", ""}}) {
        PreflightReport r = one_machine(boots[0], boots[1], boots[2]);
        r.pairs = {sched(0, 1, 2.89, 0.01), sched(0, 2, 0.118, 0.31), seen(1, 2, 0.115, std::nullopt, 0u, 0.05)};
        r.retests = {sched(2, 0, 0.09, 0.36), sched(0, 1, 2.7, 0.0), sched(2, 1, 0.11, 0.29)};
        judge(r);
        assert_int_equal(r.code, kCheckFailed);
        assert_int_equal(r.problems.size(), 1);
        assert_contains(r.problems[0], "node2: slow: its pairs run at 0.1180 GB/s at best");
    }
    // Two machines, node2 alone on its own: its mates are none, so it is
    // judged on its pairs, whatever TCP saw.
    PreflightReport r = one_machine(kBoot, kBoot, "1f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60");
    r.pairs = {sched(0, 1, 2.89, 0.01), sched(0, 2, 0.118, 0.31), sched(1, 2, 0.115, 0.2)};
    r.retests = {sched(2, 0, 0.09, 0.36), sched(0, 1, 2.7, 0.0), sched(2, 1, 0.11, 0.29)};
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_contains(r.problems[0], "node2: slow");
}

// one throttled node (1/40 of the speed) is named in every run, alone.
static void noisy_cluster_model(void**) {
    const uint32_t n = 32;
    const auto rounds = pair_rounds(n);
    int old_false_runs = 0, new_false_runs = 0, slow_named = 0, runs = 500;
    for (int seed = 0; seed < runs; ++seed) {
        std::mt19937 rng(static_cast<unsigned>(seed));
        std::uniform_real_distribution<double> u(0, 1);
        auto noisy = [&](double speed) {
            double f = 0.5 + 0.5 * u(rng);
            if (u(rng) < 0.15) f *= std::exp(std::log(0.02) + (std::log(0.2) - std::log(0.02)) * u(rng));
            return speed * f;
        };
        for (int throttled = 0; throttled < 2; ++throttled) {
            const uint32_t bad = throttled ? static_cast<uint32_t>(seed % n) : n;  // n: none
            auto speed = [&](uint32_t a, uint32_t b) { return (a == bad || b == bad) ? 0.1 / 40 : 0.1; };
            std::vector<PairResult> first;
            for (const auto& round : rounds)
                for (const auto& [a, b] : round) first.push_back(pr(a, b, noisy(speed(a, b))));
            bool old_false = false;
            for (const auto& [x, why] : slow_nodes(first, n, std::nullopt))
                if (x != bad) old_false = true;
            const RetestPlan plan = plan_retests(first, n, std::nullopt);
            const auto v = judge_retests(plan, first, run_plan(plan, [&](uint32_t a, uint32_t b) {
                                             return noisy(speed(a, b));
                                         }),
                                         n, std::nullopt, hosts(n));
            bool new_false = false, found = false;
            for (uint32_t x : named(v)) (x == bad ? found : new_false) = true;
            old_false_runs += old_false;
            new_false_runs += new_false;
            if (throttled) slow_named += found;
        }
    }
    print_message("noise model, %d runs healthy + %d throttled: first-round rule names a healthy node in %d, "
                  "confirmed rule in %d; the throttled node named in %d of %d\n",
                  runs, runs, old_false_runs, new_false_runs, slow_named, runs);
    assert_int_equal(slow_named, runs);
    assert_true(old_false_runs > 100);        // the rule of the issue: often wrong
    // Under 3 % of the runs, where the model's retests are as noisy as the
    // first rounds (on the real cluster they run with fewer pairs beside them).
    assert_true(new_false_runs * 100 < 3 * 2 * runs);
}


// ---- inside nodes --------------------------------------------------------

namespace {

// 2 nodes of 4 GPUs in all pairs, about 330 GB/s over NVLink; `bw(node, a,
// b)` may change a pair.
template <typename F>
std::vector<GpuPairResult> gpu_pairs(F bw) {
    std::vector<GpuPairResult> out;
    for (uint32_t node = 0; node < 2; ++node)
        for (int a = 0; a < 4; ++a)
            for (int b = a + 1; b < 4; ++b) {
                const std::string ga = "GPU" + std::to_string(a), gb = "GPU" + std::to_string(b);
                out.push_back({node, ga, gb, bw(node, ga, gb, 330.0 + a + b), ""});
            }
    return out;
}

// The retests a run would give: the plan's pairs at speed `bw`.
template <typename F>
std::vector<GpuPairResult> run_gpu_plan(const GpuRetestPlan& plan, F bw) {
    std::vector<GpuPairResult> out;
    for (const auto& round : plan.rounds)
        for (auto p : round) {
            p.busbw_gbps = bw(p.node, p.gpu_a, p.gpu_b);
            out.push_back(p);
        }
    return out;
}

bool touches(const std::string& a, const std::string& b, const std::string& g) { return a == g || b == g; }

}  // namespace

// A GPU slow in the first rounds only (a neighbour's job on the host, a
// clock ramping up): retested with two of its node's fast GPUs, cleared.
static void a_gpu_slow_once_is_cleared(void**) {
    const auto first = gpu_pairs([](uint32_t n, const std::string& a, const std::string& b, double bw) {
        return n == 1 && touches(a, b, "GPU2") ? 40.0 : bw;
    });
    const GpuRetestPlan plan = plan_gpu_retests(first);
    assert_int_equal(plan.suspects.size(), 1);
    assert_str(plan.suspects[0].gpu, "GPU2");
    assert_true(plan.unconfirmable.empty());
    // Two partners, fastest first (GPU1 and GPU3 both reach 334 in
    // GPU1-GPU3; the lower index first), one round each: GPU2 cannot be in
    // two pairs at once. Beside each, a control of the two GPUs left free.
    assert_int_equal(plan.rounds.size(), 2);
    assert_int_equal(plan.rounds[0].size(), 2);
    assert_int_equal(plan.rounds[0][0].node, 1);
    assert_int_equal(plan.rounds[0][1].node, 1);
    assert_true(std::set<std::string>({plan.rounds[0][1].gpu_a, plan.rounds[0][1].gpu_b}) ==
                std::set<std::string>({"GPU0", "GPU3"}));
    assert_true(std::set<std::string>({plan.rounds[1][1].gpu_a, plan.rounds[1][1].gpu_b}) ==
                std::set<std::string>({"GPU0", "GPU1"}));
    assert_str(plan.rounds[0][0].gpu_a, "GPU2");
    assert_str(plan.rounds[0][0].gpu_b, "GPU1");
    assert_str(plan.rounds[1][0].gpu_b, "GPU3");
    const auto v = judge_gpu_retests(plan, first, run_gpu_plan(plan, [](uint32_t, const std::string&, const std::string&) {
                                         return 329.0;
                                     }),
                                     hosts(2));
    assert_int_equal(v.size(), 1);
    assert_false(v[0].named);
    assert_contains(v[0].text, "GPU2: its first pairs looked slow (slow GPU GPU2: its pairs run at 40.0 GB/s at best");
    assert_contains(v[0].text, "but a retest with GPU1: 329.0 GB/s and GPU3: 329.0 GB/s ran at speed; not named");
    // In the verdict: PASS, with the note.
    PreflightReport r;
    for (uint32_t i = 0; i < 2; ++i) {
        NodeReport n;
        n.node = i;
        n.host = "n" + std::to_string(i);
        n.ranks = {i};
        n.gpus = 4;
        r.nodes.push_back(n);
    }
    r.coll.ran = r.coll.correct = true;
    r.gpu_pairs = first;
    r.gpu_retests = run_gpu_plan(plan, [](uint32_t, const std::string&, const std::string&) { return 329.0; });
    r.gpu_retests_ran = true;
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_str(r.nodes[1].verdict, "ok");
    assert_int_equal(r.notes.size(), 1);
    assert_contains(r.notes[0], "n1: GPU2: its first pairs looked slow");
    assert_contains(report_json(r), "\"gpu_retests\":[{\"host\":\"n1\",\"a\":\"GPU2\",\"b\":\"GPU1\",\"busbw_gbps\":329");
    assert_contains(report_json(r), "\"gpu_retest_controls\":[{\"host\":\"n1\",\"a\":\"GPU3\",\"b\":\"GPU0\",\"busbw_gbps\":329");
    // Without retests (an older report): the first rounds name it.
    r.gpu_retests_ran = false;
    r.notes.clear();
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_contains(r.nodes[1].verdict, "slow GPU GPU2");
}

static void a_slow_gpu_is_confirmed_and_a_slow_link_timed_again(void**) {
    const auto first = gpu_pairs([](uint32_t n, const std::string& a, const std::string& b, double bw) {
        if (n == 1 && touches(a, b, "GPU2")) return 40.0;                // a GPU on PCIe
        if (n == 0 && a == "GPU0" && b == "GPU3") return 60.0;           // one NVLink down
        return bw;
    });
    const GpuRetestPlan plan = plan_gpu_retests(first);
    assert_int_equal(plan.suspects.size(), 2);
    // The link's pair twice and GPU2's two partners: no GPU twice in a round.
    std::size_t total = 0;
    for (const auto& round : plan.rounds) {
        std::set<std::pair<uint32_t, std::string>> seen;
        for (const auto& p : round) {
            assert_true(seen.insert({p.node, p.gpu_a}).second);
            assert_true(seen.insert({p.node, p.gpu_b}).second);
        }
        total += round.size();
    }
    assert_int_equal(total, 8);  // and a control in each node in each round
    assert_int_equal(plan.rounds.size(), 2);  // the two nodes' retests share rounds
    auto slow_again = [](uint32_t n, const std::string& a, const std::string& b) {
        if (n == 1 && touches(a, b, "GPU2")) return 41.0;
        if (n == 0 && touches(a, b, "GPU0") && touches(a, b, "GPU3")) return 61.0;
        return 330.0;
    };
    const auto v = judge_gpu_retests(plan, first, run_gpu_plan(plan, slow_again), hosts(2));
    assert_int_equal(named_count(v), 2);
    for (const auto& x : v) {
        if (x.node == 1) assert_contains(x.text, "slow GPU GPU2: its pairs run at 40.0 GB/s at best");
        if (x.node == 1) assert_contains(x.text, "; confirmed when retested with GPU1: 41.0 GB/s and GPU3: 41.0 GB/s against a median of 333.0 GB/s (controls GPU");
        if (x.node == 0) assert_contains(x.text, "slow link between GPU0 and GPU3: 60.0 GB/s");
        if (x.node == 0) assert_contains(x.text, "; confirmed when timed again (itself: 61.0 GB/s and itself: 61.0 GB/s)");
    }
    // A retest that failed confirms nothing; the first failure stands alone.
    auto failed = run_gpu_plan(plan, slow_again);
    for (auto& t : failed) t.error = "the pair's all-reduce failed";
    const auto w = judge_gpu_retests(plan, first, failed, hosts(2));
    assert_int_equal(named_count(w), 0);
    assert_contains(w[0].text, "no retest could confirm it");
}

// Load on one host that arrives during the check (a neighbour's job
// launching kernels): GPU2 of n1 looks slow, and so do its retests, but so
// does the control of two healthy GPUs of n1 timed beside them: not named.
// A node of three GPUs has no two free beside a retest: its control gets a
// round of its own, between the retests.
static void host_load_during_gpu_retests_blames_no_gpu(void**) {
    const auto first = gpu_pairs([](uint32_t n, const std::string& a, const std::string& b, double bw) {
        return n == 1 && touches(a, b, "GPU2") ? 40.0 : bw;
    });
    const GpuRetestPlan plan = plan_gpu_retests(first);
    const auto v = judge_gpu_retests(plan, first, run_gpu_plan(plan, [](uint32_t n, const std::string& a, const std::string& b) {
                                         return n == 1 ? (touches(a, b, "GPU2") ? 41.0 : 52.0) : 330.0;
                                     }),
                                     hosts(2));
    assert_int_equal(named_count(v), 0);
    assert_contains(v[0].text, "and so did its retests (GPU1: 41.0 GB/s and GPU3: 41.0 GB/s), but so did controls GPU");
    assert_contains(v[0].text, "the node's healthy GPUs ran slow then too, not this one alone; not named");
    // The slow GPU stays named when its node's controls run at speed.
    const auto w = judge_gpu_retests(plan, first, run_gpu_plan(plan, [](uint32_t, const std::string& a, const std::string& b) {
                                         return touches(a, b, "GPU2") ? 41.0 : 330.0;
                                     }),
                                     hosts(2));
    assert_int_equal(named_count(w), 1);

    std::vector<GpuPairResult> three{{0, "GPU0", "GPU1", 330, ""}, {0, "GPU0", "GPU2", 40, ""}, {0, "GPU1", "GPU2", 41, ""}};
    const GpuRetestPlan p3 = plan_gpu_retests(three);
    assert_int_equal(p3.suspects.size(), 1);
    assert_str(p3.suspects[0].gpu, "GPU2");
    assert_int_equal(p3.rounds.size(), 3);
    assert_int_equal(p3.rounds[1].size(), 1);
    assert_true(std::set<std::string>({p3.rounds[1][0].gpu_a, p3.rounds[1][0].gpu_b}) ==
                std::set<std::string>({"GPU0", "GPU1"}));
    // A slow link of a node of two GPUs: nothing to compare with, no control.
    std::vector<GpuPairResult> two{{0, "GPU0", "GPU1", 330, ""}, {1, "GPU0", "GPU1", 40, ""}, {2, "GPU0", "GPU1", 331, ""}};
    const GpuRetestPlan p2 = plan_gpu_retests(two);
    assert_int_equal(p2.suspects.size(), 1);
    assert_int_equal(p2.rounds.size(), kRetestsPerSuspect);
    for (const auto& round : p2.rounds)
        for (const auto& p : round) assert_int_equal(p.node, 1);
}

// A failed first pair is not a suspect: it is named as it is.
static void failed_gpu_pairs_are_not_retested(void**) {
    auto first = gpu_pairs([](uint32_t, const std::string&, const std::string&, double bw) { return bw; });
    first[3].error = "the pair's all-reduce failed";
    first[3].busbw_gbps = 0;
    const GpuRetestPlan plan = plan_gpu_retests(first);
    assert_true(plan.suspects.empty());
    assert_true(plan.rounds.empty());
    PreflightReport r;
    for (uint32_t i = 0; i < 2; ++i) {
        NodeReport n;
        n.node = i;
        n.host = "n" + std::to_string(i);
        r.nodes.push_back(n);
    }
    r.coll.ran = r.coll.correct = true;
    r.gpu_pairs = first;
    r.gpu_retests_ran = true;
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_contains(r.nodes[0].verdict, "GPU pair GPU1 - GPU2 failed");
}

// Noise inside nodes: 200 seeded runs of 2 nodes x 8 GPUs (28 pairs each),
// every pair within 15 % of 330 GB/s and, with probability 0.05, a pair a
// factor 3 to 10 slower (a launch delayed on a busy host). The first-round
// rule names a GPU or a link in many runs; after retests, as noisy as the
// first rounds, almost never; a GPU at a tenth of the speed is always named.
static void noisy_gpu_model(void**) {
    int old_false = 0, new_false = 0, slow_named = 0;
    const int runs = 200;
    for (int seed = 0; seed < runs; ++seed) {
        std::mt19937 rng(static_cast<unsigned>(seed) + 1000);
        std::uniform_real_distribution<double> u(0, 1);
        auto noisy = [&](double speed) {
            double f = 0.85 + 0.15 * u(rng);
            if (u(rng) < 0.05) f /= 3 + 7 * u(rng);
            return speed * f;
        };
        for (int throttled = 0; throttled < 2; ++throttled) {
            const std::string bad = throttled ? "GPU" + std::to_string(seed % 8) : "none";
            auto speed = [&](uint32_t n, const std::string& a, const std::string& b) {
                return n == 1 && touches(a, b, bad) ? 33.0 : 330.0;
            };
            std::vector<GpuPairResult> first;
            for (uint32_t n = 0; n < 2; ++n)
                for (int a = 0; a < 8; ++a)
                    for (int b = a + 1; b < 8; ++b) {
                        const std::string ga = "GPU" + std::to_string(a), gb = "GPU" + std::to_string(b);
                        first.push_back({n, ga, gb, noisy(speed(n, ga, gb)), ""});
                    }
            bool of = false;
            for (const auto& f : slow_gpus(first))
                if (!(f.node == 1 && f.gpu == bad && f.other.empty())) of = true;
            const GpuRetestPlan plan = plan_gpu_retests(first);
            const auto v = judge_gpu_retests(plan, first, run_gpu_plan(plan, [&](uint32_t n, const std::string& a,
                                                                                  const std::string& b) {
                                                 return noisy(speed(n, a, b));
                                             }),
                                             hosts(2));
            bool nf = false, found = false;
            for (std::size_t i = 0; i < v.size(); ++i) {
                if (!v[i].named) continue;
                const SlowGpu& s = plan.suspects[i];
                if (s.node == 1 && s.gpu == bad && s.other.empty()) found = true;
                else nf = true;
            }
            old_false += of;
            new_false += nf;
            if (throttled) slow_named += found;
        }
    }
    print_message("GPU noise model, %d runs healthy + %d with a slow GPU: first-round rule names a healthy GPU or "
                  "link in %d, confirmed rule in %d; the slow GPU named in %d of %d\n",
                  runs, runs, old_false, new_false, slow_named, runs);
    assert_int_equal(slow_named, runs);
    assert_true(old_false > 20);
    assert_true(new_false * 100 < 2 * 2 * runs);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(factor_three_noise_is_cleared_by_a_retest),
        cmocka_unit_test(a_slow_node_is_confirmed_by_its_retests),
        cmocka_unit_test(load_during_the_retests_blames_nobody),
        cmocka_unit_test(one_slow_control_is_noise),
        cmocka_unit_test(the_plan_pairs_suspects_with_distinct_fast_partners),
        cmocka_unit_test(a_neighbour_slow_only_with_the_culprit_is_ok),
        cmocka_unit_test(a_failed_retest_confirms_nothing),
        cmocka_unit_test(the_floor_judges_retests_too),
        cmocka_unit_test(two_nodes_are_not_retested),
        cmocka_unit_test(a_slow_majority_is_named_unconfirmed),
        cmocka_unit_test(judge_uses_the_retests),
        cmocka_unit_test(noisy_cluster_model),
        cmocka_unit_test(a_gpu_slow_once_is_cleared),
        cmocka_unit_test(a_slow_gpu_is_confirmed_and_a_slow_link_timed_again),
        cmocka_unit_test(host_load_during_gpu_retests_blames_no_gpu),
        cmocka_unit_test(failed_gpu_pairs_are_not_retested),
        cmocka_unit_test(noisy_gpu_model),
        cmocka_unit_test(a_slow_node_that_strangers_disturbed_is_not_judged),
        cmocka_unit_test(a_suspect_retested_on_fresh_ports_is_judged_on_them),
        cmocka_unit_test(an_undisturbed_slow_node_is_named_as_before),
        cmocka_unit_test(strangers_at_a_node_that_is_not_slow_say_nothing_of_slowness),
        cmocka_unit_test(nodes_of_one_machine_are_not_blamed_for_its_scheduler),
        cmocka_unit_test(a_throttled_link_on_a_shared_machine_is_named),
        cmocka_unit_test(nodes_of_their_own_machines_are_judged_as_before),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
