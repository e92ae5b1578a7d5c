// SPDX-License-Identifier: Apache-2.0
// Phase 4, pair tests, which name a culprit. Between nodes: rounds of
// disjoint node pairs (every pair up to 16 nodes, ring neighbours above).
// Inside nodes with several GPUs: rounds of disjoint GPU pairs, so a slow
// GPU or NVLink pair is named as a slow node is. On GPUs the rounds run on
// communicators split off the all-reduce's (helper/gpu/allreduce.cc); on CPUs rank 0 cues
// each pair's two ranks. Each pair's timed loop stops after its budget
// (0.01 x --timeout, 0.25 to 0.5 s) and counts its median pass; the
// retests run beside a control pair of two healthy nodes, timed at the
// same moment (load comes and goes). What looks slow in these first
// rounds is only a suspect: it is retested in more rounds, against
// partners this run proved fast (lib/check/retest), and named only if
// that is slow too. On GPUs every rank keeps its communicators for them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "helper/check/lead.h"
#include "helper/check/ring.h"
#include "lib/check/retest.h"
#include "lib/util/machine.h"
#include "lib/util/text.h"

namespace mn::check {
namespace {

// The strangers at this rank's data port during a pair test, into its
// report (and a line on stderr): those its doorway met where it accepted,
// and, unless the test ran on a fresh port (counted where it closed),
// those waiting in its data port's backlog at the end (held there while
// it connected to its peer, or opened again during the test).
void count_strangers(msg::PairReport& r, Strangers seen, const Step& st, bool fresh) {
    if (!fresh) seen.merge(take_waiting(st.data_listen.get()));
    if (seen.total == 0) return;
    r.strangers = seen.total;
    r.strangers_seen = seen.brief();
    std::fprintf(stderr, "mn-preflight: %s rank %u: strangers at its %s during %s: %s\n", st.self.label.c_str(),
                 st.self.rank, fresh ? "fresh port" : "data port", r.tag.c_str(), r.strangers_seen.c_str());
}

// A port for one retest (PairCue's fresh_port), where this rank listens
// for its data port; `port` is set to it.
Outcome<Fd> open_fresh_port(const Step& st, uint16_t& port) { return wire::listen_tcp(st.bind_addr, 0, &port); }

// One side of a pair test (CPU path): a two-member ring all-reduce with the
// peer rank 0 named, inside the cue's budget. The accepting side of a
// retest on a fresh port accepts on `fresh` (open_fresh_port) and closes
// it once its peer came: the timed test runs with no port of it open to
// strangers, who are refused from then on.
msg::PairReport run_pair(const msg::PairCue& q, const Step& st, Fd fresh = {}) {
    set_phase("pair test " + q.tag);
    const bool on_fresh = q.fresh_port.value_or(false);
    const Deadline pd = Deadline::in(std::min(st.work_end.left(), q.budget));
    Strangers seen;
    const int listen_fd = on_fresh ? fresh.get() : st.data_listen.get();
    Outcome<Fd> fd = q.connect ? data_connect(q.peer_addr, q.peer_port, q.tag, st.self, pd)
                               : data_accept(listen_fd, q.tag, q.peer, st.self, pd, &seen);
    if (on_fresh && !q.connect) {
        seen.merge(take_waiting(listen_fd));
        fresh = Fd{};
    }
    msg::PairReport r;
    r.tag = q.tag;
    if (!fd) {
        r.error = fd.problem().text();
        count_strangers(r, seen, st, on_fresh);
        return r;
    }
    const uint32_t pos = q.connect ? 0 : 1;
    std::vector<float> buf(q.bytes / sizeof(float));
    fill_pattern(buf, pos);
    Links links;
    links.pos = pos;
    links.n = 2;
    links.next = links.prev = fd->get();
    // How long this thread waited for a CPU meanwhile: a pair slowed by the
    // scheduler (nodes that share a machine) is no evidence against a node.
    const auto cpu_before = thread_cpu_times();
    const double t0 = now_s();
    Timed t = timed_ring(buf, q.iters, links, 2, pd, q.time_bound, slowed_from_round(q.tag) ? kPassPause : 0);
    r.cpu_wait = cpu_wait_share(cpu_before, thread_cpu_times(), now_s() - t0);
    if (const auto path = wire::path_seen(fd->get())) {
        r.retrans = path->retrans;
        r.rtt_ms = path->rtt_ms;
    }
    // Its median pass: a pass that waited on a busy scheduler is noise, a
    // slow link slows them all.
    r.seconds = t.median_pass > 0 ? t.median_pass : t.seconds;
    r.error = t.ok ? (t.correct ? "" : t.error) : t.error;
    count_strangers(r, seen, st, on_fresh);
    return r;
}

// This rank's part of the GPU retests: more split rounds on the
// communicators its all-reduce kept.
msg::GpuRetestReport run_gpu_retest(const msg::GpuRetest& q, const Step& st) {
    set_phase("GPU retests");
    const gpu::PairRounds r = gpu::retest_pairs(q.colors, stalls_pairs(st.self.rank, true) ? kStall : 0);
    return {r.seconds, r.error};
}

// Keeps the larger of two sides' figures under `tag`; none once a side
// had none.
template <typename T>
void larger(std::map<std::string, std::optional<T>>& m, const std::string& tag, const std::optional<T>& v) {
    const auto [it, first] = m.try_emplace(tag, v);
    if (!first) it->second = it->second && v ? std::optional<T>(std::max(*it->second, *v)) : std::nullopt;
}

// One round of CPU pair tests under way: who must report which tag.
struct Round {
    std::map<uint32_t, std::string> expect;     // rank -> tag
    std::optional<msg::PairCue> own;            // rank 0's part
    // Retests on fresh ports: the connecting sides' cues, sent (or, rank
    // 0's, started) once their peer said the port it opened; by tag.
    std::map<std::string, std::pair<uint32_t, msg::PairCue>> held;
    std::shared_ptr<Fd> own_fresh;              // the port rank 0 opened for its accepting side
    std::set<std::string> fresh;                // the tags that run on fresh ports
    std::map<std::string, std::vector<std::string>> errors;
    std::map<std::string, double> slowest;
    std::map<std::string, unsigned> strangers;      // at either side's data port
    std::map<std::string, std::string> strangers_seen;  // "at node1: 8 connections from ..."
    // The larger of its sides' waits for a CPU, retransmissions and round
    // trips; none once a side did not say.
    std::map<std::string, std::optional<double>> cpu_wait, rtt_ms;
    std::map<std::string, std::optional<uint32_t>> retrans;
    // A side's report; `host`: its node.
    void take(const msg::PairReport& r, const std::string& host) {
        if (!r.error.empty()) errors[r.tag].push_back(r.error);
        slowest[r.tag] = std::max(slowest[r.tag], r.seconds);
        larger(cpu_wait, r.tag, r.cpu_wait);
        larger(retrans, r.tag, r.retrans);
        larger(rtt_ms, r.tag, r.rtt_ms);
        if (r.strangers == 0) return;
        strangers[r.tag] += r.strangers;
        std::string& seen = strangers_seen[r.tag];
        seen += (seen.empty() ? "at " : "; at ") + host + ": " + r.strangers_seen;
    }
};

using NodePairs = std::vector<std::pair<uint32_t, uint32_t>>;

// "pair:K:Q" for the first rounds, "retest:K:Q" for the retests.
std::string pair_tag(const std::string& kind, std::size_t round, std::size_t pair) {
    return kind + ":" + std::to_string(round) + ":" + std::to_string(pair);
}

// Starts rank 0's side of a pair test on a thread.
void start_own(Step& st, Lead& l, const msg::PairCue& cue, std::shared_ptr<Fd> fresh) {
    l.own_pair = on_thread<msg::PairReport>([cue, fresh, &st] { return run_pair(cue, st, std::move(*fresh)); });
}

// Cues both sides of each pair of a round (node representatives: their
// lowest rank); rank 0's own side is kept for it to run. A retest runs on
// a port its accepting side opens for it (PairCue's fresh_port) where that
// side's build can: its connecting side is cued once the port is known.
Round cue_round(Step& st, Lead& l, const NodePairs& pairs, const std::string& kind, std::size_t k, double budget) {
    Round round;
    for (std::size_t q = 0; q < pairs.size(); ++q) {
        const uint32_t a = l.rep.nodes[pairs[q].first].ranks.front(), b = l.rep.nodes[pairs[q].second].ranks.front();
        const std::string tag = pair_tag(kind, k, q);
        bool fresh = kind == "retest" && l.members[b].hello.fresh_ports.value_or(false);
        uint16_t own_port = 0;
        if (fresh && b == 0) {
            // Rank 0 accepts: its port is known now. One it cannot open
            // leaves the retest on its data port.
            auto opened = open_fresh_port(st, own_port);
            if (opened) round.own_fresh = std::make_shared<Fd>(std::move(opened.value()));
            else fresh = false;
        }
        if (fresh) round.fresh.insert(tag);
        for (int side = 1; side >= 0; --side) {  // the accepting side first
            const uint32_t me = side == 0 ? a : b, peer = side == 0 ? b : a;
            msg::PairCue m;
            m.tag = tag;
            m.peer = peer;
            m.peer_addr = l.members[peer].hello.data_addr;
            m.peer_port = l.members[peer].hello.data_port;
            m.connect = side == 0;
            m.bytes = l.pair_bytes;
            m.iters = 5;
            m.budget = budget;
            m.time_bound = st.budget.pair;
            if (fresh) m.fresh_port = true;
            if (fresh && m.connect && peer == 0) m.peer_port = own_port;
            if (me != 0) round.expect[me] = tag;
            if (me == 0) round.own = m;
            if (fresh && m.connect && peer != 0) round.held[tag] = {me, m};
            else if (me != 0) l.tell(me, m, st.end);
        }
    }
    return round;
}

// The accepting side of `tag` opened `port`: its connecting side is cued
// (rank 0's own started).
void cue_held(Step& st, Lead& l, Round& round, const std::string& tag, uint16_t port) {
    const auto it = round.held.find(tag);
    if (it == round.held.end()) return;
    auto [rank, cue] = it->second;
    round.held.erase(it);
    cue.peer_port = port;
    if (rank == 0) start_own(st, l, cue, std::make_shared<Fd>());
    else l.tell(rank, cue, st.end);
}

// Every cued rank's report and rank 0's own side (on a thread), or why
// none came; false when a rank was lost meanwhile (noted: the pair tests
// end there, the others stopped by it).
bool await_round(Step& st, Lead& l, Round& round, double budget) {
    std::vector<bool> waiting(st.self.world, false);
    // Rank 0's side: started, or held for its peer's port (not a late one
    // of an earlier round).
    const bool own_held = round.own && round.held.count(round.own->tag) && round.held.at(round.own->tag).first == 0;
    waiting[0] = round.own && (l.own_pair.valid() || own_held);
    for (const auto& [r, tag] : round.expect) waiting[r] = true;
    auto take = [&](uint32_t r, const msg::PairReport& m) {
        if (r != 0 && round.expect.at(r) != m.tag) return Reply::Ignored;
        if (m.listening) {  // not its report yet: the port its peer is to meet it on
            cue_held(st, l, round, m.tag, *m.listening);
            return Reply::Ignored;
        }
        round.take(m, l.rep.nodes[l.members[r].node_index].host);
        return Reply::Taken;
    };
    const Deadline wait = Deadline::in(std::min(st.end.left(), budget + 2));
    if (!l.await_replies(waiting, l.own_pair, wait, take)) return false;
    for (const auto& [r, tag] : round.expect)
        if (waiting[r])
            round.errors[tag].push_back("rank " + std::to_string(r) +
                                        (round.held.count(tag) ? " was never cued: its peer never said the port it opened"
                                                               : " did not report"));
    if (waiting[0]) round.errors[round.own->tag].push_back("rank 0's side did not finish");
    return true;
}

// Runs rounds of node pairs (kind "pair" or "retest"), one round at a time
// so that pairs never share a link with another pair's test; each pair's
// result goes to `out`. `reserve` rounds more are to come after these:
// they keep a share of the time. False when a rank was lost (noted).
bool run_rounds(Step& st, Lead& l, const std::vector<NodePairs>& rounds, const std::string& kind, std::size_t reserve,
                std::vector<PairResult>& out) {
    for (std::size_t k = 0; k < rounds.size() && !st.work_end.passed(); ++k) {
        const double budget = std::max(1.0, st.work_end.left() / double(rounds.size() - k + reserve));
        set_phase(kind + " round " + std::to_string(k + 1) + " of " + std::to_string(rounds.size()));
        Round round = cue_round(st, l, rounds[k], kind, k, budget);
        if (round.own && !round.held.count(round.own->tag))
            start_own(st, l, *round.own, round.own_fresh ? round.own_fresh : std::make_shared<Fd>());
        if (!await_round(st, l, round, budget)) return false;
        for (std::size_t q = 0; q < rounds[k].size(); ++q) {
            const std::string tag = pair_tag(kind, k, q);
            PairResult pr;
            pr.a = rounds[k][q].first;
            pr.b = rounds[k][q].second;
            if (!round.errors[tag].empty()) pr.error = round.errors[tag].front();
            else if (round.slowest[tag] > 0) pr.busbw_gbps = allreduce_busbw(l.pair_bytes / round.slowest[tag] / 1e9, 2);
            pr.strangers = round.strangers[tag];
            pr.strangers_seen = round.strangers_seen[tag];
            pr.cpu_wait = round.cpu_wait[tag];
            pr.retrans = round.retrans[tag];
            pr.rtt_ms = round.rtt_ms[tag];
            pr.fresh_port = round.fresh.count(tag) > 0;
            out.push_back(pr);
        }
        // A long check (slow links, many rounds) shows it is moving.
        if (rounds.size() > 3 || now_s() - st.start > 5)
            progress(st.self, kind + " round " + std::to_string(k + 1) + " of " + std::to_string(rounds.size()) +
                                  " done (" + num(now_s() - st.start) + " s)");
    }
    return true;
}

// The CPU path's pair tests: the first rounds make suspects, retests
// against proven-fast partners confirm or clear them (lib/check/retest).
// False when a rank was lost (noted).
bool cpu_pairs(Step& st, Lead& l) {
    PreflightReport& rep = l.rep;
    const uint32_t nnodes = static_cast<uint32_t>(rep.nodes.size());
    if (!run_rounds(st, l, l.rounds, "pair", kRetestsPerSuspect, rep.pairs)) return false;
    if (!l.rounds.empty())
        progress(st.self, "pair tests: " + std::to_string(rep.pairs.size()) + " pairs in " +
                              std::to_string(l.rounds.size()) + " rounds (" + num(now_s() - st.start) + " s)");
    if (l.rounds.empty()) return true;
    rep.retest_plan = std::make_shared<const RetestPlan>(plan_retests(rep.pairs, nnodes, st.o.min_busbw));
    const RetestPlan& plan = *rep.retest_plan;
    rep.retests_ran = true;
    if (plan.rounds.empty()) return true;
    std::vector<std::string> names;
    for (uint32_t s : plan.suspects) names.push_back(rep.nodes[s].host);
    progress(st.self, "retesting " + join_list(names) + " against nodes proven fast (" +
                          std::to_string(plan.rounds.size()) + " rounds)");
    return run_rounds(st, l, plan.rounds, "retest", 0, rep.retests);
}

// ---- the GPU path ----------------------------------------------------------

// Every lane (NCCL rank) of the step, in NCCL rank order: its GPU as its
// rank named it, and its node.
struct Lanes {
    std::vector<std::string> names;
    std::vector<uint32_t> node;
    std::map<std::pair<uint32_t, std::string>, uint32_t> index;  // (node, GPU) -> lane
};

Lanes lanes_of(const Step& st, const Lead& l) {
    Lanes m;
    for (uint32_t r = 0; r < st.self.world; ++r) {
        const msg::Hello& h = l.members[r].hello;
        for (uint32_t i = 0; i < h.lanes; ++i) {
            const std::string name = i < h.lane_gpus.size() ? h.lane_gpus[i] : "GPU?";
            m.index[{l.members[r].node_index, name}] = static_cast<uint32_t>(m.names.size());
            m.names.push_back(name);
            m.node.push_back(l.members[r].node_index);
        }
    }
    return m;
}

// A lane's seconds for a round its rank never reported.
const double kAbsent = std::numeric_limits<double>::quiet_NaN();

// Each rank's seconds per round and lane (`per_rank[r]`), laid out as
// [round][lane]; a round a rank never reached is kAbsent for its lanes.
std::vector<std::vector<double>> by_lane(const Step& st, const Lead& l,
                                         const std::vector<std::vector<std::vector<double>>>& per_rank) {
    std::vector<std::vector<double>> secs;
    for (uint32_t r = 0; r < st.self.world; ++r) {
        const uint32_t lanes = l.members[r].hello.lanes;
        for (std::size_t k = 0; k < per_rank[r].size(); ++k) {
            if (secs.size() <= k) secs.resize(k + 1);
            for (uint32_t i = 0; i < lanes; ++i) {
                const std::size_t lane = l.first_lane[r] + i;
                if (secs[k].size() <= lane) secs[k].resize(lane + 1, kAbsent);
                secs[k][lane] = i < per_rank[r][k].size() ? per_rank[r][k][i] : 0;
            }
        }
    }
    return secs;
}

// One timed GPU pair: what it tests (GpuRound::Pair) and its busbw or error.
struct Scored {
    bool intra = false;
    GpuRound::Pair what;
    double busbw = 0;
    std::string error;
};

// The pairs of `rounds` from their lanes' seconds: a pair's time is its
// slowest lane's. A round with lanes missing never ran: skipped, or with
// `missing` its pairs carry that as their error (a retest that was lost).
std::vector<Scored> score(const std::vector<GpuRound>& rounds, const std::vector<std::vector<double>>& secs,
                          std::size_t bytes, const std::string& missing = "") {
    std::vector<Scored> out;
    for (std::size_t k = 0; k < rounds.size(); ++k) {
        const GpuRound& g = rounds[k];
        for (const auto& [c, what] : g.what) {
            double slowest = 0;
            uint32_t nr = 0;
            bool absent = false;
            for (std::size_t lane = 0; lane < g.color.size(); ++lane) {
                if (g.color[lane] != c) continue;
                ++nr;
                if (k >= secs.size() || lane >= secs[k].size() || std::isnan(secs[k][lane])) absent = true;
                else slowest = std::max(slowest, secs[k][lane] > 0 ? secs[k][lane] : 1e9);
            }
            if (absent && missing.empty()) continue;  // this round never ran (the pair tests were skipped, with a note)
            Scored s{g.intra, what, 0, absent ? missing : slowest >= 1e9 ? "the pair's all-reduce failed" : ""};
            if (s.error.empty() && slowest > 0) s.busbw = allreduce_busbw(bytes / slowest / 1e9, nr);
            out.push_back(s);
        }
    }
    return out;
}

// A node pair timed over NCCL: no doorway (no strangers), and NCCL's
// connections say nothing of waits or retransmissions.
PairResult nccl_pair(const Scored& s) {
    PairResult p;
    p.a = s.what.a;
    p.b = s.what.b;
    p.busbw_gbps = s.busbw;
    p.error = s.error;
    return p;
}

// The GPU path's pairs: every rank timed each round on each of its lanes.
void gpu_pairs(Step& st, Lead& l) {
    const Lanes m = lanes_of(st, l);
    std::vector<std::vector<std::vector<double>>> per_rank;
    for (const auto& r : l.results) per_rank.push_back(r.pair_seconds);
    for (const Scored& s : score(l.gpu_rounds, by_lane(st, l, per_rank), l.pair_bytes)) {
        if (s.intra) l.rep.gpu_pairs.push_back({m.node[s.what.a], m.names[s.what.a], m.names[s.what.b], s.busbw, s.error});
        else l.rep.pairs.push_back(nccl_pair(s));
    }
}

// A round of node pairs on GPUs: every lane of a pair's two nodes takes
// the pair's color.
GpuRound node_round(const Lanes& m, const NodePairs& round) {
    GpuRound g;
    g.color.assign(m.names.size(), -1);
    for (std::size_t q = 0; q < round.size(); ++q) {
        g.what[static_cast<int>(q)] = {round[q].first, round[q].second};
        for (std::size_t lane = 0; lane < m.node.size(); ++lane)
            if (m.node[lane] == round[q].first || m.node[lane] == round[q].second) g.color[lane] = static_cast<int>(q);
    }
    return g;
}

// The retest rounds on GPUs: node suspects with their partners (every
// lane of both nodes one color, as in the first rounds), then GPU
// suspects inside nodes (a color per GPU pair; `a` the suspect).
std::vector<GpuRound> gpu_retest_rounds(const Lanes& m, const RetestPlan& nodes, const GpuRetestPlan& gpus) {
    std::vector<GpuRound> out;
    for (const auto& round : nodes.rounds) out.push_back(node_round(m, round));
    for (const auto& round : gpus.rounds) {
        GpuRound g;
        g.intra = true;
        g.color.assign(m.names.size(), -1);
        for (std::size_t q = 0; q < round.size(); ++q) {
            auto a = m.index.find({round[q].node, round[q].gpu_a}), b = m.index.find({round[q].node, round[q].gpu_b});
            if (a == m.index.end() || b == m.index.end()) continue;
            g.color[a->second] = g.color[b->second] = static_cast<int>(q);
            g.what[static_cast<int>(q)] = {a->second, b->second};
        }
        if (!g.what.empty()) out.push_back(g);
    }
    return out;
}

// Each rank's retest report, rank 0's own from its thread; false when a
// rank was lost meanwhile (noted, the others stopped). A rank that sent
// none in time leaves its lanes without seconds.
bool collect_retests(Step& st, Lead& l, std::size_t rounds, std::vector<std::vector<std::vector<double>>>& per_rank,
                     std::vector<std::string>& errors) {
    const uint32_t world = st.self.world;
    per_rank.assign(world, {});
    std::vector<bool> waiting(world, true);
    auto take = [&](uint32_t r, const msg::GpuRetestReport& m) {
        per_rank[r] = m.seconds;
        if (!m.error.empty()) errors.push_back(l.who(r) + ": " + m.error);
        return Reply::Taken;
    };
    // Each round: a split and a timed loop of at most the pair budget.
    const Deadline wait = Deadline::in(std::min(st.end.left(), double(rounds) * (st.budget.pair + 3) + 2));
    if (!l.await_replies(waiting, l.own_retest, wait, take)) return false;
    for (uint32_t r = 0; r < world; ++r)
        if (waiting[r]) errors.push_back(l.who(r) + " did not report its retests in time");
    return true;
}

// The GPU path's retests: the suspects of the first rounds (nodes, GPUs,
// links) timed again on communicators split off the all-reduce's, which
// every rank kept for this. False when a rank was lost (noted).
bool gpu_retests(Step& st, Lead& l) {
    PreflightReport& rep = l.rep;
    const uint32_t nnodes = static_cast<uint32_t>(rep.nodes.size());
    RetestPlan nodes;
    GpuRetestPlan gpus;
    if (!rep.pairs.empty()) {
        rep.retest_plan = std::make_shared<const RetestPlan>(plan_retests(rep.pairs, nnodes, st.o.min_busbw));
        nodes = *rep.retest_plan;
        rep.retests_ran = true;
    }
    if (!rep.gpu_pairs.empty()) {
        rep.gpu_retest_plan = std::make_shared<const GpuRetestPlan>(plan_gpu_retests(rep.gpu_pairs));
        gpus = *rep.gpu_retest_plan;
        rep.gpu_retests_ran = true;
    }
    const Lanes m = lanes_of(st, l);
    const std::vector<GpuRound> rounds = gpu_retest_rounds(m, nodes, gpus);
    if (rounds.empty()) return true;
    std::vector<std::string> names;
    for (uint32_t s : nodes.suspects) names.push_back(rep.nodes[s].host);
    for (const auto& s : gpus.suspects)
        names.push_back(rep.nodes[s.node].host + " " + (s.other.empty() ? s.gpu : s.gpu + " - " + s.other));
    set_phase("GPU retests");
    progress(st.self, "retesting " + join_list(names) + " (" + std::to_string(rounds.size()) + " rounds of NCCL splits)");
    for (uint32_t r = 0; r < st.self.world; ++r) {
        const msg::GpuRetest q{rank_colors(l, r, rounds)};
        if (r == 0) l.own_retest = on_thread<msg::GpuRetestReport>([q, &st] { return run_gpu_retest(q, st); });
        else l.tell(r, q, st.end);
    }
    std::vector<std::vector<std::vector<double>>> per_rank;
    std::vector<std::string> errors;
    if (!collect_retests(st, l, rounds.size(), per_rank, errors)) return false;
    const std::string missing = errors.empty() ? "not timed" : errors.front();
    for (const Scored& s : score(rounds, by_lane(st, l, per_rank), l.pair_bytes, missing)) {
        if (s.intra) rep.gpu_retests.push_back({m.node[s.what.a], m.names[s.what.a], m.names[s.what.b], s.busbw, s.error});
        else rep.retests.push_back(nccl_pair(s));
    }
    return true;
}

}  // namespace

std::vector<std::vector<int>> rank_colors(const Lead& l, uint32_t r, const std::vector<GpuRound>& rounds) {
    std::vector<std::vector<int>> out;
    for (const auto& g : rounds) {
        std::vector<int> mine;
        for (uint32_t k = 0; k < l.members[r].hello.lanes; ++k) mine.push_back(g.color[l.first_lane[r] + k]);
        out.push_back(mine);
    }
    return out;
}

void gpu_pair_plan(const Step& st, Lead& l) {
    if (!st.o.pairs) return;
    const Lanes m = lanes_of(st, l);
    const std::vector<uint32_t>& lane_node = m.node;
    std::map<uint32_t, std::vector<uint32_t>> node_lanes;
    for (uint32_t lane = 0; lane < lane_node.size(); ++lane) node_lanes[lane_node[lane]].push_back(lane);
    for (const auto& round : l.rounds) l.gpu_rounds.push_back(node_round(m, round));
    // Inside nodes: every pair of a node's GPUs, all nodes at once.
    std::map<uint32_t, std::vector<std::vector<std::pair<uint32_t, uint32_t>>>> inside;
    std::size_t n_inside = 0;
    for (const auto& [node, lanes] : node_lanes) {
        inside[node] = pair_rounds(static_cast<uint32_t>(lanes.size()));
        n_inside = std::max(n_inside, inside[node].size());
    }
    for (std::size_t i = 0; i < n_inside; ++i) {
        GpuRound g;
        g.intra = true;
        g.color.assign(lane_node.size(), -1);
        for (const auto& [node, rounds] : inside) {
            if (i >= rounds.size()) continue;
            for (std::size_t q = 0; q < rounds[i].size(); ++q) {
                const int c = static_cast<int>(node * 1000 + q);
                const uint32_t a = node_lanes[node][rounds[i][q].first], b = node_lanes[node][rounds[i][q].second];
                g.color[a] = g.color[b] = c;
                g.what[c] = {a, b};
            }
        }
        l.gpu_rounds.push_back(g);
    }
    // A round whose one pair is every lane (one node of two GPUs) times
    // what the all-reduce already timed: it would only add its set-up.
    l.gpu_rounds.erase(std::remove_if(l.gpu_rounds.begin(), l.gpu_rounds.end(),
                                       [](const GpuRound& g) {
                                           return !g.color.empty() && g.color.front() >= 0 &&
                                                  std::all_of(g.color.begin(), g.color.end(),
                                                              [&](int c) { return c == g.color.front(); });
                                       }),
                        l.gpu_rounds.end());
}

void lead_pairs(Step& st, Lead& l) {
    l.enter(msg::Stage::Pairs);
    if (l.gpu_path) {
        gpu_pairs(st, l);
        gpu_retests(st, l);
    } else {
        cpu_pairs(st, l);
    }
    l.cost.mark("pairs", st.start);
}

int serve_pairs(Step& st, Follower& f) {
    return f.until_word(st.self, st.end, "waiting for rank 0", "lost rank 0", [&](const msg::FromLead& m) {
        if (const auto* g = std::get_if<msg::GpuRetest>(&m)) return f.ctl.send(run_gpu_retest(*g, st), st.end);
        if (const auto* q = std::get_if<msg::PairCue>(&m)) {
            if (q->connect || !q->fresh_port.value_or(false)) return f.ctl.send(run_pair(*q, st), st.end);
            // A retest on a fresh port: open it, say it, then meet the peer there.
            msg::PairReport said;
            said.tag = q->tag;
            uint16_t port = 0;
            auto fresh = open_fresh_port(st, port);
            if (!fresh) {
                said.error = fresh.problem().text();
                return f.ctl.send(said, st.end);
            }
            said.listening = port;
            return f.ctl.send(said, st.end) && f.ctl.send(run_pair(*q, st, std::move(fresh.value())), st.end);
        }
        return true;
    });
}

}  // namespace mn::check
