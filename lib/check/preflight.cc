// SPDX-License-Identifier: Apache-2.0
#include "lib/check/preflight.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>

#include "lib/check/retest.h"
#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn {
namespace {

// Bandwidths keep three significant digits when small: 0.0123, not 0.01.
std::string bw(double gbps) { return gbps >= 10 || gbps == 0 ? num(gbps, 1) : num(gbps, gbps >= 1 ? 2 : 4); }

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::size_t cpu_default_bytes(uint32_t tasks_per_node) {
    constexpr std::size_t kNode = 4u << 20, kLeast = 256u << 10;
    return std::max(kLeast, kNode / std::max<uint32_t>(1, tasks_per_node) / 64 * 64);
}

double allreduce_busbw(double algbw, uint32_t nranks) {
    return nranks == 0 ? 0 : algbw * 2.0 * (nranks - 1) / nranks;
}

std::vector<std::vector<std::pair<uint32_t, uint32_t>>> pair_rounds(uint32_t nnodes) {
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> rounds;
    if (nnodes < 2) return rounds;
    if (nnodes <= kAllPairsMax) {
        // Circle method: fix slot 0, rotate the rest; an odd count gets a
        // bye (the slot numbered nnodes).
        const uint32_t m = nnodes % 2 ? nnodes + 1 : nnodes;
        std::vector<uint32_t> slot(m);
        for (uint32_t i = 0; i < m; ++i) slot[i] = i;
        for (uint32_t r = 0; r + 1 < m; ++r) {
            std::vector<std::pair<uint32_t, uint32_t>> round;
            for (uint32_t i = 0; i < m / 2; ++i) {
                uint32_t a = slot[i], b = slot[m - 1 - i];
                if (a >= nnodes || b >= nnodes) continue;
                round.push_back({std::min(a, b), std::max(a, b)});
            }
            rounds.push_back(round);
            std::rotate(slot.begin() + 1, slot.end() - 1, slot.end());
        }
        return rounds;
    }
    // Ring neighbours (i, i+1): even i, odd i, and the closing edge when
    // nnodes is odd.
    rounds.resize(nnodes % 2 ? 3 : 2);
    for (uint32_t i = 0; i < nnodes; ++i) {
        const uint32_t j = (i + 1) % nnodes;
        const std::size_t r = (nnodes % 2 && i == nnodes - 1) ? 2 : i % 2;
        rounds[r].push_back({std::min(i, j), std::max(i, j)});
    }
    return rounds;
}

std::string FabricSignature::summary() const {
    if (fabric == "socket") return "socket" + (mtu ? " mtu " + std::to_string(mtu) : std::string());
    std::size_t n = hcas.empty() ? 0 : 1 + std::count(hcas.begin(), hcas.end(), ',');
    return fabric + " " + std::to_string(n) + "x" + num(rate_gbps, -1) + "G" +
           (mtu ? " mtu " + std::to_string(mtu) : std::string());
}

std::vector<std::pair<uint32_t, std::string>> inconsistent_nodes(const std::vector<NodeReport>& nodes) {
    std::vector<std::pair<uint32_t, std::string>> out;
    if (nodes.size() < 3) {
        // Two nodes that differ: no majority, but still worth naming both.
        if (nodes.size() == 2 && !(nodes[0].sig == nodes[1].sig))
            for (const auto& n : nodes)
                out.push_back({n.node, "fabric differs between the two nodes: " + nodes[0].host + " has " +
                                           nodes[0].sig.summary() + ", " + nodes[1].host + " has " +
                                           nodes[1].sig.summary()});
        return out;
    }
    std::vector<std::pair<FabricSignature, int>> counts;
    for (const auto& n : nodes) {
        auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == n.sig; });
        if (it == counts.end()) counts.push_back({n.sig, 1});
        else ++it->second;
    }
    auto major = std::max_element(counts.begin(), counts.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    const FabricSignature& m = major->first;
    for (const auto& n : nodes) {
        if (n.sig == m) continue;
        std::string what;
        auto add = [&](const std::string& s) { what += (what.empty() ? "" : ", ") + s; };
        if (n.sig.fabric != m.fabric) add("class " + n.sig.fabric + " (others " + m.fabric + ")");
        if (n.sig.hcas != m.hcas) add("HCAs " + (n.sig.hcas.empty() ? "none" : n.sig.hcas) + " (others " +
                                      (m.hcas.empty() ? "none" : m.hcas) + ")");
        if (n.sig.rate_gbps != m.rate_gbps)
            add("rate " + num(n.sig.rate_gbps, -1) + " Gb/s (others " + num(m.rate_gbps, -1) + ")");
        if (n.sig.mtu != m.mtu) add("MTU " + std::to_string(n.sig.mtu) + " (others " + std::to_string(m.mtu) + ")");
        out.push_back({n.node, "fabric differs from the majority: " + what});
    }
    return out;
}

