// Phase 2, readiness, before any NCCL call: every rank opens its GPUs (or
// allocates its CPU buffer), checks the buffers the all-reduce will use and
// tells rank 0. NCCL's init starts only on rank 0's go; on the first
// failure rank 0 stops every rank and the verdict names that node and GPU
// at once, instead of the others hanging in NCCL's init until the time-out.
// Budget: until 0.7 x --timeout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "helper/check/step.h"
#include "lib/util/text.h"

namespace mn::check {
namespace {

const char kHook[] = "set-up failed on purpose (MN_PREFLIGHT_FAIL_SETUP names this rank: a test hook)";

// This rank's readiness for the path rank 0 chose: "" or its fault.
std::string get_ready(Step& st, bool gpu_path, std::size_t bytes) {
    if (gpu_path) {
        if (!st.gpu_setup.valid()) return "no GPU set-up was started";
        if (st.gpu_setup.wait_until(st.ready_by.at) != std::future_status::ready) {
            std::string gpus;
            for (int d : st.devices) gpus += (gpus.empty() ? "" : ", ") + gpu::describe(d);
            return gpus + ": opening the GPU and allocating its buffer did not finish within " +
                   num(st.budget.readiness, -1) + " s";
        }
        std::string e = st.gpu_setup.get().first;
        st.health = st.gpu_setup.get().second;
        if (e.empty() && setup_fails_on_purpose(st.self.rank))
            e = gpu::describe(st.devices.empty() ? 0 : st.devices[0]) + ": " + kHook;
        return e;
    }
    if (setup_fails_on_purpose(st.self.rank)) return kHook;
    try {
        st.ring.assign(bytes / sizeof(float), 0.0f);
    } catch (const std::bad_alloc&) {
        return "cannot allocate the " + num(bytes / 1048576.0, -1) + " MiB all-reduce buffer";
    }
    fill_pattern(st.ring, 0);
    if (std::string bad = check_pattern(st.ring, 1); !bad.empty()) return "the all-reduce buffer does not hold what was written: " + bad;
    return "";
}

// The path, sizes and pair rounds: rank 0 decides them from the hellos.
bool choose_path(Step& st) {
    const Self& self = st.self;
    PreflightReport& rep = st.rep;
    std::vector<std::string> no_gpu;
    for (uint32_t r = 0; r < self.world; ++r)
        if (st.members[r].hello["gpu_ok"] != "1")
            no_gpu.push_back(st.members[r].hello["label"] + " rank " + std::to_string(r) + ": " +
                             st.members[r].hello["gpu_why"]);
    std::string path = st.o.path;
    if (path == "auto") path = no_gpu.empty() ? "gpu" : (no_gpu.size() == self.world ? "cpu" : "mixed");
    if (path == "gpu" && !no_gpu.empty()) path = "mixed";
    if (path == "mixed") {
        rep.coll.error = "some ranks have no GPU path (" + no_gpu.front() + (no_gpu.size() > 1 ? ", ..." : "") +
                         "); fix those nodes or run with --cpu";
        for (auto& n : rep.nodes)
            for (uint32_t r : n.ranks)
                if (st.members[r].hello["gpu_ok"] != "1") {
                    n.problems.push_back("no GPU path: " + st.members[r].hello["gpu_why"]);
                    break;
                }
        return false;
    }
    st.gpu_path = path == "gpu";
    st.bytes = st.o.bytes ? st.o.bytes : (st.gpu_path ? (64u << 20) : (4u << 20));
    st.iters = st.o.iters ? st.o.iters : (st.gpu_path ? 20 : 5);
    st.pair_bytes = st.o.pair_bytes ? st.o.pair_bytes : (st.gpu_path ? (16u << 20) : (1u << 20));
    // GPU pairs run in the start of the all-reduce's buffer.
    if (st.gpu_path) st.pair_bytes = std::min(st.pair_bytes, st.bytes);
    if (st.o.pairs) st.rounds = pair_rounds(static_cast<uint32_t>(rep.nodes.size()));
    rep.coll.path = st.gpu_path ? "gpu, NCCL " + st.ga.nccl_version : "cpu, TCP ring on " + rep.nodes[0].ifname;
    rep.coll.bytes = st.bytes;
    rep.coll.iters = static_cast<uint32_t>(st.iters);
    return true;
}

}  // namespace

bool serve_readiness(Step& st) {
    set_phase("readiness: waiting for rank 0");
    std::string err;
    auto m = st.inbox.next(st.ready_by, &err);
    if (!m || (*m)["op"] != "prepare") return false;
    set_phase("readiness");
    const std::string e = get_ready(st, (*m)["path"] == "gpu", std::strtoull((*m)["bytes"].c_str(), nullptr, 10));
    if (!e.empty())
        std::fprintf(stderr, "mn-preflight: %s rank %u: %s\n", st.self.label.c_str(), st.self.rank, e.c_str());
    wire::send_msg(st.ctl.get(),
                   {{"op", "ready"}, {"ok", e.empty() ? "1" : "0"}, {"error", e}, {"health", encode_readings(st.health)}},
                   st.ready_by);
    return e.empty();
}

bool lead_readiness(Step& st) {
    const Self& self = st.self;
    st.phase = "readiness";
    st.note(0, RankState::Done, "");
    if (!choose_path(st)) return false;
    const Fields prep{{"op", "prepare"}, {"path", st.gpu_path ? "gpu" : "cpu"}, {"bytes", std::to_string(st.bytes)}};
    for (uint32_t r = 1; r < self.world; ++r) wire::send_msg(st.members[r].ctl.get(), prep, st.ready_by);
    std::vector<bool> ready(self.world, false);
    st.node_health.assign(st.rep.nodes.size(), {});
    auto add_health = [&](uint32_t r, const std::vector<GpuReadings>& g) {
        auto& h = st.node_health[st.members[r].node_index];
        h.insert(h.end(), g.begin(), g.end());
    };
    // Everyone else was ready, or on its way, and is stopped with no fault.
    auto stop_the_rest = [&] {
        for (uint32_t r = 0; r < self.world; ++r)
            if (st.evidence[r].state == RankState::Done) st.note(r, RankState::Stopped, "");
        return false;
    };
    const std::string own_error = get_ready(st, st.gpu_path, st.bytes);
    add_health(0, st.health);
    if (const std::string& e = own_error; !e.empty()) {
        st.note(0, RankState::Fault, e);
        return stop_the_rest();
    }
    ready[0] = true;
    uint32_t count = 1;
    set_phase("readiness", "waiting for every rank's set-up");
    while (count < self.world) {
        auto e = st.mux.next(st.ready_by);
        if (!e) break;
        const uint32_t r = static_cast<uint32_t>(e->key);
        if (!e->msg) {
            st.note(r, RankState::Fault, "its process ended during readiness (" + e->error + ")");
            return stop_the_rest();
        }
        Fields& f = *e->msg;
        if (f["op"] != "ready" || ready[r]) continue;
        add_health(r, decode_readings(f["health"]));
        if (f["ok"] != "1") {
            st.note(r, RankState::Fault, f["error"]);
            return stop_the_rest();
        }
        ready[r] = true;
        ++count;
    }
    if (count < self.world) {
        for (uint32_t r = 0; r < self.world; ++r)
            if (!ready[r]) st.note(r, RankState::Silent, "never finished readiness (opening its GPUs or buffers)");
        return stop_the_rest();
    }
    progress(self, "readiness: " + std::to_string(self.world) + " ranks set up (" + num(now_s() - st.start) + " s)");
    return true;
}

}  // namespace mn::check
