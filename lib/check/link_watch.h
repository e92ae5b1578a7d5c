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
// phys_state, "4: ACTIVE", "5: LinkUp", read with parse_state).
struct PortReading {
    std::string name;  // "mlx5_0:1"
    std::string state, phys_state;  // "ACTIVE", "LinkUp"; "" when unreadable
};

struct PortStall {
    PortReading port;
    double seconds = 0;  // how long it has been out of ACTIVE, when named
};

// "mlx5_3:1, an RDMA port of the step's, is DOWN (phys_state Disabled)
// for 5 s: NCCL's traffic over it has stopped".
std::string port_stall_words(const PortStall& s, const std::string& here);

// Looks at the step's RDMA ports, one sample after another: those ACTIVE
// at the first look are the step's (NCCL chose among them at its start);
// one of them out of ACTIVE at every look for `window` seconds is named
// (a port that could not be read is not taken for down).
class PortWatch {
public:
    explicit PortWatch(double window) : window_(window) {}
    std::optional<PortStall> look(double now, const std::vector<PortReading>& ports);

private:
    double window_;
    bool first_ = true;
    std::map<std::string, double> watched_;  // the step's ports -> out of ACTIVE since (-1: ACTIVE)
};

}  // namespace mn