std::vector<std::pair<uint32_t, std::string>> slow_nodes(const std::vector<PairResult>& pairs, uint32_t nnodes,
                                                         std::optional<double> floor) {
    std::vector<std::pair<uint32_t, std::string>> out;
    for (uint32_t x = 0; x < nnodes; ++x) {
        std::vector<double> mine, others;
        for (const auto& p : pairs) {
            const double bw = p.error.empty() ? p.busbw_gbps : 0.0;
            (p.a == x || p.b == x ? mine : others).push_back(bw);
        }
        if (mine.empty()) continue;
        const double best = *std::max_element(mine.begin(), mine.end());
        if (floor) {
            if (best < *floor)
                out.push_back({x, "every pair with it runs below --min-busbw " + num(*floor) + " GB/s (best " +
                                      num(best) + " GB/s)"});
            continue;
        }
        if (others.empty()) continue;
        const double ref = median(others);
        if (ref > 0 && best < 0.5 * ref)
            out.push_back({x, "its pairs run at " + bw(best) + " GB/s at best, the others' median is " + bw(ref) +
                                  " GB/s"});
    }
    return out;
}

std::vector<SlowGpu> slow_gpus(const std::vector<GpuPairResult>& pairs) {
    std::vector<SlowGpu> out;
    for (const auto& p : pairs)
        if (!p.error.empty())
            out.push_back({p.node, p.gpu_a, p.gpu_b, true, "GPU pair " + p.gpu_a + " - " + p.gpu_b + " failed: " + p.error});
    if (pairs.size() < 3) return out;
    // Each GPU: its pairs against the median of the pairs it is not in.
    std::map<std::pair<uint32_t, std::string>, std::vector<double>> mine;
    for (const auto& p : pairs) {
        const double bw = p.error.empty() ? p.busbw_gbps : 0.0;
        mine[{p.node, p.gpu_a}].push_back(bw);
        mine[{p.node, p.gpu_b}].push_back(bw);
    }
    std::set<std::pair<uint32_t, std::string>> slow;
    for (const auto& [gpu, bws] : mine) {
        std::vector<double> others;
        for (const auto& p : pairs)
            if (!(p.node == gpu.first && (p.gpu_a == gpu.second || p.gpu_b == gpu.second)))
                others.push_back(p.error.empty() ? p.busbw_gbps : 0.0);
        if (others.empty() || bws.size() < 2) continue;  // one pair: GPU and link cannot be told apart
        const double best = *std::max_element(bws.begin(), bws.end()), ref = median(others);
        if (ref > 0 && best < 0.5 * ref) {
            slow.insert(gpu);
            out.push_back({gpu.first, gpu.second, "", false,
                           "slow GPU " + gpu.second + ": its pairs run at " + bw(best) +
                               " GB/s at best, the other GPU pairs' median is " + bw(ref) + " GB/s"});
        }
    }
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        const auto& p = pairs[i];
        if (!p.error.empty() || slow.count({p.node, p.gpu_a}) || slow.count({p.node, p.gpu_b})) continue;
        std::vector<double> others;
        for (std::size_t j = 0; j < pairs.size(); ++j)
            if (j != i) others.push_back(pairs[j].error.empty() ? pairs[j].busbw_gbps : 0.0);
        const double ref = median(others);
        if (ref > 0 && p.busbw_gbps < 0.5 * ref)
            out.push_back({p.node, p.gpu_a, p.gpu_b, false,
                           "slow link between " + p.gpu_a + " and " + p.gpu_b + ": " + bw(p.busbw_gbps) +
                               " GB/s, the other GPU pairs' median is " + bw(ref) +
                               " GB/s (check nvidia-smi nvlink -s and topo -m)"});
    }
    return out;
}

