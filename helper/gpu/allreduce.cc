// run_allreduce() as named steps: open lanes -> init communicators ->
// checked all-reduce -> warm-up and timed loop -> pair rounds, then the
// communicators released. Each step reads what the step before made and
// returns a Failure (or fills the result); every wait polls, so
// abort_nccl() ends any of them.
#include "helper/gpu.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "helper/gpu/lanes.h"
#include "helper/gpu/libraries.h"
#include "helper/gpu/wait.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

namespace mn::gpu {
namespace {

// What every step works with: the libraries' calls, this process's GPUs
// (lanes), one buffer's worth of floats on the host (for the pattern and
// the check) and the time every wait gives up at.
struct Run {
    const Cuda& cu;
    const Nccl& nc;
    std::vector<Lane> lanes;
    std::vector<float> host;
    double until = 0;
};

// Hands each communicator back: destroyed, or aborted once abort_nccl()
// was called (which may have taken it already).
void release(const Run& run, std::vector<ncclComm_t>& cs) {
    for (std::size_t l = 0; l < cs.size(); ++l) {
        if (!cs[l]) continue;
        if (!untrack(cs[l])) {  // abort_nccl() has it
            cs[l] = nullptr;
            continue;
        }
        run.cu.ctx_set(run.lanes[l].ctx);
        if (stopped()) run.nc.comm_abort(cs[l]);
        else run.nc.comm_destroy(cs[l]);
        cs[l] = nullptr;
    }
}

// Step 1: the lanes readiness opened, or open them now (the prolog's use);
// each lane's buffer then holds its rank's pattern.
std::optional<Failure> open_lanes(Run& run, const AllreduceJob& job) {
    run.lanes = prepared_lanes(job.devices, job.bytes);
    if (run.lanes.empty()) {
        run.lanes.resize(job.devices.size());
        for (std::size_t l = 0; l < run.lanes.size(); ++l) {
            run.lanes[l].dev = job.devices[l];
            if (std::string e = open_lane(run.lanes[l], job.bytes); !e.empty()) return Failure{e, false};
        }
    }
    run.host.resize(job.bytes / sizeof(float));
    for (std::size_t l = 0; l < run.lanes.size(); ++l) {
        fill_pattern(run.host, static_cast<uint32_t>(job.first_rank) + static_cast<uint32_t>(l));
        run.cu.ctx_set(run.lanes[l].ctx);
        if (CUresult r = run.cu.htod(run.lanes[l].buf, run.host.data(), job.bytes); r != CUDA_SUCCESS)
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

// One round of `n` floats from each lane's buffer (or its vote) on
// communicators `cs`, settled: a non-blocking communicator refuses the
// next call (ncclInvalidArgument) until this one has left ncclInProgress.
std::optional<Failure> enqueue(const Run& run, const std::vector<ncclComm_t>& cs, bool vote, std::size_t n) {
    ncclResult_t rc = run.nc.group_start();
    for (std::size_t l = 0; l < run.lanes.size(); ++l) {
        if (!cs[l]) continue;
        const Lane& ln = run.lanes[l];
        run.cu.ctx_set(ln.ctx);
        void* p = reinterpret_cast<void*>(vote ? ln.vote : ln.buf);
        ncclResult_t r = run.nc.all_reduce(p, p, vote ? 1 : n, ncclFloat32, ncclSum, cs[l], ln.stream);
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
    if (auto f = enqueue(run, comms, false, job.bytes / sizeof(float))) return f;
    if (auto f = drain(run.lanes, comms, run.until, "the first all-reduce")) return f;
    res.ran = true;
    res.correct = true;
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.dtoh(run.host.data(), ln.buf, job.bytes);
        if (std::string bad = check_pattern(run.host, static_cast<uint32_t>(job.nranks)); !bad.empty()) {
            res.correct = false;
            res.error = describe(ln.dev) + ": wrong all-reduce result, " + bad;
            break;
        }
    }
    return std::nullopt;
}

// `k` rounds between each lane's two events; adds each lane's time to
// `per_lane`.
std::optional<Failure> timed_block(const Run& run, const std::vector<ncclComm_t>& cs, std::size_t n, int k,
                                   std::vector<double>& per_lane) {
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.event_record(ln.t0, ln.stream);
    }
    for (int i = 0; i < k; ++i)
        if (auto e = enqueue(run, cs, false, n)) return e;
    // Every operation on its stream before the closing event.
    if (auto e = settle(cs, run.until, "ncclAllReduce")) return e;
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.event_record(ln.t1, ln.stream);
    }
    if (auto e = drain(run.lanes, cs, run.until, "ncclAllReduce")) return e;
    for (std::size_t l = 0; l < run.lanes.size(); ++l)
        if (cs[l]) per_lane[l] += lane_seconds(run.cu, run.lanes[l]);
    return std::nullopt;
}

// Every member's vote (an all-reduce of one float) whether its budget is
// spent: `stop` when any member's is.
std::optional<Failure> vote(const Run& run, const std::vector<ncclComm_t>& cs, bool spent, bool& stop) {
    const float mine = spent ? 1.0f : 0.0f;
    for (const Lane& ln : run.lanes) {
        run.cu.ctx_set(ln.ctx);
        run.cu.htod(ln.vote, &mine, sizeof mine);
    }
    if (auto e = enqueue(run, cs, true, 1)) return e;
    if (auto e = drain(run.lanes, cs, run.until, "the time vote")) return e;
    float sum = 0;
    for (std::size_t l = 0; l < run.lanes.size(); ++l)
        if (cs[l]) {
            run.cu.ctx_set(run.lanes[l].ctx);
            run.cu.dtoh(&sum, run.lanes[l].vote, sizeof sum);
            break;
        }
    stop = sum > 0;
    return std::nullopt;
}

// Blocks of up to five rounds, timed per lane by CUDA events; after each,
// every member votes whether its budget is spent, so all stop after the
// same block. `per_lane`: seconds per round.
std::optional<Failure> timed_loop(const Run& run, const std::vector<ncclComm_t>& cs, std::size_t n, int iters,
                                  double budget, std::vector<double>& per_lane) {
    per_lane.assign(run.lanes.size(), 0);
    const double start = now_s();
    int done = 0;
    while (done < iters) {
        const int k = std::min(5, iters - done);
        if (auto e = timed_block(run, cs, n, k, per_lane)) return e;
        done += k;
        if (done >= iters) break;
        bool stop = false;
        if (auto e = vote(run, cs, now_s() - start > budget, stop)) return e;
        if (stop) break;
    }
    for (auto& s : per_lane) s /= std::max(1, done);
    return std::nullopt;
}

// Step 4: warm-up (on half the budget), then the timed loop; the slowest
// lane's seconds per round, and the transports NCCL chose.
std::optional<Failure> time_allreduce(const Run& run, const std::vector<ncclComm_t>& comms, const AllreduceJob& job,
                                      AllreduceResult& res) {
    const std::size_t count = job.bytes / sizeof(float);
    std::vector<double> secs;
    std::optional<Failure> f = timed_loop(run, comms, count, std::max(1, job.warmup), job.budget / 2, secs);
    if (!f) f = timed_loop(run, comms, count, std::max(1, job.iters), job.budget, secs);
    if (!secs.empty()) res.seconds = *std::max_element(secs.begin(), secs.end());
    // NCCL (2.22+) connects channels at the first collective, so its
    // transport lines exist only now.
    res.transports = transports_in(job.log_path);
    return f;
}

// Communicators `sub` split off `comms`, each lane by its color (-1: in
// no pair, no communicator), settled.
std::optional<Failure> split(const Run& run, const std::vector<ncclComm_t>& comms, const std::vector<int>& colors,
                             int first_rank, std::vector<ncclComm_t>& sub) {
    ncclResult_t rc = run.nc.group_start();
    for (std::size_t l = 0; l < run.lanes.size() && rc == ncclSuccess; ++l) {
        run.cu.ctx_set(run.lanes[l].ctx);
        const int color = l < colors.size() && colors[l] >= 0 ? colors[l] : NCCL_SPLIT_NOCOLOR;
        rc = run.nc.comm_split(comms[l], color, first_rank + static_cast<int>(l), &sub[l], nullptr);
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

// One pair round on `sub`: seconds per round for each lane, 0 on error,
// -1 for a lane in no pair.
std::vector<double> pair_round(const Run& run, const std::vector<ncclComm_t>& sub, std::size_t n,
                               const AllreduceJob& job) {
    std::vector<double> round(run.lanes.size(), -1);
    if (std::none_of(sub.begin(), sub.end(), [](ncclComm_t c) { return c != nullptr; })) return round;
    std::vector<double> warm, ps;
    std::optional<Failure> f = timed_loop(run, sub, n, 1, job.pair_budget, warm);
    if (!f) f = timed_loop(run, sub, n, std::max(1, job.iters / 2), job.pair_budget, ps);
    for (std::size_t l = 0; l < run.lanes.size(); ++l)
        if (sub[l]) round[l] = f ? 0 : ps[l];
    return round;
}

// Step 5: the pair rounds, each on communicators split off the first so
// that each pair runs alone. Pairs use the start of the all-reduce's
// buffer: never past its end.
void pair_rounds(const Run& run, const std::vector<ncclComm_t>& comms, const AllreduceJob& job, AllreduceResult& res) {
    const std::size_t n = std::min(job.pair_bytes, job.bytes) / sizeof(float);
    for (const auto& colors : job.pair_colors) {
        if (!run.nc.comm_split) {
            res.pair_error = "this NCCL has no ncclCommSplit (needs 2.18 or newer)";
            break;
        }
        std::vector<ncclComm_t> sub(run.lanes.size(), nullptr);
        if (auto f = split(run, comms, colors, job.first_rank, sub)) {
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
    Run run{libs.cuda, libs.nccl, {}, {}, now_s() + job.deadline_s};
    auto fail = [&res](const Failure& f) {
        res.error = f.what;
        res.peer = f.peer;
        return res;
    };
    ncclUniqueId id{};
    if (!unique_id_from_hex(job.id, id)) return fail({"rank 0 sent no NCCL unique id", true});
    // NCCL_DEBUG_FILE=job.log_path was set before NCCL's first call.
    if (auto f = open_lanes(run, job)) return fail(*f);
    Communicators c = init_communicators(run, job, id);
    res.init_seconds = c.init_seconds;
    if (c.failure) return fail(*c.failure);
    std::optional<Failure> f = checked_allreduce(run, c.comms, job, res);
    if (!f) f = time_allreduce(run, c.comms, job, res);
    if (f) {
        release(run, c.comms);
        return fail(*f);
    }
    pair_rounds(run, c.comms, job, res);
    release(run, c.comms);
    return res;
}

std::string local_check(double budget_seconds) {
    Availability a = probe();
    if (!a.ok) return "";  // a CPU node: nothing to check here
    constexpr std::size_t kBytes = 16 << 20;
    std::vector<int> devs;
    for (int i = 0; i < a.devices; ++i) devs.push_back(i);
    if (std::string e = prepare(devs, kBytes); !e.empty()) return e;
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
