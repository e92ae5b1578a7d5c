// SPDX-License-Identifier: Apache-2.0
// The messages between the ranks of mn-preflight's check: one struct per
// message. messages.cc lists each struct's fields once (nlohmann-json's
// struct mapping); a message travels as CBOR, {"Hello": {"rank": 1, ...}},
// in helper/wire.h's frames. Decoding never guesses: a missing field, a
// number out of its field's range, a word not of its set is an error naming
// the message and the field, and the receiver holds it against the peer
// that sent it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "helper/wire.h"
#include "lib/check/fingerprint.h"
#include "lib/check/gpu_health.h"
#include "lib/check/preflight.h"
#include "lib/util/outcome.h"

namespace mn::check::msg {

// The check's phases, as rank 0 announces them in its heartbeats and as
// messages name them ("stopped answering in the all-reduce").
enum class Stage { Rendezvous, Readiness, Collective, Pairs, Verdict };
const char* stage_name(Stage s);  // "the all-reduce"
const char* stage_word(Stage s);  // "collective": the word on the wire, and a time-out's phase

// ---- the handshake of every connection (helper/check/control/doorway.h) ----------

// Each build speaks one protocol; two that differ refuse each other with a
// message that names both. A field added within a protocol is a
// std::optional, which a build of the same protocol from before it does
// not send and this one reads as not said (messages.cc's get_field). 6: a node's ranks may speak to rank 0 through
// their node's leader (Relay, Relayed; 5: NCCL's id and ranks in Prepare; 4: the
// rendezvous quiet above 4,096 ranks and pair reports with the strangers
// at the data port; 3: messages in CBOR; 2: key=value text; 1 had one-way
// proofs). A build of 4 beside one of 5 would refuse 5's Prepare as
// garbled: refused at the door, with both named, instead.
constexpr uint32_t kProtocol = 6;

// The acceptor -> whoever connected: the protocol, and a fresh nonce. The
// one message that is not CBOR: key=value lines ("op=challenge", "v=3",
// "nonce=..."), as protocol 2 wrote every message, and so for good, so
// that every build since protocol 2 reads the other's version in it.
// A release as a challenge or a knock may say it ("0.2.0"): up to 32
// letters, digits and .-+~ ("" too: not said). Anything else is unproven
// text of whoever answered, never kept.
bool release_word(const std::string& r);

struct Challenge {
    uint32_t version = kProtocol;
    std::string nonce;
    std::string release;  // the acceptor's mn-nccl release ("release=..."); "" from a build before 0.2.0
    auto tie() const { return std::tie(version, nonce, release); }
};

// The connector -> the acceptor, sealed (its proof of the step secret):
// what the connection is for ("control", "takeover", "data:ring", ...),
// the connector's rank and its own fresh nonce.
struct Knock {
    uint32_t version = kProtocol;
    std::string purpose;
    uint32_t rank = 0;
    std::string nonce;
    std::optional<std::string> release;  // the connector's mn-nccl release (added within protocol 6)
    auto tie() const { return std::tie(version, purpose, rank, nonce, release); }
};

// The acceptor -> the connector, sealed (the acceptor's proof): admitted,
// by this rank.
struct Welcome {
    uint32_t rank = 0;
    auto tie() const { return std::tie(rank); }
};

// The acceptor -> a connector it will not admit, plain (it may not know the
// key), then the end: why, as a word of the program's own ("secret":
// its knock does not prove the step secret; "unwanted": its rank came
// already or is not one awaited; "protocol": another protocol). The
// connector then gives up rather than knock again.
struct Refused {
    std::string reason;
    auto tie() const { return std::tie(reason); }
};

// A rank -> rank 0 (the control connection's first message): who it is
// and what it brings.
struct Hello {
    uint32_t rank = 0;
    uint32_t node = 0;       // NODE_RANK (emulation-aware)
    std::string label;       // the host, or NCCL_HOSTID under emulation
    std::string slurm_node;  // SLURMD_NODENAME
    std::string host;        // the kernel's host name (processes on a GPU are per host)
    unsigned pid = 0;
    bool gpu_ok = false;
    std::string gpu_why;     // why not
    uint32_t gpus = 0;       // the GPUs its driver shows, with or without a GPU path
    uint32_t lanes = 1;      // NCCL ranks of this process (its GPUs), at least 1
    std::vector<std::string> lane_gpus;  // "GPU1 (0000:19:00.0)" per lane
    std::string data_addr;   // where the others reach its data port (and its standby port)
    uint16_t data_port = 0;
    uint16_t standby_port = 0;  // where it takes the others' reports if it gives the verdict in rank 0's place
    FabricSignature sig;
    std::string ifname;
    std::vector<std::string> problems;  // found at home (fabric discovery)
    // The machine it runs on: the kernel's boot id, shared by every network
    // namespace and container of one boot and by no other machine. Nodes
    // on one machine share its CPUs (lib/check/retest.h). Added in protocol
    // 6: none from a build before it.
    std::optional<std::string> machine;
    // It opens a port of its own for a retest when asked (PairCue's
    // fresh_port). Added in protocol 6: none from a build before it, which
    // rank 0 retests on its data port as before.
    std::optional<bool> fresh_ports;
    auto tie() const {
        return std::tie(rank, node, label, slurm_node, host, pid, gpu_ok, gpu_why, gpus, lanes, lane_gpus, data_addr,
                        data_port, standby_port, sig, ifname, problems, machine, fresh_ports);
    }
};

// ---- both ways, on the control connection ----------------------------------

// A heartbeat: every beat period each way, from the process's control
// thread, so that a rank busy in a long GPU call still answers. Rank 0's
// says where it is.
struct Beat {
    Stage stage = Stage::Rendezvous;
    auto tie() const { return std::tie(stage); }
};

// ---- rank 0 -> a rank ----------------------------------------------------

// After the rendezvous: who gives the verdict if rank 0 is lost. The
// standbys (ranks 1, 2, ... as many as kStandbys) in order: the lowest
// that answers the others takes over; rank 0's hello names its node.
struct Standby {
    uint32_t rank = 0;
    std::string label;  // its node, for messages
    std::string addr;
    uint16_t port = 0;
    auto tie() const { return std::tie(rank, label, addr, port); }
};
struct Roster {
    Hello lead;
    std::vector<Standby> standbys;
    auto tie() const { return std::tie(lead, standbys); }
};

// Readiness: set up for this path and buffer. On the GPU path also the
// NCCL ranks and rank 0's unique id, so that NCCL's init starts as soon as
// this rank's GPUs hold their buffers, beside the rest of readiness (the
// Plan repeats them).
struct Prepare {
    bool gpu = false;  // else the CPU path (a TCP ring)
    uint64_t bytes = 0;
    int nranks = 0, first_rank = 0;  // GPU path: NCCL ranks in all; this rank's first
    std::string id;                  // GPU path: NCCL's unique id
    // Rank 0's NCCL ("2.28.3"): a rank of another release starts no init
    // with it (their wire protocols may differ); the fingerprints name it.
    std::string nccl;
    // Rank 0 reads the fingerprint as fields (Ready's node_fingerprint);
    // none from a build before them, which reads Ready's text alone.
    // Added within protocol 6.
    std::optional<bool> fingerprint_fields;
    auto tie() const { return std::tie(gpu, bytes, nranks, first_rank, id, nccl, fingerprint_fields); }
};

// The collective's go: this rank's part of the plan.
struct Plan {
    bool gpu = false;
    uint64_t bytes = 0;
    int iters = 0, warmup = 0;
    double budget = 0, pair_budget = 0;  // seconds: the timed loops stop after these
    uint64_t pair_bytes = 0;
    int nranks = 0, first_rank = 0;      // NCCL ranks in all; this rank's first
    std::string id;                      // NCCL's unique id (GPU path)
    // CPU path: each node's ranks add their buffers at the node's head
    // (its lowest rank; `leader` on the wire), the heads ring, and each
    // head hands the sum back. A head's next_* is the next head's data
    // port; a member's, its head's.
    std::string next_addr;
    uint16_t next_port = 0;
    uint32_t leader = 0;            // this rank's node's head in the ring (itself when it heads)
    std::vector<uint32_t> members;  // a head: the other ranks of its node
    uint32_t ring_pos = 0, ring_size = 0;  // a leader: its place in the leaders' ring, and their number
    uint32_t prev = 0, next = 0;           // a leader: the leaders before and after it
    std::vector<std::vector<int>> colors;  // GPU pair rounds: each lane's color, -1 to sit out
    auto tie() const {
        return std::tie(gpu, bytes, iters, warmup, budget, pair_budget, pair_bytes, nranks, first_rank, id, next_addr,
                        next_port, leader, members, ring_pos, ring_size, prev, next, colors);
    }
};

// One side of a CPU pair test: meet `peer` and time a two-rank all-reduce.
struct PairCue {
    std::string tag;
    uint32_t peer = 0;
    std::string peer_addr;
    uint16_t peer_port = 0;
    bool connect = false;  // this side connects, the other accepts
    uint64_t bytes = 0;
    int iters = 0;
    double budget = 0;      // seconds for the whole test
    double time_bound = 0;  // seconds: the timed loop stops after this
    // A retest on a port opened for it alone (lib/check/retest.h, "strangers
    // at the data ports"). The accepting side opens it, says it first in a
    // PairReport with only `tag` and `listening`, and closes it once its
    // peer came; rank 0 then cues the connecting side with that port. The
    // connecting side does not count its own data port's strangers: the
    // test never used it. Added in protocol 6 (Hello's fresh_ports).
    std::optional<bool> fresh_port;
    auto tie() const {
        return std::tie(tag, peer, peer_addr, peer_port, connect, bytes, iters, budget, time_bound, fresh_port);
    }
};

// GPU path: more pair rounds on the communicators the all-reduce kept,
// to retest suspects (lib/check/retest). Every rank gets one, since every
// rank takes part in each split; its lanes' color per round, -1 to sit out.
struct GpuRetest {
    std::vector<std::vector<int>> colors;
    auto tie() const { return std::tie(colors); }
};

// The end: done after a pass, stop otherwise (leave NCCL now), with the
// check's exit code.
struct Word {
    bool done = false;
    int code = 0;
    std::string why;
    auto tie() const { return std::tie(done, code, why); }
};

// ---- a rank -> rank 0 ----------------------------------------------------

// Readiness: set up, or the fault (naming the GPU), with NVML's readings.
struct Ready {
    std::string error;  // "" when ready
    std::vector<GpuReadings> health;
    // Its node's fingerprint (lib/check/fingerprint), read beside the
    // rendezvous (loading NCCL and CUDA takes a while), as fields where
    // rank 0 asked for them (Prepare's fingerprint_fields; added within
    // protocol 6), else as encode_fingerprint()'s text for a rank 0 before
    // them; none and "" when not read in time (or not this node's first
    // task's to send).
    std::string fingerprint;
    std::optional<Fingerprint> node_fingerprint;
    auto tie() const { return std::tie(error, health, fingerprint, node_fingerprint); }
};

// A rank's part of the collective.
struct Result {
    enum class Kind { None, Peer, Fault };  // an error's kind: a transfer with another rank, or this rank's own
    bool ran = false, correct = false;
    std::string error;
    Kind kind = Kind::None;
    double seconds = 0;  // per pass
    double init = 0;     // NCCL's init (GPU path)
    std::optional<double> passes;  // CPU path: the timed passes the budget allowed
    std::vector<std::string> transports;
    std::vector<std::vector<double>> pair_seconds;  // GPU pair rounds: per round, per lane
    std::string pair_error;
    // CPU path: who came to this rank's data port without the step secret
    // while it waited for its ring (Strangers::brief); none when nobody
    // did, or from a build before it (protocol 6).
    std::optional<std::string> strangers;
    auto tie() const {
        return std::tie(ran, correct, error, kind, seconds, init, passes, transports, pair_seconds, pair_error,
                        strangers);
    }
};

// One side of a CPU pair test (or retest), done: its time, and the
// strangers at this rank's data port meanwhile (connections without the
// step secret: the doorway's count where this side accepted, and those
// waiting in its backlog at the end), whose load may have slowed it: how
// many, and Strangers::summary(), at most kStrangersText bytes.
constexpr std::size_t kStrangersText = 512;
struct PairReport {
    std::string tag;
    double seconds = 0;
    std::string error;
    uint32_t strangers = 0;
    std::string strangers_seen;
    // The share of the timed test this rank's thread waited, runnable, for
    // a CPU (the kernel's run_delay over the wall time); none where the
    // kernel does not say, or from a build before it (protocol 6).
    std::optional<double> cpu_wait;
    // What TCP saw of the pair's path from this side (wire::path_seen):
    // segments sent again, smoothed round trip in ms; none where it could
    // not say, or from a build before them (protocol 6).
    std::optional<uint32_t> retrans;
    std::optional<double> rtt_ms;
    // The accepting side of a retest on a fresh port, before the test: the
    // port it opened (the report with its time comes after). Protocol 6.
    std::optional<uint16_t> listening;
    auto tie() const {
        return std::tie(tag, seconds, error, strangers, strangers_seen, cpu_wait, retrans, rtt_ms, listening);
    }
};

// A GPU retest's rounds, timed: per round, per lane, as Result's pair_seconds.
struct GpuRetestReport {
    std::vector<std::vector<double>> seconds;
    std::string error;
    auto tie() const { return std::tie(seconds, error); }
};

// The check ended without rank 0 (it was lost, and a standby gave the
// verdict): should rank 0 come back, it ends quietly with this code.
struct Superseded {
    uint32_t by = 0;
    std::string by_label;
    int code = 0;
    auto tie() const { return std::tie(by, by_label, code); }
};
// Why rank 0 does not take it ("" when it does): only a standby of its
// roster gives a verdict in its place, and that verdict names rank 0's
// node, so it never passes (a code 0 would start the program under
// --exec on a word no check gave).
std::string superseded_refusal(const Superseded& m, const std::vector<uint32_t>& standbys);

// ---- when rank 0 is lost: a rank -> the standby that takes over -----------

// On the standby's port, the connection's first message: who this rank
// is. The standby's Welcome says it takes over; its Word follows.
struct TakeoverReport {
    Hello hello;
    auto tie() const { return std::tie(hello); }
};

// ---- through a node's leader (helper/check/node.cc) -------------------------

// A message as it travels (its CBOR body), inside another.
struct Nested {
    wire::Body bytes;
    bool operator==(const Nested& o) const { return bytes == o.bytes; }
};

// Rank 0 -> a node's leader: words for its node's ranks, the leader's own
// among them. Each part's body (a message rank 0 sends a rank, as it
// travels) goes to every rank in `to`; the leader seals each copy anew
// on its line to that rank.
struct RelayPart {
    std::vector<uint32_t> to;
    Nested body;
    auto tie() const { return std::tie(to, body); }
};
struct Relay {
    std::vector<RelayPart> parts;
    auto tie() const { return std::tie(parts); }
};

// A node's leader -> rank 0: what its node's ranks said since its last
// Relayed, in the order they said it. `what`: Hello (body: the rank's
// Hello, which joins it to the step through this leader), Said (body: a
// message a rank sends rank 0) or Gone (its line to the leader ended, or
// it stopped answering: error says how, `silent` which; the wire's word
// for what step.h calls Gone::StoppedAnswering).
struct Carried {
    enum class What { Hello, Said, Gone };  // on the wire: "hello", "said", "gone"
    uint32_t rank = 0;
    What what = What::Said;
    Nested body;
    std::string error;
    bool silent = false;
    auto tie() const { return std::tie(rank, what, body, error, silent); }
};
struct Relayed {
    std::vector<Carried> parts;
    // Who came to the speaker's node door without the step secret, so far
    // (Strangers::brief), said when it grew; none from a build before it
    // (protocol 6).
    std::optional<std::string> door_strangers;
    auto tie() const { return std::tie(parts, door_strangers); }
};

// ---- the hang watch (helper/watch.cc): a node's watch -> rank 0's ----------------

// What a node's watch named (lib/check/stall.h's WatchReport, as it
// travels): the first and only message of a connection for "watch", for
// rank 0's watch to say with the others' as the step's one block. Proven by
// the step secret, yet rank 0's watch still judges it: only a node of the
// step named with host evidence goes into the exclude file.
struct Finding {
    std::string kind, host, rank, local_rank;
    uint32_t pid = 0;
    std::string comm, seen_from, detail;
    std::vector<std::string> evidence, dumps;
    std::string excluded;        // why the node is not for the exclude file, where it is not
    bool host_evidence = false;  // the host's own evidence (a link the kernel gives up on): it may be excluded
    auto tie() const {
        return std::tie(kind, host, rank, local_rank, pid, comm, seen_from, detail, evidence, dumps, excluded,
                        host_evidence);
    }
};

// One of a group's recent collectives (lib/check/flight_record.h's FlightCall).
struct CallPosition {
    int64_t seq = -1;
    std::string op, input, state;
    auto tie() const { return std::tie(seq, op, input, state); }
};
// Where a rank stands in one process group (lib/check/flight_record.h's
// FlightGroup, as it travels).
struct GroupPosition {
    std::string id, desc;
    int64_t enqueued = -1, started = -1, completed = -1, waiting_seq = -1;
    std::string waiting_op, waiting_state, waiting_input;
    std::vector<CallPosition> recent;
    auto tie() const {
        return std::tie(id, desc, enqueued, started, completed, waiting_seq, waiting_op, waiting_state, waiting_input,
                        recent);
    }
};
// A rank whose Flight Recorder has not moved for the watch's window
// (lib/check/rank_positions.h's RankPosition): the first and only message
// of a "watch" connection, as a Finding is, for rank 0's watch to compare
// with the others'. Sent again each window while it holds.
struct Position {
    std::string host, rank, local_rank, comm, gpu;
    uint32_t pid = 0;
    double still = 0, cpu = 0;
    std::vector<GroupPosition> groups;
    // Its node's hardware Xid lines (lib/check/gpu_events.h), where its
    // watch saw any (added within protocol 6).
    std::optional<std::vector<std::string>> gpu_events;
    // The dump it was read from, a path on its host (added within protocol 6).
    std::optional<std::string> dump;
    auto tie() const { return std::tie(host, rank, local_rank, comm, gpu, pid, still, cpu, groups, gpu_events, dump); }
};

// What comes on the control connection after the hello.
using FromLead = std::variant<Beat, Roster, Prepare, Plan, PairCue, GpuRetest, Word, Relay>;
using FromRank = std::variant<Beat, Superseded, Ready, Result, PairReport, GpuRetestReport, Relayed>;

// A message as its body travels, and back: the message, or what is wrong
// with it ("Hello: 'data_port' is 70000, not a whole number from 0 to
// 65535"); garbage is such an error, never an exception.
template <typename M>
wire::Body encode(const M& m);
template <typename M>
Outcome<M> decode(const wire::Body& body);
template <>
wire::Body encode(const Challenge& m);
template <>
Outcome<Challenge> decode<Challenge>(const wire::Body& body);
wire::Body encode(const FromLead& m);
wire::Body encode(const FromRank& m);
// One of the messages that may come on the control connection.
Outcome<FromLead> decode_from_lead(const wire::Body& body);
Outcome<FromRank> decode_from_rank(const wire::Body& body);
// The phases' names for two of them.
inline Outcome<Word> decode_word(const wire::Body& b) { return decode<Word>(b); }
inline Outcome<TakeoverReport> decode_takeover_report(const wire::Body& b) { return decode<TakeoverReport>(b); }

template <typename M>
bool send(int fd, const M& m, const wire::Deadline& d) {
    return wire::send_msg(fd, encode(m), d);
}

// Equality, field by field (decode(encode(x)) == x is a fuzz property).
template <typename M, typename = decltype(std::declval<const M&>().tie())>
bool operator==(const M& a, const M& b) {
    return a.tie() == b.tie();
}
// Ready's readings have no == of their own: compared as they travel.
bool operator==(const Ready& a, const Ready& b);

}  // namespace mn::check::msg
