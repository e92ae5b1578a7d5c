// SPDX-License-Identifier: Apache-2.0
// Who may come in. Every connection of the check (a rank to rank 0, a rank
// to a standby, a data connection between two ranks) opens with the same
// handshake, in which each side proves the step secret to the other:
//   acceptor  -> Challenge{protocol, nonce_a}               plain text: every build reads it
//   connector -> Knock{protocol, purpose, rank, nonce_c}    sealed: its proof
//                and, where the purpose has one, its first message (sealed)
//   acceptor  -> Welcome{its rank}                          sealed: its proof
// The seal's key is HMAC(step secret, purpose, the connector's rank and both
// nonces): new for each connection, so no proof made for one use or one
// connection is worth anything on another. Every later message on a
// control connection is sealed under it (wire::Seal).
//
// The acceptor reads whoever connects without blocking, in one poll loop:
// a short deadline, a small frame limit and a cap on how many wait at once.
// Each turn it takes the kernel's whole backlog (a rank's connection never
// waits behind a flood there); when the cap is reached the oldest caller of
// the address that holds the most places is cut off for the newcomer, as
// OpenSSH's MaxStartups drops early: a flood from one address cuts only
// its own callers, and a rank that shares its address answers its challenge
// in milliseconds, long before thousands of newer connections push it out
// (and knocks again if they do). What strangers did is counted by address,
// for one summary line; their bytes are never quoted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "helper/check/control/messages.h"
#include "helper/wire.h"
#include "lib/util/outcome.h"

