// SPDX-License-Identifier: Apache-2.0
// Phase 2, readiness: every rank opens its GPUs (or allocates its CPU
// buffer), checks the buffers the all-reduce will use and tells rank 0. On
// the first failure rank 0 stops every rank and the verdict names that node
// and GPU at once, instead of the others hanging in NCCL's init until the
// time-out. On the GPU path NCCL's init starts here, on a thread, as soon
// as a rank's buffers are allocated (gpu::start_init): it overlaps the
// copies, NVML's readings and rank 0's collection instead of following
// the go; a rank stopped meanwhile ends with it (_exit).
// Budget: until 0.7 x --timeout.
#include <algorithm>
#include <chrono>
#include <future>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <set>

#include "helper/check/lead.h"
#include "helper/check/ring.h"
#include "lib/check/fingerprint.h"
#include "lib/check/gpu_claims.h"
#include "lib/check/gpu_health.h"
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
    // Set up at launch for this size (prepare_self): nothing left to do.
    if (st.ring_ready && st.ring.size() == bytes / sizeof(float)) return *st.ring_ready;
    return prepare_ring(st.ring, bytes, st.self.rank);
}

// This node's fingerprint, read since launch (prepare_self); "" if it is
// not read by the end of readiness' time (its node is then not compared).
std::string own_fingerprint(const Step& st) {
    if (!st.fingerprint.valid()) return "";
    if (st.fingerprint.wait_until(st.ready_by.at) != std::future_status::ready) return "";
    try {
        return st.fingerprint.get();
    } catch (...) {
        return "";
    }
}

// This rank's Ready for the path rank 0 chose: its fault or none, its
// GPUs' readings, and its node's fingerprint when it is ready: as fields
// where rank 0 reads them (`fields`), else as text (a rank 0 before them).
msg::Ready ready_message(Step& st, bool gpu_path, std::size_t bytes, bool fields) {
    msg::Ready ready;
    ready.error = get_ready(st, gpu_path, bytes);
    ready.health = st.health;
    if (!ready.error.empty()) return ready;
    const std::string text = own_fingerprint(st);
    if (text.empty()) return ready;
    auto f = decode_fingerprint(text);
    if (fields && f) ready.node_fingerprint = std::move(f.value());
    else ready.fingerprint = text;
    return ready;
}

// Ranks of one host that open one GPU: each such node named, the check
// stopped before NCCL would refuse it deep in its init.
bool gpus_unshared(const Step& st, Lead& l) {
    std::vector<GpuClaim> claims;
    for (uint32_t r = 0; r < st.self.world; ++r) {
        const msg::Hello& h = l.members[r].hello;
        // The label tells hosts apart as NCCL does: emulated nodes have
        // their own (and their own NCCL_HOSTID) on one machine.
        if (h.gpu_ok) claims.push_back({r, h.label, h.label, h.lane_gpus});
    }
    const auto shared = shared_gpus(claims);
    for (const auto& s : shared) {
        for (auto& n : l.rep.nodes)
            if (std::find(n.ranks.begin(), n.ranks.end(), s.ranks.front()) != n.ranks.end()) n.problems.push_back({VerdictKind::Fault, s.text()});
    }
    if (!shared.empty()) l.rep.coll.error = "ranks share a GPU (" + shared.front().text() + ")";
    return shared.empty();
}

