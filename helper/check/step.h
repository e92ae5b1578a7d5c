// SPDX-License-Identifier: Apache-2.0
// One rank's state through mn-preflight's check, and each phase's time
// budget. The phases, in order, each in a file of its own:
//   rendezvous.cc  every rank connects to rank 0 and proves the step secret
//   readiness.cc   every rank opens its GPUs (or its CPU buffer), allocates
//                  and checks what the all-reduce will use, and says so;
//                  rank 0 says go, or stops everyone on the first failure
//   collective.cc  the all-reduce (NCCL or a TCP ring), bounded by time
//   pairs.cc       pair tests between nodes and between a node's GPUs
//   verdict.cc     blame by evidence, the table or JSON, done or stop
// Beside them, on the process's one control thread (liveness.cc; the
// watchdog's turn is step.cc's): heartbeats both ways (a rank that stops
// answering for kSilence, or ends, is named at once) and takeover.cc
// (rank 0 lost: a standby gives the verdict); above kGatherAbove ranks
// node.cc (a node's ranks speak to rank 0 through their node's leader,
// which the control thread relays).
// messages.h holds what they say to each other. helper/check.cc runs them.
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

#include "helper/check.h"
#include "helper/check/doorway.h"
#include "helper/check/messages.h"
#include "helper/gpu.h"
#include "helper/wire.h"
#include "lib/check/blame.h"
#include "lib/check/gpu_health.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

