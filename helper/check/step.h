// One rank's state through mn-preflight's check, and each phase's time
// budget. The phases, in order, each in a file of its own:
//   rendezvous.cc  every rank connects to rank 0 and proves the step secret
//   readiness.cc   every rank opens its GPUs (or its CPU buffer), allocates
//                  and checks what the all-reduce will use, and says so;
//                  rank 0 says go, or stops everyone on the first failure
//   collective.cc  the all-reduce (NCCL or a TCP ring), bounded by time
//   pairs.cc       pair tests between nodes and between a node's GPUs
//   verdict.cc     blame by evidence, the table or JSON, done or stop
// helper/check.cc runs them.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "helper/check.h"
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

std::string env_or(const char* name, const std::string& dflt = "");

// What this process is, from Slurm's and the plugin's variables.
struct Self {
    uint32_t rank = 0, world = 1;
    uint32_t node = 0;      // NODE_RANK (emulation-aware), else SLURM_NODEID
    std::string label;      // the host, or NCCL_HOSTID under emulation
    std::string master;
    uint16_t port = 0;
    std::string secret;
    bool task_mode = true;  // LOCAL_WORLD_SIZE set: one GPU per task
    uint32_t local_rank = 0;
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

// A rank other than 0: rank 0's messages, read by a thread of its own so
// that a stop word lands while this rank is busy or stuck inside NCCL. On
// "stop" that thread aborts NCCL and ends the process with rank 0's code.
// A message that does not decode ends the inbox, saying so.
class Inbox {
public:
    void start(int fd, const Self& self, Deadline end);
    std::optional<msg::FromLead> next(const Deadline& d, std::string* err);
    struct State;

private:
    std::shared_ptr<State> st_;
};

// Rank 0's view of one rank.
struct Member {
    msg::Hello hello;
    Fd ctl;  // rank 0's own entry has none
    uint32_t node_index = 0;
};

// One round of GPU pair tests: each lane's (NCCL rank's) color, -1 to sit
// out, and what each color tests.
struct GpuRound {
    bool intra = false;  // GPUs of one node, else two nodes
    std::vector<int> color;
    struct Pair {
        uint32_t a = 0, b = 0;  // inter: node indexes; intra: lanes
    };
    std::map<int, Pair> what;
};

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
    Fd data_listen;
    uint16_t data_port = 0;
    msg::Hello hello;
    // GPU set-up and NVML's readings, started at launch so they overlap
    // the rendezvous: "" or the fault, and the readings.
    std::shared_future<std::pair<std::string, std::vector<GpuReadings>>> gpu_setup;
    std::vector<float> ring;  // CPU path: the all-reduce buffer, from readiness
    std::vector<GpuReadings> health;  // NVML's readings of this rank's GPUs, from readiness
};

// A rank other than 0: its line to rank 0.
struct Follower {
    Fd ctl;
    Inbox inbox;
};

// What rank 0 hears from a rank: a message, or why none will come (its
// connection ended, or it sent something that does not decode: its fault).
struct Heard {
    uint32_t rank = 0;
    std::optional<msg::FromRank> msg;
    std::string error;
    bool garbled = false;
    // Why this rank is gone, in `phase`: for the verdict.
    std::string gone(const std::string& phase) const;
};

// Rank 0: the members, what they said, and the report taking shape.
struct Lead {
    std::vector<Member> members;
    wire::Mux mux;
    PreflightReport rep;
    std::vector<RankEvidence> evidence;  // one per rank, for the verdict
    std::vector<std::vector<GpuReadings>> node_health;  // per node: its GPUs' readings, from readiness
    std::string phase;                   // the phase under way, for a time-out line
    bool gpu_path = false;
    std::size_t bytes = 0, pair_bytes = 0;
    int iters = 0;
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> rounds;  // node pair rounds
    std::vector<GpuRound> gpu_rounds;
    std::vector<uint32_t> first_lane;    // each rank's first NCCL rank
    std::vector<msg::Result> results;    // each rank's collective result
    std::future<msg::Result> own;        // rank 0's own share, on a thread

    // The ranks of this step as rank 0 numbers them, for messages.
    std::string who(uint32_t rank) const;
    void note(uint32_t rank, RankState s, const std::string& error);
    // The next message from any rank (or a rank's end); none at d.
    std::optional<Heard> hear(const Deadline& d);
    // Sends to every rank but 0.
    template <typename M>
    void tell_all(const M& m, const Deadline& d) {
        for (uint32_t r = 1; r < members.size(); ++r)
            if (members[r].ctl) msg::send(members[r].ctl.get(), m, d);
    }
};

// The watchdog: nothing outlives --timeout.
void set_phase(const std::string& p, const std::string& waiting = "");
void start_watchdog(double seconds, const Self& self, bool json);
void mark_done();
void progress(const Self& self, const std::string& line);

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

// ---- the phases; each returns false when the check cannot go on --------
// rendezvous.cc
bool prepare_self(Step& st);                // every rank: facts, GPU set-up started, data port
bool join(Step& st, Follower& f);           // rank != 0: connect, prove the secret, say hello
bool gather(Step& st, Lead& l);             // rank 0: every rank arrives
// readiness.cc
bool serve_readiness(Step& st, Follower& f);
bool lead_readiness(Step& st, Lead& l);     // rank 0: go, or the failure that stops everyone
// collective.cc
bool serve_collective(Step& st, Follower& f);
bool lead_collective(Step& st, Lead& l);
msg::Result run_share(const msg::Plan& plan, const Step& st);  // this rank's part of the all-reduce
// pairs.cc
std::vector<std::vector<int>> gpu_pair_plan(const Step& st, Lead& l);  // fills l.gpu_rounds: per round, each lane's color
int serve_pairs(Step& st, Follower& f);     // rank != 0: pair tests on rank 0's cue, until done
void lead_pairs(Step& st, Lead& l);
// verdict.cc
int verdict(Step& st, Lead& l);             // rank 0: blame, print, tell every rank done or stop

// The CPU path: a ring all-reduce over TCP, shared by collective and pairs.
struct Timed {
    bool ok = false, correct = false;
    double seconds = 0;  // per pass over the whole buffer
    double passes = 0;   // how many the time bound allowed (the first is checked)
    std::string error;
    bool peer = false;   // the error is a transfer's, not this rank's
};
// `iters` timed passes after one checked pass, each stopping early (all
// ranks at once, by a vote carried in the data) once `budget` seconds have
// gone; transfers give up at d.
Timed timed_ring(std::vector<float>& buf, int iters, uint32_t pos, uint32_t n, int next_fd, int prev_fd,
                 const Deadline& d, double budget);
Outcome<Fd> data_connect(const std::string& addr, uint16_t port, const std::string& purpose, uint32_t rank,
                         const std::string& secret, const Deadline& d);
Outcome<Fd> data_accept(int listen_fd, const std::string& purpose, uint32_t from, const std::string& secret,
                        const Deadline& d);

}  // namespace mn::check
