// SPDX-License-Identifier: Apache-2.0
#include "helper/check/control/doorway.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include "build_config.h"
#include "lib/util/crypto.h"
#include "lib/util/text.h"

namespace mn::check {

uint32_t spoken_protocol() {
#ifdef MN_TEST_HOOKS
    static const uint32_t v = [] {
        const char* e = std::getenv("MN_PREFLIGHT_PROTOCOL");
        return e && *e ? static_cast<uint32_t>(std::strtoul(e, nullptr, 10)) : msg::kProtocol;
    }();
    return v;
#else
    return msg::kProtocol;
#endif
}

std::string release() { return PACKAGE_VERSION; }

namespace {

constexpr char kAcceptor = 'a', kConnector = 'c';

// Purposes are the program's own words: "control", "takeover", "data:ring".
bool plain_word(const std::string& s) {
    if (s.empty() || s.size() > 64) return false;
    return std::all_of(s.begin(), s.end(), [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == ':' || ch == '_' || ch == '-';
    });
}

// The acceptor's reasons, in the connector's words.
std::string refusal_text(const std::string& reason) {
    if (reason == "secret")
        return "it does not take this rank's proof of the step secret (MN_NCCL_STEP_SECRET differs: every task of "
               "one srun step has the same)";
    if (reason == "unwanted") return "this rank came already, or is not one it waits for";
    if (reason == "protocol") return "it speaks another mn-preflight protocol";
    return "for no reason it gave";
}

// Tells a caller it is not admitted (a few bytes on a socket with room:
// never waits), so that it gives up rather than knocks again.
void refuse(int fd, const char* reason) {
    wire::send_msg(fd, msg::encode(msg::Refused{reason}), Deadline::in(0.05));
}

// One sealed frame from a connected peer (blocking, bounded by d): its
// body; *forged when it came whole but its seal did not open;
// *refused (with the reason in err) when the acceptor said so instead.
std::optional<wire::Body> recv_sealed(int fd, const Deadline& d, wire::Seal& seal, std::size_t limit,
                                      std::string* err, bool* forged, bool* refused) {
    *forged = *refused = false;
    std::string len(4, '\0');
    if (!wire::recv_all(fd, len.data(), 4, d)) {
        *err = "the connection closed or time ran out";
        return std::nullopt;
    }
    const uint32_t n = wire::length_of(len);
    if (n > limit + wire::Seal::kMacBytes) {
        *err = "a frame of " + std::to_string(n) + " bytes";
        *forged = true;
        return std::nullopt;
    }
    std::string frame(n, '\0');
    if (!wire::recv_all(fd, frame.data(), n, d)) {
        *err = "the connection closed or time ran out";
        return std::nullopt;
    }
    if (n >= wire::Seal::kMacBytes) {
        const std::string body = frame.substr(0, n - wire::Seal::kMacBytes);
        if (seal.open(body, frame.substr(n - wire::Seal::kMacBytes))) return body;
    }
    if (auto r = msg::decode<msg::Refused>(frame)) {
        *refused = true;
        *err = refusal_text(r->reason);
        return std::nullopt;
    }
    *forged = true;
    *err = "its answer does not carry the seal of this step's secret";
    return std::nullopt;
}

}  // namespace

std::string fresh_nonce() {
    const std::string raw = random_bytes(16);
    return to_hex(raw.data(), raw.size());
}

std::string channel_key(const std::string& secret, const std::string& purpose, uint32_t rank,
                        const std::string& nonce_a, const std::string& nonce_c, uint32_t protocol) {
    const Mac k = hmac_sha256(secret, "mn-preflight/" + std::to_string(protocol) + "\n" + purpose + "\n" +
                                          std::to_string(rank) + "\n" + nonce_a + "\n" + nonce_c);
    return std::string(reinterpret_cast<const char*>(k.data()), k.size());
}

// ---- strangers -------------------------------------------------------------------

void Strangers::add(const std::string& address, const std::string& what) {
    ++by_address[address][what];
    ++total;
}

void Strangers::merge(const Strangers& o) {
    for (const auto& [addr, whats] : o.by_address)
        for (const auto& [what, n] : whats) by_address[addr][what] += n;
    total += o.total;
}

std::string Strangers::summary() const {
    if (total == 0) return "";
    std::vector<std::pair<unsigned, std::string>> busiest;
    for (const auto& [addr, whats] : by_address) {
        unsigned n = 0;
        for (const auto& w : whats) n += w.second;
        busiest.push_back({n, addr});
    }
    std::sort(busiest.begin(), busiest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string out;
    const std::size_t shown = std::min<std::size_t>(busiest.size(), 4);
    for (std::size_t i = 0; i < shown; ++i) {
        const auto& [n, addr] = busiest[i];
        std::string whats;
        for (const auto& [what, k] : by_address.at(addr))
            whats += (whats.empty() ? "" : ", ") + std::to_string(k) + " " + what;
        out += (out.empty() ? "" : "; ") + std::to_string(n) + (n == 1 ? " connection from " : " connections from ") +
               addr + " (" + whats + ")";
    }
    if (busiest.size() > shown) out += "; and " + std::to_string(busiest.size() - shown) + " more addresses";
    return out;
}

std::string Strangers::brief() const {
    std::string s = summary();
    if (s.size() > msg::kStrangersText) {
        s.resize(msg::kStrangersText - 4);
        s += " ...";
    }
    return s;
}

// ---- the acceptor ----------------------------------------------------------------

std::shared_ptr<wire::Seal> acceptor_seal(const std::string& secret, const msg::Knock& k, const std::string& nonce_a) {
    return std::make_shared<wire::Seal>(channel_key(secret, k.purpose, k.rank, nonce_a, k.nonce, k.version), kAcceptor,
                                        kConnector);
}

std::shared_ptr<wire::Seal> connector_seal(const std::string& secret, const msg::Knock& k, const std::string& nonce_a) {
    return std::make_shared<wire::Seal>(channel_key(secret, k.purpose, k.rank, nonce_a, k.nonce, k.version), kConnector,
                                        kAcceptor);
}

std::string knock_bytes(const msg::Knock& k, const std::optional<wire::Body>& first, wire::Seal& seal) {
    // In order: each frame takes the seal's next sequence number.
    std::string out = wire::frame(msg::encode(k), &seal);
    if (first) out += wire::frame(*first, &seal);
    return out;
}

KnockReading read_knock(const std::string& buf, const std::string& nonce_a, const std::string& secret, bool first) {
    KnockReading r;
    auto stranger = [&](std::string what, const char* refusal = nullptr) {
        r.state = KnockReading::State::Stranger;
        r.what = std::move(what);
        r.refusal = refusal;
        return r;
    };
    if (buf.size() < 4) return r;
    const uint32_t n = wire::length_of(buf);
    // Protocol 1 answered its challenge with an unsealed hello of any size.
    if (n > kFirstLimit) return stranger("sent what is not mn-preflight's");
    if (buf.size() < 4 + std::size_t(n)) return r;
    // Protocol 1's hello: key=value lines, "op=hello" among them.
    const std::string whole = "\n" + buf.substr(4, n);
    if (whole.find("\nop=hello\n") != std::string::npos)
        return stranger("spoke an older mn-preflight protocol (1)", "protocol");
    if (n > kKnockLimit + wire::Seal::kMacBytes || n < wire::Seal::kMacBytes)
        return stranger("sent what is not mn-preflight's");
    // Its key comes from its own (still unproven) words.
    const std::string body = buf.substr(4, n - wire::Seal::kMacBytes);
    auto k = msg::decode<msg::Knock>(body);
    if (!k || !plain_word(k->purpose) || k->nonce.size() != 32) return stranger("sent what is not mn-preflight's");
    auto seal = acceptor_seal(secret, k.value(), nonce_a);
    if (k->version != spoken_protocol()) {
        const std::string spoke = "mn-preflight protocol " + std::to_string(k->version) +
                                  (k->release ? " (mn-nccl " + *k->release + ")" : "");
        // Proven under its own protocol: a rank of this step on a node of
        // another release, to be named as such; else a stranger.
        if (!seal->open(body, buf.substr(4 + n - wire::Seal::kMacBytes, wire::Seal::kMacBytes)))
            return stranger("spoke " + spoke, "protocol");
        KnockReading s = stranger("rank " + std::to_string(k->rank) + " of this step spoke " + spoke, "protocol");
        s.skew = "rank " + std::to_string(k->rank) + " speaks " + spoke;
        s.knock = k.value();
        return s;
    }
    if (!seal->open(body, buf.substr(4 + n - wire::Seal::kMacBytes, wire::Seal::kMacBytes)))
        return stranger("did not prove the step secret", "secret");
    r.knock = k.value();
    std::size_t used = 4 + n;
    if (first) {
        std::size_t more = 0;
        auto m = wire::take_frame(buf.substr(used), kFirstLimit, seal.get(), &more);
        // It proved the secret: a first message that does not open is a fault of ours, not a stranger's.
        if (!m) return stranger("proved the step secret, but its first message was refused (" + m.problem().what + ")");
        if (!m.value()) return r;
        r.first = std::move(*m.value());
        used += more;
    }
    if (buf.size() != used) return stranger("sent more than its knock before its welcome");
    r.state = KnockReading::State::Proven;
    r.seal = std::move(seal);
    return r;
}

struct Doorway::Caller {
    Fd fd;
    std::string peer, nonce, buf;
    Deadline by;
};

std::size_t waiting_cap() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kMaxWaiting;
    return std::clamp<std::size_t>(lim.rlim_cur / 4, kFewestWaiting, kMaxWaiting);
}

Doorway::Doorway(int listen_fd, std::string secret, uint32_t rank, bool first, std::size_t cap)
    : listen_fd_(listen_fd), secret_(std::move(secret)), rank_(rank), first_(first), cap_(std::max<std::size_t>(cap, 1)) {}

Doorway::~Doorway() = default;

void Doorway::forget(const Caller& c) {
    auto it = by_address_.find(c.peer);
    if (it != by_address_.end() && --it->second == 0) by_address_.erase(it);
}

void Doorway::cut_one() {
    if (waiting_.empty()) return;
    const auto busiest = std::max_element(by_address_.begin(), by_address_.end(),
                                          [](const auto& a, const auto& b) { return a.second < b.second; });
    auto it = waiting_.begin();
    if (busiest != by_address_.end())
        it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& c) { return c->peer == busiest->first; });
    if (it == waiting_.end()) it = waiting_.begin();
    strangers_.add((*it)->peer, "cut off for a newer connection while " + std::to_string(cap_) +
                                    " waited at once");
    forget(**it);
    waiting_.erase(it);
}

