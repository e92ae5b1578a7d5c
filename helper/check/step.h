// SPDX-License-Identifier: Apache-2.0
// Every rank's own state through mn-preflight's check (Step), each phase's
// time budget, and a rank's side of the phases. The phases, in order, each
// in a file of its own (helper/check.cc steps them; rank 0's side: lead.h):
//   rendezvous.cc  every rank connects to rank 0 and proves the step secret
//   readiness.cc   every rank opens its GPUs (or its CPU buffer), allocates
//                  and checks what the all-reduce will use, and says so;
//                  rank 0 says go, or stops everyone on the first failure
//   collective.cc  the all-reduce (NCCL or a TCP ring), bounded by time
//   pairs.cc       pair tests between nodes and between a node's GPUs
//   verdict.cc     blame by evidence, the table or JSON, done or stop
// Beside them, on the process's one control thread, the control plane
// (control/: the words, heartbeats both ways, the watchdog, a node's
// speaker's relay); takeover.cc (rank 0 lost: a standby gives the
// verdict); node.cc (above kGatherAbove ranks a node's ranks speak to rank
// 0 through their node's speaker).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "helper/check/control/doorway.h"
#include "helper/check/control/hub.h"
#include "helper/check/control/inbox.h"
#include "helper/check/control/line.h"
#include "helper/check/control/messages.h"
#include "helper/check/control/relay.h"
#include "helper/check/control/thread.h"
#include "helper/check/hooks.h"
#include "helper/check/self.h"
#include "helper/gpu.h"
#include "helper/wire.h"
#include "lib/check/blame.h"
#include "lib/check/check_options.h"
#include "lib/check/gpu_health.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

namespace mn::check {

using wire::Deadline;
using wire::Fd;

// Each phase's share of --timeout T, as deadlines from the check's start.
struct Budgets {
    double rendezvous = 0;  // T/2: every rank has arrived
    double readiness = 0;   // 0.7 T: every rank is set up
    double transfers = 0;   // T - 2.5 s: data transfers give up, so a blocked rank still reports
    double verdict = 0;     // T - 0.5 s: rank 0 prints, whatever is missing
    double collective = 0;  // seconds: the all-reduce's timed loop stops after this
    double pair = 0;        // seconds: each pair test's timed loop stops after this
    static Budgets of(double timeout);
};

// A line on stderr about how the check goes: rank 0's only.
void progress(const Self& self, const std::string& line);

// ---- the control plane (control/) ------------------------------------------------
// The words between the ranks (messages.h), every connection's handshake
// (doorway.h), the lines and their heartbeats (line.h), the control thread
// and the watchdog (thread.h), rank 0's hub (hub.h), a rank's inbox
// (inbox.h) and a node's speaker's relay (relay.h). They know no phase and
// no membership.

// ---- a node's speaker (node.cc; control/relay.h says what it does) ------------
// Above kGatherAbove ranks each node's first task (LOCAL_RANK 0) speaks to
// rank 0 for its node. The ranks of rank 0's node (NODE_RANK 0) join rank 0
// itself. A rank that finds nobody listening at its speaker's door within
// kSpeakerWait joins rank 0 directly.
constexpr uint32_t kGatherAbove = 1024;
constexpr double kSpeakerWait = 5.0;
// Whether this step's ranks gather at their node's speaker (a build with
// --enable-test-hooks takes the bound from MN_PREFLIGHT_GATHER_ABOVE).
bool gathers(const Self& self);

// ---- rank 0 lost (takeover.cc) ---------------------------------------------------
// The first kStandbys ranks on a line of their own (ranks 1 to kStandbys
// but where ranks gather) may give the verdict in rank 0's place; each
// rank asks them in order, and the lowest that answers does.
constexpr uint32_t kStandbys = 4;

// What a rank other than 0 needs to give the verdict in rank 0's place
// (takeover.cc), copied for its inbox's thread.
struct Standin {
    Self self;
    CheckOptions o;
    double start = 0;
    msg::Hello hello;
    int standby_fd = -1;  // its standby port's listening socket
    // Its control line goes to its node's speaker, not rank 0 (node.cc).
    bool via_speaker = false;
};

// Rank 0 is lost: the standbys' way to a verdict. Never returns.
// A node's speaker passes the word it ends with to its node's ranks (tell_node).
[[noreturn]] void take_over(const Standin& me, const std::optional<msg::Roster>& roster, const std::string& loss,
                            Line& ctl, const NodeWord& tell_node = {});

// What every rank has, rank 0 included.
struct Step {
    CheckOptions o;
    Self self;
    double start = 0;
    Budgets budget;
    Deadline rdzv, ready_by, work_end, end;
    // What this rank found at home.
    FabricSignature sig;
    std::string ifname;
    std::vector<std::string> home_problems;
    gpu::Availability ga;
    std::vector<int> devices;  // this process's GPUs
    std::string nccl_log;
    std::string bind_addr;  // where this rank listens: its address towards rank 0 ("" every address)
    Fd data_listen;
    uint16_t data_port = 0;
    Fd standby_listen;  // a standby's port, for the others' reports if rank 0 is lost
    msg::Hello hello;
    // GPU set-up and NVML's readings, started at launch so they overlap
    // the rendezvous: "" or the fault, and the readings.
    std::shared_future<std::pair<std::string, std::vector<GpuReadings>>> gpu_setup;
    std::vector<float> ring;  // CPU path: the all-reduce buffer, from readiness
    // CPU path: the buffer set up at launch (prepare_self), beside the
    // rendezvous as the GPUs' set-up is: "" or its fault; none when not.
    std::optional<std::string> ring_ready;
    std::vector<GpuReadings> health;  // NVML's readings of this rank's GPUs, from readiness
    // The node's fingerprint (node_fingerprint), read on a thread from
    // launch by the node's first task (LOCAL_RANK 0) only: loading NCCL and
    // CUDA took seconds at 8 ranks a node, in the rendezvous' way when the
    // hello carried it. None on the others.
    std::shared_future<std::string> fingerprint;
    // A node's leader (node.cc): its door, open from launch.
    std::shared_ptr<NodeDoor> node_door;
};

// Runs fn on a thread of its own, its result in the future: rank 0's own
// work beside its listening. The thread is detached, so nobody waits on it
// longer than they choose; the verdict ends the process if it still runs.
// With no thread to be had, fn runs here, now: work that waits on nobody
// else (its own readiness, a fingerprint, one side of a pair test), so the
// check goes on, slower; the heartbeats are the control thread's anyway.
template <typename T, typename Fn>
std::future<T> on_thread(Fn fn) {
    auto p = std::make_shared<std::promise<T>>();
    std::future<T> f = p->get_future();
    auto run = [p](Fn& work) {
        try {
            p->set_value(work());
        } catch (...) {
            p->set_exception(std::current_exception());
        }
    };
    auto fn_shared = std::make_shared<Fn>(std::move(fn));
    auto t = start_thread("a thread", [run, fn_shared]() mutable { run(*fn_shared); });
    if (t) t.value().detach();
    else run(*fn_shared);
    return f;
}

// A rank other than 0: its line to rank 0 (the inbox is destroyed first).
struct Follower {
    Line ctl;
    Inbox inbox;
    int code = kTimeout;  // its exit when join() fails: kUsage for another release's rank 0