// The path, sizes and pair rounds: rank 0 decides them from the hellos.
bool choose_path(const Step& st, Lead& l) {
    const Self& self = st.self;
    PreflightReport& rep = l.rep;
    if (!gpus_unshared(st, l)) return false;
    std::vector<std::string> no_gpu;
    // Ranks on GPUs they cannot drive (no usable NCCL, no GPU of their
    // own): never a CPU node, so never passed on TCP alone.
    std::vector<uint32_t> stranded;
    for (uint32_t r = 0; r < self.world; ++r) {
        const msg::Hello& h = l.members[r].hello;
        if (h.gpu_ok) continue;
        no_gpu.push_back(h.label + " rank " + std::to_string(r) + ": " + h.gpu_why);
        if (h.gpus > 0) stranded.push_back(r);
    }
    std::string path = st.o.path;
    if (path == "auto" && !stranded.empty()) {
        const msg::Hello& h = l.members[stranded.front()].hello;
        rep.coll.error = h.label + " rank " + std::to_string(stranded.front()) + " has " + std::to_string(h.gpus) +
                         " GPU(s) and no GPU path (" + h.gpu_why +
                         "): the check would time TCP alone and say nothing of what training uses; fix: install NCCL "
                         "there (Debian: libnccl2) or point MN_PREFLIGHT_LIBNCCL at its libnccl.so.2, or run with "
                         "--cpu to check the network alone";
        for (auto& n : rep.nodes)
            for (uint32_t r : n.ranks)
                if (std::find(stranded.begin(), stranded.end(), r) != stranded.end()) {
                    n.problems.push_back({VerdictKind::Fault, "no GPU path on " + std::to_string(l.members[r].hello.gpus) +
                                                           " GPU(s): " + l.members[r].hello.gpu_why});
                    break;
                }
        return false;
    }
    // Asked for: said, since a PASS here says nothing of GPUs or NCCL.
    if (path == "cpu") rep.notes.push_back("--cpu: the network was checked over TCP alone, not the GPUs or NCCL");
    if (path == "auto") path = no_gpu.empty() ? "gpu" : (no_gpu.size() == self.world ? "cpu" : "mixed");
    if (path == "gpu" && !no_gpu.empty()) path = "mixed";
    if (path == "mixed") {
        rep.coll.error = "some ranks have no GPU path (" + no_gpu.front() + (no_gpu.size() > 1 ? ", ..." : "") +
                         "); fix those nodes or run with --cpu";
        for (auto& n : rep.nodes)
            for (uint32_t r : n.ranks)
                if (!l.members[r].hello.gpu_ok) {
                    n.problems.push_back({VerdictKind::Fault, "no GPU path: " + l.members[r].hello.gpu_why});
                    break;
                }
        return false;
    }
    l.gpu_path = path == "gpu";
    std::size_t most = 1;  // tasks on the busiest node
    for (const auto& n : rep.nodes) most = std::max(most, n.ranks.size());
    l.bytes = st.o.bytes ? st.o.bytes : (l.gpu_path ? kGpuBytes : cpu_default_bytes(static_cast<uint32_t>(most)));
    l.iters = st.o.iters ? st.o.iters : (l.gpu_path ? 20 : 5);
    l.pair_bytes = st.o.pair_bytes ? st.o.pair_bytes : (l.gpu_path ? (16u << 20) : (1u << 20));
    // GPU pairs run in the start of the all-reduce's buffer.
    if (l.gpu_path) l.pair_bytes = std::min(l.pair_bytes, l.bytes);
    if (st.o.pairs) l.rounds = pair_rounds(static_cast<uint32_t>(rep.nodes.size()));
    rep.coll.path = l.gpu_path ? "gpu, NCCL " + st.ga.nccl_version : "cpu, TCP ring on " + rep.nodes[0].ifname;
    rep.coll.bytes = l.bytes;
    rep.coll.iters = static_cast<uint32_t>(l.iters);
    // NCCL's ranks: each rank's lanes in rank order.
    l.first_lane.assign(self.world, 0);
    l.lanes = 0;
    for (uint32_t r = 0; r < self.world; ++r) {
        l.first_lane[r] = l.lanes;
        l.lanes += l.members[r].hello.lanes;
    }
    rep.coll.nranks = l.gpu_path ? l.lanes : self.world;
    if (l.gpu_path) {
        l.nccl_id = gpu::unique_id();
        if (l.nccl_id.empty()) {
            rep.coll.error = "rank 0 could not make NCCL's unique id (ncclGetUniqueId failed on " + rep.nodes[0].host +
                             "); fix: NCCL_SOCKET_IFNAME must name an interface that is up there";
            rep.nodes[0].problems.push_back({VerdictKind::Fault, "ncclGetUniqueId failed (NCCL found no interface for its bootstrap)"});
            return false;
        }
    }
    return true;
}

// This rank's NCCL init, started now if the path is the GPU's (it waits
// for this rank's buffers on its thread). A rank whose NCCL is another
// release than rank 0's starts none: the fingerprints fail the check
// before the go, and no NCCL meets another release's. Nor does a rank the
// set-up hook fails, as a rank whose buffers could not be had.
void start_nccl_init(const Step& st, const msg::Prepare& p) {
    if (!p.gpu || p.id.empty() || st.devices.empty() || setup_fails_on_purpose(st.self.rank)) return;
    if (!same_release(p.nccl, st.ga.nccl_version)) return;
    gpu::start_init(nccl_job(st, p.nranks, p.first_rank, p.id));
}

// Rank r's Prepare: on the GPU path with its NCCL ranks and the id.
msg::Prepare prepare_for(const Step& st, const Lead& l, uint32_t r) {
    msg::Prepare p;
    p.gpu = l.gpu_path;
    p.bytes = l.bytes;
    if (l.gpu_path) {
        p.nranks = static_cast<int>(l.lanes);
        p.first_rank = static_cast<int>(l.first_lane[r]);
        p.id = l.nccl_id;
        p.nccl = st.ga.nccl_version;
    }
    p.fingerprint_fields = true;
    return p;
}

}  // namespace