namespace mn::check {

using wire::Deadline;
using wire::Fd;

// A handshake's end on the connector's side.
struct Channel {
    Fd fd;
    std::shared_ptr<wire::Seal> seal;
};

// A connection that proved the step secret and was wanted.
struct Guest {
    Fd fd;
    std::shared_ptr<wire::Seal> seal;
    std::string purpose, peer;
    uint32_t rank = 0;
    wire::Body first;  // its first message (a doorway that waits for one)
};

// What strangers did at one doorway, by address.
struct Strangers {
    std::map<std::string, std::map<std::string, unsigned>> by_address;  // address -> what it did -> how often
    unsigned total = 0;
    void add(const std::string& address, const std::string& what);
    void merge(const Strangers& o);
    // One line: "3000 connections from 127.0.0.1 (2990 sent nothing in
    // time, 10 did not prove the step secret)", the busiest addresses
    // first; "" when none came.
    std::string summary() const;
    // The summary within msg::kStrangersText bytes, as a rank's report carries it.
    std::string brief() const;
};

// Limits, each chosen far from what a rank needs.
constexpr std::size_t kKnockLimit = 1024;        // a knock's body, bytes
constexpr std::size_t kFirstLimit = 256 * 1024;  // a first message (a hello with its problems), bytes
constexpr double kKnockWait = 2.0;               // seconds from accept to the whole knock
constexpr std::size_t kMaxWaiting = 4096;        // connections waiting for their knock at once, at most
constexpr std::size_t kFewestWaiting = 64;       // and at least, whatever the open-file limit

// The cap for this process: a quarter of its open-file limit (the rest is
// the step's lines and the program's own), within the two above.
std::size_t waiting_cap();

struct KnockReading;

class Doorway {
public:
    // rank: this rank's (its Welcome says it); first: whether the
    // connector's first message comes with its knock and is read here.
    // cap: callers waiting for their knock at once (waiting_cap()).
    Doorway(int listen_fd, std::string secret, uint32_t rank, bool first, std::size_t cap = waiting_cap());
    ~Doorway();
    Doorway(const Doorway&) = delete;
    Doorway& operator=(const Doorway&) = delete;
    // Whether a proven (purpose, rank) is one this acceptor waits for now.
    using Want = std::function<bool(const std::string& purpose, uint32_t rank)>;
    // One turn: waits at most `wait` seconds for something to happen, then
    // accepts, challenges and reads what came. The guests it admitted,
    // each sent its Welcome.
    std::vector<Guest> turn(double wait, const Want& want);
    const Strangers& strangers() const { return strangers_; }
    // The acceptor has whom it waited for: the callers still waiting
    // (every rank it wanted came, so none is one) are strangers that held
    // a connection, counted as such and closed. A doorway left without
    // this closes them uncounted.
    void close_waiting();
    // Connections that proved the secret but were not wanted (a rank that
    // came twice, a purpose not awaited): "rank 3 for data:ring from ADDR".
    const std::vector<std::string>& unwanted() const { return unwanted_; }
    // Ranks of the step that proved the secret under another protocol (a
    // node of another release): KnockReading::skew, with the address.
    const std::vector<std::string>& skewed() const { return skewed_; }
    const std::vector<uint32_t>& skewed_ranks() const { return skewed_ranks_; }
    uint32_t accepted() const { return accepted_; }
    // Why accepting failed, once it did for want of a resource (open files:
    // nobody more can come in); "" otherwise.
    const std::string& trouble() const { return trouble_; }

private:
    struct Caller;
    // Takes the backlog, making room by cut_one() once the cap is reached.
    void accept_new();
    // Cuts off the oldest caller of the address with the most waiting.
    void cut_one();
    void forget(const Caller& c);
    // Reads what a caller sent; a guest once its knock (and first message)
    // are whole and wanted; none while it owes more or once it is refused
    // (then *done).
    std::optional<Guest> read_caller(Caller& c, const Want& want, bool* done);
    int listen_fd_;
    std::string secret_;
    uint32_t rank_;
    bool first_;
    std::size_t cap_;
    std::vector<std::unique_ptr<Caller>> waiting_;  // in the order they came
    std::map<std::string, std::size_t> by_address_;  // waiting callers per address
    Strangers strangers_;
    std::vector<std::string> unwanted_;
    std::vector<std::string> skewed_;
    std::vector<uint32_t> skewed_ranks_;
    void skewed(const KnockReading& k, const std::string& peer);
    uint32_t accepted_ = 0;
    std::string trouble_;
};

// The connector's side: connects (retrying while nobody listens yet or the
// acceptor cut it off for a flood), answers the challenge, sends `first`
// and waits for the Welcome; `acceptor`: the rank that must welcome it
// (none: any rank of the step). A problem says what went wrong: nobody
// answered, another protocol (both named), or a process that does not prove
// the step secret (another process holds the port). `listen_by`: give up
// then if no connection was ever taken (*unheard set), not at d.
// *other_release: the problem is the acceptor's protocol (a configuration
// error, exit 2, not a time-out).
Outcome<Channel> knock(const std::string& addr, uint16_t port, const std::string& purpose, uint32_t rank,
                       std::optional<uint32_t> acceptor, const std::optional<wire::Body>& first,
                       const std::string& secret, const Deadline& d, std::optional<Deadline> listen_by = std::nullopt,
                       bool* unheard = nullptr, bool* other_release = nullptr);

// The acceptor's reading of what a caller sent so far (pure: the doorway,
// the fuzz target and the tests share it): more to come, a stranger (what
// it did, in Strangers' words, and the reason the acceptor tells it, if
// any), or proven, with its knock, the connection's seal (past the knock
// and the first message) and that first message.
struct KnockReading {
    enum class State { More, Stranger, Proven };
    State state = State::More;
    std::string what;
    const char* refusal = nullptr;  // "secret" or "protocol", told to the caller
    // A rank of the step that speaks another protocol, proven under its own:
    // "rank 3 speaks mn-preflight protocol 5 (mn-nccl 0.1.0)" (and its
    // knock); "" otherwise. Not a stranger: it proved the step secret.
    std::string skew;
    msg::Knock knock;
    std::shared_ptr<wire::Seal> seal;
    wire::Body first;
};
KnockReading read_knock(const std::string& buf, const std::string& nonce_a, const std::string& secret, bool first);
// The connector's knock (and first message) as they travel, sealed under `seal`.
std::string knock_bytes(const msg::Knock& k, const std::optional<wire::Body>& first, wire::Seal& seal);
// The acceptor's seal and the connector's, for a knock under nonce_a.
std::shared_ptr<wire::Seal> acceptor_seal(const std::string& secret, const msg::Knock& k, const std::string& nonce_a);
std::shared_ptr<wire::Seal> connector_seal(const std::string& secret, const msg::Knock& k, const std::string& nonce_a);

// The seal's key for one connection (both ends derive it), under a
// protocol's number: a knock of another protocol is still proven under its
// own, so that the acceptor can name a rank of another release.
std::string channel_key(const std::string& secret, const std::string& purpose, uint32_t rank,
                        const std::string& nonce_a, const std::string& nonce_c, uint32_t protocol = msg::kProtocol);

// The protocol this build speaks (msg::kProtocol; a build with test hooks
// speaks MN_PREFLIGHT_PROTOCOL's instead, to play another release), and its
// release ("0.2.0"), said in its challenge and its knock.
uint32_t spoken_protocol();
std::string release();

// A nonce: 16 random bytes, as hex.
std::string fresh_nonce();

}  // namespace mn::check
