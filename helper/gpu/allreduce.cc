// SPDX-License-Identifier: Apache-2.0
// run_allreduce() as named steps: open lanes -> init communicators ->
// checked all-reduce -> warm-up and timed loops -> pair rounds, then the
// communicators released. Each step reads what the step before made and
// returns a Failure (or fills the result); every wait polls, so
// abort_nccl() ends any of them.
#include "helper/gpu.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <utility>
#include <optional>
#include <system_error>
#include <thread>

#include "helper/gpu/lanes.h"
#include "helper/gpu/libraries.h"
#include "helper/gpu/wait.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

namespace mn::gpu {
namespace {

// What every step works with: the libraries' calls, this process's GPUs
// (lanes) and the time every wait gives up at.
struct Run {
    const Cuda& cu;
    const Nccl& nc;
    std::vector<Lane> lanes;
    double until = 0;
    double pause = 0;  // seconds the host waits before each launch of a timed loop (a test hook's stall)
    int first_rank = 0;  // NCCL rank of lanes[0]: the key of each split
};

// Hands each communicator back: destroyed, or aborted once abort_nccl()
// was called (which may have taken it already) or with `abort`.
void release(const Run& run, std::vector<ncclComm_t>& cs, bool abort = false) {
    for (std::size_t l = 0; l < cs.size(); ++l) {
        if (!cs[l]) continue;
        if (!untrack(cs[l])) {  // abort_nccl() has it
            cs[l] = nullptr;
            continue;
        }
        run.cu.ctx_set(run.lanes[l].ctx);
        if (abort || stopped()) run.nc.comm_abort(cs[l]);
        else run.nc.comm_destroy(cs[l]);
        cs[l] = nullptr;
    }
}

// The communicators run_allreduce() kept for retests (job.hold), with what
// their rounds need; one check holds one set.
struct Held {
    Run run;
    AllreduceJob job;
    std::vector<ncclComm_t> comms;
};
std::mutex held_mu;
std::optional<Held> held;
// Communicators done with before the end (the timed loop's blocking one),
// left to the process's end with the held ones: ncclCommDestroy waits for
// every rank to reach it, and the end frees them anyway.
std::vector<ncclComm_t> parked;

void park(std::vector<ncclComm_t>& cs) {
    std::lock_guard<std::mutex> g(held_mu);
    for (ncclComm_t& c : cs)
        if (c) parked.push_back(std::exchange(c, nullptr));
}

// Step 1: the lanes readiness opened, or open them now (the prolog's use);
// each lane's buffer then holds its rank's pattern (written again only
// where readiness guessed another place).
std::optional<Failure> open_lanes(Run& run, const AllreduceJob& job) {
    run.lanes = prepared_lanes(job.devices, job.bytes);
    if (run.lanes.empty()) {
        run.lanes.resize(job.devices.size());
        for (std::size_t l = 0; l < run.lanes.size(); ++l) {
            run.lanes[l].dev = job.devices[l];
            const uint32_t own = static_cast<uint32_t>(job.first_rank) + static_cast<uint32_t>(l);
            if (std::string e = open_lane(run.lanes[l], job.bytes, own); !e.empty()) return Failure{e, false};
        }
    }
    std::vector<float> tile(kPatternTile);
    for (std::size_t l = 0; l < run.lanes.size(); ++l) {
        const uint32_t own = static_cast<uint32_t>(job.first_rank) + static_cast<uint32_t>(l);
        if (run.lanes[l].pattern == own) continue;
        fill_pattern(tile, own);
        run.lanes[l].pattern = own;
        run.cu.ctx_set(run.lanes[l].ctx);
        if (CUresult r = put_tiles(run.cu, run.lanes[l], job.bytes, tile); r != CUDA_SUCCESS)
            return Failure{describe(run.lanes[l].dev) + ": " + cu_error(r), false};
    }
    return std::nullopt;
}

struct Communicators {
    std::vector<ncclComm_t> comms;  // one per lane
    double init_seconds = 0;
    std::optional<Failure> failure;  // then comms are released
};

// Step 2: one communicator per lane, initialised non-blocking in one group:
// rank 0's stop word reaches this rank inside NCCL's init.
Communicators init_communicators(const Run& run, const AllreduceJob& job, const ncclUniqueId& id) {
    Communicators out;
    out.comms.assign(run.lanes.size(), nullptr);
    set_nccl_log(job.log_path);
    const auto t0 = std::chrono::steady_clock::now();
    InitConfig config;
    ncclResult_t nr = run.nc.group_start();
    for (std::size_t l = 0; l < run.lanes.size() && nr == ncclSuccess; ++l) {
        run.cu.ctx_set(run.lanes[l].ctx);
        nr = comm_init(run.nc, config, &out.comms[l], job.nranks, id, job.first_rank + static_cast<int>(l));
        if (nr == ncclInProgress) nr = ncclSuccess;
    }
    ncclResult_t ge = group_end(run.nc);
    if (nr == ncclSuccess) nr = ge;
    for (ncclComm_t c : out.comms)
        if (c) track(c);
    const std::string where = describe(run.lanes[0].dev);
    if (nr != ncclSuccess) out.failure = Failure{"ncclCommInitRank on " + where + ": " + nccl_error(nr), nccl_is_peer(nr)};
    else out.failure = settle(out.comms, run.until, "NCCL init on " + where);
    out.init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (out.failure) release(run, out.comms);
    return out;
}

// NCCL's init started in readiness (start_init), for the run_allreduce()
// it was started for; one per check.
struct Early {
    AllreduceJob what;
    std::shared_future<Communicators> comms;
    bool taken = false;
};
std::mutex early_mu;
std::optional<Early> early;

// The early init, on its thread: once prepare() has this rank's buffers
// in place (their free memory read before NCCL takes its own), one
// communicator per lane, on the GPUs' primary contexts, as step 2 makes them.
Communicators early_init(const AllreduceJob& s) {
    const Libraries& libs = libraries();
    Run run{libs.cuda, libs.nccl, {}, now_s() + s.deadline_s};
    run.first_rank = s.first_rank;
    Communicators out;
    ncclUniqueId id{};
    if (!unique_id_from_hex(s.id, id)) {
        out.failure = Failure{"rank 0 sent no NCCL unique id", true};
        return out;
    }
    if (!lanes_allocated(s.devices, s.deadline_s)) {
        out.failure = Failure{"NCCL's init did not start: this rank's GPU buffers were not allocated", false};
        return out;
    }
    run.lanes.resize(s.devices.size());
    for (std::size_t l = 0; l < run.lanes.size(); ++l) {
        run.lanes[l].dev = s.devices[l];
        CUdevice d = 0;
        CUresult r = run.cu.device_get(&d, s.devices[l]);
        if (r == CUDA_SUCCESS) r = run.cu.ctx_retain(&run.lanes[l].ctx, d);
        if (r != CUDA_SUCCESS) {
            out.failure = Failure{describe(s.devices[l]) + ": " + cu_error(r) + " before NCCL's init", false};
            return out;
        }
    }
    return init_communicators(run, s, id);
}

// The early init's communicators (settled, or its failure) when `job` is
// the all-reduce it was started for; none otherwise.
std::optional<Communicators> take_early(const AllreduceJob& job) {
    std::shared_future<Communicators> f;
    {
        std::lock_guard<std::mutex> g(early_mu);
        if (!early || early->taken || early->what.id != job.id || early->what.nranks != job.nranks ||
            early->what.first_rank != job.first_rank || early->what.devices != job.devices)
            return std::nullopt;
        early->taken = true;
        f = early->comms;
    }
    return f.get();
}

// One round on communicators `cs`: `n` floats of each lane's buffer (or
// of its vote, reduced by `op`), settled: a non-blocking communicator
// refuses the next call (ncclInvalidArgument) until this one has left
// ncclInProgress. Only init, a split or a group that connects leaves it
// there; once connected, ncclGroupEnd launches at once and settle returns
// without waiting.
std::optional<Failure> enqueue(const Run& run, const std::vector<ncclComm_t>& cs, std::size_t n, bool vote = false,
                               ncclRedOp_t op = ncclSum) {
    ncclResult_t rc = run.nc.group_start();
    for (std::size_t l = 0; l < run.lanes.size(); ++l) {
        if (!cs[l]) continue;
        const Lane& ln = run.lanes[l];
        run.cu.ctx_set(ln.ctx);
        void* p = reinterpret_cast<void*>(vote ? ln.vote : ln.buf);
        ncclResult_t r = run.nc.all_reduce(p, p, n, ncclFloat32, op, cs[l], ln.stream);
        if (rc == ncclSuccess && r != ncclInProgress) rc = r;
    }
    ncclResult_t e = group_end(run.nc);
    if (rc == ncclSuccess) rc = e;
    if (rc != ncclSuccess) return Failure{"ncclAllReduce: " + nccl_error(rc), nccl_is_peer(rc)};
    return settle(cs, run.until, "ncclAllReduce");
}

// Step 3: one all-reduce of the patterns, its result checked on every lane.
std::optional<Failure> checked_allreduce(Run& run, const std::vector<ncclComm_t>& comms, const AllreduceJob& job,
                                         AllreduceResult& res) {
    if (auto f = enqueue(run, comms, job.bytes / sizeof(float))) return f;
    if (auto f = drain(run.lanes, comms, run.until, "the first all-reduce")) return f;
    res.ran = true;
    res.correct = true;
    std::vector<float> sum(kPatternTile);
    fill_sum(sum, static_cast<uint32_t>(job.nranks));
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        if (std::string bad = get_tiles(run.cu, ln, job.bytes, sum); !bad.empty()) {
            res.correct = false;
            res.error = describe(ln.dev) + ": wrong all-reduce result, " + bad;
            break;
        }
    }
    return std::nullopt;
}

// How the time is taken, as nccl-tests' all_reduce_perf takes it (its
// src/common.cu): rounds launched back to back on each lane's stream, and
// seconds per round = the time between two CUDA events on that stream
// around a loop of k rounds, divided by k. Between the two events the host
// only launches (no wait for the GPU, none for another rank); the wait,
// which polls so that abort_nccl() ends it, comes after the closing event.
// With `lead`, one untimed round goes before the opening event, which then
// fires as that round ends, at nearly the same moment on every rank (what
// nccl-tests' barrier before its timer is for): no rank counts its wait for
// a later one. Adds each lane's seconds to `sum`.
std::optional<Failure> timed_rounds(const Run& run, const std::vector<ncclComm_t>& cs, std::size_t n, int k, bool lead,
                                    std::vector<double>& sum) {
    if (lead)
        if (auto e = enqueue(run, cs, n)) return e;
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.event_record(ln.t0, ln.stream);
    }
    for (int i = 0; i < k; ++i) {
        // The stall goes inside the timed span, before each launch: the
        // GPU idles, as behind a busy host, and the loop's size follows.
        if (run.pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(run.pause));
        if (auto e = enqueue(run, cs, n)) return e;
    }
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.event_record(ln.t1, ln.stream);
    }
    if (auto e = drain(run.lanes, cs, run.until, "ncclAllReduce")) return e;
    for (std::size_t l = 0; l < run.lanes.size(); ++l)
        if (cs[l]) sum[l] += lane_seconds(run.cu, run.lanes[l]);
    return std::nullopt;
}

