// SPDX-License-Identifier: Apache-2.0
// Rank 0's side of the check: its view of every rank (Member), what they
// said and the report taking shape (Lead), and rank 0's phases. The
// harness (helper/check.cc) steps them; each phase begins with
// Lead::enter(Stage), the one mark of where rank 0 is: for the ranks (the
// hub's beats), a loss's words, the watchdog and the verdict.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "helper/check/step.h"

namespace mn::check {

// Rank 0's view of one rank.
struct Member {
    msg::Hello hello;
    // Its node's software, from its readiness (none from all but a node's
    // first task, or if late); why its text could not be read, if so.
    std::optional<Fingerprint> fingerprint;
    std::string fingerprint_problem;
    Line ctl;  // rank 0's own entry has none, nor does a rank that joined through its node's speaker
    std::optional<uint32_t> via;  // that rank's node's speaker: the one record of who speaks for whom
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

// Rank 0's view of what the control plane itself cost (doc/scale.md; the
// "control" object of --json): each phase's end in seconds from the
// check's start, the connections it accepted, and at the verdict its
// traffic (wire::traffic), sockets and CPU time.
struct ControlCost {
    std::vector<std::pair<std::string, double>> marks;  // phase, its end (s from start)
    double start_unix = 0;                               // the check's start, wall clock
    uint32_t accepted = 0;                               // connections taken on MASTER_PORT
    void mark(const std::string& phase, double start) { marks.push_back({phase, now_s() - start}); }
    nlohmann::ordered_json json(double start) const;    // the "control" object
};

// What a rank's reply, or its loss, did to one of rank 0's waits
// (Lead::await_replies): counted, not what was waited for, or the end.
enum class Reply { Taken, Ignored, Stop };

// Rank 0: the members, what they said, and the report taking shape.
// How long rank 0 hears past a deadline that passed while it was not
// running (Lead::past): the control thread takes what queued up meanwhile
// in a turn or two of 0.2 s.
constexpr double kPauseGrace = 1.0;

struct Lead {
    std::vector<Member> members;
    PreflightReport rep;
    std::vector<RankEvidence> evidence;  // one per rank, for the verdict
    std::vector<std::vector<GpuReadings>> node_health;  // per node: its GPUs' readings, from readiness
    // The phase under way, as the verdict names it ("pairs"; a standby's
    // "rank 0 lost"): enter() sets it.
    std::string phase;
    bool gpu_path = false;
    std::size_t bytes = 0, pair_bytes = 0;
    int iters = 0;
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> rounds;  // node pair rounds
    std::vector<GpuRound> gpu_rounds;
    std::vector<uint32_t> first_lane;    // each rank's first NCCL rank
    uint32_t lanes = 0;                  // NCCL ranks in all
    std::string nccl_id;                 // GPU path: NCCL's unique id, made in readiness
    std::vector<msg::Result> results;    // each rank's collective result
    std::future<msg::Result> own;        // rank 0's own share, on a thread
    std::future<msg::PairReport> own_pair;  // rank 0's side of a CPU pair test, on a thread
    std::future<msg::GpuRetestReport> own_retest;  // rank 0's part of the GPU retests, on a thread
    std::future<msg::Ready> own_ready;      // rank 0's own readiness, on a thread
    ControlCost cost;
    // Why the check could not go on where no rank is to blame (rank 0 could
    // not listen): the verdict fails with it.
    std::string halted;
    bool finished = false;               // every phase ran to its end
    Strangers strangers;                 // who knocked on MASTER_PORT without the step secret
    std::vector<std::string> skewed;     // ranks that came speaking another protocol (Doorway::skewed)
    Hub hub;                             // destroyed before the members' Lines

    // Rank 0 begins stage s: its heartbeats say so, a loss is worded in it,
    // the watchdog names it; the verdict's stage leaves `phase` as the last
    // work's (what did not finish).
    void enter(msg::Stage s);
    msg::Stage stage() const { return stage_; }

