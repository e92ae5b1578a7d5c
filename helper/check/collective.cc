// SPDX-License-Identifier: Apache-2.0
// Phase 3, the collective: an all-reduce across every rank with its result
// checked (NCCL on GPUs, a ring over TCP on CPUs). Bounded by size and by
// time: the timed loop stops, on every rank at once, after the budget
// (0.05 x --timeout, 0.5 to 2 s), so a slow node costs seconds, not a full
// transfer at its speed; the pair tests then name it. Transfers give up
// 2.5 s before --timeout, so a rank blocked by a stuck peer still reports.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <set>
#include <thread>
#include <unistd.h>

#include "helper/check/lead.h"
#include "helper/check/ring.h"
#include "lib/util/text.h"

namespace mn::check {
namespace {

// This rank's part of the all-reduce on GPUs: NCCL, every lane.
msg::Result gpu_share(const msg::Plan& p, const Step& st) {
    set_phase("NCCL init and all-reduce");
    gpu::AllreduceJob job = nccl_job(st, p.nranks, p.first_rank, p.id);
    job.bytes = p.bytes;
    job.warmup = p.warmup;
    job.iters = p.iters;
    job.budget = p.budget;
    job.pair_budget = p.pair_budget;
    job.pair_bytes = p.pair_bytes;
    job.pair_colors = p.colors;
    job.hold = true;  // for the retests (pairs.cc); released at rank 0's word
    job.pair_pause = stalls_pairs(st.self.rank, false) ? kStall : 0;
    auto r = gpu::run_allreduce(job);
    forget_nccl_log(job.log_path);  // read: a rank stopped later leaves nothing behind
    msg::Result out;
    out.ran = r.ran;
    out.correct = r.correct;
    out.error = r.error;
    out.kind = r.error.empty() ? msg::Result::Kind::None : r.peer ? msg::Result::Kind::Peer : msg::Result::Kind::Fault;
    out.seconds = r.seconds;
    out.init = r.init_seconds;
    out.transports = r.transports;
    out.pair_seconds = r.pair_seconds;
    out.pair_error = r.pair_error;
    return out;
}

// The same on CPUs, over TCP: a member hands its pieces to its node's
// leader; a leader gathers its members', rings with the other leaders and
// hands the sums back (Links).
msg::Result cpu_share(const msg::Plan& p, Step& st) {
    set_phase("ring connect");
    const uint32_t rank = st.self.rank;
    const bool leads = p.leader == rank;
    msg::Result out;
    out.kind = msg::Result::Kind::Peer;
    Fd up, next;
    std::vector<Fd> group;
    Links links;
    if (!leads) {
        auto c = data_connect(p.next_addr, p.next_port, "node", st.self, st.work_end);
        if (!c) {
            out.error = "cannot reach its node's leader, rank " + std::to_string(p.leader) + ": " + c.problem().text();
            return out;
        }
        up = std::move(c.value());
        links.head = up.get();
        links.head_rank = p.leader;
    } else {
        // Connecting waits for the next leader's challenge, which it sends
        // while accepting its own: every leader does both at once, or the
        // ring would wait on itself.
        std::future<Outcome<Fd>> onward;
        if (p.ring_size > 1) {
            try {
                onward = std::async(std::launch::async, [&] {
                    return data_connect(p.next_addr, p.next_port, "ring", st.self, st.work_end);
                });
            } catch (const std::system_error& e) {
                out.kind = msg::Result::Kind::Fault;
                out.error = starved("cannot start the ring's connect thread", e.code().value()).text();
                return out;
            }
        }
        std::vector<std::pair<std::string, uint32_t>> want;
        for (uint32_t m : p.members) want.push_back({"node", m});
        if (p.ring_size > 1) want.push_back({"ring", p.prev});
        // Strangers at the data port meanwhile go in the report: rank 0 counts
        // them against a time-out or a failed link (fail_closed), never a node.
        Strangers seen;
        auto g = data_accept_all(st.data_listen.get(), want, st.self, st.work_end, &seen);
        if (seen.total) {
            out.strangers = seen.brief();
            std::fprintf(stderr, "mn-preflight: %s rank %u: strangers at its data port: %s\n", st.self.label.c_str(),
                         rank, out.strangers->c_str());
        }
        if (onward.valid()) {
            auto c = onward.get();
            if (!c) {
                out.error = "cannot reach the next node's leader: " + c.problem().text();
                return out;
            }
            next = std::move(c.value());
        }
        if (!g) {
            out.error = g.problem().text();
            return out;
        }
        group = std::move(g.value());
        for (std::size_t m = 0; m < p.members.size(); ++m) links.members.push_back(group[m].get());
        links.pos = p.ring_pos;
        links.n = std::max<uint32_t>(1, p.ring_size);
        links.next = next.get();
        links.member_ranks = p.members;
        if (p.ring_size > 1) {
            links.prev = group.back().get();
            links.prev_rank = p.prev;
            links.next_rank = p.next;
        }
    }
    set_phase("TCP all-reduce");
    // The buffer readiness filled with this rank's pattern (at launch for
    // the default size): taken, not copied, since every rank of a machine
    // copying megabytes at the go starves rank 0's loop that sends it.
    std::vector<float> buf = std::move(st.ring);
    if (buf.size() != p.bytes / sizeof(float)) {
        buf.assign(p.bytes / sizeof(float), 0.0f);
        fill_pattern(buf, rank);
    }
    Timed t = timed_ring(buf, p.iters, links, st.self.world, st.work_end, p.budget);
    out.ran = t.ok || !t.error.empty();
    out.correct = t.correct;
    out.error = t.error;
    out.kind = t.error.empty() ? msg::Result::Kind::None : t.peer ? msg::Result::Kind::Peer : msg::Result::Kind::Fault;
    out.seconds = t.seconds;
    out.passes = t.passes;
    return out;
}

}  // namespace

gpu::AllreduceJob nccl_job(const Step& st, int nranks, int first_rank, const std::string& id) {
    gpu::AllreduceJob job;
    job.devices = st.devices;
    job.nranks = nranks;
    job.first_rank = first_rank;
    job.id = id;
    job.log_path = st.nccl_log;
    job.deadline_s = st.work_end.left();
    return job;
}

msg::Result run_share(const msg::Plan& plan, Step& st) {
    if (exits_on_purpose(st.self.rank)) {
        std::fprintf(stderr, "mn-preflight: %s rank %u: ending on purpose as the collective starts "
                             "(MN_PREFLIGHT_EXIT_IN_COLLECTIVE: a test hook)\n",
                     st.self.label.c_str(), st.self.rank);
        std::fflush(stderr);
        _exit(1);
    }
    return plan.gpu ? gpu_share(plan, st) : cpu_share(plan, st);
}

bool serve_collective(Step& st, Follower& f) {
    set_phase("waiting for rank 0's go");
    std::string err;
    auto m = f.inbox.next(st.end, &err);
    const auto* plan = m ? std::get_if<msg::Plan>(&*m) : nullptr;
    if (!plan) return false;
    return f.ctl.send(run_share(*plan, st), st.end);
}

namespace {

// Each rank's part of the plan: its lanes' first NCCL rank, its ring
// neighbour, its lanes' colors in the GPU pair rounds.
msg::Plan plan_for(const Step& st, const Lead& l, uint32_t r) {
    msg::Plan p;
    p.gpu = l.gpu_path;
    p.bytes = l.bytes;
    p.iters = l.iters;
    p.warmup = 5;
    p.budget = st.budget.collective;
    p.pair_budget = st.budget.pair;
    p.pair_bytes = l.pair_bytes;
    p.nranks = static_cast<int>(l.lanes);
    p.first_rank = static_cast<int>(l.first_lane[r]);
    p.id = l.nccl_id;  // made in readiness (lead_readiness)
    // CPU path: the node's leader is its lowest rank; the leaders ring in
    // node order.
    const auto& nodes = l.rep.nodes;
    const uint32_t node = l.members[r].node_index, nn = static_cast<uint32_t>(nodes.size());
    auto leader_of = [&](uint32_t k) { return *std::min_element(nodes[k].ranks.begin(), nodes[k].ranks.end()); };
    p.leader = leader_of(node);
    const uint32_t to = p.leader == r ? leader_of((node + 1) % nn) : p.leader;
    p.next_addr = l.members[to].hello.data_addr;
    p.next_port = l.members[to].hello.data_port;
    if (p.leader == r) {
        for (uint32_t m : nodes[node].ranks)
            if (m != r) p.members.push_back(m);
        p.ring_pos = node;
        p.ring_size = nn;
        p.prev = leader_of((node + nn - 1) % nn);
        p.next = leader_of((node + 1) % nn);
    }
    p.colors = rank_colors(l, r, l.gpu_rounds);
    return p;
}

// The go, to every rank; rank 0's own share runs on a thread beside the
// collection of the others' reports, so that a failing or stuck rank is
// heard at once.
void start_collective(Step& st, Lead& l) {
    // Pair rounds on GPUs: between nodes (a color per node pair), then
    // inside nodes (a color per GPU pair), each lane of a rank its color.
    if (l.gpu_path) gpu_pair_plan(st, l);
    set_phase(l.gpu_path ? "NCCL init and all-reduce" : "ring connect");
    l.tell_each([&](uint32_t r) { return plan_for(st, l, r); }, st.end);
    auto own = std::make_shared<std::promise<msg::Result>>();
    l.own = own->get_future();
    if (shares_simulated()) {
        msg::Result r;
        r.ran = r.correct = true;
        r.seconds = 0.001;
        own->set_value(r);
        return;
    }
    auto t = start_thread("rank 0's share of the all-reduce", [own, plan = plan_for(st, l, 0), &st] {
        try {
            own->set_value(run_share(plan, st));
        } catch (const std::exception& e) {
            msg::Result r;
            r.kind = msg::Result::Kind::Fault;
            r.error = std::string("internal error: ") + e.what();
            own->set_value(r);
        }
    });
    if (t) {
        t.value().detach();
    } else {
        msg::Result r;
        r.kind = msg::Result::Kind::Fault;
        r.error = t.problem().text();
        own->set_value(r);
    }
}

// Every rank's result, in the order they come; false (noted) on the first
// fault, or when time ran out.
bool collect_results(Step& st, Lead& l) {
    const uint32_t world = st.self.world;
    l.results.assign(world, {});
    std::vector<bool> waiting(world, true);
    auto take = [&](uint32_t r, const msg::Result& m) {
        l.results[r] = m;
        if (m.kind == msg::Result::Kind::Fault) {
            l.note(r, RankState::Fault, m.error);
            return Reply::Stop;
        }
        if (m.kind == msg::Result::Kind::Peer) l.note(r, RankState::PeerError, m.error);
        return Reply::Taken;
    };
    const bool failed = !l.await_replies(waiting, l.own, st.end, take);
    bool all = true;
    for (uint32_t r = 0; r < world; ++r) {
        if (!waiting[r]) continue;
        all = false;
        l.note(r, failed ? RankState::Stopped : RankState::Silent,
               failed ? "" : "never finished the all-reduce (stuck or stopped)");
    }
    return all && !failed;
}

// The figures from every rank's result; false when a transfer failed.
bool sum_up(Step& st, Lead& l) {
    PreflightReport& rep = l.rep;
    double worst = 0, init = 0;
    bool all_ran = true, all_correct = true, peer = false;
    std::set<std::string> inter, intra;
    for (uint32_t r = 0; r < st.self.world; ++r) {
        const msg::Result& f = l.results[r];
        NodeReport& n = rep.nodes[l.members[r].node_index];
        all_ran = all_ran && f.ran;
        all_correct = all_correct && f.correct;
        peer = peer || !f.error.empty();
        worst = std::max(worst, f.seconds);
        init = std::max(init, f.init);
        for (const std::string& x : f.transports) {
            if (x.rfind("NET/", 0) == 0) {
                inter.insert(x);
                if (n.inter_transport.find(x) == std::string::npos)
                    n.inter_transport += (n.inter_transport.empty() ? "" : ",") + x;
            } else {
                intra.insert(x);
            }
        }
        if (!f.pair_error.empty()) rep.notes.push_back("pair tests skipped: " + f.pair_error);
        if (f.passes && *f.passes < l.iters && r == 0)
            rep.notes.push_back("the all-reduce stopped after " + num(*f.passes, 3) + " of " + std::to_string(l.iters) +
                                " timed passes: its " + num(st.budget.collective, -1) + " s budget was spent");
    }
    if (peer) return false;
    rep.coll.ran = all_ran;
    rep.coll.correct = all_ran && all_correct;
    rep.coll.seconds = worst;
    rep.coll.init_seconds = init;
    rep.coll.algbw_gbps = worst > 0 ? l.bytes / worst / 1e9 : 0;
    rep.coll.busbw_gbps = allreduce_busbw(rep.coll.algbw_gbps, rep.coll.nranks);
    rep.coll.inter_transport = join_list({inter.begin(), inter.end()});
    rep.coll.intra_transport = join_list({intra.begin(), intra.end()});
    return true;
}

}  // namespace

bool lead_collective(Step& st, Lead& l) {
    l.enter(msg::Stage::Collective);
    l.cost.mark("readiness", st.start);
    start_collective(st, l);
    l.cost.mark("go", st.start);
    const bool ok = collect_results(st, l) && sum_up(st, l);
    l.cost.mark("collective", st.start);
    if (!ok) return false;
    progress(st.self, "all-reduce: busbw " + num(l.rep.coll.busbw_gbps) + " GB/s, result " +
                          (l.rep.coll.correct ? "correct" : "WRONG") + " (" + num(now_s() - st.start) + " s)");
    return true;
}

}  // namespace mn::check
