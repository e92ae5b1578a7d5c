// SPDX-License-Identifier: Apache-2.0
// The control connections and their rhythm: a Line (one whole sealed
// message at a time, batched when many parts go at once), the heartbeats'
// period, when a peer has stopped answering, and the words for how a peer
// is gone. Knows no phase and no membership: the hub, the inbox and the
// speaker's relay (a node's speaker: its first task, which speaks to rank
// 0 for its node above kGatherAbove ranks) all keep time by it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "helper/check/control/messages.h"
#include "helper/wire.h"
#include "lib/util/text.h"

namespace mn::check {

using wire::Deadline;
using wire::Fd;

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
// 90 % of its messages and held the rendezvous past its budget). A rank
// that stops answering is still named within kSilence + 1 s.
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
// MN_PREFLIGHT_QUIET_ABOVE, so a test plays it with 64 ranks: hooks.cc.)
bool quiet_rendezvous(uint32_t world);
// A peer is lost after 3 s without a word: six beats in a row missing, so
// a busy node's scheduler, a dropped packet's retransmission (TCP waits at
// least 200 ms, then doubles) or a link full of the all-reduce's data
// never trips it; short enough that detection, a standby taking over
// (about a second) and the verdict fit in 5 s.
constexpr double kSilence = 3.0;

// Notices that this process itself was not running (SIGSTOP, a frozen VM):
// a loop's gap between two turns above `limit` seconds. The silence
// measured meanwhile is then its own, not its peers'.
class Pulse {
public:
    bool skipped(double limit = 1.0);
    double gap() const { return gap_; }  // the last turn's, in seconds

private:
    double last_ = now_s();
    double gap_ = 0;
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
    // Parts sent in as few messages M{parts} as keep each below a quarter
    // of wire::kMaxMessage, by `bytes(part)`'s estimate: a Relay down to a
    // node's speaker, a Relayed up from it. `parts` is left empty.
    template <typename M, typename Part, typename Bytes>
    void send_batched(std::vector<Part>& parts, const Deadline& d, Bytes bytes) {
        M batch;
        std::size_t size = 0;
        for (auto& p : parts) {
            size += bytes(p);
            batch.parts.push_back(std::move(p));
            if (size > wire::kMaxMessage / 4) {
                send(batch, d);
                batch = {};
                size = 0;
            }
        }
        if (!batch.parts.empty()) send(batch, d);
        parts.clear();
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

// A beat is due on `line` unless another message went out on it within
// half a period: that one told the other side as much. The longest gap
// between two messages is then 1.5 periods (1.5 s above 4,096 ranks),
// within kSilence; at 8,192 ranks it left out about a third of the beats
// (doc/scale.md).
inline bool due_beat(const Line& line, double now, double period) { return now - line.sent_at() >= period / 2; }
// The peers of `heard` (key: when each was last heard) that stopped
// answering: nothing for kSilence. One whose words wait unread in `mux`
// has not: this thread is behind, not the peer.
std::vector<uint32_t> stopped_answering(std::map<uint32_t, double>& heard, const wire::Mux& mux, double now);

// How a peer is gone: its line ended, it stopped answering (nothing heard
// from it for kSilence: a fault, named at once), or it sent what does not
// decode (its fault). Not RankState::Silent, which is a rank that never
// reported before a phase's deadline and is named only at the verdict.
enum class Gone { Ended, StoppedAnswering, Garbled };
// The detail of Gone::StoppedAnswering, the one place it is written:
// "nothing heard from it for 3 s".
std::string silence_words();
// The one wording of a loss, for the verdict and a standby's lines: why a
// peer is gone (`detail`: its line's error, the silence, what did not
// decode), in stage s ("stopped answering in the all-reduce (nothing
// heard from it for 3 s)").
std::string loss_words(Gone gone, const std::string& detail, msg::Stage s);

}  // namespace mn::check