// Communicators `sub` split off `comms`, each lane by its color (-1: in
// no pair, no communicator), settled; `blocking`: blocking ones
// (BlockingConfig), else as their parent.
std::optional<Failure> split(const Run& run, const std::vector<ncclComm_t>& comms, const std::vector<int>& colors,
                             std::vector<ncclComm_t>& sub, bool blocking = false) {
    BlockingConfig config;
    ncclResult_t rc = run.nc.group_start();
    for (std::size_t l = 0; l < run.lanes.size() && rc == ncclSuccess; ++l) {
        run.cu.ctx_set(run.lanes[l].ctx);
        const int color = l < colors.size() && colors[l] >= 0 ? colors[l] : NCCL_SPLIT_NOCOLOR;
        rc = run.nc.comm_split(comms[l], color, run.first_rank + static_cast<int>(l), &sub[l],
                               blocking ? config.get() : nullptr);
        if (rc == ncclInProgress) rc = ncclSuccess;
    }
    ncclResult_t e = group_end(run.nc);
    if (rc == ncclSuccess) rc = e;
    for (ncclComm_t c : sub)
        if (c) track(c);
    if (rc != ncclSuccess) return Failure{"ncclCommSplit: " + nccl_error(rc), nccl_is_peer(rc)};
    if (auto f = settle(comms, run.until, "ncclCommSplit")) return f;
    return settle(sub, run.until, "ncclCommSplit");
}

