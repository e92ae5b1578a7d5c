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
#include "lib/util/text.h"

namespace mn::check {
namespace {

// One ring all-reduce (reduce-scatter, then all-gather) of `buf` among n
// members; this one is at position `pos`, sending to next and receiving
// from prev (one socket when n == 2).
bool ring_allreduce(float* buf, std::size_t count, uint32_t pos, uint32_t n, int next_fd, int prev_fd,
                    const Deadline& d, std::string* err) {
    if (n < 2) return true;
    auto lo = [&](uint32_t c) { return count * c / n; };
    auto len = [&](uint32_t c) { return lo(c + 1) - lo(c); };
    std::vector<float> tmp(count / n + 1);
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t send_c = (pos + n - s) % n, recv_c = (pos + n - s - 1) % n;
        if (!wire::exchange(next_fd, buf + lo(send_c), len(send_c) * 4, prev_fd, tmp.data(), len(recv_c) * 4, d, err))
            return false;
        for (std::size_t i = 0; i < len(recv_c); ++i) buf[lo(recv_c) + i] += tmp[i];
    }
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t send_c = (pos + 1 + n - s) % n, recv_c = (pos + n - s) % n;
        if (!wire::exchange(next_fd, buf + lo(send_c), len(send_c) * 4, prev_fd, buf + lo(recv_c), len(recv_c) * 4, d,
                            err))
            return false;
    }
    return true;
}

// One all-reduce of `piece` (count floats) over `links`: a member sends
// its piece to its leader and gets the sum back; a leader adds its
// members' pieces, rings with the other leaders and hands the sum back.
// A failure names the rank at the other end.
bool node_allreduce(float* piece, std::size_t count, const Links& links, std::vector<float>& tmp, const Deadline& d,
                    std::string* err) {
    const std::size_t bytes = count * sizeof(float);
    auto rank_of = [](const std::optional<uint32_t>& r) { return r ? "rank " + std::to_string(*r) : std::string("?"); };
    auto member = [&](std::size_t m) {
        return "rank " + (m < links.member_ranks.size() ? std::to_string(links.member_ranks[m]) : std::string("?"));
    };
    tmp.resize(std::max(tmp.size(), count));
    if (links.leader >= 0) {
        if (!wire::send_all(links.leader, piece, bytes, d) || !wire::recv_all(links.leader, tmp.data(), bytes, d)) {
            *err = "no sum back from its node's leader, " + rank_of(links.leader_rank);
            return false;
        }
        std::copy(tmp.begin(), tmp.begin() + static_cast<long>(count), piece);
        return true;
    }
    for (std::size_t m = 0; m < links.members.size(); ++m) {
        if (!wire::recv_all(links.members[m], tmp.data(), bytes, d)) {
            *err = "no piece from " + member(m) + " of its node";
            return false;
        }
        for (std::size_t i = 0; i < count; ++i) piece[i] += tmp[i];
    }
    if (!ring_allreduce(piece, count, links.pos, links.n, links.next, links.prev, d, err)) {
        if (links.prev_rank)
            *err = "leaders' ring from " + rank_of(links.prev_rank) + " to " + rank_of(links.next_rank) + ": " + *err;
        return false;
    }
    for (std::size_t m = 0; m < links.members.size(); ++m)
        if (!wire::send_all(links.members[m], piece, bytes, d)) {
            *err = "could not hand the sum to " + member(m) + " of its node";
            return false;
        }
    return true;
}

}  // namespace

std::string prepare_ring(std::vector<float>& ring, std::size_t bytes, uint32_t pos) {
    try {
        ring.assign(bytes / sizeof(float), 0.0f);
    } catch (const std::bad_alloc&) {
        return "cannot allocate the " + num(bytes / 1048576.0, -1) + " MiB all-reduce buffer";
    }
    // This rank's own pattern, read back: the all-reduce starts from it.
    fill_pattern(ring, pos);
    if (std::string bad = check_fill(ring, pos); !bad.empty())
        return "the all-reduce buffer does not hold what was written: " + bad;
    return "";
}