namespace {

// What to check when NCCL left a node's fast fabric for its own sockets.
std::string fast_fabric_fix(const std::string& fabric) {
    if (fabric == "efa")
        return "check that NCCL loads the aws-ofi-nccl plugin (libnccl-net.so, its libfabric with the efa provider) "
               "and 'ulimit -l'";
    if (fabric == "tcpx")
        return "check that NCCL loads Google's GPUDirect-TCPX plugin (its libnccl-net.so on LD_LIBRARY_PATH) and that "
               "its receive-datapath manager (RxDM, NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX) runs";
    if (fabric == "tcpxo")
        return "check that NCCL loads Google's GPUDirect-TCPXO plugin (/var/lib/tcpxo/lib64 on LD_LIBRARY_PATH, "
               "nccl-env-profile.sh sourced) and that its RxDM (tcpgpudmarxd) runs";
    return "check NCCL_IB_HCA, the verbs provider and 'ulimit -l'";
}

}  // namespace

void excuse_timeouts(PreflightReport& r) {
    if (r.disturbed.empty() && r.skew.empty()) return;
    for (auto& n : r.nodes)
        if (n.kind == VerdictKind::Timeout) n.kind = VerdictKind::Disturbed;
}

void judge(PreflightReport& r) {
    std::map<uint32_t, std::vector<Charge>> blame;
    for (const auto& n : r.nodes)
        for (const auto& p : n.problems) blame[n.node].push_back(p);
    for (const auto& [node, why] : inconsistent_nodes(r.nodes)) blame[node].push_back({VerdictKind::Fabric, why});
    const uint32_t nnodes = static_cast<uint32_t>(r.nodes.size());
    // Which nodes share a machine, for the CPU path's pairs: there the
    // scheduler carries every byte. On GPUs the evidence is the node's own
    // devices and links (lib/check/retest.h).
    const bool cpu_path = r.coll.path.rfind("cpu", 0) == 0;
    std::vector<std::string> hosts, machines;
    for (const auto& n : r.nodes) {
        hosts.push_back(n.host);
        machines.push_back(cpu_path ? n.machine : "");
    }
    // Pairs that strangers disturbed judge nobody (lib/check/retest.h): a
    // note for each node they kept from being named, else one for them all.
    bool disturbed = false;
    if (r.retests_ran) {
        const auto plan = retest_plan_of(r);
        for (const auto& v : judge_retests(*plan, r.pairs, r.retests, nnodes, r.min_busbw, hosts, machines)) {
            if (v.named) blame[v.node].push_back({VerdictKind::Slow, v.text});
            else r.notes.push_back(hosts[v.node] + ": " + v.text);
            disturbed = disturbed || v.disturbed;
        }
    } else {
        for (const auto& [node, why] : slow_nodes(r.pairs, nnodes, r.min_busbw)) {
            if (auto d = disturbed_slowness(node, r.pairs, {}, r.min_busbw, hosts)) {
                r.notes.push_back(hosts[node] + ": " + *d);
                disturbed = true;
            } else if (auto m = shared_machine_slowness(node, r.pairs, {}, machines, hosts)) {
                r.notes.push_back(hosts[node] + ": slow (" + why + "), but " + *m);
            } else {
                blame[node].push_back({VerdictKind::Slow, "slow: " + why});
            }
        }
    }
    if (const std::string s = data_port_strangers(r.pairs, r.retests); !s.empty() && !disturbed) r.notes.push_back(s);
    for (const auto& f : slow_gpus(r.gpu_pairs))
        if (f.node < r.nodes.size() && (f.failed || !r.gpu_retests_ran))
            blame[r.nodes[f.node].node].push_back({f.failed ? VerdictKind::Fault : VerdictKind::Slow, f.text});
    if (r.gpu_retests_ran)
        for (const auto& v : judge_gpu_retests(*gpu_retest_plan_of(r), r.gpu_pairs, r.gpu_retests, hosts)) {
            if (v.node >= r.nodes.size()) continue;
            if (v.named) blame[r.nodes[v.node].node].push_back({VerdictKind::Slow, v.text});
            else r.notes.push_back(hosts[v.node] + ": " + v.text);
        }
    for (auto& n : r.nodes) {
        // NCCL falling back to sockets on a node with RDMA is the classic
        // silent 10x slowdown.
        if (n.has_fast_fabric() && n.inter_transport.find("Socket") != std::string::npos)
            blame[n.node].push_back({VerdictKind::Fabric, "has " + n.sig.summary() + " but NCCL used " + n.inter_transport +
                                                       " between nodes: " + fast_fabric_fix(n.sig.fabric)});
        std::vector<double> bw;
        for (const auto& p : r.pairs)
            if ((p.a == n.node || p.b == n.node) && p.error.empty()) bw.push_back(p.busbw_gbps);
        if (!bw.empty()) n.pair_busbw = median(bw);
    }
    r.problems.clear();
    for (auto& n : r.nodes) {
        const auto it = blame.find(n.node);
        n.charges.clear();
        if (it == blame.end()) {
            n.verdict = n.waited_on.empty() ? "ok" : "waited on " + join_list(n.waited_on);
            n.kind = n.waited_on.empty() ? VerdictKind::Ok : VerdictKind::Waited;
            continue;
        }
        n.verdict.clear();
        n.charges = it->second;
        for (const auto& w : it->second) {
            n.verdict += (n.verdict.empty() ? "" : "; ") + w.text;
            r.problems.push_back(n.host + ": " + w.text);
        }
        // A culprit of a check that ran out of time; and no node's when
        // strangers or another release's ranks made it run out.
        n.kind = r.timed_out.empty() ? it->second.front().kind : VerdictKind::Timeout;
    }
    excuse_timeouts(r);
    if (r.coll.ran && !r.coll.correct)
        r.problems.push_back("the all-reduce result was wrong" + (r.coll.error.empty() ? "" : ": " + r.coll.error));
    else if (!r.coll.ran && !r.coll.error.empty())
        r.problems.push_back("the all-reduce did not complete: " + r.coll.error);
    if (r.coll.ran && r.min_busbw && r.coll.busbw_gbps < *r.min_busbw)
        r.problems.push_back("all-reduce busbw " + num(r.coll.busbw_gbps) + " GB/s is below --min-busbw " +
                             num(*r.min_busbw) + " GB/s");
    for (const auto& p : r.pairs)
        if (!p.error.empty() && r.nodes.size() > p.b)
            r.notes.push_back("pair " + r.nodes[p.a].host + "-" + r.nodes[p.b].host + ": " + p.error);
    if (!r.timed_out.empty()) {
        r.problems.insert(r.problems.begin(), "time-out: " + r.timed_out);
        r.code = kTimeout;
    } else {
        r.code = r.problems.empty() ? kPass : kCheckFailed;
    }
}