    // The one wait of a rank on rank 0 until its word (done or stop): each
    // other message goes to serve(m), false when this rank cannot go on
    // (kTimeout). Rank 0 speaks at the end of its budget, so the wait lasts
    // a little longer than `end`; none by then: "mn-preflight: HOST rank R:
    // <none> (why)" and kTimeout. `doing` is the watchdog's phase meanwhile.
    template <typename Serve>
    int until_word(const Self& self, const Deadline& end, const char* doing, const char* none, Serve serve) {
        while (true) {
            set_phase(doing);
            std::string err;
            auto m = inbox.next(Deadline::in(end.left() + 0.4), &err);
            if (!m) {
                std::fprintf(stderr, "mn-preflight: %s rank %u: %s (%s)\n", self.label.c_str(), self.rank, none,
                             err.c_str());
                return kTimeout;
            }
            if (const auto* w = std::get_if<msg::Word>(&*m)) {
                mark_done();
                return w->code;
            }
            if (!serve(*m)) return kTimeout;
        }
    }
};

// ---- the phases; each returns false when the check cannot go on --------
// rendezvous.cc
bool prepare_self(Step& st);                // every rank: facts, GPU set-up started, data port
void forget_nccl_log(std::string& path);    // NCCL's log and its private directory, removed; path cleared
bool join(Step& st, Follower& f);           // rank != 0: connect, prove the secret, say hello
// node.cc
// A node's speaker: its door, opened at launch (prepare_self).
void open_node_door(Step& st);
// A rank of a node with a speaker: knocks at its door, the line on success;
// none when nobody listens there for kSpeakerWait (it joins rank 0); an
// empty line when the handshake failed after a connection (it ends).
std::optional<Line> join_speaker(Step& st);
// readiness.cc
bool serve_readiness(Step& st, Follower& f);
// collective.cc
bool serve_collective(Step& st, Follower& f);
msg::Result run_share(const msg::Plan& plan, Step& st);  // this rank's part of the all-reduce
// This rank's NCCL part of an all-reduce: its GPUs, its NCCL ranks, the
// id, NCCL's log and the work's deadline (readiness' early init and the
// collective's job both start from it).
gpu::AllreduceJob nccl_job(const Step& st, int nranks, int first_rank, const std::string& id);
// pairs.cc
int serve_pairs(Step& st, Follower& f);     // rank != 0: pair tests on rank 0's cue, until done
}  // namespace mn::check