// What every member agrees on between timed loops: the slowest member's
// seconds per round in its last loop, the most seconds any member has
// spent on the timed loops so far, and the fastest member's seconds per
// round. A loop not led by an untimed round (the first round) counts,
// on the members that launched first, the wait for the last: the last
// one's time is the round's own.
struct Agreed {
    float per_round = 0, spent = 0, fastest = 0;
};

// Every member's vote, an all-reduce (max) of kVoteFloats floats (the
// fastest as the max of the negated): all members read the same answer,
// so all size the next loop alike or all stop at once.
std::optional<Failure> vote(const Run& run, const std::vector<ncclComm_t>& cs, Agreed mine, Agreed& out) {
    const float v[kVoteFloats] = {mine.per_round, mine.spent, -mine.per_round};
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.htod(ln.vote, v, sizeof v);
    }
    if (auto e = enqueue(run, cs, kVoteFloats, true, ncclMax)) return e;
    if (auto e = drain(run.lanes, cs, run.until, "the time vote")) return e;
    float got[kVoteFloats] = {0, 0, 0};
    for (std::size_t l = 0; l < run.lanes.size(); ++l)
        if (cs[l]) {
            run.cu.ctx_set(run.lanes[l].ctx);
            run.cu.dtoh(got, run.lanes[l].vote, sizeof got);
            break;
        }
    out = {got[0], got[1], -got[2]};
    return std::nullopt;
}

