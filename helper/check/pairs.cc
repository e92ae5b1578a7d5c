// Phase 4, pair tests, which name a culprit. Between nodes: rounds of
// disjoint node pairs (every pair up to 16 nodes, ring neighbours above).
// Inside nodes with several GPUs: rounds of disjoint GPU pairs, so a slow
// GPU or NVLink pair is named as a slow node is. On GPUs the rounds run on
// communicators split off the all-reduce's (gpu.cc); on CPUs rank 0 cues
// each pair's two ranks. Each pair's timed loop stops after its budget
// (0.02 x --timeout, 0.25 to 1 s).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "helper/check/step.h"
#include "lib/util/text.h"

namespace mn::check {
namespace {

// One side of a pair test (CPU path): a two-member ring all-reduce with the
// peer rank 0 named, inside `budget` seconds.
Fields run_pair(Fields q, const Step& st, double budget) {
    set_phase("pair test " + q["tag"]);
    const uint32_t peer = static_cast<uint32_t>(std::atoi(q["peer"].c_str()));
    const bool connect = q["connect"] == "1";
    const Deadline pd = Deadline::in(std::min(st.work_end.left(), budget));
    Outcome<Fd> fd = connect ? data_connect(q["peer_addr"], static_cast<uint16_t>(std::atoi(q["peer_port"].c_str())),
                                            q["tag"], st.self.rank, st.self.secret, pd)
                             : data_accept(st.data_listen.get(), q["tag"], peer, st.self.secret, pd);
    Fields r{{"op", "pair"}, {"tag", q["tag"]}};
    if (!fd) {
        r["error"] = fd.problem().text();
        return r;
    }
    const uint32_t pos = connect ? 0 : 1;
    std::vector<float> buf(std::strtoull(q["bytes"].c_str(), nullptr, 10) / sizeof(float));
    Timed t = timed_ring(buf, std::atoi(q["iters"].c_str()), pos, 2, fd->get(), fd->get(), pd,
                         std::atof(q["time_bound"].c_str()));
    r["seconds"] = num(t.seconds, 9);
    r["error"] = t.ok ? (t.correct ? "" : t.error) : t.error;
    return r;
}

void cpu_pairs(Step& st) {
    const Self& self = st.self;
    PreflightReport& rep = st.rep;
    const auto& rounds = st.rounds;
    // Node representatives (their lowest rank) test each pair, one round
    // at a time so pairs never share a link with another pair's test.
    std::vector<uint32_t> repr(rep.nodes.size());
    for (std::size_t i = 0; i < rep.nodes.size(); ++i) repr[i] = rep.nodes[i].ranks.front();
    const int piters = 3;
    for (std::size_t k = 0; k < rounds.size() && !st.work_end.passed(); ++k) {
        const double budget = std::max(1.0, st.work_end.left() / double(rounds.size() - k));
        set_phase("pair round " + std::to_string(k + 1) + " of " + std::to_string(rounds.size()));
        std::map<uint32_t, std::string> expect;        // rank -> tag
        std::optional<Fields> own;                     // rank 0's part
        for (std::size_t q = 0; q < rounds[k].size(); ++q) {
            const uint32_t a = repr[rounds[k][q].first], b = repr[rounds[k][q].second];
            const std::string tag = "pair:" + std::to_string(k) + ":" + std::to_string(q);
            for (int side = 0; side < 2; ++side) {
                const uint32_t me_r = side == 0 ? a : b, peer = side == 0 ? b : a;
                Fields m{{"op", "pair"},
                         {"tag", tag},
                         {"peer", std::to_string(peer)},
                         {"peer_addr", st.members[peer].hello["data_addr"]},
                         {"peer_port", st.members[peer].hello["data_port"]},
                         {"connect", side == 0 ? "1" : "0"},
                         {"bytes", std::to_string(st.pair_bytes)},
                         {"iters", std::to_string(piters)},
                         {"budget", num(budget, 3)},
                         {"time_bound", num(st.budget.pair, 3)}};
                if (me_r == 0) {
                    own = m;
                } else {
                    wire::send_msg(st.members[me_r].ctl.get(), m, st.end);
                    expect[me_r] = tag;
                }
            }
        }
        std::map<std::string, std::vector<std::string>> errors;
        std::map<std::string, double> slowest;
        auto take = [&](const std::string& tag, Fields& r) {
            if (!r["error"].empty()) errors[tag].push_back(r["error"]);
            slowest[tag] = std::max(slowest[tag], std::atof(r["seconds"].c_str()));
        };
        if (own) {
            Fields r = run_pair(*own, st, budget);
            take((*own)["tag"], r);
        }
        const Deadline wait = Deadline::in(std::min(st.end.left(), budget + 2));
        while (!expect.empty()) {
            auto e = st.mux.next(wait);
            if (!e) break;
            auto it = expect.find(static_cast<uint32_t>(e->key));
            if (it == expect.end()) continue;
            if (e->msg && (*e->msg)["op"] == "pair" && (*e->msg)["tag"] == it->second) take(it->second, *e->msg);
            else if (!e->msg) errors[it->second].push_back("rank " + std::to_string(it->first) + " is gone (" + e->error + ")");
            else continue;
            expect.erase(it);
        }
        for (const auto& [r, tag] : expect) errors[tag].push_back("rank " + std::to_string(r) + " did not report");
        for (std::size_t q = 0; q < rounds[k].size(); ++q) {
            const std::string tag = "pair:" + std::to_string(k) + ":" + std::to_string(q);
            PairResult pr{rounds[k][q].first, rounds[k][q].second, 0, ""};
            if (!errors[tag].empty()) pr.error = errors[tag].front();
            else if (slowest[tag] > 0) pr.busbw_gbps = allreduce_busbw(st.pair_bytes / slowest[tag] / 1e9, 2);
            rep.pairs.push_back(pr);
        }
        // A long check (slow links, many rounds) shows it is moving.
        if (rounds.size() > 3 || now_s() - st.start > 5)
            progress(self, "pair round " + std::to_string(k + 1) + " of " + std::to_string(rounds.size()) + " done (" +
                               num(now_s() - st.start) + " s)");
    }
    if (!rounds.empty())
        progress(self, "pair tests: " + std::to_string(rep.pairs.size()) + " pairs in " + std::to_string(rounds.size()) +
                           " rounds (" + num(now_s() - st.start) + " s)");
}

// The GPU path's pairs: every rank timed each round on each of its lanes;
// a pair's time is its slowest lane's.
void gpu_pairs(Step& st) {
    const uint32_t world = st.self.world;
    std::vector<std::vector<double>> secs;  // [round][lane]
    std::vector<std::string> names;         // [lane]
    for (uint32_t r = 0; r < world; ++r) {
        const auto rounds = split_list(st.results[r]["pair_seconds"], ';');
        const auto lane_names = split_list(st.members[r].hello["lane_gpus"], ';');
        for (uint32_t l = 0; l < st.members[r].lanes(); ++l) names.push_back(l < lane_names.size() ? lane_names[l] : "GPU?");
        for (std::size_t k = 0; k < rounds.size(); ++k) {
            if (secs.size() <= k) secs.resize(k + 1);
            const auto v = split_numbers(rounds[k]);
            for (uint32_t l = 0; l < st.members[r].lanes(); ++l) {
                const std::size_t lane = st.first_lane[r] + l;
                if (secs[k].size() <= lane) secs[k].resize(lane + 1, 0);
                secs[k][lane] = l < v.size() ? v[l] : 0;
            }
        }
    }
    std::vector<uint32_t> lane_node(names.size(), 0);
    for (uint32_t r = 0; r < world; ++r)
        for (uint32_t l = 0; l < st.members[r].lanes(); ++l) lane_node[st.first_lane[r] + l] = st.members[r].node_index;
    for (std::size_t k = 0; k < st.gpu_rounds.size(); ++k) {
        const GpuRound& g = st.gpu_rounds[k];
        for (const auto& [c, what] : g.what) {
            double slowest = 0;
            uint32_t nr = 0;
            bool missing = false;
            for (std::size_t l = 0; l < g.color.size(); ++l) {
                if (g.color[l] != c) continue;
                ++nr;
                if (k >= secs.size() || l >= secs[k].size()) missing = true;
                else slowest = std::max(slowest, secs[k][l] > 0 ? secs[k][l] : 1e9);
            }
            if (missing) continue;  // this round never ran (the pair tests were skipped, with a note)
            const std::string err = slowest >= 1e9 ? "the pair's all-reduce failed" : "";
            const double busbw = err.empty() && slowest > 0 ? allreduce_busbw(st.pair_bytes / slowest / 1e9, nr) : 0;
            if (g.intra)
                st.rep.gpu_pairs.push_back({lane_node[what.a], names[what.a], names[what.b], busbw, err});
            else
                st.rep.pairs.push_back({what.a, what.b, busbw, err});
        }
    }
}

}  // namespace

std::vector<std::vector<int>> gpu_pair_plan(Step& st) {
    std::vector<std::vector<int>> out;
    if (!st.o.pairs) return out;
    const uint32_t world = st.self.world;
    std::vector<uint32_t> lane_node;
    std::map<uint32_t, std::vector<uint32_t>> node_lanes;
    for (uint32_t r = 0; r < world; ++r)
        for (uint32_t l = 0; l < st.members[r].lanes(); ++l) {
            node_lanes[st.members[r].node_index].push_back(static_cast<uint32_t>(lane_node.size()));
            lane_node.push_back(st.members[r].node_index);
        }
    for (const auto& round : st.rounds) {
        GpuRound g;
        g.color.assign(lane_node.size(), -1);
        for (std::size_t q = 0; q < round.size(); ++q) {
            g.what[static_cast<int>(q)] = {round[q].first, round[q].second};
            for (std::size_t l = 0; l < lane_node.size(); ++l)
                if (lane_node[l] == round[q].first || lane_node[l] == round[q].second) g.color[l] = static_cast<int>(q);
        }
        st.gpu_rounds.push_back(g);
    }
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
        st.gpu_rounds.push_back(g);
    }
    // A round whose one pair is every lane (one node of two GPUs) times
    // what the all-reduce already timed: it would only add its set-up.
    st.gpu_rounds.erase(std::remove_if(st.gpu_rounds.begin(), st.gpu_rounds.end(),
                                       [](const GpuRound& g) {
                                           return !g.color.empty() && g.color.front() >= 0 &&
                                                  std::all_of(g.color.begin(), g.color.end(),
                                                              [&](int c) { return c == g.color.front(); });
                                       }),
                        st.gpu_rounds.end());
    for (const auto& g : st.gpu_rounds) out.push_back(g.color);
    return out;
}

void lead_pairs(Step& st) {
    st.phase = "pairs";
    if (st.gpu_path) gpu_pairs(st);
    else cpu_pairs(st);
}

int serve_pairs(Step& st) {
    while (true) {
        set_phase("waiting for rank 0");
        std::string err;
        // Rank 0 speaks at the end of its budget: listen a little longer.
        auto m = st.inbox.next(Deadline::in(st.end.left() + 0.4), &err);
        if (!m) {
            std::fprintf(stderr, "mn-preflight: %s rank %u: lost rank 0 (%s)\n", st.self.label.c_str(), st.self.rank,
                         err.c_str());
            return kTimeout;
        }
        Fields& q = *m;
        if (q["op"] == "done") {
            mark_done();
            return std::atoi(q["code"].c_str());
        }
        if (q["op"] != "pair") continue;
        Fields r = run_pair(q, st, std::atof(q["budget"].c_str()));
        if (!wire::send_msg(st.ctl.get(), r, st.end)) return kTimeout;
    }
}

}  // namespace mn::check