bool serve_readiness(Step& st, Follower& f) {
    set_phase("readiness: waiting for rank 0");
    std::string err;
    auto m = f.inbox.next(st.ready_by, &err);
    const auto* prep = m ? std::get_if<msg::Prepare>(&*m) : nullptr;
    if (!prep) return false;
    set_phase("readiness");
    start_nccl_init(st, *prep);
    const msg::Ready ready = ready_message(st, prep->gpu, prep->bytes, prep->fingerprint_fields.value_or(false));
    if (!ready.error.empty())
        std::fprintf(stderr, "mn-preflight: %s rank %u: %s\n", st.self.label.c_str(), st.self.rank, ready.error.c_str());
    f.ctl.send(ready, st.ready_by);
    return ready.error.empty();
}

namespace {

// Every rank's readiness, rank 0's own (on a thread) included, in the
// order it comes; false on the first fault (noted), or when time ran out.
bool await_ready(Step& st, Lead& l, const std::function<void(uint32_t, const std::vector<GpuReadings>&)>& add_health) {
    l.own_ready =
        on_thread<msg::Ready>([&st, gpu = l.gpu_path, bytes = l.bytes] { return ready_message(st, gpu, bytes, true); });
    set_phase("readiness", "waiting for every rank's set-up");
    std::vector<bool> waiting(st.self.world, true);
    auto take = [&](uint32_t r, const msg::Ready& m) {
        add_health(r, m.health);
        if (m.node_fingerprint) {
            l.members[r].fingerprint = m.node_fingerprint;
        } else if (!m.fingerprint.empty()) {  // a rank of a build before the fields
            auto f = decode_fingerprint(m.fingerprint);
            if (f) l.members[r].fingerprint = std::move(f.value());
            else l.members[r].fingerprint_problem = f.problem().text();
        }
        if (m.error.empty()) return Reply::Taken;
        l.note(r, RankState::Fault, m.error);
        l.stop_the_rest();
        return Reply::Stop;
    };
    if (!l.await_replies(waiting, l.own_ready, st.ready_by, take)) return false;
    if (std::find(waiting.begin(), waiting.end(), true) == waiting.end()) return true;
    for (uint32_t r = 0; r < st.self.world; ++r)
        if (waiting[r]) l.note(r, RankState::Silent, "never finished readiness (opening its GPUs or buffers)");
    // Everyone else was ready, or on its way, and is stopped with no fault.
    l.stop_the_rest();
    return false;
}

// NVML's fails (another process on a GPU, uncorrectable ECC, a pending
// remap, ...) fail the check whatever the all-reduce shows: it stops here,
// before NCCL's init, and the verdict names those nodes (weigh()). A GPU
// busy with another process's work was named 6.6 s from launch on 2 H100,
// after 1 GiB rounds slowed by it; readiness has it in about 1 s.
bool gpus_healthy(Lead& l) {
    std::vector<std::string> failed;
    const auto findings = l.gpu_findings_by_node();
    for (std::size_t i = 0; i < findings.size() && i < l.rep.nodes.size(); ++i) {
        for (const auto& f : findings[i])
            if (f.fail) {
                failed.push_back(l.rep.nodes[i].host);
                break;
            }
    }
    if (failed.empty()) return true;
    l.rep.notes.push_back("the all-reduce did not run: NVML failed the GPUs of " + join_list(failed) +
                          " in readiness (see the nodes named)");
    l.stop_the_rest();
    return false;
}

}  // namespace

bool lead_readiness(Step& st, Lead& l) {
    l.enter(msg::Stage::Readiness);
    l.note(0, RankState::Done, "");
    if (!choose_path(st, l)) return false;
    start_nccl_init(st, prepare_for(st, l, 0));
    // The GPU path: each rank its own NCCL ranks; the CPU path: one message.
    if (l.gpu_path) l.tell_each([&](uint32_t r) { return prepare_for(st, l, r); }, st.ready_by);
    else l.tell_all(prepare_for(st, l, 0), st.ready_by);
    l.node_health.assign(l.rep.nodes.size(), {});
    auto add_health = [&](uint32_t r, const std::vector<GpuReadings>& g) {
        auto& h = l.node_health[l.members[r].node_index];
        h.insert(h.end(), g.begin(), g.end());
    };
    if (!await_ready(st, l, add_health)) return false;
    // Every rank's fingerprint came with its readiness: read beside the
    // rendezvous, compared before NCCL's init.
    if (!fingerprints_alike(l)) return false;
    if (!gpus_healthy(l)) return false;
    progress(st.self, "readiness: " + std::to_string(st.self.world) + " ranks set up (" + num(now_s() - st.start) + " s)");
    return true;
}

}  // namespace mn::check