// This rank's seconds per round: its slowest lane's, of `k` rounds.
double slowest(const std::vector<ncclComm_t>& cs, const std::vector<double>& sum, int k) {
    double s = 0;
    for (std::size_t l = 0; l < cs.size(); ++l)
        if (cs[l]) s = std::max(s, sum[l]);
    return s / std::max(1, k);
}

// At most this many rounds launched before the host waits: far fewer than
// CUDA's queue of pending launches holds, so a launch never blocks and
// rank 0's stop word is seen between two of them.
constexpr int kMaxLoop = 50;

// Rounds that the first round says are shorter than this (on its fastest
// member: the others count their wait for the last launch too) go on a
// blocking communicator (`fast`): launched through NCCL's thread, each
// round waits about 80 us for its launch, and the GPU idles between
// rounds (8 MiB over NVLink: 0.61 of all_reduce_perf's busbw on 2 H100).
// Longer rounds keep the GPU busy while the next launch comes (64 MiB,
// 0.27 ms, read 0.997 of it), and skip the split's cost (the default
// 1 GiB: about 3 ms a round).
constexpr double kLaunchBound = 0.3e-3;

// Warm-up: one round, then the rest of `warmup` back to back, as many as
// fit a quarter of `budget` at the agreed time of that round (a 1 GiB
// round takes 0.4 s over 25 Gb/s Ethernet: 5 of them would be 2 s of a
// check that measures nothing). Then timed loops, `iters` rounds in all:
// each loop sized from the agreed seconds per round to fit what is left
// of `budget`, at least one round; none starts once the budget is spent.
// `per_lane`: seconds per round. With `fast`, rounds under kLaunchBound
// are warmed up and timed on blocking communicators split off `cs0` into
// it (every member decides alike, from the vote); the caller releases
// them.
std::optional<Failure> measure(const Run& run, const std::vector<ncclComm_t>& cs0, std::size_t n, int warmup,
                               int iters, double budget, std::vector<double>& per_lane,
                               std::vector<ncclComm_t>* fast = nullptr) {
    per_lane.assign(run.lanes.size(), 0);
    std::vector<double> warm(run.lanes.size(), 0);
    if (auto e = timed_rounds(run, cs0, n, 1, false, warm)) return e;
    double last = slowest(cs0, warm, 1);
    const std::vector<ncclComm_t>* use = &cs0;
    if (warmup > 1) {
        Agreed a;
        if (auto e = vote(run, cs0, {static_cast<float>(last), 0.f}, a)) return e;
        if (fast && kBlockingSplit && run.nc.comm_split && a.fastest > 0 && a.fastest < kLaunchBound) {
            std::vector<int> colors(run.lanes.size());
            for (std::size_t l = 0; l < colors.size(); ++l) colors[l] = cs0[l] ? 0 : -1;
            fast->assign(run.lanes.size(), nullptr);
            if (auto e = split(run, cs0, colors, *fast, true)) return e;
            use = fast;
        }
        const std::vector<ncclComm_t>& cs = *use;
        const double fit = a.per_round > 0 ? 0.25 * budget / a.per_round : warmup - 1;
        const int more = static_cast<int>(std::clamp(fit, 0.0, double(std::min(kMaxLoop, warmup - 1))));
        if (more > 0) {
            warm.assign(run.lanes.size(), 0);
            if (auto e = timed_rounds(run, cs, n, more, false, warm)) return e;
            last = slowest(cs, warm, more);
        }
    }
    const std::vector<ncclComm_t>& cs = *use;
    const double start = now_s();
    int done = 0;
    while (done < iters) {
        Agreed a;
        if (auto e = vote(run, cs, {static_cast<float>(last), static_cast<float>(now_s() - start)}, a)) return e;
        if (done > 0 && a.spent >= budget) break;
        const double left = std::max(0.0, budget - a.spent);
        const double fit = a.per_round > 0 ? left / a.per_round : kMaxLoop;
        const int k = static_cast<int>(std::clamp(fit, 1.0, double(std::min(kMaxLoop, iters - done))));
        std::vector<double> loop(run.lanes.size(), 0);
        if (auto e = timed_rounds(run, cs, n, k, true, loop)) return e;
        for (std::size_t l = 0; l < loop.size(); ++l) per_lane[l] += loop[l];
        done += k;
        last = slowest(cs, loop, k);
    }
    for (auto& s : per_lane) s /= std::max(1, done);
    return std::nullopt;
}