std::vector<std::string> nccl_transports(const std::string& log) {
    std::vector<std::string> out;
    for (const std::string& line : split_list(log, '\n')) {
        const std::size_t via = line.find(" via ");
        if (via == std::string::npos || line.find("Channel") == std::string::npos) continue;
        const std::string t = line.substr(via + 5);
        // Kind and name only: NET/IB/0/GDRDMA, P2P/CUMEM/read, SHM/direct/direct.
        const std::size_t s1 = t.find('/');
        const std::size_t s2 = s1 == std::string::npos ? s1 : t.find_first_of("/ ", s1 + 1);
        std::string kind = t.substr(0, s2);
        while (!kind.empty() && std::isspace(static_cast<unsigned char>(kind.back()))) kind.pop_back();
        if (!kind.empty() && std::find(out.begin(), out.end(), kind) == out.end()) out.push_back(kind);
    }
    std::sort(out.begin(), out.end());
    return out;
}

namespace {
// Rank r's multiple is 1 + r % kMultiples. Every partial sum an all-reduce
// forms, in any order, is then an integer of at most 7 * sum_multiple(n),
// which float32 holds exactly up to 2^24: about 73,000 ranks. With r + 1
// instead, 2,190 ranks passed 2^24 and 8,192 healthy ones (1,024 nodes x 8)
// read "wrong all-reduce result" from float32's rounding alone.
constexpr uint32_t kMultiples = 64;
constexpr double kFloatExact = 16777216.0;  // 2^24

double rank_multiple(uint32_t rank) { return 1 + rank % kMultiples; }

double sum_multiple(uint32_t nranks) {
    const double whole = nranks / kMultiples, rest = nranks % kMultiples;
    return whole * kMultiples * (kMultiples + 1) / 2 + rest * (rest + 1) / 2;
}

// Element i is m * (1 + i % 7).
void fill_multiple(std::vector<float>& v, double m) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(m * (1 + i % 7));
}

