// SPDX-License-Identifier: Apache-2.0
// The hang watch's link rule (mn-preflight watch, helper/watch.cc), with no
// process of its own: a program's TCP connections as /proc/net/tcp shows
// them, and which link stopped carrying its data long enough to be named.
//
// Two signals, both the kernel's: the program has data a peer has not
// acknowledged (its send queue is not empty) and the kernel is
// retransmitting it (the retransmit timer, a count above 0) for the whole
// window; and either this node's interface that holds the connection is
// down (then this node's link is named), or it is up (then the peer's
// link, or the path to it, is). A stopped or busy peer still acknowledges
// (its kernel runs): the sender then probes a full window (timer 4, no
// retransmission) and nothing is named. A checkpoint pause sends nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

// One IPv4 TCP connection, from a line of /proc/net/tcp.
struct TcpSocket {
    std::string local, remote;  // dotted quads
    uint16_t local_port = 0, remote_port = 0;
    unsigned state = 0;         // 1: established
    uint64_t unacked = 0;       // tx_queue: bytes sent and not acknowledged (established sockets)
    unsigned timer = 0;         // 1: retransmit, 2: keepalive, 3: TIME_WAIT, 4: window probe
    unsigned retransmits = 0;   // the retransmissions since the last acknowledgement
    uint64_t inode = 0;         // the socket's inode: /proc/PID/fd/N -> socket:[inode]
};

// /proc/net/tcp's text (its header line first). A line that does not read
// as the kernel writes it is refused with its number: the caller names no
// link on a file it cannot read.
Outcome<std::vector<TcpSocket>> parse_proc_net_tcp(const std::string& text);

// An interface of this node with an IPv4 address (getifaddrs).
struct LocalInterface {
    std::string name;
    std::string addr;
    bool up = false;  // IFF_UP and IFF_RUNNING: configured up and its carrier there
};

// A link the program's data no longer crosses.
struct LinkStall {
    bool own = false;         // this node's interface is down; else the peer does not answer
    std::string ifname;       // this node's interface that holds the connection ("" when unknown)
    std::string peer;         // the address that does not acknowledge (own: the first one waiting)
    uint64_t unacked = 0;     // bytes waiting, over the program's connections to it
    unsigned retransmits = 0; // the most of any of them
    unsigned connections = 0; // the program's connections to it with data waiting
    double seconds = 0;       // how long it has been so, when named
};

// "node1 (10.250.0.11) does not acknowledge the program's data from node0:
// 96 bytes unacknowledged on 1 connection, 2 retransmissions, for 5 s;
// node0's eth0 is up: ..." or "node1's eth0 is down: ..."; `peer_name` is
// the peer's node where known. With no interface of this node's holding
// the connection (a program in a network namespace of its own), this
// side's link is not ruled out, and the words say so.
std::string link_stall_words(const LinkStall& s, const std::string& peer_name, const std::string& here);

// A peer's link is named only once the kernel has retransmitted the same
// data this many times without an acknowledgement between (the count
// starts again at each one): 1.4 s or more of silence at the shortest
// timeouts (0.2, 0.4, 0.8 s), which a slow or lossy link that still
// carries data does not reach at every look of a window.
constexpr unsigned kDownRetransmits = 3;

// Looks at a program's connections, one sample after another.
class LinkWatch {
public:
    explicit LinkWatch(double window) : window_(window) {}
    // The program's connections and this node's interfaces at time `now`
    // (seconds, a clock that only goes forward): the first link whose data
    // has waited, retransmitted (or behind an interface that is down), at
    // every look for `window` seconds or more. A link that carried data
    // again (its data gone, or fewer retransmissions than at the last look:
    // the count starts again at each acknowledgement), or that a look did
    // not show, starts again.
    std::optional<LinkStall> look(double now, const std::vector<TcpSocket>& mine,
                                  const std::vector<LocalInterface>& interfaces);

private:
    struct Waiting {
        double since;
        unsigned retransmits;  // at the last look: fewer now means an acknowledgement came between
    };
    double window_;
    std::map<std::string, Waiting> waiting_;  // "own IF" or "peer ADDR"
};