// Step 4: warm-up and the timed loops; the slowest lane's seconds per
// round, and the transports NCCL chose.
std::optional<Failure> time_allreduce(const Run& run, const std::vector<ncclComm_t>& comms, const AllreduceJob& job,
                                      AllreduceResult& res) {
    std::vector<double> secs;
    std::vector<ncclComm_t> fast;
    std::optional<Failure> f =
        measure(run, comms, job.bytes / sizeof(float), job.warmup, std::max(1, job.iters), job.budget, secs, &fast);
    if (job.hold) park(fast);
    else release(run, fast);
    if (!f && !secs.empty()) res.seconds = *std::max_element(secs.begin(), secs.end());
    // NCCL (2.22+) connects channels at the first collective, so its
    // transport lines exist only now.
    res.transports = transports_in(job.log_path);
    return f;
}

// One pair round on `sub`: seconds per round for each lane, 0 on error,
// -1 for a lane in no pair.
std::vector<double> pair_round(const Run& run, const std::vector<ncclComm_t>& sub, std::size_t n,
                               const AllreduceJob& job) {
    std::vector<double> round(run.lanes.size(), -1);
    if (std::none_of(sub.begin(), sub.end(), [](ncclComm_t c) { return c != nullptr; })) return round;
    std::vector<double> ps;
    std::optional<Failure> f = measure(run, sub, n, 1, std::max(1, job.iters / 2), job.pair_budget, ps);
    for (std::size_t l = 0; l < run.lanes.size(); ++l)
        if (sub[l]) round[l] = f ? 0 : ps[l];
    return round;
}

// Step 5: the pair rounds (`rounds`: each lane's color per round), each
// on communicators split off the first so that each pair runs alone.
// Pairs use the start of the all-reduce's buffer: never past its end.
void pair_rounds(const Run& run, const std::vector<ncclComm_t>& comms, const AllreduceJob& job,
                 const std::vector<std::vector<int>>& rounds, AllreduceResult& res) {
    const std::size_t n = std::min(job.pair_bytes, job.bytes) / sizeof(float);
    for (const auto& colors : rounds) {
        if (!run.nc.comm_split) {
            res.pair_error = "this NCCL has no ncclCommSplit (needs 2.18 or newer)";
            break;
        }
        std::vector<ncclComm_t> sub(run.lanes.size(), nullptr);
        if (auto f = split(run, comms, colors, sub)) {
            res.pair_error = f->what;
            release(run, sub);
            break;
        }
        res.pair_seconds.push_back(pair_round(run, sub, n, job));
        release(run, sub);
    }
}

}  // namespace