Timed timed_ring(std::vector<float>& buf, int iters, const Links& links, uint32_t patterns, const Deadline& d,
                 double budget, double pause) {
    Timed t;
    const std::size_t count = buf.size();
    if (count == 0) return t;
    // The buffer goes round in segments of 1 MiB, each with one more
    // element: this rank's vote to stop (1 once its budget is spent). The
    // sum reaches every rank, so all stop after the same segment.
    const std::size_t seg = std::min<std::size_t>(count, 1u << 18);
    const std::size_t nseg = (count + seg - 1) / seg;
    const std::size_t planned = nseg * (1 + static_cast<std::size_t>(std::max(0, iters)));
    std::vector<float> piece(seg + 1), tmp;
    const double t0 = now_s();
    double t_first = 0, t_pass = 0;
    std::vector<double> pass_times;
    std::size_t done = 0;
    bool stop = false;
    bool checked = false;
    // The first pass is checked, or as much of it as the time allowed.
    auto check_first = [&](std::size_t upto) {
        t.error = check_pattern(upto == count ? buf : std::vector<float>(buf.begin(), buf.begin() + upto), patterns);
        t.correct = t.error.empty();
        if (!t.correct) t.error = "wrong all-reduce result: " + t.error;
        checked = true;
    };
    while (done < planned && !stop) {
        const std::size_t lo = (done % nseg) * seg, len = std::min(seg, count - lo);
        std::copy(buf.begin() + lo, buf.begin() + lo + len, piece.begin());
        const double seg_start = now_s();
        piece[len] = seg_start - t0 > budget ? 1.0f : 0.0f;
        if (!node_allreduce(piece.data(), len + 1, links, tmp, d, &t.error)) {
            t.peer = true;
            return t;
        }
        std::copy(piece.begin(), piece.begin() + len, buf.begin() + lo);
        stop = piece[len] > 0;
        // A hook's load: at least `pause`, and 4 times the segment's own
        // time, so a slow build (ASan) is slowed by as much as a fast one.
        if (pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(std::max(pause, 4 * (now_s() - seg_start))));
        if (++done == nseg) {
            t_first = t_pass = now_s();
            check_first(count);
        } else if (done % nseg == 0) {
            const double end = now_s();
            pass_times.push_back(end - t_pass);
            t_pass = end;
        }
    }
    if (!pass_times.empty()) {
        std::nth_element(pass_times.begin(), pass_times.begin() + pass_times.size() / 2, pass_times.end());
        t.median_pass = pass_times[pass_times.size() / 2];
    }
    if (!checked) check_first(std::min(count, done * seg));
    const double t1 = now_s();
    if (done > nseg) {
        t.passes = double(done - nseg) / nseg;
        t.seconds = (t1 - t_first) / t.passes;
    } else {
        t.passes = double(done) / nseg;
        t.seconds = (t1 - t0) / t.passes;
    }
    t.ok = true;
    return t;
}

Outcome<Fd> data_connect(const std::string& addr, uint16_t port, const std::string& purpose, const Self& self,
                         const Deadline& d) {
    auto c = knock(addr, port, "data:" + purpose, self.rank, std::nullopt, std::nullopt, self.secret, d);
    if (!c) return c.problem();
    return std::move(c.value().fd);
}

Outcome<std::vector<Fd>> data_accept_all(int listen_fd, const std::vector<std::pair<std::string, uint32_t>>& want,
                                         const Self& self, const Deadline& d, Strangers* seen) {
    std::vector<Fd> got(want.size());
    std::size_t have = 0;
    Doorway door(listen_fd, self.secret, self.rank, false);
    auto slot = [&](const std::string& purpose, uint32_t rank) {
        for (std::size_t k = 0; k < want.size(); ++k)
            if ("data:" + want[k].first == purpose && want[k].second == rank && !got[k]) return k;
        return want.size();
    };
    while (have < want.size() && !d.passed()) {
        for (Guest& g : door.turn(std::min(0.1, std::max(0.0, d.left())), [&](const std::string& p, uint32_t r) {
                 return slot(p, r) < want.size();
             })) {
            got[slot(g.purpose, g.rank)] = std::move(g.fd);
            ++have;
        }
    }
    if (have == want.size()) door.close_waiting();
    const std::string who = self.label + " rank " + std::to_string(self.rank);
    if (seen) seen->merge(door.strangers());
    else if (const std::string s = door.strangers().summary(); !s.empty())
        std::fprintf(stderr, "mn-preflight: %s: strangers at its data port: %s\n", who.c_str(), s.c_str());
    for (const auto& u : door.unwanted())
        std::fprintf(stderr, "mn-preflight: %s: refused a data connection: %s\n", who.c_str(), u.c_str());
    for (std::size_t k = 0; k < want.size(); ++k)
        if (!got[k])
            return Problem{"rank " + std::to_string(want[k].second) + " did not connect for " + want[k].first +
                               (door.strangers().total ? " (" + std::to_string(door.strangers().total) +
                                                             " connections from strangers came instead)"
                                                       : ""),
                           ""};
    return got;
}

Outcome<Fd> data_accept(int listen_fd, const std::string& purpose, uint32_t from, const Self& self, const Deadline& d,
                        Strangers* seen) {
    auto got = data_accept_all(listen_fd, {{purpose, from}}, self, d, seen);
    if (!got) return got.problem();
    return std::move(got.value().front());
}

Strangers take_waiting(int listen_fd) {
    Strangers s;
    std::string peer;
    for (std::size_t n = 0; n < kMostWaiting; ++n) {
        auto c = wire::accept_one(listen_fd, Deadline::in(0), &peer);
        if (!c) break;
        s.add(peer, "waited at it while it was not accepting");
    }
    return s;
}

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
        links.leader = up.get();
        links.leader_rank = p.leader;
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
        auto g = data_accept_all(st.data_listen.get(), want, st.self, st.work_end);
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