// ---- RDMA ports (InfiniBand, RoCE): the kernel's own word on the port ------

// Whether NCCL_IB_HCA, as NCCL reads it, gives NCCL this port: empty:
// every one; "^..." every one but those listed; "=..." those named
// exactly; else those whose name starts with an entry. An entry may name
// a port ("mlx5_0:1").
bool hca_selected(const std::string& nccl_ib_hca, const std::string& hca, unsigned port);

// A port as sysfs says it now (class/infiniband/HCA/ports/P/state and
// phys_state, "4: ACTIVE", "5: LinkUp", read with parse_state), and the
// kernel's counters of it, each absent where unreadable.
struct PortReading {
    std::string name;  // "mlx5_0:1"
    std::string state, phys_state;  // "ACTIVE", "LinkUp"; "" when unreadable
    // counters/port_rcv_packets: every packet the port took in, data and
    // acknowledgements alike, the step's and anyone's.
    std::optional<uint64_t> rcv_packets;
    // hw_counters/local_ack_timeout_err (mlx5, IB and RoCE): the times a
    // reliable connection's sender heard no acknowledgement in time and
    // sent again; the RDMA side of TCP's retransmissions.
    std::optional<uint64_t> ack_timeouts;
    // The sum of counters/symbol_error, link_error_recovery,
    // port_rcv_errors and local_link_integrity_errors: the physical link's
    // own errors, as the port counts them.
    std::optional<uint64_t> link_errors;
};

// A counter file's number; absent when it is not one, or when it stands
// at 2^32-1: a 32-bit counter of the IB spec's stops there and says nothing more.
std::optional<uint64_t> port_counter(const std::string& text);

// Why a port is named.
enum class PortFault {
    NotActive,  // out of ACTIVE
    Garbled,    // ACTIVE, took in nothing, its link's errors climbing: this node's link (host evidence)
    Silent,     // ACTIVE, took in nothing, its senders timing out: this port or its far side
};

struct PortStall {
    PortReading port;
    PortFault fault = PortFault::NotActive;
    double seconds = 0;  // how long it has been so, when named
    uint64_t ack_timeouts = 0, link_errors = 0;  // how many came over those seconds
};

// "mlx5_3:1, an RDMA port of the step's on node1, is DOWN (phys_state
// Disabled) for 5 s: NCCL's traffic over it has stopped", or for a port
// still ACTIVE what it took in and counted.
std::string port_stall_words(const PortStall& s, const std::string& here);

// A port that took in nothing is named only after this many of its link's
// errors, or of its senders' time-outs, over the window (NCCL's senders
// time out every 4 s at its default NCCL_IB_TIMEOUT 20, and give up after 7
// tries).
constexpr unsigned kSilentTimeouts = kDownRetransmits;

// Looks at the step's RDMA ports, one sample after another: those ACTIVE
// at the first look are the step's (NCCL chose among them at its start);
// one of them out of ACTIVE at every look for `window` seconds is named
// (a port that could not be read is not taken for down). One still ACTIVE
// that took in no packet at all for the window while its link's errors, or
// its senders' time-outs, climbed kSilentTimeouts times is named, but only
// while `program_waits` (this node's ranks hold in a collective, as their
// Flight Recorders say). A pause waits in no collective; a lossy link that
// still carries takes packets in; a port that someone else's traffic keeps
// busy is not silent.
class PortWatch {
public:
    explicit PortWatch(double window) : window_(window) {}
    std::optional<PortStall> look(double now, const std::vector<PortReading>& ports, bool program_waits = false);

private:
    struct Watched {
        double down_since = -1;       // out of ACTIVE since (-1: ACTIVE)
        double quiet_since = -1;      // took in nothing since (-1: unknown)
        uint64_t rcv = 0;                               // at quiet_since
        std::optional<uint64_t> timeouts, errors;        // at quiet_since, where readable
    };
    double window_;
    bool first_ = true;
    std::map<std::string, Watched> watched_;  // the step's ports
};

}  // namespace mn
