// SPDX-License-Identifier: Apache-2.0
#include "lib/check/rank_positions.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include "lib/util/text.h"

namespace mn {

namespace {

struct At {
    const RankPosition* p;
    const FlightGroup* g;
};

long rank_number(const std::string& r) { return std::strtol(r.c_str(), nullptr, 10); }

// "ranks 0, 2" / "rank 3": up to 8, then how many more.
std::string ranks_words(const std::vector<At>& at) {
    std::vector<At> sorted = at;
    std::sort(sorted.begin(), sorted.end(), [](const At& a, const At& b) { return rank_number(a.p->rank) < rank_number(b.p->rank); });
    std::string out = sorted.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < sorted.size() && i < 8; ++i) out += (i ? ", " : "") + sorted[i].p->rank;
    if (sorted.size() > 8) out += " and " + std::to_string(sorted.size() - 8) + " more";
    return out;
}

std::string op_words(const FlightGroup& g) {
    const std::string op = g.waiting_op.empty() ? "a collective" : g.waiting_op;
    return g.waiting_input.empty() ? op : op + " (" + g.waiting_input + ")";
}

std::string call_words(const FlightCall& c) {
    const std::string op = c.op.empty() ? "a collective" : c.op;
    return c.input.empty() ? op : op + " (" + c.input + ")";
}

// What the rank called as collective #seq, where its entries still hold it.
const FlightCall* call_at(const FlightGroup& g, int64_t seq) {
    for (const FlightCall& c : g.recent)
        if (c.seq == seq) return &c;
    return nullptr;
}

std::string group_name(const FlightGroup& g) { return g.desc.empty() ? "process group " + g.id : g.desc; }

WatchReport report_for(const At& a, const std::string& kind, const std::string& detail) {
    WatchReport r;
    r.kind = kind;
    r.host = a.p->host;
    r.rank = a.p->rank;
    r.local_rank = a.p->local_rank;
    r.pid = a.p->pid;
    r.comm = a.p->comm;
    r.detail = detail;
    FlightSummary one;
    one.groups = {*a.g};
    for (const std::string& w : flight_words(one)) r.evidence.push_back("Flight Recorder: " + w);
    r.evidence.push_back("cpu " + num(a.p->cpu * 100, 1) + " % of a core over the " + num(a.p->still, 0) +
                         " s its position held");
    if (!a.p->gpu.empty()) r.evidence.push_back("CUDA_VISIBLE_DEVICES=" + a.p->gpu);
    return r;
}

}  // namespace