void Doorway::accept_new() {
    std::string peer;
    // The whole backlog, bounded per turn so that those waiting are read too.
    for (std::size_t taken = 0; taken < 2 * cap_; ++taken) {
        if (waiting_.size() >= cap_) cut_one();
        auto c = wire::accept_one(listen_fd_, Deadline::in(0), &peer);
        if (!c) {
            // Out of open files with callers waiting: one of them makes room.
            if (!c.problem().fix.empty() && !waiting_.empty()) {
                cut_one();
                continue;
            }
            if (!c.problem().fix.empty() && trouble_.empty()) trouble_ = c.problem().text();
            break;
        }
        ++accepted_;
        auto k = std::make_unique<Caller>();
        k->fd = std::move(c.value());
        k->peer = peer;
        k->nonce = fresh_nonce();
        k->by = Deadline::in(kKnockWait);
        // A fresh socket's buffer takes a few bytes at once: this never waits.
        if (!msg::send(k->fd.get(), msg::Challenge{spoken_protocol(), k->nonce, release()}, Deadline::in(0.05))) {
            strangers_.add(peer, "closed at once");
            continue;
        }
        ++by_address_[peer];
        waiting_.push_back(std::move(k));
    }
}

void Doorway::skewed(const KnockReading& k, const std::string& peer) {
    if (std::find(skewed_ranks_.begin(), skewed_ranks_.end(), k.knock.rank) != skewed_ranks_.end()) return;
    skewed_ranks_.push_back(k.knock.rank);
    skewed_.push_back(k.skew + " (from " + peer + ")");
}