// "" when element i is m * (1 + i % 7) throughout: exactly while that fits
// float32's integers; past them (a sum of more than ~73,000 ranks) within
// the rounding of `terms` float32 additions.
std::string check_multiple(const std::vector<float>& v, double m, uint32_t terms = 1) {
    const bool exact = m * 7 <= kFloatExact;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const double want = m * (1 + i % 7);
        const bool ok = exact ? v[i] == static_cast<float>(want)
                              : std::fabs(double(v[i]) - want) <= want * terms / kFloatExact;
        if (!ok) return "element " + std::to_string(i) + " is " + num(v[i], -1) + ", expected " + num(want, -1);
    }
    return "";
}
}  // namespace

void fill_pattern(std::vector<float>& v, uint32_t rank) { fill_multiple(v, rank_multiple(rank)); }

void fill_sum(std::vector<float>& v, uint32_t nranks) { fill_multiple(v, sum_multiple(nranks)); }

std::string check_pattern(const std::vector<float>& v, uint32_t nranks) {
    return check_multiple(v, sum_multiple(nranks), nranks);
}

std::string check_fill(const std::vector<float>& v, uint32_t rank) { return check_multiple(v, rank_multiple(rank)); }

std::string first_difference(const std::vector<float>& got, const std::vector<float>& want, std::size_t first) {
    for (std::size_t j = 0; j < got.size(); ++j)
        if (j >= want.size() || got[j] != want[j])
            return "element " + std::to_string(first + j) + " is " + num(got[j], -1) + ", expected " +
                   (j < want.size() ? num(want[j], -1) : "nothing");
    return "";
}

std::string rank_ranges(std::vector<uint32_t> ranks) {
    std::sort(ranks.begin(), ranks.end());
    std::string out;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
        i = j + 1;
    }
    return out.empty() ? "-" : out;
}