    // The ranks of this step as rank 0 numbers them, for messages.
    std::string who(uint32_t rank) const;
    void note(uint32_t rank, RankState s, const std::string& error);
    // The next word from any rank (or a rank's end); none at d. A word a
    // speaker carried counts only for the ranks that Member::via says it
    // speaks for (a hello goes to the rendezvous' admit); a speaker whose
    // own line is lost takes those ranks with it (Heard::carried).
    std::optional<Heard> hear(const Deadline& d);
    // Sends rank r (not 0) a message: on its line, or through its node's speaker.
    template <typename M>
    void tell(uint32_t r, const M& m, const Deadline& d) {
        tell_bodies({{r, msg::encode(m)}}, d);
    }
    // Sends to every rank but 0.
    // Encoded once: each rank woken by it competes for the CPU with rank
    // 0's loop, so the loop does as little as it can (doc/scale.md).
    template <typename M>
    void tell_all(const M& m, const Deadline& d) {
        tell_same(msg::encode(m), d);
    }
    // Sends each rank but 0 its own message, make(rank): every one encoded
    // before the first goes out, since a rank that has its message starts
    // work and competes with this loop for the CPU.
    template <typename Make>
    void tell_each(Make make, const Deadline& d) {
        std::vector<std::pair<uint32_t, wire::Body>> each;
        each.reserve(members.size());
        for (uint32_t r = 1; r < members.size(); ++r) each.emplace_back(r, msg::encode(make(r)));
        tell_bodies(each, d);
    }
    // The two above as they travel: one body for all, or a body per rank.
    // A node that speaks through its speaker gets one Relay for all its ranks.
    void tell_same(const wire::Body& body, const Deadline& d);
    void tell_bodies(const std::vector<std::pair<uint32_t, wire::Body>>& each, const Deadline& d);
    // Marks every rank not yet at fault stopped (another rank failed).
    void stop_the_rest();
    // The one answer to "a rank is lost (its line ended, it stopped
    // answering, it sent garbage), what now?" while rank 0 waits on the
    // ranks marked in `waiting`: noted as its fault in loss_words, the
    // others stopped, the wait ended. In the all-reduce a rank lost after
    // its result is the pair tests' to find (Ignored), unless it was a
    // node's speaker that carried ranks still owing theirs; there a rank
    // lost while waited for is a fault like a failed result, and those
    // that replied keep it. A loss just after rank 0's own pause
    // (Heard::after_pause) is the pause's: the rank is not named; rank 0's
    // node is, for a pause it did not wait for a CPU in (stopped), and a
    // starved one disturbed the check (no node named).
    Reply lose(const Heard& h, const std::vector<bool>& waiting);
    // Rank 0's wait for a message M from each rank still marked in
    // `waiting`, its own from `mine` (its thread), in the order they come,
    // until `until`: readiness, the all-reduce's results, pair rounds and
    // GPU retests all wait so. take(rank, m) says what a reply did, lose()
    // what a loss did; a rank Taken or Stopped is no longer waited for.
    // False when one of them said Stop; the ranks still marked never replied.
    template <typename M, typename Take>
    bool await_replies(std::vector<bool>& waiting, std::future<M>& mine, const Deadline& until, Take take) {
        auto left = std::count(waiting.begin(), waiting.end(), true);
        auto settle = [&](uint32_t r, Reply what) {
            if (what != Reply::Ignored && waiting[r]) {
                waiting[r] = false;
                --left;
            }
            return what != Reply::Stop;
        };
        while (left > 0) {
            if (waiting[0] && mine.valid() && mine.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
                const M m = mine.get();
                if (!settle(0, take(0u, m))) return false;
                continue;
            }
            if (past(until)) break;
            auto h = hear(Deadline::in(std::min(0.05, std::max(0.0, room(until)))));
            if (!h || h->joined) continue;  // a hello after the rendezvous: too late to join
            if (!h->msg) {
                if (!settle(h->rank, lose(*h, waiting))) return false;
                continue;
            }
            const M* m = std::get_if<M>(&*h->msg);
            if (m && waiting[h->rank] && !settle(h->rank, take(h->rank, *m))) return false;
        }
        return true;
    }
    // A phase's deadline as rank 0 keeps it. Rank 0 itself not running
    // (SIGSTOP, a frozen VM: its loop came round late) may have let the
    // deadline pass unseen: it then hears kPauseGrace more, so what came
    // meanwhile (a rank's end, a hello queued at the door) is taken and
    // its pause, not the others' lateness, is named.
    bool past(const Deadline& until);
    double room(const Deadline& until) const { return std::max(until.left(), grace_end_ - now_s()); }
    // For a time-out's words: "; rank 0 itself was not running for 19.6 s
    // (...)" after such a pause, else "".
    std::string own_pause_words() const;
    // Rank 0's own work (readiness, its share, a pair test) still running.
    bool own_work_running() const;
    // Every node's NVML findings (gpu_findings over node_health), with the
    // step's own processes on each node's host not counted as another
    // process on a GPU. Their pids are gathered once per host and shared by
    // the nodes emulated there: a copy per node was 8,192 pids for each of
    // 1,024 nodes, half of rank 0's CPU at 1,024 x 8.
    std::vector<std::vector<GpuFinding>> gpu_findings_by_node() const;
    // Each node of rep.nodes by its host, in order.
    std::vector<std::string> hosts() const;

private:
    msg::Stage stage_ = msg::Stage::Rendezvous;
    Pulse pulse_;          // past()'s: the gap between two of a phase's turns
    double grace_end_ = 0;
};

// ---- rank 0's phases, in the order the harness steps them ----------------
// rendezvous.cc
bool gather(Step& st, Lead& l);             // every rank arrives
// The report's nodes, in NODE_RANK order, from the hellos of the ranks
// present; each member gets its node's index.
void place_nodes(Lead& l, const std::vector<bool>& have);
// readiness.cc
bool lead_readiness(Step& st, Lead& l);     // go, or the failure that stops everyone
bool fingerprints_alike(Lead& l);           // fleet.cc, after readiness: the odd nodes named
// collective.cc
bool lead_collective(Step& st, Lead& l);
// pairs.cc
void gpu_pair_plan(const Step& st, Lead& l);  // fills l.gpu_rounds: per round, each lane's color
// Rank r's lanes' colors in each of `rounds` (a plan's or a retest's).
std::vector<std::vector<int>> rank_colors(const Lead& l, uint32_t r, const std::vector<GpuRound>& rounds);
void lead_pairs(Step& st, Lead& l);
// verdict.cc
int verdict(Step& st, Lead& l);             // blame, print, tell every rank done or stop
void remember(const Step& st, const Lead& l);  // fleet.cc, after the verdict: history lines, metrics files

}  // namespace mn::check
