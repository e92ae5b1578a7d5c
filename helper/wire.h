// SPDX-License-Identifier: Apache-2.0
// mn-preflight's TCP plumbing: listening, connecting and framed messages,
// every call bounded by a deadline so that nothing can hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <poll.h>

#include "lib/util/outcome.h"

namespace mn::wire {

using Clock = std::chrono::steady_clock;

struct Deadline {
    Clock::time_point at;
    static Deadline in(double seconds) {
        return {Clock::now() + std::chrono::microseconds(static_cast<long long>(seconds * 1e6))};
    }
    double left() const { return std::chrono::duration<double>(at - Clock::now()).count(); }
    bool passed() const { return Clock::now() >= at; }
    int poll_ms() const;  // for poll(): at least 0, at most 1000
};

// A file descriptor that closes itself.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd();
    int get() const { return fd_; }
    int release() {
        int f = fd_;
        fd_ = -1;
        return f;
    }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// Listens on addr:port (addr "" = every address, port 0 = any); *bound gets
// the port.
Outcome<Fd> listen_tcp(const std::string& addr, uint16_t port, uint16_t* bound);
// Listens on the abstract local socket `name` (Linux's abstract namespace:
// no file, gone with the socket; one per network namespace). A node's ranks
// reach their node's leader there (helper/check/node.cc).
Outcome<Fd> listen_local(const std::string& name);
// Accepts one connection; *peer gets its address (a local socket's peer:
// "local uid N").
Outcome<Fd> accept_one(int listen_fd, const Deadline& d, std::string* peer);
// Whether a refused or lost connection is tried again until the deadline
// (a peer that is not listening yet) or not (a service that may be absent,
// as NCCL's RAS in a step without NCCL).
enum class Retry { UntilDeadline, Never };
// Connects, retrying while the peer is not listening yet.
Outcome<Fd> connect_tcp(const std::string& addr, uint16_t port, const Deadline& d,
                        Retry retry = Retry::UntilDeadline);
// addr "@NAME": the abstract local socket NAME (port unused), retried as
// connect_tcp is while nobody listens yet; else connect_tcp.
Outcome<Fd> connect_to(const std::string& addr, uint16_t port, const Deadline& d);

bool send_all(int fd, const void* data, std::size_t n, const Deadline& d);
bool recv_all(int fd, void* data, std::size_t n, const Deadline& d);

// Sends `send` on send_fd while receiving `recv_n` bytes on recv_fd (they
// may be the same socket): the full-duplex step of a ring.
bool exchange(int send_fd, const void* send, std::size_t send_n, int recv_fd, void* recv, std::size_t recv_n,
              const Deadline& d, std::string* err);

// Messages: a 4-byte big-endian length, then the body, the bytes
// helper/check/control/messages.h encodes (CBOR) and decodes.
using Body = std::string;

// A connection's seal, from its handshake (helper/check/control/doorway.h): every
// message on it ends with HMAC-SHA-256(key, direction, sequence number,
// body), so a message is valid on this connection only, in this direction,
// once and in order; a replayed, reordered or forged one is refused.
// Sending and receiving may be on two threads (each counter has one user).
class Seal {
public:
    static constexpr std::size_t kMacBytes = 32;
    // `out` and `in`: this end's direction letters ('a' the acceptor's
    // messages, 'c' the connector's).
    Seal(std::string key, char out, char in) : key_(std::move(key)), out_(out), in_(in) {}
    std::string close(const std::string& body);                     // the MAC to send after body
    bool open(const std::string& body, const std::string& mac);     // whether mac is the next one in
private:
    std::string mac(char dir, uint64_t seq, const std::string& body) const;
    std::string key_;
    char out_, in_;
    uint64_t sent_ = 0, received_ = 0;
};

// The largest message mn-preflight sends (a roster or a report with many
// problems stays far below); a stranger's length above it is refused
// before anything is allocated.
constexpr std::size_t kMaxMessage = 1u << 20;

// With a seal, the frame is length, body, MAC (the length counts both).
std::string frame(const Body& body, Seal* seal = nullptr);  // the bytes send_msg sends (sealing advances seal)
// The length at the front of a frame (buf holds at least 4 bytes).
uint32_t length_of(const std::string& buf);
bool send_msg(int fd, const Body& body, const Deadline& d, Seal* seal = nullptr);
std::optional<Body> recv_msg(int fd, const Deadline& d, std::string* err, Seal* seal = nullptr,
                             std::size_t limit = kMaxMessage);
// One whole frame at the front of buf (its body, MAC removed and checked
// when sealed): none while more bytes are needed; a problem when the
// length is above `limit` or the seal does not open. `used` gets the
// frame's size.
Outcome<std::optional<Body>> take_frame(const std::string& buf, std::size_t limit, Seal* seal, std::size_t* used);

// Messages from many sockets at once, in the order they come: rank 0
// hears whichever rank speaks first, so one rank's failure is not queued
// behind another rank that is still busy (or stuck). One thread reads;
// wake() may be called from any thread.
class Mux {
public:
    Mux();
    ~Mux();
    Mux(const Mux&) = delete;
    Mux& operator=(const Mux&) = delete;
    // With a seal, every message must open under it; one that does not
    // ends the source (its event says so).
    void add(std::size_t key, int fd, Seal* seal = nullptr);
    struct Event {
        std::size_t key = 0;
        std::optional<Body> msg;  // none: the socket closed or broke (error says how), once
        std::string error;
    };
    // The next whole message (or a socket's end); none at the deadline or
    // when woken. Once the deadline has passed it still reads what the
    // sockets hold, without waiting.
    std::optional<Event> next(const Deadline& d);
    // Makes a next() under way (or the next one) return at once.
    void wake();
    // Whether `key` said something not taken yet (bytes in its socket or
    // here): a reader that fell behind (8,192 ranks beating on a busy host)
    // must not take a rank whose words wait unread for a silent one.
    bool pending(std::size_t key) const;

private:
    struct Source {
        int fd = -1;
        std::string buf;
        bool closed = false;
        Seal* seal = nullptr;
    };
    std::map<std::size_t, Source> src_;
    // Whole messages (and ends) already read, in order: each wait reads
    // every socket that has data, so a message costs O(1).
    std::deque<Event> ready_;
    // epoll, not poll: a wait costs what is ready, not every rank's socket
    // (rank 0 hears 2 beats per rank per second; doc/scale.md).
    int ep_ = -1;
    int wake_[2] = {-1, -1};
    std::optional<Event> take(std::size_t key, Source& s);
    void read_one(std::size_t key);
};

// This process's control-plane traffic, counted where messages are framed
// (send_msg, recv_msg, Mux; data transfers are not counted): rank 0's
// share is what doc/scale.md models and bench-control-plane.sh measures.
struct Traffic {
    uint64_t messages_sent = 0, messages_received = 0;
    uint64_t bytes_sent = 0, bytes_received = 0;
};
Traffic traffic();

// What TCP saw of a connection's path so far (TCP_INFO): segments it sent
// again, and its smoothed round trip. A throttled or lossy link shows in
// both; a peer process slow to read (the scheduler's) in neither, since
// the kernel acknowledges for it. None when the kernel does not say.
struct PathSeen {
    uint32_t retrans = 0;
    double rtt_ms = 0;
};
std::optional<PathSeen> path_seen(int fd);

}  // namespace mn::wire