std::string report_table(const PreflightReport& r) {
    std::size_t hw = 4;
    for (const auto& n : r.nodes) hw = std::max(hw, n.host.size());
    std::string out = pad("host", hw) + pad("ranks", 7) + pad("GPUs", 4) + pad("fabric", 22) + pad("pair busbw", 11) +
                      "verdict\n";
    for (const auto& n : r.nodes)
        out += pad(n.host, hw) + pad(rank_ranges(n.ranks), 7) + pad(std::to_string(n.gpus), 4) +
               pad(n.sig.summary() + (n.sig.fabric == "socket" && !n.ifname.empty() ? " " + n.ifname : ""), 22) +
               pad(n.pair_busbw ? bw(*n.pair_busbw) + " GB/s" : "-", 11) + n.verdict + "\n";
    const CollectiveResult& c = r.coll;
    if (c.ran) {
        out += "all-reduce (" + c.path + "): " + std::to_string(c.nranks) + " ranks, " +
               num(c.bytes / 1048576.0, -1) + " MiB x " + std::to_string(c.iters) + ", " +
               num(c.seconds * 1e3, 3) + " ms, algbw " + bw(c.algbw_gbps) + " GB/s, busbw " +
               bw(c.busbw_gbps) + " GB/s, result " + (c.correct ? "correct" : "WRONG");
        if (c.init_seconds > 0) out += ", init " + num(c.init_seconds, 2) + " s";
        out += "\n";
        if (!c.inter_transport.empty() || !c.intra_transport.empty())
            out += "transport: between nodes " + (c.inter_transport.empty() ? "-" : c.inter_transport) +
                   ", inside nodes " + (c.intra_transport.empty() ? "-" : c.intra_transport) + "\n";
    }
    if (!r.gpu_pairs.empty()) {
        std::vector<double> v;
        const GpuPairResult* low = &r.gpu_pairs.front();
        for (const auto& p : r.gpu_pairs) {
            v.push_back(p.busbw_gbps);
            if (p.busbw_gbps < low->busbw_gbps) low = &p;
        }
        out += "GPU pairs inside nodes: " + std::to_string(v.size()) + ", median busbw " + bw(median(v)) +
               " GB/s, lowest " + bw(low->busbw_gbps) + " GB/s (" +
               (r.nodes.size() > low->node ? r.nodes[low->node].host + " " : "") + low->gpu_a + " - " + low->gpu_b +
               ")\n";
    }
    for (const auto& n : r.notes) out += "note: " + n + "\n";
    for (const auto& p : r.problems) out += "problem: " + p + "\n";
    if (!r.disturbed.empty()) out += "disturbed: " + r.disturbed + "\n";
    if (!r.skew.empty()) out += "skew: " + r.skew + "\n";
    out += std::string(r.code == kPass ? "PASS" : "FAIL") + " (" + num(r.elapsed, 1) + " s" +
           (r.code == kTimeout ? ", time-out" : "") +
           (!r.skew.empty()        ? ", mn-preflight releases differ: no node is to blame"
            : !r.disturbed.empty() ? ", disturbed by " + r.disturbed_by + ": no node is to blame"
                                   : "") +
           ")\n";
    return out;
}