std::vector<WatchReport> compare_positions(const std::vector<RankPosition>& ranks, const PositionRules& rules) {
    std::vector<WatchReport> out;
    std::set<std::string> named;  // a rank once, by the first group that names it
    auto name = [&](const At& a, const std::string& kind, const std::string& detail) {
        if (named.insert(a.p->rank).second) out.push_back(report_for(a, kind, detail));
    };
    // The groups in the order the ranks list them (the default group first).
    std::vector<std::string> ids;
    for (const RankPosition& p : ranks)
        for (const FlightGroup& g : p.flight.groups)
            if (std::find(ids.begin(), ids.end(), g.id) == ids.end() && ids.size() < 64) ids.push_back(g.id);
    for (const std::string& id : ids) {
        std::vector<At> at;
        for (const RankPosition& p : ranks)
            for (const FlightGroup& g : p.flight.groups)
                if (g.id == id) at.push_back({&p, &g});
        if (at.size() < 2) continue;
        // The collective most of the waiting ranks wait in: #k.
        std::map<int64_t, std::size_t> waiting;
        for (const At& a : at)
            if (a.g->waiting_seq >= 0) ++waiting[a.g->waiting_seq];
        if (waiting.empty()) continue;  // nobody in a collective: a pause all share
        int64_t k = -1;
        std::size_t most = 0;
        for (const auto& [seq, n] : waiting)
            if (n >= most) {
                k = seq;
                most = n;
            }
        std::vector<At> in_k;
        for (const At& a : at)
            if (a.g->waiting_seq == k) in_k.push_back(a);
        // What they call there: the call most of them make (ties: the
        // lowest rank's); a rank that calls another one is out of step.
        std::map<std::string, std::size_t> calls;
        for (const At& a : in_k) ++calls[op_words(*a.g)];
        const auto lowest = std::min_element(in_k.begin(), in_k.end(), [](const At& a, const At& b) {
            return rank_number(a.p->rank) < rank_number(b.p->rank);
        });
        std::string call = op_words(*lowest->g);
        for (const auto& [c, n] : calls)
            if (n > calls[call]) call = c;
        std::vector<At> same, other;
        for (const At& a : in_k) (op_words(*a.g) == call ? same : other).push_back(a);
        const std::string where = " #" + std::to_string(k) + " of " + group_name(*in_k.front().g);
        for (const At& a : other)
            name(a, "application desync",
                 "calls " + op_words(*a.g) + " as collective" + where + ", where " + ranks_words(same) + " call " +
                     call + ": the program took another path on this rank");
        // Past #k already, having called another collective there (its
        // peers' data may have let it complete: the others wait on).
        for (const At& a : at)
            if (a.g->waiting_seq != k)
                if (const FlightCall* c = call_at(*a.g, k); c && call_words(*c) != call)
                    name(a, "application desync",
                         "called " + call_words(*c) + " as collective" + where + " (" +
                             (c->state.empty() ? "?" : c->state) + "), where " + ranks_words(same) + " wait in " +
                             call + ": the program took another path on this rank");
        // Started on the others' GPUs, only scheduled on this one's: its
        // GPU has not come to the collective (torch marks a collective
        // started only with TORCH_NCCL_ENABLE_TIMING, which the watch sets).
        std::vector<At> started;
        for (const At& a : same)
            if (a.g->waiting_state == "started") started.push_back(a);
        if (!started.empty())
            for (const At& a : same)
                if (a.g->waiting_state == "scheduled")
                    name(a, "GPU stuck",
                         "its " + call + where + " was scheduled on its GPU and has not started for " +
                             num(a.p->still, 0) + " s, while " + ranks_words(started) +
                             " started theirs: work queued before it on this GPU does not end (a kernel that "
                             "never returns, or a hung GPU)");
        // Never called #k: idle, it waits on something that is not the
        // others; busy, it is in its own code (named only after busy_after).
        for (const At& a : at) {
            if (a.g->waiting_seq >= 0 || a.g->enqueued >= k) continue;
            const std::string last = a.g->enqueued >= 0 ? "its last is #" + std::to_string(a.g->enqueued)
                                                         : "it has called none";
            if (a.p->cpu < rules.idle_cpu)
                name(a, "application desync",
                     "has not called collective" + where + " (" + call + "), in which " + ranks_words(same) +
                         " wait: " + last + ", and its processes used " + num(a.p->cpu * 100, 1) +
                         " % of a core for " + num(a.p->still, 0) + " s: it waits on something else");
            else if (a.p->still >= rules.busy_after)
                name(a, "busy outside collectives",
                     "has not called collective" + where + " (" + call + ") for " + num(a.p->still, 0) + " s, in which " +
                         ranks_words(same) + " wait: " + last + ", and it is busy in its own code (" +
                         num(a.p->cpu * 100, 0) + " % of a core)");
        }
    }
    // A GPU stuck where its node's GPUs said they are at fault: two
    // signals, so the node is blamed. Any rank's watch on that node may
    // carry them (the node's first task watches its GPUs).
    for (WatchReport& r : out) {
        if (r.kind != "GPU stuck") continue;
        std::vector<std::string> events;
        for (const RankPosition& p : ranks)
            if (p.host == r.host)
                for (const std::string& e : p.gpu_events)
                    if (std::find(events.begin(), events.end(), e) == events.end()) events.push_back(e);
        if (events.empty()) continue;
        r.host_evidence = true;
        r.detail += "; and " + r.host + "'s GPUs reported a hardware fault (NVML)";
        for (const std::string& e : events) r.evidence.push_back("NVML: " + e);
    }
    return out;
}

}  // namespace mn
