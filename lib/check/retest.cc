// SPDX-License-Identifier: Apache-2.0
#include "lib/check/retest.h"

#include <algorithm>
#include <map>
#include <set>

#include "lib/util/text.h"

namespace mn {
namespace {

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string gbps(double v) { return v >= 10 || v == 0 ? num(v, 1) : num(v, v >= 1 ? 2 : 4); }

// "a", "a and b", "a, b and c".
std::string and_list(const std::vector<std::string>& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
    return out;
}

bool involves(const PairResult& p, uint32_t x) { return p.a == x || p.b == x; }

// The best error-free pair of each node (none: -1).
std::vector<double> best_pairs(const std::vector<PairResult>& pairs, uint32_t nnodes) {
    std::vector<double> best(nnodes, -1);
    for (const auto& p : pairs) {
        if (!p.error.empty()) continue;
        for (uint32_t x : {p.a, p.b})
            if (x < nnodes) best[x] = std::max(best[x], p.busbw_gbps);
    }
    return best;
}

// What healthy looks like in this run: the pairs between non-suspects
// (all error-free pairs when there are none).
double healthy_median(const std::vector<PairResult>& pairs, const std::set<uint32_t>& suspects) {
    std::vector<double> clean, all;
    for (const auto& p : pairs) {
        if (!p.error.empty()) continue;
        all.push_back(p.busbw_gbps);
        if (!suspects.count(p.a) && !suspects.count(p.b)) clean.push_back(p.busbw_gbps);
    }
    return median_of(clean.empty() ? all : clean);
}

std::string host_of(const std::vector<std::string>& hosts, uint32_t x) {
    return x < hosts.size() ? hosts[x] : "node " + std::to_string(x);
}

// The named nodes a cleared suspect's slow first pairs all involved, if so.
std::vector<uint32_t> slow_only_with(uint32_t s, const std::vector<PairResult>& pairs, const std::set<uint32_t>& named,
                                     double threshold) {
    std::set<uint32_t> with;
    for (const auto& p : pairs) {
        if (!involves(p, s) || (p.error.empty() && p.busbw_gbps >= threshold)) continue;
        const uint32_t other = p.a == s ? p.b : p.a;
        if (!named.count(other)) return {};
        with.insert(other);
    }
    return {with.begin(), with.end()};
}

// "a control n0 - n1: 0.5 GB/s timed beside them", or "controls ..." for
// several readings.
std::string controls_text(const std::vector<std::string>& seen) {
    if (seen.empty()) return "";
    return (seen.size() > 1 ? "controls " : "a control ") + and_list(seen) + " timed beside them";
}

// A round of controls alone goes between the retests (after the first),
// where it sees the same moment as they do.
template <typename Pair>
void insert_control_round(std::vector<std::vector<Pair>>& rounds, std::vector<Pair> round) {
    rounds.insert(rounds.begin() + (rounds.size() > 1 ? 1 : 0), std::move(round));
}

}  // namespace

bool is_control(const RetestPlan& plan, const PairResult& retest) {
    return std::find(plan.suspects.begin(), plan.suspects.end(), retest.a) == plan.suspects.end();
}

std::vector<uint32_t> proven_fast(const std::vector<PairResult>& pairs, uint32_t nnodes,
                                  const std::vector<uint32_t>& suspects) {
    const std::set<uint32_t> sus(suspects.begin(), suspects.end());
    std::vector<double> bws;
    for (const auto& p : pairs)
        if (p.error.empty()) bws.push_back(p.busbw_gbps);
    const double m = median_of(bws);
    const std::vector<double> best = best_pairs(pairs, nnodes);
    // At or above the median first; then (if partners run short) at least
    // half of it, which is still no suspect's reading.
    std::vector<uint32_t> strong, fair;
    for (uint32_t x = 0; x < nnodes; ++x) {
        if (sus.count(x) || best[x] <= 0) continue;
        if (best[x] >= m) strong.push_back(x);
        else if (best[x] >= 0.5 * m) fair.push_back(x);
    }
    auto faster = [&](uint32_t a, uint32_t b) { return best[a] > best[b] || (best[a] == best[b] && a < b); };
    std::sort(strong.begin(), strong.end(), faster);
    std::sort(fair.begin(), fair.end(), faster);
    strong.insert(strong.end(), fair.begin(), fair.end());
    return strong;
}

RetestPlan plan_retests(const std::vector<PairResult>& pairs, uint32_t nnodes, std::optional<double> floor) {
    RetestPlan plan;
    for (auto& [node, why] : slow_nodes(pairs, nnodes, floor)) {
        plan.suspects.push_back(node);
        plan.why.push_back(why);
    }
    if (plan.suspects.empty()) return plan;
    if (nnodes <= 2) {
        plan.unconfirmable = true;
        plan.unconfirmable_why = "two nodes, no third to retest with";
        return plan;
    }
    const std::vector<uint32_t> fast = proven_fast(pairs, nnodes, plan.suspects);
    if (fast.size() < plan.suspects.size()) {
        // Most nodes look slow: then the "median" is theirs, and retests
        // against the few others would prove little. Fail on what was seen.
        plan.unconfirmable = true;
        plan.unconfirmable_why = std::to_string(plan.suspects.size()) + " of " + std::to_string(nnodes) +
                                 " nodes look slow and only " + std::to_string(fast.size()) + " were proven fast";
        return plan;
    }
    const std::size_t per = std::min({kRetestsPerSuspect, fast.size(), kMaxRetestRounds});
    // Round r gives suspect i partner (i + r) mod f: distinct within a
    // round (suspects <= partners) and across rounds for one suspect.
    bool controlled = false;
    for (std::size_t r = 0; r < per; ++r) {
        std::vector<std::pair<uint32_t, uint32_t>> round;
        std::set<uint32_t> busy;
        for (std::size_t i = 0; i < plan.suspects.size(); ++i) {
            const uint32_t partner = fast[(i + r) % fast.size()];
            round.push_back({plan.suspects[i], partner});
            busy.insert(partner);
        }
        // The round's controls: pairs of the fastest partners it leaves free.
        std::vector<uint32_t> free;
        for (uint32_t f : fast)
            if (!busy.count(f) && free.size() < 2 * kControlsPerRound) free.push_back(f);
        for (std::size_t c = 0; c + 1 < free.size(); c += 2) {
            round.push_back({free[c], free[c + 1]});
            controlled = true;
        }
        plan.rounds.push_back(round);
    }
    // Too few nodes for a control beside the retests (three nodes: one
    // suspect, two partners): a round of its own between them.
    if (!controlled && fast.size() >= 2) insert_control_round(plan.rounds, {{fast[0], fast[1]}});
    return plan;
}

std::vector<RetestVerdict> judge_retests(const RetestPlan& plan, const std::vector<PairResult>& pairs,
                                         const std::vector<PairResult>& retests, uint32_t nnodes,
                                         std::optional<double> floor, const std::vector<std::string>& hosts,
                                         const std::vector<std::string>& machines) {
    (void)nnodes;
    const std::set<uint32_t> sus(plan.suspects.begin(), plan.suspects.end());
    const double first = healthy_median(pairs, sus);
    // The controls timed among the retests: what healthy ran at then.
    std::vector<double> ctl;
    std::vector<std::string> ctl_seen;
    for (const auto& t : retests)
        if (is_control(plan, t) && t.error.empty()) {
            ctl.push_back(t.busbw_gbps);
            ctl_seen.push_back(host_of(hosts, t.a) + " - " + host_of(hosts, t.b) + ": " + gbps(t.busbw_gbps) + " GB/s");
        }
    // Their best: a slowdown of every node slows them all, one unlucky
    // control is noise.
    const double ref = ctl.empty() ? first : std::min(first, *std::max_element(ctl.begin(), ctl.end()));
    const double threshold = floor ? *floor : 0.5 * ref;
    const std::string controls = controls_text(ctl_seen);
    const std::string against = floor ? "--min-busbw " + num(*floor) + " GB/s"
                                : "a median of " + gbps(first) + " GB/s" + (ctl.empty() ? "" : " (" + controls + ")");
    std::vector<RetestVerdict> out;
    std::set<uint32_t> named;
    for (std::size_t i = 0; i < plan.suspects.size(); ++i) {
        const uint32_t s = plan.suspects[i];
        RetestVerdict v{s, false, false, ""};
        if (plan.unconfirmable) {
            if (auto d = disturbed_slowness(s, pairs, {}, floor, hosts)) {
                v.disturbed = true;
                v.text = *d;
                out.push_back(v);
                continue;
            }
            if (auto d = shared_machine_slowness(s, pairs, {}, machines, hosts)) {
                v.text = *d;
                out.push_back(v);
                continue;
            }
            v.named = true;
            v.text = "slow: " + plan.why[i] + " (not retested: " + plan.unconfirmable_why + ")";
            out.push_back(v);
            named.insert(s);
            continue;
        }
        std::vector<std::string> ran, failed;
        double best = -1;
        for (const auto& t : retests) {
            if (t.a != s) continue;
            if (!t.error.empty()) {
                failed.push_back(host_of(hosts, t.b) + " (" + t.error + ")");
                continue;
            }
            ran.push_back(host_of(hosts, t.b) + ": " + gbps(t.busbw_gbps) + " GB/s");
            best = std::max(best, t.busbw_gbps);
        }
        if (ran.empty()) {
            v.text = "its first pairs looked slow (" + plan.why[i] + ") but no retest could confirm it" +
                     (failed.empty() ? std::string(" (none ran in time)") : ": " + and_list(failed)) +
                     "; not named";
        } else if (best < threshold) {
            if (auto d = disturbed_slowness(s, pairs, retests, floor, hosts)) {
                v.disturbed = true;
                v.text = *d;
            } else if (auto m = shared_machine_slowness(s, pairs, retests, machines, hosts)) {
                v.text = "its first pairs looked slow (" + plan.why[i] + ") and so did its retests (" +
                         and_list(ran) + "), but " + *m;
            } else {
                v.named = true;
                v.text = "slow: " + plan.why[i] + "; confirmed by " +
                         (ran.size() > 1 ? "retests with " : "a retest with ") + and_list(ran) + " against " + against;
                named.insert(s);
            }
        } else if (!floor && best < 0.5 * first) {
            // Slow again, but so were the healthy nodes at that time.
            v.text = "its first pairs looked slow (" + plan.why[i] + ") and so did its retests (" + and_list(ran) +
                     "), but so did " + controls + ": the healthy nodes ran slow then too, not this one alone; not named";
        } else {
            v.text = "its first pairs looked slow (" + plan.why[i] + "), but a retest with " + and_list(ran) +
                     " ran at speed; not named";
        }
        out.push_back(v);
    }
    // A cleared suspect that was slow only with named nodes: say so.
    for (auto& v : out) {
        if (v.named) continue;
        const auto with = slow_only_with(v.node, pairs, named, threshold);
        if (with.empty()) continue;
        std::vector<std::string> names;
        for (uint32_t w : with) names.push_back(host_of(hosts, w));
        v.text += " (slow only with " + and_list(names) + ", named)";
    }
    return out;
}

// ---- strangers at the data ports ---------------------------------------------

namespace {

// At most this many pairs' texts in a note: the rest are counted.
constexpr std::size_t kStrangerTexts = 3;

// "24 connections in 3 of its 5 pairs: TEXT; TEXT; and 1 more like it"
// (whose "its", what "pairs"); "" when none of `among` saw strangers.
std::string strangers_in(const std::vector<const PairResult*>& among, const std::string& whose,
                         const std::string& what) {
    unsigned total = 0;
    std::size_t hit = 0;
    std::vector<std::string> seen;
    for (const PairResult* p : among) {
        if (p->strangers == 0) continue;
        ++hit;
        total += p->strangers;
        if (!p->strangers_seen.empty() && std::find(seen.begin(), seen.end(), p->strangers_seen) == seen.end())
            seen.push_back(p->strangers_seen);
    }
    if (hit == 0) return "";
    std::string out = std::to_string(total) + (total == 1 ? " connection in " : " connections in ") +
                      std::to_string(hit) + " of " + whose + " " + std::to_string(among.size()) + " " + what;
    for (std::size_t i = 0; i < seen.size() && i < kStrangerTexts; ++i) out += (i == 0 ? ": " : "; ") + seen[i];
    if (seen.size() > kStrangerTexts)
        out += "; and " + std::to_string(seen.size() - kStrangerTexts) + " more like " +
               (seen.size() - kStrangerTexts == 1 ? "it" : "them");
    return out;
}

}  // namespace

std::optional<std::string> disturbed_slowness(uint32_t x, const std::vector<PairResult>& pairs,
                                              const std::vector<PairResult>& retests, std::optional<double> floor,
                                              const std::vector<std::string>& hosts) {
    // Retests on fresh ports are judged as they ran: no stranger could
    // reach their timed test.
    bool retried = false, all_fresh = true;
    for (const auto& t : retests)
        if (t.a == x) {
            retried = true;
            all_fresh = all_fresh && t.fresh_port;
        }
    if (retried && all_fresh) return std::nullopt;
    std::vector<const PairResult*> evidence;
    std::vector<double> others;
    for (const auto& p : pairs) {
        if (involves(p, x)) evidence.push_back(&p);
        else if (p.error.empty()) others.push_back(p.busbw_gbps);
    }
    bool retested = false;
    for (const auto& t : retests)
        if (t.a == x) {
            evidence.push_back(&t);
            retested = true;
        }
    const std::string seen = strangers_in(evidence, "its", retested ? "pairs and retests" : "pairs");
    if (seen.empty()) return std::nullopt;
    double best = -1;
    for (const PairResult* p : evidence)
        if (p->error.empty()) best = std::max(best, p->busbw_gbps);
    const std::string its = retested ? "its pairs and retests" : "its pairs";
    std::string text = best < 0 ? its + " failed" : its + " ran at " + gbps(best) + " GB/s at best";
    if (floor) text += " (against --min-busbw " + num(*floor) + " GB/s)";
    else if (!others.empty()) text += " (the others' median " + gbps(median_of(others)) + " GB/s)";
    return text + " while strangers held connections to the data ports (" + seen +
           "): not judged; if it persists, find who connects to " + host_of(hosts, x) +
           "'s data port (ss -tnp there and on the addresses named)";
}

std::optional<std::string> shared_machine_slowness(uint32_t x, const std::vector<PairResult>& pairs,
                                                   const std::vector<PairResult>& retests,
                                                   const std::vector<std::string>& machines,
                                                   const std::vector<std::string>& hosts) {
    if (x >= machines.size() || machines[x].empty()) return std::nullopt;
    std::vector<std::string> mates;
    for (uint32_t i = 0; i < machines.size(); ++i)
        if (i != x && machines[i] == machines[x]) mates.push_back(host_of(hosts, i));
    if (mates.empty()) return std::nullopt;
    std::size_t ran = 0, unsaid = 0, shown = 0;
    double waited = -1;
    auto weigh = [&](const PairResult& p) {
        if (!p.error.empty()) return;
        ++ran;
        if (p.cpu_wait) waited = std::max(waited, *p.cpu_wait);
        if (!p.rtt_ms) ++unsaid;
        else if (*p.rtt_ms >= kLinkRttMs) ++shown;
    };
    for (const auto& p : pairs)
        if (involves(p, x)) weigh(p);
    for (const auto& t : retests)
        if (t.a == x) weigh(t);
    if (ran == 0 || (unsaid == 0 && 2 * shown > ran)) return std::nullopt;  // its link's own evidence
    const std::string tests = std::to_string(ran) + " pair test" + (ran == 1 ? "" : "s");
    std::string why;
    if (unsaid)
        why = "a side did not say what TCP saw of the path in " + std::to_string(unsaid) + " of its " + tests;
    else
        why = std::to_string(ran - shown) + " of its " + tests + " show nothing of its link (round trips under " +
              num(kLinkRttMs, 0) + " ms: no queue)";
    if (waited >= 0) why += ", a side waiting for a CPU up to " + num(100 * waited, 0) + " % of the time";
    return "it shares one machine (the same boot id) with " + and_list(mates) + ", and " + why +
           ": nodes of one machine share its CPUs, and a difference between them that its link does not show is its "
           "scheduler's, not a node's; not judged (to judge it, check it with nodes of other machines)";
}

std::string data_port_strangers(const std::vector<PairResult>& pairs, const std::vector<PairResult>& retests) {
    std::vector<const PairResult*> all;
    for (const auto& p : pairs) all.push_back(&p);
    for (const auto& t : retests) all.push_back(&t);
    const std::string seen = strangers_in(all, "the", "pair tests");
    return seen.empty() ? "" : "strangers at the data ports: " + seen;
}

// ---- inside nodes ------------------------------------------------------------

namespace {

using Gpu = std::pair<uint32_t, std::string>;  // (node index, GPU)

bool is_link(const SlowGpu& f) { return !f.other.empty(); }

// The first pairs that say what healthy looks like: error-free, no suspect
// GPU in them, not a suspect link (all error-free pairs when none is left).
double gpu_healthy_median(const std::vector<GpuPairResult>& pairs, const std::vector<SlowGpu>& suspects) {
    std::vector<double> clean, all;
    for (const auto& p : pairs) {
        if (!p.error.empty()) continue;
        all.push_back(p.busbw_gbps);
        bool touched = false;
        for (const auto& s : suspects) {
            if (s.node != p.node) continue;
            if (is_link(s) ? (std::set<std::string>{s.gpu, s.other} == std::set<std::string>{p.gpu_a, p.gpu_b})
                           : (p.gpu_a == s.gpu || p.gpu_b == s.gpu))
                touched = true;
        }
        if (!touched) clean.push_back(p.busbw_gbps);
    }
    return median_of(clean.empty() ? all : clean);
}

// The retests of suspect `s`: its link's own pair, or its GPU with a partner.
bool retest_of(const SlowGpu& s, const GpuPairResult& t) {
    if (t.node != s.node) return false;
    if (is_link(s)) return std::set<std::string>{s.gpu, s.other} == std::set<std::string>{t.gpu_a, t.gpu_b};
    return t.gpu_a == s.gpu;
}

// Each round's controls, as between nodes: in every node the round
// retests in, two of its GPUs that no suspect is and the round leaves free
// (fastest first; never a suspect link). A node left without one (three
// GPUs: the suspect and its two partners) gets a round of its own after
// the first.
void add_gpu_controls(GpuRetestPlan& plan, std::map<uint32_t, std::vector<std::string>>& clean,
                      std::vector<std::set<Gpu>>& busy) {
    auto suspect_link = [&](uint32_t node, const std::string& a, const std::string& b) {
        for (const auto& s : plan.suspects)
            if (s.node == node && is_link(s) && std::set<std::string>{s.gpu, s.other} == std::set<std::string>{a, b})
                return true;
        return false;
    };
    // The first pair of free GPUs of `node` (none busy in `taken`).
    auto control = [&](uint32_t node, const std::set<Gpu>& taken) -> std::optional<GpuPairResult> {
        const auto& gs = clean[node];
        for (std::size_t i = 0; i < gs.size(); ++i)
            for (std::size_t j = i + 1; j < gs.size(); ++j)
                if (!taken.count({node, gs[i]}) && !taken.count({node, gs[j]}) && !suspect_link(node, gs[i], gs[j]))
                    return GpuPairResult{node, gs[i], gs[j], 0, ""};
        return std::nullopt;
    };
    std::set<uint32_t> nodes, controlled;
    for (std::size_t r = 0; r < plan.rounds.size(); ++r) {
        std::set<uint32_t> here;
        for (const auto& w : plan.rounds[r]) here.insert(w.node);
        for (uint32_t node : here) {
            nodes.insert(node);
            if (auto c = control(node, busy[r])) {
                busy[r].insert({node, c->gpu_a});
                busy[r].insert({node, c->gpu_b});
                plan.rounds[r].push_back(*c);
                controlled.insert(node);
            }
        }
    }
    std::vector<GpuPairResult> own;
    for (uint32_t node : nodes)
        if (!controlled.count(node))
            if (auto c = control(node, {})) own.push_back(*c);
    if (!own.empty()) insert_control_round(plan.rounds, own);
}

}  // namespace

GpuRetestPlan plan_gpu_retests(const std::vector<GpuPairResult>& pairs) {
    GpuRetestPlan plan;
    for (const auto& f : slow_gpus(pairs))
        if (!f.failed) plan.suspects.push_back(f);
    if (plan.suspects.empty()) return plan;
    std::set<Gpu> suspect_gpus;
    for (const auto& s : plan.suspects)
        if (!is_link(s)) suspect_gpus.insert({s.node, s.gpu});
    // Each GPU's best error-free pair; a node's GPUs that no suspect is,
    // fastest first, are its partners and its controls.
    std::map<Gpu, double> best;
    for (const auto& p : pairs) {
        if (!p.error.empty()) continue;
        for (const std::string& g : {p.gpu_a, p.gpu_b}) {
            auto [it, fresh] = best.insert({{p.node, g}, p.busbw_gbps});
            if (!fresh) it->second = std::max(it->second, p.busbw_gbps);
        }
    }
    std::map<uint32_t, std::vector<std::string>> clean;
    {
        std::vector<std::pair<double, Gpu>> order;
        for (const auto& [g, b] : best)
            if (!suspect_gpus.count(g)) order.push_back({-b, g});
        std::sort(order.begin(), order.end());
        for (const auto& [b, g] : order) clean[g.first].push_back(g.second);
    }
    std::vector<GpuPairResult> wanted;
    for (std::size_t i = 0; i < plan.suspects.size(); ++i) {
        const SlowGpu& s = plan.suspects[i];
        if (is_link(s)) {
            for (std::size_t k = 0; k < kRetestsPerSuspect; ++k) wanted.push_back({s.node, s.gpu, s.other, 0, ""});
            continue;
        }
        const std::vector<std::string>& partners = clean[s.node];
        if (partners.empty()) plan.unconfirmable.push_back(i);
        for (std::size_t k = 0; k < std::min(kRetestsPerSuspect, partners.size()); ++k)
            wanted.push_back({s.node, s.gpu, partners[k], 0, ""});
    }
    // Into rounds: each pair in the first round where neither GPU is busy.
    std::vector<std::set<Gpu>> busy;
    for (const auto& w : wanted) {
        std::size_t r = 0;
        while (r < busy.size() && (busy[r].count({w.node, w.gpu_a}) || busy[r].count({w.node, w.gpu_b}))) ++r;
        if (r == busy.size()) {
            busy.emplace_back();
            plan.rounds.emplace_back();
        }
        busy[r].insert({w.node, w.gpu_a});
        busy[r].insert({w.node, w.gpu_b});
        plan.rounds[r].push_back(w);
    }
    add_gpu_controls(plan, clean, busy);
    return plan;
}

bool is_gpu_control(const GpuRetestPlan& plan, const GpuPairResult& retest) {
    return std::none_of(plan.suspects.begin(), plan.suspects.end(),
                        [&](const SlowGpu& s) { return retest_of(s, retest); });
}

std::vector<RetestVerdict> judge_gpu_retests(const GpuRetestPlan& plan, const std::vector<GpuPairResult>& pairs,
                                             const std::vector<GpuPairResult>& retests,
                                             const std::vector<std::string>& hosts) {
    const double first = gpu_healthy_median(pairs, plan.suspects);
    // Each node's controls (retests of no suspect): their best is what its
    // healthy GPUs ran at during the retests.
    std::map<uint32_t, double> ctl_best;
    std::map<uint32_t, std::vector<std::string>> ctl_seen;
    for (const auto& t : retests) {
        if (!t.error.empty() || !is_gpu_control(plan, t)) continue;
        ctl_best[t.node] = std::max(ctl_best[t.node], t.busbw_gbps);
        ctl_seen[t.node].push_back(t.gpu_a + " - " + t.gpu_b + ": " + gbps(t.busbw_gbps) + " GB/s");
    }
    std::vector<RetestVerdict> out;
    for (std::size_t i = 0; i < plan.suspects.size(); ++i) {
        const SlowGpu& s = plan.suspects[i];
        RetestVerdict v{s.node, false, false, ""};
        const std::string what = is_link(s) ? "the link between " + s.gpu + " and " + s.other : s.gpu;
        const auto c = ctl_best.find(s.node);
        const double ref = c != ctl_best.end() ? std::min(first, c->second) : first;
        const double threshold = 0.5 * ref;
        const std::string controls = controls_text(ctl_seen[s.node]);
        if (std::find(plan.unconfirmable.begin(), plan.unconfirmable.end(), i) != plan.unconfirmable.end()) {
            v.named = true;
            v.text = s.text + " (not retested: every other GPU of " + host_of(hosts, s.node) + " looks slow too)";
            out.push_back(v);
            continue;
        }
        std::vector<std::string> ran, failed;
        double best = -1;
        for (const auto& t : retests) {
            if (!retest_of(s, t)) continue;
            const std::string with = is_link(s) ? "itself" : t.gpu_b;
            if (!t.error.empty()) {
                failed.push_back(with + " (" + t.error + ")");
                continue;
            }
            ran.push_back(with + ": " + gbps(t.busbw_gbps) + " GB/s");
            best = std::max(best, t.busbw_gbps);
        }
        if (ran.empty()) {
            v.text = what + ": its first pairs looked slow (" + s.text + ") but no retest could confirm it" +
                     (failed.empty() ? std::string(" (none ran in time)") : ": " + and_list(failed)) + "; not named";
        } else if (best < threshold) {
            v.named = true;
            v.text = s.text + "; confirmed when " + (is_link(s) ? "timed again (" + and_list(ran) + ")"
                                                                 : "retested with " + and_list(ran)) +
                     " against a median of " + gbps(first) + " GB/s" + (controls.empty() ? "" : " (" + controls + ")");
        } else if (best < 0.5 * first) {
            // Slow again, but so were the node's healthy GPUs at that time.
            v.text = what + ": its first pairs looked slow (" + s.text + ") and so did its retests (" + and_list(ran) +
                     "), but so did " + controls + ": the node's healthy GPUs ran slow then too, not this one alone; not named";
        } else {
            v.text = what + ": its first pairs looked slow (" + s.text + "), but " +
                     (is_link(s) ? "timed again it ran at speed (" + and_list(ran) + ")"
                                 : "a retest with " + and_list(ran) + " ran at speed") +
                     "; not named";
        }
        out.push_back(v);
    }
    return out;
}

std::shared_ptr<const RetestPlan> retest_plan_of(const PreflightReport& r) {
    if (r.retest_plan) return r.retest_plan;
    return std::make_shared<const RetestPlan>(plan_retests(r.pairs, static_cast<uint32_t>(r.nodes.size()), r.min_busbw));
}

std::shared_ptr<const GpuRetestPlan> gpu_retest_plan_of(const PreflightReport& r) {
    if (r.gpu_retest_plan) return r.gpu_retest_plan;
    return std::make_shared<const GpuRetestPlan>(plan_gpu_retests(r.gpu_pairs));
}

}  // namespace mn