namespace mn::check {

using wire::Deadline;
using wire::Fd;

// What this process is, from Slurm's and the plugin's variables.
struct Self {
    uint32_t rank = 0, world = 1;
    uint32_t node = 0;      // NODE_RANK (emulation-aware), else SLURM_NODEID
    std::string label;      // the host, or NCCL_HOSTID under emulation
    std::string master;
    uint16_t port = 0;
    std::string secret;
    bool task_mode = true;  // LOCAL_WORLD_SIZE set and no PET_*: one GPU per task
    uint32_t local_rank = 0;
    uint32_t local_world = 1;  // this node's tasks (LOCAL_WORLD_SIZE, else SLURM_NTASKS_PER_NODE's)
};
Outcome<Self> read_self();

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

// ---- resources --------------------------------------------------------------
// At 8,192 ranks on one host a process may find no thread, socket or memory
// left: it says so, naming itself and what it could not get, and ends with
// kCheckFailed, never an abort (issue 29).

// Who this process is, for such messages (after read_self).
void set_identity(const Self& self);
// "mn-preflight: rank 17 on node3: cannot start the control thread:
// Resource temporarily unavailable" and the fix for that errno.
Problem starved(const std::string& what, int err);
// A thread, or the problem naming `what` and this rank.
template <typename Fn>
Outcome<std::thread> start_thread(const std::string& what, Fn&& fn) {
    try {
        return std::thread(std::forward<Fn>(fn));
    } catch (const std::system_error& e) {
        return starved("cannot start " + what, e.code().value());
    }
}

// ---- the watchdog (step.cc) -------------------------------------------------
// The watchdog: nothing outlives --timeout. set_phase names what a
// time-out would name (and, on rank 0, who it waits for); start_watchdog
// starts the process's control thread (below), or says why it cannot.
void set_phase(const std::string& p, const std::string& waiting = "");
Outcome<bool> start_watchdog(double seconds, const Self& self, bool json);
// One look at the time, from the control thread's every turn.
void watchdog_turn();
// The control thread leaves its turns for good (a takeover): what is left
// of --timeout goes to a timer instead (exit_at).
void watchdog_to_timer();
// Ends the process with `code` in `seconds`, by SIGALRM: no thread needed.
void exit_at(double seconds, int code);
void mark_done();
void progress(const Self& self, const std::string& line);

// ---- liveness (liveness.cc) --------------------------------------------------
// Heartbeats on the control connections, both ways, from the process's
// control thread (one per process, from launch: the watchdog's too), never
// from a phase's: a rank busy in a long GPU call or transfer still answers,
// and a rank (rank 0 included) that stops answering or dies is named within
// seconds, in the phase it was in, rather than at --timeout. One thread
// serves every connection with epoll (wire::Mux): at 8,192 ranks on one
// host, a thread per connection or per job ran out of threads.

// Every half second, each way; every second above kBeatsHalved ranks, where
// rank 0 would otherwise send and read 4 x R beats a second (at 16,384
// ranks on 2 cores, with its ranks played by mn-rank-sim, the beats were
// 90 % of its messages and held the rendezvous past its budget). A silent
// rank is still named within kSilence + 1 s.
constexpr double kBeat = 0.5;
constexpr uint32_t kBeatsHalved = 4096;
inline double beat_period(uint32_t world) { return world > kBeatsHalved ? 2 * kBeat : kBeat; }
// Above kBeatsHalved ranks no beats go either way until the rendezvous is
// over (rank 0's roster): the ranks that came wait for the rest, srun's
// launch of thousands of processes takes seconds, and their beats were
// most of what rank 0 read and sent meanwhile (at 16,384 ranks on 2 cores
// they held the rendezvous past its budget). A rank that dies meanwhile
// still shows at once (its connection ends); one that stops is named once
// the check goes on, and a rank 0 that stops leaves the ranks to their
// rendezvous deadline.
// (A build with --enable-test-hooks takes the bound from
// MN_PREFLIGHT_QUIET_ABOVE, so a test plays it with 64 ranks.)
bool quiet_rendezvous(uint32_t world);
// A bound a test hook may move: the variable's number in a build with
// --enable-test-hooks when it is set, else `dflt`.
uint32_t hook_bound(const char* var, uint32_t dflt);
// A peer is lost after 3 s without a word: six beats in a row missing, so
// a busy node's scheduler, a dropped packet's retransmission (TCP waits at
// least 200 ms, then doubles) or a link full of the all-reduce's data
// never trips it; short enough that detection, a standby taking over
// (about a second) and the verdict fit in 5 s.
constexpr double kSilence = 3.0;
// Ranks 1..kStandbys may give the verdict in rank 0's place; each rank
// asks them in order, and the lowest that answers does.
constexpr uint32_t kStandbys = 4;

// Notices that this process itself was not running (SIGSTOP, a frozen VM):
// a loop's gap between two turns above `limit` seconds. The silence
// measured meanwhile is then its own, not its peers'.
class Pulse {
public:
    bool skipped(double limit = 1.0);

private:
    double last_ = now_s();
};

// A control connection: a phase's thread and the control thread both
// send on it, one whole message at a time.
// Every message on it is sealed (doorway.h: the handshake's key).
class Line {
public:
    Line() = default;
    Line(Fd fd, std::shared_ptr<wire::Seal> seal) : fd_(std::move(fd)), seal_(std::move(seal)) {}
    int fd() const { return fd_.get(); }
    // For the one thread that reads this line (the hub's or the inbox's Mux).
    wire::Seal* seal() const { return seal_.get(); }
    explicit operator bool() const { return static_cast<bool>(fd_); }
    template <typename M>
    bool send(const M& m, const Deadline& d) {
        return send_fields(msg::encode(m), d);
    }
    // A message encoded once for many lines (rank 0's words to every rank);
    // each line seals it under its own key.
    bool send_fields(const wire::Body& f, const Deadline& d) {
        std::lock_guard<std::mutex> g(*mu_);
        const bool ok = wire::send_msg(fd_.get(), f, d, seal_.get());
        if (ok) sent_at_ = now_s();
        return ok;
    }
    // When a message last went out on it (now_s; 0: never): any message is
    // a sign of life to the other side, so a beat due within half a beat
    // period of one is left out (due_beat).
    double sent_at() const {
        std::lock_guard<std::mutex> g(*mu_);
        return sent_at_;
    }

private:
    double sent_at_ = 0;
    Fd fd_;
    std::shared_ptr<wire::Seal> seal_;
    std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
};

// Parts sent on `line` in as few messages M{parts} as keep each below a
// quarter of wire::kMaxMessage, by `bytes(part)`'s estimate: a Relay down
// to a node's leader, a Relayed up from it.
template <typename M, typename Part, typename Bytes>
void send_batched(Line& line, std::vector<Part>& parts, const Deadline& d, Bytes bytes) {
    M batch;
    std::size_t size = 0;
    for (auto& p : parts) {
        size += bytes(p);
        batch.parts.push_back(std::move(p));
        if (size > wire::kMaxMessage / 4) {
            line.send(batch, d);
            batch = {};
            size = 0;
        }
    }
    if (!batch.parts.empty()) line.send(batch, d);
}

// How a rank is gone: its line ended, it stopped answering (nothing heard
// from it for kSilence: a fault, named at once), or it sent what does not
// decode (its fault). Not RankState::Silent, which is a rank that never
// reported before a phase's deadline and is named only at the verdict.
enum class Gone { Ended, StoppedAnswering, Garbled };
// The detail of Gone::StoppedAnswering: "nothing heard from it for 3 s".
std::string silence_words();

// What rank 0 hears from a rank: a message, or why none will come.
struct Heard {
    uint32_t rank = 0;
    std::optional<msg::FromRank> msg;
    Gone gone = Gone::Ended;  // without a message
    std::string error;        // the detail: the line's error, the silence, what did not decode
    // A rank that joined through its node's leader `via` (node.cc): its
    // hello, for the rendezvous to admit.
    std::optional<msg::Hello> joined;
    uint32_t via = 0;
    // A leader lost: the ranks it spoke for, who can no longer reply.
    std::vector<uint32_t> carried;
};
// The one wording of a loss, for the verdict and a standby's lines: why
// rank `h.rank` is gone, in stage s ("stopped answering in the all-reduce
// (nothing heard from it for 3 s)").
std::string loss_words(const Heard& h, msg::Stage s);

// The control thread's job beside the watchdog: one turn of the hub's or
// the inbox's loop (waiting 0.1 s at most); false when it is done. One job
// at a time: control_attach replaces the one attached.
void control_attach(std::function<bool()> turn);
// Starts the control thread (start_watchdog does, at launch): the problem
// naming this rank when the system gives no thread.
Outcome<bool> start_control();
// Detaches the job and returns once the control thread is out of it.
void control_detach();

// Rank 0's side: every rank's messages, decoded, in the order they come
// (heartbeats taken here), a heartbeat to each rank every kBeat, a rank
// silent for kSilence reported once. A rank's Superseded (the others
// ended the check while this process was stopped) ends the process.
class Hub {
public:
    Hub() = default;
    Hub(const Hub&) = delete;
    Hub& operator=(const Hub&) = delete;
    ~Hub();
    void start(const Self& self, bool json);  // on the control thread
    void add(uint32_t rank, Line* line);  // a rank that arrived; its Line outlives the hub
    void stage(msg::Stage s);             // what rank 0's heartbeats say
    msg::Stage stage() const;
    std::optional<Heard> next(const Deadline& d);
    // Returns once the hub has read what the ranks sent so far (a
    // Superseded among it ends the process first): before a verdict.
    void settle();
    struct State;

private:
    std::shared_ptr<State> st_;
};

// What a rank other than 0 needs to give the verdict in rank 0's place
// (takeover.cc), copied for its inbox's thread.
struct Standin {
    Self self;
    CheckOptions o;
    double start = 0;
    msg::Hello hello;
    int standby_fd = -1;  // its standby port's listening socket
    // Its control line goes to its node's leader, not rank 0 (node.cc).
    bool via_leader = false;
};

// ---- a node's leader (node.cc) -------------------------------------------------
// Above kGatherAbove ranks, each node's first task (LOCAL_RANK 0, not rank
// 0 itself) speaks to rank 0 for its node: the node's other ranks knock at
// its door (an abstract local socket named by the step secret, so another
// user can neither guess nor squat it) under the same handshake, and it
// relays their hellos and reports up in one message a turn and rank 0's
// words down (Relay, Relayed), beats them and names one that falls silent
// or ends. Rank 0 then holds a connection per node, not per rank: at 8,192
// ranks on 2 cores its share of the loopback's messages held the control
// plane above a second (doc/scale.md). The ranks of rank 0's node (NODE_RANK
// 0) join rank 0 itself. A rank that finds nobody listening at its leader's
// door within kLeaderWait joins rank 0 directly.
constexpr uint32_t kGatherAbove = 1024;
constexpr double kLeaderWait = 5.0;
// Whether this step's ranks gather at their node's leader (a build with
// --enable-test-hooks takes the bound from MN_PREFLIGHT_GATHER_ABOVE).
bool gathers(const Self& self);
// This node's door: "@mn-preflight-node-" and a hex HMAC of the step
// secret, the node and MASTER_PORT.
std::string node_door_name(const Self& self);
// A leader's door, served by its control thread from launch (its Inbox
// takes it over): the ranks proven and not yet taken.
class NodeDoor {
public:
    NodeDoor(Fd listen, const Self& self);
    ~NodeDoor();
    // One turn: accepts, challenges, reads for `wait` seconds at most; the
    // ranks admitted (purpose "node", a rank of the step, not yet come).
    // With the ranks held by hold() first.
    std::vector<Guest> turn(double wait);
    // A turn whose ranks wait here for the Inbox (before this rank joined).
    void hold(double wait);
    bool open() const { return door_ != nullptr; }
    // Every rank of the node came, or the rendezvous is over: the door
    // closes, strangers still waiting counted; their summary to stderr.
    void close();
    std::size_t came() const { return seen_.size(); }

private:
    Fd listen_;
    Self self_;
    std::unique_ptr<Doorway> door_;
    std::set<uint32_t> seen_;
    std::vector<Guest> held_;
};

// A rank other than 0: rank 0's messages, read by the control thread, which
// also sends this rank's heartbeats, so that a stop word lands while this
// rank is busy or stuck inside NCCL (the thread aborts NCCL and ends the
// process with rank 0's code). Rank 0 lost (its connection ended, nothing
// from it for kSilence, a message that does not decode): the thread ends
// the check through the standbys (takeover.cc), never returning.
class Inbox {
public:
    Inbox() = default;
    Inbox(const Inbox&) = delete;
    Inbox& operator=(const Inbox&) = delete;
    ~Inbox();
    // On the control thread; a leader's door and the ranks it admitted so
    // far (node.cc) with it.
    void start(Line* ctl, const Standin& me, std::shared_ptr<NodeDoor> door = nullptr);
    std::optional<msg::FromLead> next(const Deadline& d, std::string* err);
    struct State;

private:
    std::shared_ptr<State> st_;
};

// Rank 0 is lost: the standbys' way to a verdict. Never returns.
// A node's leader passes the word it ends with to its node's ranks (tell_node).
using NodeWord = std::function<void(const msg::Word&)>;
[[noreturn]] void take_over(const Standin& me, const std::optional<msg::Roster>& roster, const std::string& loss,
                            Line& ctl, const NodeWord& tell_node = {});
// Leaves NCCL and ends the process with `code` (bounded, whatever NCCL does).
[[noreturn]] void end_now(int code);

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

// What rank 0's hub heard, by kind ("Beat", "Ready", ...), and the beats it
// sent ("Beat out"): for --json's "control" (doc/scale.md).
std::map<std::string, uint64_t> control_messages_by_kind();

// The test hook MN_PREFLIGHT_START_LOG=FILE: every rank appends "RANK
// UNIX-SECONDS" (its check's start, wall clock) to FILE, so that a
// benchmark can tell launch skew from the rendezvous' own time.
void log_start(const Self& self, double start);
// The same file (test hook): "RANK UNIX_TIME WHAT" when the rank is done
// with WHAT ("checked": its check over; what the process's end frees,
// NCCL's communicators, comes after).
void log_end(const Self& self, const char* what);


// Test hooks, obeyed only by a build configured with --enable-test-hooks
// (scripts/build.sh; never the packages).
// The test hook MN_PREFLIGHT_FAIL_SETUP=RANK[,RANK]: those ranks' set-up
// fails on purpose, so the failure path can be shown without a broken GPU.
bool setup_fails_on_purpose(uint32_t rank);
// The test hook MN_PREFLIGHT_EXIT_IN_COLLECTIVE=RANK[,RANK]: those ranks'
// processes end as the collective starts, leaving the others inside NCCL's
// init (or the ring's connect) waiting for them, where the stop word must
// reach them.
bool exits_on_purpose(uint32_t rank);
// The test hooks MN_PREFLIGHT_STALL_PAIRS=RANK[,RANK] (the first pair
// rounds only: noise that a retest must clear) and
// MN_PREFLIGHT_STALL_RETESTS=RANK[,RANK] (the retests too: a slow node
// that they must confirm), GPU path: those ranks' hosts wait kStall
// seconds before each launch of a pair's timed loop, and the GPU idles.
bool stalls_pairs(uint32_t rank, bool retest);
constexpr double kStall = 0.05;
// The test hook MN_PREFLIGHT_SLOW_FROM_ROUND=K, CPU path: every pair of
// the first rounds from round K (0-based) on, and every retest and
// control, waits kPassPause seconds per pass, or 4 times the pass's own
// time if longer: load that arrives in the middle of the check and slows
// every node alike, by a factor of 5 or more on any build.
bool slowed_from_round(const std::string& tag);
// The test hook MN_PREFLIGHT_SIM_SHARE=1, for mn-rank-sim
// (tests/bench/mn_rank_sim.cc: the other ranks played in one process, over
// the real protocol, with no data path): rank 0's own share of the CPU
// all-reduce counts as done, 1 ms a pass, without its ring.
bool shares_simulated();
constexpr double kPassPause = 0.02;

// ---- the phases; each returns false when the check cannot go on --------
// rendezvous.cc
bool prepare_self(Step& st);                // every rank: facts, GPU set-up started, data port
void forget_nccl_log(std::string& path);    // NCCL's log and its private directory, removed; path cleared
bool join(Step& st, Follower& f);           // rank != 0: connect, prove the secret, say hello
// node.cc
// A node's leader: its door, opened at launch (prepare_self).
void open_node_door(Step& st);
// A rank of a node with a leader: knocks at its door, the line on success;
// none when nobody listens there for kLeaderWait (it joins rank 0); an
// empty line when the handshake failed after a connection (it ends).
std::optional<Line> join_leader(Step& st);
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
// fleet.cc: every node alike (rank 0's side in lead.h)
std::string node_fingerprint(const std::string& host);  // every rank: its node's, read at launch, sent when ready
void remember_prolog(const PrologOptions& o, const std::string& host, const std::vector<std::string>& problems,
                     const std::vector<std::string>& notes, const std::vector<GpuReadings>& gpus);

// The CPU path's buffer of `bytes` with ring position `pos`'s pattern,
// written and read back: "" or what is wrong.
std::string prepare_ring(std::vector<float>& ring, std::size_t bytes, uint32_t pos);

// The CPU path: a ring all-reduce over TCP, shared by collective and pairs.
struct Timed {
    bool ok = false, correct = false;
    double seconds = 0;  // per pass over the whole buffer
    double passes = 0;   // how many the time bound allowed (the first is checked)
    double median_pass = 0;  // the median whole pass after the first (0: none)
    std::string error;
    bool peer = false;   // the error is a transfer's, not this rank's
};
// How a rank takes part in a CPU all-reduce. A ring of R ranks takes
// 2 (R - 1) steps per piece, each waiting on a rank to be scheduled: 256
// ranks on 2 cores took 4 s a pass. The ranks of a node share its link
// anyway, so, as NCCL does, they add their pieces at the node's leader
// first; only the leaders ring (2 (N - 1) steps), then each hands the sum
// back to its members.
struct Links {
    int leader = -1;           // a member: the socket to its leader (the rest unused)
    std::vector<int> members;  // a leader: its members' sockets
    uint32_t pos = 0, n = 1;   // a leader: its place in the leaders' ring and their number
    int next = -1, prev = -1;  // the ring's sockets (one socket when n == 2)
    // Who is at the other end, for messages: the leader, each member, the
    // ring's neighbours (ranks); none for a pair test.
    std::optional<uint32_t> leader_rank, prev_rank, next_rank;
    std::vector<uint32_t> member_ranks;
};
// `iters` timed passes after one checked pass, each stopping early (all
// ranks at once, by a vote carried in the data) once `budget` seconds have
// gone; transfers give up at d. buf holds this rank's fill_pattern on
// entry; the checked pass must hold the sum of `patterns` of them.
// `pause`: seconds to wait after each segment, at least (a test hook's load).
Timed timed_ring(std::vector<float>& buf, int iters, const Links& links, uint32_t patterns, const Deadline& d,
                 double budget, double pause = 0);
// Data connections open with the handshake (doorway.h) for "data:PURPOSE",
// so a stranger's connection to a data port is refused like one to
// MASTER_PORT; after it, the data flows unsealed (each pass is checked
// against its pattern).
Outcome<Fd> data_connect(const std::string& addr, uint16_t port, const std::string& purpose, const Self& self,
                         const Deadline& d);
Outcome<Fd> data_accept(int listen_fd, const std::string& purpose, uint32_t from, const Self& self, const Deadline& d,
                        Strangers* seen = nullptr);
// Several data connections on one listening socket, in whatever order they
// come: one per (purpose, rank) of `want`; strangers are read past without
// blocking, and those still waiting once all came are counted with them:
// into *seen, else their summary goes to stderr. Sockets in the order of
// `want`, or a problem naming who never came.
Outcome<std::vector<Fd>> data_accept_all(int listen_fd, const std::vector<std::pair<std::string, uint32_t>>& want,
                                         const Self& self, const Deadline& d, Strangers* seen = nullptr);
// The connections waiting in the backlog of a data port that no rank of
// the step connects to now (a pair test's end: the next round is cued only
// after every report of this one, and the side that connected to its peer
// accepted nothing meanwhile): strangers', held or opened during the test.
// Accepted without a word, counted by address and closed; at most
// kMostWaiting, the rest are the next test's.
constexpr std::size_t kMostWaiting = 4096;
Strangers take_waiting(int listen_fd);

}  // namespace mn::check