std::optional<Guest> Doorway::read_caller(Caller& c, const Want& want, bool* done) {
    *done = true;
    const std::size_t most =
        4 + kKnockLimit + wire::Seal::kMacBytes + (first_ ? 4 + kFirstLimit + wire::Seal::kMacBytes : 0);
    char chunk[16384];
    while (c.buf.size() < most) {
        const ssize_t k = ::recv(c.fd.get(), chunk, std::min(sizeof chunk, most - c.buf.size()), 0);
        if (k > 0) {
            c.buf.append(chunk, static_cast<std::size_t>(k));
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        // A rank of another release sends its knock and leaves at once:
        // what it said is read before its leaving is counted.
        if (!c.buf.empty()) {
            KnockReading last = read_knock(c.buf, c.nonce, secret_, first_);
            if (last.state == KnockReading::State::Stranger) {
                if (!last.skew.empty()) skewed(last, c.peer);
                else strangers_.add(c.peer, last.what);
                return std::nullopt;
            }
        }
        strangers_.add(c.peer, c.buf.empty() ? "closed without a word" : "closed in the middle of its knock");
        return std::nullopt;
    }
    KnockReading k = read_knock(c.buf, c.nonce, secret_, first_);
    if (k.state == KnockReading::State::More) {
        *done = false;
        return std::nullopt;
    }
    if (k.state == KnockReading::State::Stranger) {
        if (!k.skew.empty()) skewed(k, c.peer);
        else strangers_.add(c.peer, k.what);
        if (k.refusal) refuse(c.fd.get(), k.refusal);
        return std::nullopt;
    }
    Guest g;
    g.first = std::move(k.first);
    const std::string who = "rank " + std::to_string(k.knock.rank) + " for " + k.knock.purpose + " from " + c.peer;
    if (!want(k.knock.purpose, k.knock.rank)) {
        unwanted_.push_back(who);
        refuse(c.fd.get(), "unwanted");
        return std::nullopt;
    }
    if (!wire::send_msg(c.fd.get(), msg::encode(msg::Welcome{rank_}), Deadline::in(0.5), k.seal.get())) {
        unwanted_.push_back(who + ": it left before its welcome");
        return std::nullopt;
    }
    g.fd = std::move(c.fd);
    g.seal = std::move(k.seal);
    g.purpose = k.knock.purpose;
    g.peer = c.peer;
    g.rank = k.knock.rank;
    return g;
}

void Doorway::close_waiting() {
    for (const auto& c : waiting_)
        strangers_.add(c->peer, c->buf.empty() ? "held a connection without a word" : "had not finished its knock");
    waiting_.clear();
    by_address_.clear();
}

std::vector<Guest> Doorway::turn(double wait, const Want& want) {
    std::vector<pollfd> p{{listen_fd_, POLLIN, 0}};
    for (const auto& c : waiting_) p.push_back({c->fd.get(), POLLIN, 0});
    // Wake for the first caller's deadline too.
    for (const auto& c : waiting_) wait = std::min(wait, std::max(0.0, c->by.left()));
    ::poll(p.data(), p.size(), static_cast<int>(std::max(0.0, wait) * 1000));
    std::vector<Guest> guests;
    std::vector<std::unique_ptr<Caller>> still;
    for (std::size_t i = 0; i < waiting_.size(); ++i) {
        Caller& c = *waiting_[i];
        bool done = false;
        if (p[i + 1].revents & (POLLIN | POLLERR | POLLHUP)) {
            if (auto g = read_caller(c, want, &done)) guests.push_back(std::move(*g));
        }
        if (!done && c.by.passed()) {
            strangers_.add(c.peer, c.buf.empty() ? "sent nothing in time" : "did not finish its knock in time");
            done = true;
        }
        if (done) {
            forget(c);
            continue;
        }
        still.push_back(std::move(waiting_[i]));
    }
    waiting_ = std::move(still);
    accept_new();
    return guests;
}

// ---- the connector ---------------------------------------------------------------

Outcome<Channel> knock(const std::string& addr, uint16_t port, const std::string& purpose, uint32_t rank,
                       std::optional<uint32_t> acceptor, const std::optional<wire::Body>& first,
                       const std::string& secret, const Deadline& d, std::optional<Deadline> listen_by,
                       bool* unheard, bool* other_release) {
    const std::string where = !addr.empty() && addr[0] == '@' ? "the local socket " + addr : addr + ":" + std::to_string(port);
    std::string last = "nobody answered";
    bool heard = false;
    while (!d.passed()) {
        const Deadline by = !heard && listen_by && listen_by->at < d.at ? *listen_by : d;
        auto fd = wire::connect_to(addr, port, by);
        if (!fd) {
            if (unheard) *unheard = !heard;
            return Problem{where + " did not answer (" + fd.problem().what + ")", ""};
        }
        heard = true;
        std::string err;
        auto cf = wire::recv_msg(fd->get(), d, &err, nullptr, kKnockLimit);
        if (!cf) {
            // Cut off in a flood of strangers, or the acceptor is not up yet: again.
            last = where + " closed the connection before its challenge (" + err + ")";
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        auto ch = msg::decode<msg::Challenge>(*cf);
        if (!ch)
            return Problem{"the process at " + where + " did not send mn-preflight's challenge: another process holds "
                           "the port",
                           "run the check as a new step (its MASTER_PORT differs) and find the process on the port"};
        if (ch->version != spoken_protocol()) {
            // Knocks all the same, proven under this build's protocol, so
            // that an acceptor that can tell names this rank's release.
            const msg::Knock k{spoken_protocol(), purpose, rank, fresh_nonce(), release()};
            auto seal = connector_seal(secret, k, ch->nonce);
            const std::string bytes = knock_bytes(k, std::nullopt, *seal);
            wire::send_all(fd->get(), bytes.data(), bytes.size(), Deadline::in(0.5));
            if (other_release) *other_release = true;
            return Problem{"the mn-preflight at " + where + " speaks protocol " + std::to_string(ch->version) +
                               (ch->release.empty() ? " (mn-nccl before 0.2.0)" : " (mn-nccl " + ch->release + ")") +
                               ", this one protocol " + std::to_string(spoken_protocol()) + " (mn-nccl " + release() +
                               "): releases further apart than one protocol do not check together",
                           "install one mn-nccl release on every node of the step (and in every container image); "
                           "upgrade the remaining nodes (README: Upgrading)"};
        }
        const msg::Knock k{spoken_protocol(), purpose, rank, fresh_nonce(), release()};
        auto seal = connector_seal(secret, k, ch->nonce);
        const std::string bytes = knock_bytes(k, first, *seal);
        if (!wire::send_all(fd->get(), bytes.data(), bytes.size(), d)) {
            last = where + " closed the connection during the handshake";
            continue;
        }
        bool forged = false, refused = false;
        auto wf = recv_sealed(fd->get(), d, *seal, kKnockLimit, &err, &forged, &refused);
        if (!wf && refused) return Problem{where + " refused this rank: " + err, ""};
        if (!wf && forged)
            return Problem{"the process at " + where + " does not prove this step's secret (" + err +
                               "): another process holds the port",
                           "run the check as a new step (its MASTER_PORT differs) and find the process on the port"};
        if (!wf) {
            last = where + " refused this rank or cut it off (" + err + ")";
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        auto w = msg::decode<msg::Welcome>(*wf);
        if (!w || (acceptor && w->rank != *acceptor))
            return Problem{"the rank at " + where + " is not the one this rank meant to reach", ""};
        return Channel{std::move(fd.value()), std::move(seal)};
    }
    return Problem{last, ""};
}

}  // namespace mn::check
