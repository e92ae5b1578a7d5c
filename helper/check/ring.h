// SPDX-License-Identifier: Apache-2.0
// The CPU path's data plane, shared by the collective and the pair tests:
// the ring's buffer and its pattern, the ring all-reduce over TCP (the
// node's ranks summed at its head first), and the data connections with
// their handshake and their strangers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "helper/check/control/doorway.h"
#include "helper/check/self.h"
#include "helper/wire.h"

namespace mn::check {

using wire::Deadline;
using wire::Fd;

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
// anyway, so, as NCCL does, they add their pieces at the node's head (its
// lowest rank; msg::Plan's `leader`) first; only the heads ring
// (2 (N - 1) steps), then each hands the sum back to its members.
struct Links {
    int head = -1;             // a member: the socket to its head (the rest unused)
    std::vector<int> members;  // a head: its members' sockets
    uint32_t pos = 0, n = 1;   // a head: its place in the heads' ring and their number
    int next = -1, prev = -1;  // the ring's sockets (one socket when n == 2)
    // Who is at the other end, for messages: the head, each member, the
    // ring's neighbours (ranks); none for a pair test.
    std::optional<uint32_t> head_rank, prev_rank, next_rank;
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