AllreduceResult run_allreduce(const AllreduceJob& job) {
    AllreduceResult res;
    const Libraries& libs = libraries();
    Run run{libs.cuda, libs.nccl, {}, now_s() + job.deadline_s};
    run.first_rank = job.first_rank;
    auto fail = [&res](const Failure& f) {
        res.error = f.what;
        res.peer = f.peer;
        return res;
    };
    ncclUniqueId id{};
    if (!unique_id_from_hex(job.id, id)) return fail({"rank 0 sent no NCCL unique id", true});
    // NCCL_DEBUG_FILE=job.log_path was set before NCCL's first call.
    if (auto f = open_lanes(run, job)) return fail(*f);
    std::optional<Communicators> started = take_early(job);
    Communicators c = started ? std::move(*started) : init_communicators(run, job, id);
    res.init_seconds = c.init_seconds;
    if (c.failure) return fail(*c.failure);
    std::optional<Failure> f = checked_allreduce(run, c.comms, job, res);
    if (!f) f = time_allreduce(run, c.comms, job, res);
    if (f) {
        release(run, c.comms);
        return fail(*f);
    }
    Run paused = run;
    paused.pause = job.pair_pause;
    pair_rounds(paused, c.comms, job, job.pair_colors, res);
    if (job.hold && res.pair_error.empty()) {
        std::lock_guard<std::mutex> g(held_mu);
        if (held) release(held->run, held->comms, true);
        held.reset();
        held.emplace(Held{run, job, c.comms});
    } else {
        release(run, c.comms);
    }
    return res;
}

PairRounds retest_pairs(const std::vector<std::vector<int>>& rounds, double pause) {
    PairRounds out;
    std::lock_guard<std::mutex> g(held_mu);
    if (!held) {
        out.error = "the all-reduce's communicators were not kept (its pair rounds failed)";
        return out;
    }
    if (stopped()) {
        out.error = "stopped by rank 0";
        return out;
    }
    Run run = held->run;
    run.pause = pause;
    AllreduceResult res;
    pair_rounds(run, held->comms, held->job, rounds, res);
    out.seconds = std::move(res.pair_seconds);
    out.error = res.pair_error;
    return out;
}

void start_init(const AllreduceJob& s) {
    auto done = std::make_shared<std::promise<Communicators>>();
    {
        std::lock_guard<std::mutex> g(early_mu);
        if (early) return;
        early.emplace(Early{s, done->get_future().share()});
    }
    try {
        std::thread([s, done] {
            Communicators c;
            try {
                c = early_init(s);
            } catch (const std::exception& e) {
                c.failure = Failure{std::string("NCCL's init: ") + e.what(), false};
            }
            done->set_value(std::move(c));
        }).detach();
    } catch (const std::system_error&) {
        // No thread: NCCL's init waits for the plan, as without this.
        std::lock_guard<std::mutex> g(early_mu);
        early.reset();
    }
}

bool nccl_left_open() {
    {
        // Its thread may still be inside NCCL.
        std::lock_guard<std::mutex> g(early_mu);
        if (early) return true;
    }
    std::lock_guard<std::mutex> g(held_mu);
    return held.has_value() || !parked.empty();
}

std::string local_check(double budget_seconds) {
    Availability a = probe();
    if (!a.ok) return "";  // a CPU node: nothing to check here
    constexpr std::size_t kBytes = 16 << 20;
    std::vector<int> devs;
    for (int i = 0; i < a.devices; ++i) devs.push_back(i);
    if (std::string e = prepare(devs, kBytes, 0); !e.empty()) return e;
    if (devs.size() < 2) return "";
    AllreduceJob job;
    job.devices = devs;
    job.nranks = static_cast<int>(devs.size());
    job.id = unique_id();
    job.bytes = kBytes;
    job.iters = 2;
    job.deadline_s = budget_seconds;
    AllreduceResult r = run_allreduce(job);
    if (!r.ran || !r.correct) return "NCCL all-reduce across the node's " + std::to_string(devs.size()) + " GPUs: " + r.error;
    return "";
}

}  // namespace mn::gpu
