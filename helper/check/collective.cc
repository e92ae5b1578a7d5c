// Phase 3, the collective: an all-reduce across every rank with its result
// checked (NCCL on GPUs, a ring over TCP on CPUs). Bounded by size and by
// time: the timed loop stops, on every rank at once, after the budget
// (0.1 x --timeout, 0.5 to 3 s), so a slow node costs seconds, not a full
// transfer at its speed; the pair tests then name it. Transfers give up
// 2.5 s before --timeout, so a rank blocked by a stuck peer still reports.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <unistd.h>

#include "helper/check/step.h"
#include "lib/util/sha256.h"
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

}  // namespace

Timed timed_ring(std::vector<float>& buf, int iters, uint32_t pos, uint32_t n, int next_fd, int prev_fd,
                 const Deadline& d, double budget) {
    Timed t;
    fill_pattern(buf, pos);  // sums over positions 0..n-1, as check_pattern expects
    const std::size_t count = buf.size();
    if (count == 0) return t;
    // The buffer goes round in segments of 1 MiB, each with one more
    // element: this rank's vote to stop (1 once its budget is spent). The
    // sum reaches every rank, so all stop after the same segment.
    const std::size_t seg = std::min<std::size_t>(count, 1u << 18);
    const std::size_t nseg = (count + seg - 1) / seg;
    const std::size_t planned = nseg * (1 + static_cast<std::size_t>(std::max(0, iters)));
    std::vector<float> piece(seg + 1);
    const double t0 = now_s();
    double t_first = 0;
    std::size_t done = 0;
    bool stop = false;
    bool checked = false;
    // The first pass is checked, or as much of it as the time allowed.
    auto check_first = [&](std::size_t upto) {
        t.error = check_pattern(upto == count ? buf : std::vector<float>(buf.begin(), buf.begin() + upto), n);
        t.correct = t.error.empty();
        if (!t.correct) t.error = "wrong all-reduce result: " + t.error;
        checked = true;
    };
    while (done < planned && !stop) {
        const std::size_t lo = (done % nseg) * seg, len = std::min(seg, count - lo);
        std::copy(buf.begin() + lo, buf.begin() + lo + len, piece.begin());
        piece[len] = now_s() - t0 > budget ? 1.0f : 0.0f;
        if (!ring_allreduce(piece.data(), len + 1, pos, n, next_fd, prev_fd, d, &t.error)) {
            t.peer = true;
            return t;
        }
        std::copy(piece.begin(), piece.begin() + len, buf.begin() + lo);
        stop = piece[len] > 0;
        if (++done == nseg) {
            t_first = now_s();
            check_first(count);
        }
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

// Data connections carry a proof of the step secret, so a stray connection
// to a data port is refused like one to MASTER_PORT.
Outcome<Fd> data_connect(const std::string& addr, uint16_t port, const std::string& purpose, uint32_t rank,
                         const std::string& secret, const Deadline& d) {
    auto fd = wire::connect_tcp(addr, port, d);
    if (!fd) return fd.problem();
    Fields f{{"purpose", purpose}, {"rank", std::to_string(rank)},
             {"proof", hmac_hex(secret, "data:" + purpose + ":" + std::to_string(rank))}};
    if (!wire::send_msg(fd->get(), f, d)) return Problem{"could not greet " + addr + ":" + std::to_string(port), ""};
    return fd;
}

Outcome<Fd> data_accept(int listen_fd, const std::string& purpose, uint32_t from, const std::string& secret,
                        const Deadline& d) {
    while (!d.passed()) {
        std::string peer;
        auto fd = wire::accept_one(listen_fd, d, &peer);
        if (!fd) break;
        std::string err;
        auto m = wire::recv_msg(fd->get(), Deadline::in(std::min(2.0, std::max(0.1, d.left()))), &err);
        if (!m) continue;
        auto& f = *m;
        if (f["purpose"] == purpose && f["rank"] == std::to_string(from) &&
            f["proof"] == hmac_hex(secret, "data:" + purpose + ":" + f["rank"]))
            return std::move(fd.value());
        std::fprintf(stderr, "mn-preflight: %s: refused a data connection from %s (no valid step secret)\n",
                     host_name().c_str(), peer.c_str());
    }
    return Problem{"rank " + std::to_string(from) + " did not connect for " + purpose, ""};
}

Fields run_share(const Fields& plan, const Step& st) {
    Fields p = plan;
    if (exits_on_purpose(st.self.rank)) {
        std::fprintf(stderr, "mn-preflight: %s rank %u: ending on purpose as the collective starts "
                             "(MN_PREFLIGHT_EXIT_IN_COLLECTIVE: a test hook)\n",
                     st.self.label.c_str(), st.self.rank);
        std::fflush(stderr);
        _exit(1);
    }
    if (p["path"] == "gpu") {
        set_phase("NCCL init and all-reduce");
        gpu::AllreduceJob job;
        job.devices = st.devices;
        job.nranks = std::atoi(p["nranks"].c_str());
        job.first_rank = std::atoi(p["first_rank"].c_str());
        job.id = p["id"];
        job.bytes = std::strtoull(p["bytes"].c_str(), nullptr, 10);
        job.warmup = std::atoi(p["warmup"].c_str());
        job.iters = std::atoi(p["iters"].c_str());
        job.budget = std::atof(p["budget"].c_str());
        job.pair_budget = std::atof(p["pair_budget"].c_str());
        job.pair_bytes = std::strtoull(p["pair_bytes"].c_str(), nullptr, 10);
        for (const std::string& round : split_list(p["colors"], ';')) {
            std::vector<int> lanes;
            for (double c : split_numbers(round)) lanes.push_back(static_cast<int>(c));
            job.pair_colors.push_back(lanes);
        }
        job.log_path = st.nccl_log;
        job.deadline_s = st.work_end.left();
        auto r = gpu::run_allreduce(job);
        std::remove(job.log_path.c_str());
        std::vector<std::string> ps;
        for (const auto& round : r.pair_seconds) {
            std::vector<std::string> lanes;
            for (double x : round) lanes.push_back(num(x, 9));
            ps.push_back(join_list(lanes));
        }
        return {{"ran", r.ran ? "1" : "0"},
                {"correct", r.correct ? "1" : "0"},
                {"error", r.error},
                {"kind", r.error.empty() ? "" : (r.peer ? "peer" : "fault")},
                {"seconds", num(r.seconds, 9)},
                {"init", num(r.init_seconds, 6)},
                {"transports", join_list(r.transports)},
                {"pair_seconds", join_list(ps, ';')},
                {"pair_error", r.pair_error}};
    }
    set_phase("ring connect");
    const uint32_t n = st.self.world, rank = st.self.rank;
    Fd next, prev;
    if (n > 1) {
        auto nx = data_connect(p["next_addr"], static_cast<uint16_t>(std::atoi(p["next_port"].c_str())), "ring", rank,
                               st.self.secret, st.work_end);
        auto pv = data_accept(st.data_listen.get(), "ring", (rank + n - 1) % n, st.self.secret, st.work_end);
        if (!nx || !pv)
            return {{"ran", "0"},
                    {"kind", "peer"},
                    {"error", !nx ? "cannot reach the next rank: " + nx.problem().text() : pv.problem().text()}};
        next = std::move(nx.value());
        prev = std::move(pv.value());
    }
    set_phase("TCP ring all-reduce");
    std::vector<float> buf = st.ring;
    buf.resize(std::strtoull(p["bytes"].c_str(), nullptr, 10) / sizeof(float));
    Timed t = timed_ring(buf, std::atoi(p["iters"].c_str()), rank, n, next.get(), prev.get(), st.work_end,
                         std::atof(p["budget"].c_str()));
    // Name the ring neighbours: one of them is the likely culprit.
    if (!t.ok)
        t.error = "ring from rank " + std::to_string((rank + n - 1) % n) + " to rank " + std::to_string((rank + 1) % n) +
                  ": " + t.error;
    return {{"ran", t.ok || !t.error.empty() ? "1" : "0"},
            {"correct", t.correct ? "1" : "0"},
            {"error", t.error},
            {"kind", t.error.empty() ? "" : (t.peer ? "peer" : "fault")},
            {"seconds", num(t.seconds, 9)},
            {"passes", num(t.passes, 3)}};
}

bool serve_collective(Step& st) {
    set_phase("waiting for rank 0's go");
    std::string err;
    auto plan = st.inbox.next(st.end, &err);
    if (!plan || (*plan)["op"] != "plan") return false;
    Fields result = run_share(*plan, st);
    result["op"] = "coll";
    return wire::send_msg(st.ctl.get(), result, st.end);
}

bool lead_collective(Step& st) {
    const Self& self = st.self;
    PreflightReport& rep = st.rep;
    st.phase = "collective";
    const uint32_t world = self.world;
    std::vector<uint32_t>& first = st.first_lane;
    first.assign(world, 0);
    uint32_t lanes = 0;
    for (uint32_t r = 0; r < world; ++r) {
        first[r] = lanes;
        lanes += st.members[r].lanes();
    }
    rep.coll.nranks = st.gpu_path ? lanes : world;
    const std::string id = st.gpu_path ? gpu::unique_id() : "";
    // Pair rounds on GPUs: between nodes (a color per node pair), then
    // inside nodes (a color per GPU pair), each lane of a rank its color.
    const auto gpu_rounds = st.gpu_path ? gpu_pair_plan(st) : std::vector<std::vector<int>>{};
    auto plan_for = [&](uint32_t r) {
        Fields p{{"op", "plan"},
                 {"path", st.gpu_path ? "gpu" : "cpu"},
                 {"bytes", std::to_string(st.bytes)},
                 {"iters", std::to_string(st.iters)},
                 {"warmup", "5"},
                 {"budget", num(st.budget.collective, 3)},
                 {"pair_budget", num(st.budget.pair, 3)},
                 {"pair_bytes", std::to_string(st.pair_bytes)},
                 {"nranks", std::to_string(lanes)},
                 {"first_rank", std::to_string(first[r])},
                 {"id", id}};
        const uint32_t nx = (r + 1) % world;
        p["next_addr"] = st.members[nx].hello["data_addr"];
        p["next_port"] = st.members[nx].hello["data_port"];
        std::vector<std::string> rounds;
        for (const auto& round : gpu_rounds) {
            std::vector<std::string> mine;
            for (uint32_t l = 0; l < st.members[r].lanes(); ++l) mine.push_back(std::to_string(round[first[r] + l]));
            rounds.push_back(join_list(mine));
        }
        p["colors"] = join_list(rounds, ';');
        return p;
    };
    set_phase(st.gpu_path ? "NCCL init and all-reduce" : "ring connect");
    // The go.
    for (uint32_t r = 1; r < world; ++r) wire::send_msg(st.members[r].ctl.get(), plan_for(r), st.end);
    // Rank 0's own share runs beside the collection of the others'
    // reports, so that a failing or stuck rank is heard at once.
    auto own = std::make_shared<std::promise<Fields>>();
    st.own = own->get_future();
    std::thread([own, plan = plan_for(0), &st] {
        try {
            own->set_value(run_share(plan, st));
        } catch (const std::exception& e) {
            own->set_value({{"ran", "0"}, {"kind", "fault"}, {"error", std::string("internal error: ") + e.what()}});
        }
    }).detach();
    st.results.assign(world, {});
    std::vector<bool> reported(world, false);
    uint32_t count = 0;
    const Deadline collect = Deadline::in(std::max(0.0, st.end.left()));
    bool failed = false;
    auto take = [&](uint32_t r, const Fields& f) {
        st.results[r] = f;
        reported[r] = true;
        ++count;
        const std::string kind = st.results[r]["kind"];
        if (kind == "fault") {
            st.note(r, RankState::Fault, st.results[r]["error"]);
            failed = true;
        } else if (kind == "peer") {
            st.note(r, RankState::PeerError, st.results[r]["error"]);
        }
    };
    while (count < world && !failed && !collect.passed()) {
        if (!reported[0] && st.own.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
            take(0, st.own.get());
            continue;
        }
        auto e = st.mux.next(Deadline::in(std::min(0.05, std::max(0.0, collect.left()))));
        if (!e) continue;
        const uint32_t r = static_cast<uint32_t>(e->key);
        if (reported[r]) continue;
        if (!e->msg) {
            take(r, {{"kind", "fault"}, {"error", "its process ended during the all-reduce (" + e->error + ")"}});
            continue;
        }
        if ((*e->msg)["op"] == "coll") take(r, *e->msg);
    }
    for (uint32_t r = 0; r < world; ++r)
        if (!reported[r])
            st.note(r, failed ? RankState::Stopped : RankState::Silent,
                    failed ? "" : "never finished the all-reduce (stuck or stopped)");
    if (count < world || failed) return false;
    double worst = 0, init = 0;
    bool all_ran = true, all_correct = true, peer = false;
    std::set<std::string> inter, intra;
    for (uint32_t r = 0; r < world; ++r) {
        Fields& f = st.results[r];
        NodeReport& n = rep.nodes[st.members[r].node_index];
        if (f["ran"] != "1") all_ran = false;
        if (f["correct"] != "1") all_correct = false;
        if (!f["error"].empty()) peer = true;
        worst = std::max(worst, std::atof(f["seconds"].c_str()));
        init = std::max(init, std::atof(f["init"].c_str()));
        for (const std::string& x : split_list(f["transports"])) {
            if (x.rfind("NET/", 0) == 0) {
                inter.insert(x);
                if (n.inter_transport.find(x) == std::string::npos)
                    n.inter_transport += (n.inter_transport.empty() ? "" : ",") + x;
            } else {
                intra.insert(x);
            }
        }
        if (!f["pair_error"].empty()) rep.notes.push_back("pair tests skipped: " + f["pair_error"]);
        if (!f["passes"].empty() && std::atof(f["passes"].c_str()) < st.iters && r == 0)
            rep.notes.push_back("the all-reduce stopped after " + f["passes"] + " of " + std::to_string(st.iters) +
                                " timed passes: its " + num(st.budget.collective, -1) + " s budget was spent");
    }
    if (peer) return false;
    rep.coll.ran = all_ran;
    rep.coll.correct = all_ran && all_correct;
    rep.coll.seconds = worst;
    rep.coll.init_seconds = init;
    rep.coll.algbw_gbps = worst > 0 ? st.bytes / worst / 1e9 : 0;
    rep.coll.busbw_gbps = allreduce_busbw(rep.coll.algbw_gbps, rep.coll.nranks);
    rep.coll.inter_transport = join_list({inter.begin(), inter.end()});
    rep.coll.intra_transport = join_list({intra.begin(), intra.end()});
    progress(self, "all-reduce: busbw " + num(rep.coll.busbw_gbps) + " GB/s, result " +
                       (rep.coll.correct ? "correct" : "WRONG") + " (" + num(now_s() - st.start) + " s)");
    return true;
}

}  // namespace mn::check
