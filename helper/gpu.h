// SPDX-License-Identifier: Apache-2.0
// mn-preflight's GPU path. CUDA (the driver's libcuda.so.1), NCCL
// (libnccl.so.2) and NVML (libnvidia-ml.so.1) are loaded at run time, so
// one build serves GPU and CPU-only nodes and follows whatever NCCL the
// node has; their types come from cuda.h, nccl.h and nvml.h when configure
// found them. The code is in helper/gpu/, one room per library (cuda,
// nccl, nvml, libraries: loading them), the GPUs opened for the check
// (lanes), the polling waits (wait) and the all-reduce's steps
// (allreduce); no CUDA, NCCL or NVML type leaves that folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/check/gpu_health.h"

namespace mn::gpu {

struct Availability {
    bool ok = false;
    std::string why;  // why not, naming the library or the call
    int devices = 0;  // the GPUs the driver shows (also without NCCL)
    std::string nccl_version;  // "2.28.3"
};

// Loads the libraries and counts the visible GPUs. MN_PREFLIGHT_LIBNCCL names
// another libnccl (a path), for NCCL installed outside the loader's path.
Availability probe();

// What the node runs, for its fingerprint; 0 and "" where not known.
struct Identity {
    int nccl_code = 0;      // ncclGetVersion of the NCCL a check loads
    std::string nccl_path;  // the file it came from
    int cuda_code = 0;      // cuDriverGetVersion
    int gpus = 0;
    std::string gpu_model;  // several models joined by " + "
    std::vector<std::string> gpu_buses;  // each GPU's PCI address as sysfs names it ("0000:19:00.0")
    // The external network plugin NCCL would load, looked up as NCCL does
    // (NCCL_NET_PLUGIN, else libnccl-net.so): its file and newest API.
    bool net_known = false;
    std::string net_name, net_api, net_path;  // name "" with net_known: none
};
Identity identity();

// "GPU1 (0000:19:00.0)": how every message names a GPU.
std::string describe(int dev);

// Readiness, before any NCCL call: opens each GPU (context, stream),
// allocates the all-reduce's buffer, checks a copy there and back, and
// that enough memory stays free for NCCL. "" when ready, else what failed,
// naming the GPU. run_allreduce() uses what it set up. The copy is of
// the pattern of NCCL rank `first_pattern` + lane, which the buffer then
// holds: when that guess is the rank's real place, the all-reduce starts
// from it as it is (1 GiB written again cost 0.1 s).
std::string prepare(const std::vector<int>& devices, std::size_t bytes, uint32_t first_pattern);

// Leaves NCCL wherever this process is in it (init, a collective, a
// split), from any thread: ncclCommAbort on every communicator, and every
// wait in run_allreduce() returns.
void abort_nccl();

// What NVML (libnvidia-ml.so.1, loaded now) says about each of these CUDA
// devices, found by PCI bus id; lib/gpu_health judges it. A GPU NVML does
// not answer for says why in nvml_error.
std::vector<GpuReadings> health(const std::vector<int>& devices);
// Loads and initialises NVML on a thread now (nvmlInit takes a while),
// so that health() after prepare()'s copy only reads. prepare() calls it.
void start_health();

// NVML's critical Xid events on every GPU this process sees (those of
// the job, under Slurm's device cgroup), watched from start_gpu_events()
// on: NVML loads on a thread. gpu_events() takes those that came since,
// without waiting (none while NVML starts, and none where there is no
// NVML, no event call or no GPU). lib/check/gpu_events judges each Xid.
struct GpuXid {
    std::string busid;
    uint64_t xid = 0;
};
void start_gpu_events();
std::vector<GpuXid> gpu_events();

struct DeviceInfo {
    int index = 0;
    std::string name, busid;
};
std::vector<DeviceInfo> devices();

// ncclGetUniqueId as hex, made by rank 0 and sent to the others.
std::string unique_id();

struct AllreduceResult {
    bool ran = false;
    bool correct = false;
    std::string error;     // names the GPU (index, bus id) when it is one
    double init_seconds = 0;
    double seconds = 0;    // per iteration: the slowest lane's, CUDA events around the timed loops
    std::vector<std::string> transports;  // "NET/Socket", "P2P/CUMEM", ... from NCCL's own log
    bool peer = false;  // the error is NCCL's with another rank (remote, network, time-out, stopped)
    // For each pair round, for each lane: seconds per iteration, 0 on
    // error, -1 when the lane was in no pair that round.
    std::vector<std::vector<double>> pair_seconds;
    std::string pair_error;
};

struct AllreduceJob {
    std::vector<int> devices;  // this process's GPUs (lanes)
    int nranks = 0;            // NCCL ranks in all
    int first_rank = 0;        // NCCL rank of devices[0]
    std::string id;            // unique_id() of rank 0
    std::size_t bytes = 0;
    int warmup = 0, iters = 0;
    double budget = 3;       // seconds: the timed loop stops after this (every rank at once)
    double pair_budget = 1;  // the same for each pair round
    double deadline_s = 60;  // seconds from now: every wait gives up
    // Pair rounds: for each round, each lane's color (the pair it is in)
    // or -1, and the bytes to use.
    std::vector<std::vector<int>> pair_colors;
    std::size_t pair_bytes = 0;
    std::string log_path;  // where NCCL writes its INFO lines (transport)
    // Keep the communicators after the pair rounds, for retest_pairs();
    // they are left to the process's end (nccl_left_open).
    bool hold = false;
    // A test hook's stall: seconds the host waits before each launch of a
    // pair round's timed loop (the GPU idles, as behind a busy host).
    double pair_pause = 0;
};

// Non-blocking ncclCommInitRankConfig for each lane, one checked
// all-reduce, warm-up and timed loops bounded by job.budget (timed as
// nccl-tests times: CUDA events around back-to-back launches), then the
// pair rounds on communicators split off the first one. Every wait polls,
// so abort_nccl() (rank 0's stop word) ends it.
AllreduceResult run_allreduce(const AllreduceJob& job);

// More pair rounds on the communicators run_allreduce() kept (job.hold),
// split as its own were: every rank of the all-reduce takes part in each
// split, colored -1 to sit out. `pause` as job.pair_pause.
struct PairRounds {
    std::vector<std::vector<double>> seconds;  // as AllreduceResult::pair_seconds
    std::string error;
};
PairRounds retest_pairs(const std::vector<std::vector<int>>& rounds, double pause);
// NCCL's init for the all-reduce to come (job's devices, nranks,
// first_rank, id, log_path and deadline_s; the rest unused), started in
// readiness on a thread of its own as soon as prepare()'s buffers are
// allocated on these GPUs (their free memory checked first), beside the
// rest of readiness: run_allreduce() with the same id, ranks and GPUs
// takes its communicators instead of initialising its own (on 2 H100s the
// init was 0.4 to 0.6 s after the plan). Once started, the process ends by
// _exit (nccl_left_open()), whether the all-reduce runs or not.
void start_init(const AllreduceJob& job);

// The kept communicators (job.hold) are never handed back: the check's
// process ends after its verdict (mn-preflight, or the inline check's
// child), and its end frees them. ncclCommAbort at the verdict took 0.35 s
// on 2 H100s, on every rank, before the step could end. True while any are
// open, or once start_init() ran: the process must then end by _exit, not
// exit(), whose destructors would race NCCL's threads.
bool nccl_left_open();

// Prolog: every visible GPU takes a context, a 16 MiB allocation and a copy
// there and back; with two or more, a single-process NCCL all-reduce
// across them. Empty when healthy, else one line naming the GPU.
std::string local_check(double budget_seconds);

}  // namespace mn::gpu