Json report_object(const PreflightReport& r) {
    auto host = [&](uint32_t node) { return json_text(r.nodes.size() > node ? r.nodes[node].host : "?"); };
    Json j;
    j["verdict"] = r.code == kPass ? "PASS" : "FAIL";
    j["exit_code"] = r.code;
    j["elapsed_s"] = json_rounded(r.elapsed, 3);
    if (!r.disturbed.empty()) {
        j["disturbed"] = json_text(r.disturbed);
        j["disturbed_by"] = json_text(r.disturbed_by);
    }
    if (!r.skew.empty()) j["skew"] = json_text(r.skew);
    j["nodes"] = Json::array();
    for (const NodeReport& n : r.nodes)
        j["nodes"].push_back({{"host", json_text(n.host)},
                              {"node", n.node},
                              {"ranks", n.ranks},
                              {"gpus", n.gpus},
                              {"fabric", json_text(n.sig.fabric)},
                              {"hcas", json_text(n.sig.hcas)},
                              {"rate_gbps", json_number(n.sig.rate_gbps)},
                              {"mtu", n.sig.mtu},
                              {"ifname", json_text(n.ifname)},
                              {"pair_busbw_gbps", n.pair_busbw ? json_rounded(*n.pair_busbw, 4) : Json(nullptr)},
                              {"inter_transport", json_text(n.inter_transport)},
                              {"verdict", json_text(n.verdict)},
                              {"waited_on", json_texts(n.waited_on)}});
    const CollectiveResult& c = r.coll;
    j["allreduce"] = {{"ran", c.ran},
                      {"path", json_text(c.path)},
                      {"ranks", c.nranks},
                      {"bytes", c.bytes},
                      {"iters", c.iters},
                      {"time_ms", json_rounded(c.seconds * 1e3, 4)},
                      {"algbw_gbps", json_rounded(c.algbw_gbps, 4)},
                      {"busbw_gbps", json_rounded(c.busbw_gbps, 4)},
                      {"init_s", json_rounded(c.init_seconds, 4)},
                      {"correct", c.correct},
                      {"inter_transport", json_text(c.inter_transport)},
                      {"intra_transport", json_text(c.intra_transport)},
                      {"error", json_text(c.error)}};
    // A node pair, its nodes under the keys ka and kb.
    // Strangers at its nodes' data ports only where some came.
    auto pair = [&](const char* ka, const char* kb, const PairResult& p) {
        Json o{{ka, host(p.a)}, {kb, host(p.b)}, {"busbw_gbps", json_rounded(p.busbw_gbps, 4)},
               {"error", json_text(p.error)}};
        if (p.strangers) {
            o["strangers"] = p.strangers;
            o["strangers_seen"] = json_text(p.strangers_seen);
        }
        if (p.cpu_wait) o["cpu_wait"] = json_rounded(*p.cpu_wait, 3);
        if (p.retrans) o["retrans"] = *p.retrans;
        if (p.rtt_ms) o["rtt_ms"] = json_rounded(*p.rtt_ms, 3);
        return o;
    };
    j["pairs"] = Json::array();
    for (const PairResult& p : r.pairs) j["pairs"].push_back(pair("a", "b", p));
    // The retests a verdict may rest on: a = the suspect, b = its partner;
    // and the control pairs timed among them (a is no suspect).
    j["retests"] = Json::array();
    j["retest_controls"] = Json::array();
    if (!r.retests.empty()) {
        const auto plan = retest_plan_of(r);
        for (const PairResult& p : r.retests) {
            if (is_control(*plan, p)) j["retest_controls"].push_back(pair("a", "b", p));
            else j["retests"].push_back(pair("suspect", "partner", p));
        }
    }
    auto gpu_list = [&](const std::vector<GpuPairResult>& v) {
        Json list = Json::array();
        for (const GpuPairResult& p : v)
            list.push_back({{"host", host(p.node)},
                            {"a", json_text(p.gpu_a)},
                            {"b", json_text(p.gpu_b)},
                            {"busbw_gbps", json_rounded(p.busbw_gbps, 4)},
                            {"error", json_text(p.error)}});
        return list;
    };
    // Inside nodes: the GPU pairs, those timed again for a suspect GPU or
    // link, and the control pairs timed beside them.
    std::vector<GpuPairResult> gpu_retests, gpu_controls;
    if (!r.gpu_retests.empty()) {
        const auto plan = gpu_retest_plan_of(r);
        for (const GpuPairResult& p : r.gpu_retests) (is_gpu_control(*plan, p) ? gpu_controls : gpu_retests).push_back(p);
    }
    j["gpu_pairs"] = gpu_list(r.gpu_pairs);
    j["gpu_retests"] = gpu_list(gpu_retests);
    j["gpu_retest_controls"] = gpu_list(gpu_controls);
    j["problems"] = json_texts(r.problems);
    // What the table prints as "note:" (warnings, suspects the retests cleared).
    j["notes"] = json_texts(r.notes);
    j["timed_out"] = json_text(r.timed_out);
    return j;
}

std::string report_json(const PreflightReport& r) { return json_line(report_object(r)); }

// Whether a note of the report is about this node: it names the node in
// its own place ("HOST: ...", "HOST rank N: ...", "warning: HOST...", "pair
// A-B: ..."), not anywhere in its text, so that one host's name inside
// another's ("node1" in "gpu-node1") or inside quoted text ties nothing.
bool note_about(std::string note, const std::string& host) {
    if (note.rfind("warning: ", 0) == 0) note.erase(0, 9);
    if (note.rfind(host + ": ", 0) == 0 || note.rfind(host + " rank ", 0) == 0 || note.rfind(host + " ", 0) == 0)
        return true;
    if (note.rfind("pair ", 0) != 0) return false;
    const std::size_t colon = note.find(": ");
    const std::string pair = note.substr(5, colon == std::string::npos ? std::string::npos : colon - 5);
    return pair.rfind(host + "-", 0) == 0 || (pair.size() > host.size() && pair.compare(pair.size() - host.size() - 1,
                                                                                      std::string::npos, "-" + host) == 0);
}

}  // namespace mn
