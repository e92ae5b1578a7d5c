// SPDX-License-Identifier: Apache-2.0
// mn-preflight's messages: a 4-byte big-endian length, then the body
// (helper/wire), each message CBOR typed by helper/check/messages. The
// input is what a peer sends on the socket: rank 0 reads it before it
// knows who sent it.
//  - recv_msg takes a whole frame and nothing else, its body byte for byte;
//  - every message's decoder takes the frame's body without crashing;
//    one it refuses is refused with the message's name; one it takes holds
//    exactly the input's values (its encoding is the input's, field by
//    field: nothing cast, cut or guessed), re-encodes to the same bytes
//    every time and decodes to itself, and decode_from_lead/decode_from_rank
//    agree with it;
//  - each message built from the input's bytes (any strings, numbers,
//    lists, nested hellos) decodes from its encoding to itself:
//    decode(encode(x)) == x; only the heartbeat goes both ways.
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "tests/fuzz/fuzz.h"
#include "helper/check/control/messages.h"
#include "helper/wire.h"

namespace msg = mn::check::msg;
using nlohmann::json;

namespace {

void framing(const std::string& bytes) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
    FUZZ_CHECK(::send(sv[1], bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()),
               "socketpair send");
    ::close(sv[1]);
    std::string err;
    auto m = mn::wire::recv_msg(sv[0], mn::wire::Deadline::in(5), &err);
    ::close(sv[0]);
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();
    const uint32_t n = size < 4 ? 0 : uint32_t(data[0]) << 24 | uint32_t(data[1]) << 16 | uint32_t(data[2]) << 8 | data[3];
    const bool whole = size >= 4 && n <= (1u << 20) && size - 4 >= n;
    FUZZ_CHECK(m.has_value() == whole, "recv_msg %s a frame of %u bytes with %zu sent (%s)", m ? "took" : "refused", n,
               size, err.c_str());
    if (m) FUZZ_CHECK(*m == bytes.substr(4, n), "recv_msg changed the body");
    else FUZZ_CHECK(!err.empty(), "a refusal says why");
}

// Whether every value of `mine` stands in `theirs` (which may hold more
// keys; an optional it lacks, a field added within the protocol, is a null
// in `mine`: not said).
bool holds(const json& theirs, const json& mine) {
    if (mine.is_object()) {
        if (!theirs.is_object()) return false;
        for (const auto& [k, v] : mine.items())
            if (theirs.contains(k) ? !holds(theirs.at(k), v) : !v.is_null()) return false;
        return true;
    }
    if (mine.is_array()) {
        if (!theirs.is_array() || theirs.size() != mine.size()) return false;
        for (std::size_t i = 0; i < mine.size(); ++i)
            if (!holds(theirs.at(i), mine.at(i))) return false;
        return true;
    }
    return mine == theirs && mine.type() == theirs.type();
}

// A decoder on an arbitrary body: no crash; what it takes is the body's.
template <typename M>
void decoder(const std::string& body, const char* name) {
    auto m = msg::decode<M>(body);
    if (!m) {
        FUZZ_CHECK(m.problem().what.rfind(std::string(name) + ": ", 0) == 0, "%s refused without its name: %s", name,
                   m.problem().what.c_str());
        return;
    }
    const std::string again = msg::encode(m.value());
    auto back = msg::decode<M>(again);
    FUZZ_CHECK(back && back.value() == m.value(), "%s: a decoded message does not survive encode/decode", name);
    FUZZ_CHECK(msg::encode(back.value()) == again, "%s: encoding is not canonical", name);
    if constexpr (!std::is_same_v<M, msg::Challenge>)
        FUZZ_CHECK(holds(json::from_cbor(body), json::from_cbor(again)), "%s: taken with a value the body does not hold",
                   name);
}

void every_decoder(const std::string& body) {
    decoder<msg::Challenge>(body, "Challenge");
    decoder<msg::Hello>(body, "Hello");
    decoder<msg::Prepare>(body, "Prepare");
    decoder<msg::Plan>(body, "Plan");
    decoder<msg::PairCue>(body, "PairCue");
    decoder<msg::Word>(body, "Word");
    decoder<msg::Ready>(body, "Ready");
    decoder<msg::Result>(body, "Result");
    decoder<msg::PairReport>(body, "PairReport");
    decoder<msg::GpuRetest>(body, "GpuRetest");
    decoder<msg::GpuRetestReport>(body, "GpuRetestReport");
    decoder<msg::Knock>(body, "Knock");
    decoder<msg::Welcome>(body, "Welcome");
    decoder<msg::Refused>(body, "Refused");
    decoder<msg::Beat>(body, "Beat");
    decoder<msg::Roster>(body, "Roster");
    decoder<msg::Superseded>(body, "Superseded");
    decoder<msg::TakeoverReport>(body, "TakeoverReport");
    decoder<msg::Relay>(body, "Relay");
    decoder<msg::Relayed>(body, "Relayed");
    decoder<msg::Finding>(body, "Finding");
    decoder<msg::Position>(body, "Position");
    auto lead = msg::decode_from_lead(body);
    if (lead) {
        auto back = msg::decode_from_lead(msg::encode(lead.value()));
        FUZZ_CHECK(back && back.value() == lead.value(), "a message from rank 0 changed through encode/decode");
    }
    auto rank = msg::decode_from_rank(body);
    if (rank) {
        auto back = msg::decode_from_rank(msg::encode(rank.value()));
        FUZZ_CHECK(back && back.value() == rank.value(), "a message to rank 0 changed through encode/decode");
    }
    FUZZ_CHECK(!(lead && rank) || std::holds_alternative<msg::Beat>(lead.value()), "one message taken both ways");
    // What a node's leader relays is decoded again where it lands (the
    // leader, rank 0): every nested body, as whatever it may be.
    if (const auto* relay = lead ? std::get_if<msg::Relay>(&lead.value()) : nullptr)
        for (const auto& p : relay->parts) (void)msg::decode_from_lead(p.body.bytes);
    if (const auto* rel = rank ? std::get_if<msg::Relayed>(&rank.value()) : nullptr)
        for (const auto& c : rel->parts) {
            (void)msg::decode_from_rank(c.body.bytes);
            (void)msg::decode<msg::Hello>(c.body.bytes);
        }
}

// Values out of the input's bytes, cycling when they run out.
class Source {
public:
    explicit Source(const std::string& b) : b_(b) {}
    uint8_t byte() { return b_.empty() ? 0 : static_cast<uint8_t>(b_[i_++ % b_.size()]); }
    uint64_t bits(int n) {
        uint64_t v = 0;
        for (int k = 0; k < n; k += 8) v = v << 8 | byte();
        return n >= 64 ? v : v & ((uint64_t(1) << n) - 1);
    }
    bool flag() { return byte() & 1; }
    int integer() { return static_cast<int>(bits(31)); }
    double real() {
        const uint64_t u = bits(64);
        double d;
        std::memcpy(&d, &u, sizeof d);
        return std::isfinite(d) ? d : -double(u >> 11);
    }
    std::string text() {
        std::string s;
        for (int n = byte() % 24; n > 0; --n) s += static_cast<char>(byte());
        return s;
    }
    std::vector<std::string> texts() {
        std::vector<std::string> v(byte() % 5);
        for (auto& s : v) s = text();
        return v;
    }
    template <typename T, typename Make>
    std::vector<std::vector<T>> rows(Make make) {
        std::vector<std::vector<T>> v(byte() % 4);
        for (auto& row : v)
            for (int n = byte() % 5; n > 0; --n) row.push_back(make());
        return v;
    }

private:
    const std::string& b_;
    std::size_t i_ = 0;
};

template <typename M>
void round_trip(const M& m, const char* name) {
    const std::string body = msg::encode(m);
    auto back = msg::decode<M>(body);
    FUZZ_CHECK(back, "%s built from the input does not decode: %s", name, back.problem().what.c_str());
    FUZZ_CHECK(back.value() == m, "%s: decode(encode(x)) != x", name);
    FUZZ_CHECK(msg::encode(back.value()) == body, "%s: encoding is not canonical", name);
}

msg::Hello hello_from(Source& s) {
    msg::Hello h;
    h.rank = static_cast<uint32_t>(s.bits(32));
    h.node = static_cast<uint32_t>(s.bits(32));
    h.label = s.text();
    h.slurm_node = s.text();
    h.host = s.text();
    h.pid = static_cast<unsigned>(s.bits(32));
    h.gpu_ok = s.flag();
    h.gpu_why = s.text();
    h.gpus = static_cast<uint32_t>(s.bits(32));
    h.lanes = 1 + static_cast<uint32_t>(s.bits(8));
    h.lane_gpus = s.texts();
    h.data_addr = s.text();
    h.data_port = static_cast<uint16_t>(s.bits(16));
    h.sig.fabric = s.text();
    h.sig.hcas = s.text();
    h.sig.rate_gbps = s.real();
    h.sig.mtu = static_cast<unsigned>(s.bits(32));
    h.ifname = s.text();
    h.problems = s.texts();
    if (s.flag()) h.machine = s.text();
    if (s.flag()) h.fresh_ports = s.flag();
    return h;
}

msg::Plan plan_from(Source& s) {
    msg::Plan p;
    p.gpu = s.flag();
    p.bytes = s.bits(64);
    p.iters = s.integer();
    p.warmup = s.integer();
    p.budget = s.real();
    p.pair_budget = s.real();
    p.pair_bytes = s.bits(64);
    p.nranks = s.integer();
    p.first_rank = s.integer();
    p.id = s.text();
    p.next_addr = s.text();
    p.next_port = static_cast<uint16_t>(s.bits(16));
    p.leader = static_cast<uint32_t>(s.bits(32));
    for (int n = s.byte() % 9; n > 0; --n) p.members.push_back(static_cast<uint32_t>(s.bits(32)));
    p.ring_pos = static_cast<uint32_t>(s.bits(32));
    p.ring_size = static_cast<uint32_t>(s.bits(32));
    p.prev = static_cast<uint32_t>(s.bits(32));
    p.next = static_cast<uint32_t>(s.bits(32));
    p.colors = s.rows<int>([&] { return static_cast<int>(s.bits(32)); });
    return p;
}

msg::Result result_from(Source& s) {
    msg::Result r;
    r.ran = s.flag();
    r.correct = s.flag();
    r.error = s.text();
    r.kind = static_cast<msg::Result::Kind>(s.byte() % 3);
    r.seconds = s.real();
    r.init = s.real();
    if (s.flag()) r.passes = s.real();
    r.transports = s.texts();
    r.pair_seconds = s.rows<double>([&] { return s.real(); });
    r.pair_error = s.text();
    if (s.flag()) {
        std::string seen = s.text();
        if (seen.size() > msg::kStrangersText) seen.resize(msg::kStrangersText);  // the bound a sender keeps
        r.strangers = seen;
    }
    return r;
}

msg::Ready ready_from(Source& s) {
    msg::Ready r;
    r.error = s.text();
    for (int n = s.byte() % 3; n > 0; --n) {
        mn::GpuReadings g;
        g.gpu = s.text();
        g.nvml = s.flag();
        g.nvml_error = s.text();
        if (s.flag()) g.processes.push_back({static_cast<unsigned>(s.bits(32)), s.text(), s.bits(64)});
        if (s.flag()) g.ecc_uncorrected = s.bits(64);
        if (s.flag()) g.retirement_pending = s.flag();
        if (s.flag()) g.remap_pending = s.flag();
        if (s.flag()) g.remap_failed = s.flag();
        if (s.flag()) g.pcie_gen = static_cast<unsigned>(s.bits(32));
        if (s.flag()) g.pcie_width_max = static_cast<unsigned>(s.bits(8));
        g.nvlinks = s.integer();
        g.nvlinks_up = -s.integer();
        g.hw_slowdown = s.flag();
        g.power_brake = s.flag();
        if (s.flag()) g.ecc_enabled = s.flag();
        if (s.flag()) g.mig_enabled = s.flag();
        if (s.flag()) g.fabric_domain = s.text();
        if (s.flag()) g.fabric_unready = s.text();
        r.health.push_back(g);
    }
    r.fingerprint = s.text();
    if (s.flag()) {
        mn::Fingerprint f;
        f.host = s.text();
        f.nccl = s.text();
        f.net.known = s.flag();
        f.net.name = s.text();
        f.gpus = static_cast<unsigned>(s.bits(32));
        f.verbs_known = s.flag();
        f.verbs = s.texts();
        f.pcie.push_back({s.text(), static_cast<unsigned>(s.bits(32)), static_cast<unsigned>(s.bits(32)), s.real(),
                          s.real()});
        f.hca_firmware = s.texts();
        f.nccl_env_known = s.flag();
        f.nccl_env = s.texts();
        f.image = s.text();
        r.node_fingerprint = f;
    }
    return r;
}

msg::Roster roster_from(Source& s) {
    msg::Roster r;
    r.lead = hello_from(s);
    for (int n = s.byte() % 5; n > 0; --n)
        r.standbys.push_back({static_cast<uint32_t>(s.bits(32)), s.text(), s.text(), static_cast<uint16_t>(s.bits(16))});
    return r;
}

// The messages of the control plane and takeover (helper/check/control/, takeover.cc).
void built_liveness(Source& s) {
    round_trip(msg::Beat{static_cast<msg::Stage>(s.byte() % 5)}, "Beat");
    round_trip(roster_from(s), "Roster");
    round_trip(msg::Superseded{static_cast<uint32_t>(s.bits(32)), s.text(), static_cast<int>(s.byte())}, "Superseded");
    round_trip(msg::TakeoverReport{hello_from(s)}, "TakeoverReport");
    round_trip(msg::Welcome{static_cast<uint32_t>(s.bits(32))}, "Welcome");
    round_trip(msg::Refused{s.text()}, "Refused");
    // A node's watch -> rank 0's: what it named.
    msg::Finding f{s.text(), s.text(), s.text(), s.text(), static_cast<uint32_t>(s.bits(32)), s.text(), s.text(),
                   s.text(), {}, {}, s.text(), s.flag()};
    for (int n = s.byte() % 4; n > 0; --n) f.evidence.push_back(s.text());
    for (int n = s.byte() % 3; n > 0; --n) f.dumps.push_back(s.text());
    round_trip(f, "Finding");
    FUZZ_CHECK(!msg::decode_from_rank(msg::encode(f)) && !msg::decode_from_lead(msg::encode(f)),
               "a watch's finding is no message of the check's control connection");
    // ... or where its rank stands in its collectives.
    msg::Position pos{s.text(), s.text(), s.text(), s.text(), s.text(), static_cast<uint32_t>(s.bits(32)),
                      static_cast<double>(s.bits(16)) / 8, static_cast<double>(s.byte()) / 64, {}, std::nullopt, std::nullopt};
    for (int n = s.byte() % 3; n > 0; --n)
        pos.groups.push_back({s.text(), s.text(), static_cast<int64_t>(s.bits(32)) - 1, -1,
                              static_cast<int64_t>(s.bits(32)), static_cast<int64_t>(s.bits(16)) - 1, s.text(),
                              s.text(), s.text(), {}});
    for (auto& g : pos.groups)
        for (int n = s.byte() % 3; n > 0; --n) g.recent.push_back({static_cast<int64_t>(s.bits(32)), s.text(), s.text(), s.text()});
    if (s.byte() & 1) {
        pos.gpu_events.emplace();
        for (int n = s.byte() % 3; n > 0; --n) pos.gpu_events->push_back(s.text());
    }
    if (s.byte() & 1) pos.dump = s.text();
    round_trip(pos, "Position");
    FUZZ_CHECK(!msg::decode<msg::Finding>(msg::encode(pos)), "a position is no finding");
    // A message from the wrong side is refused, naming what it is.
    const std::string beat = msg::encode(msg::Beat{msg::Stage::Pairs});
    FUZZ_CHECK(msg::decode_from_lead(beat) && msg::decode_from_rank(beat), "a heartbeat goes both ways");
    FUZZ_CHECK(!msg::decode_from_lead(msg::encode(msg::Superseded{})), "rank 0 never sends superseded");
    FUZZ_CHECK(!msg::decode_from_rank(msg::encode(roster_from(s))), "a rank never sends a roster");
    // Through a node's leader: words down, what its ranks said up, each
    // nested as it travels (any bytes: the nested body is decoded apart).
    msg::Relay down;
    for (int n = s.byte() % 4; n > 0; --n) {
        std::vector<uint32_t> to;
        for (int k = s.byte() % 5; k > 0; --k) to.push_back(static_cast<uint32_t>(s.bits(32)));
        down.parts.push_back(
            {to, {n % 2 ? msg::encode(msg::Word{s.flag(), static_cast<int>(s.byte()), s.text()}) : s.text()}});
    }
    round_trip(down, "Relay");
    msg::Relayed up;
    for (int n = s.byte() % 4; n > 0; --n)
        up.parts.push_back({static_cast<uint32_t>(s.bits(32)), static_cast<msg::Carried::What>(s.byte() % 3),
                            {n % 2 ? msg::encode(hello_from(s)) : s.text()}, s.text(), s.flag()});
    if (s.flag()) {
        std::string seen = s.text();
        if (seen.size() > msg::kStrangersText) seen.resize(msg::kStrangersText);
        up.door_strangers = seen;
    }
    round_trip(up, "Relayed");
    FUZZ_CHECK(!msg::decode_from_rank(msg::encode(down)), "a rank never sends a relay");
    FUZZ_CHECK(!msg::decode_from_lead(msg::encode(up)), "rank 0 never sends what a leader relays up");
    // A word out of Carried::What's set ("said" as "sail") does not decode.
    std::string odd = msg::encode(msg::Relayed{{{1, msg::Carried::What::Said, {}, "", false}}, std::nullopt});
    const std::size_t said = odd.find("said");
    FUZZ_CHECK(said != std::string::npos, "a carried part's word travels as text");
    odd.replace(said, 4, "sail");
    FUZZ_CHECK(!msg::decode<msg::Relayed>(odd), "a carried part's word out of its set");
}

void built_messages(const std::string& bytes) {
    Source s(bytes);
    std::string nonce = s.text();  // the challenge's lines hold any byte but a newline
    nonce.erase(std::remove(nonce.begin(), nonce.end(), '\n'), nonce.end());
    // A release is a short version word, kept only as one: any other text
    // in its place reads as none.
    const std::string rel = s.text();
    const bool word = msg::release_word(rel);
    const msg::Challenge ch{static_cast<uint32_t>(s.bits(32)), nonce, rel.find('\n') == std::string::npos ? rel : ""};
    auto ch_back = msg::decode<msg::Challenge>(msg::encode(ch));
    FUZZ_CHECK(ch_back && ch_back->release == (word ? ch.release : ""), "Challenge: a release kept only as a word");
    round_trip(msg::Challenge{ch.version, nonce, word ? ch.release : ""}, "Challenge");
    round_trip(msg::Knock{static_cast<uint32_t>(s.bits(32)), s.text(), static_cast<uint32_t>(s.bits(32)), s.text(),
                          s.flag() ? std::optional<std::string>("0.2.0") : std::nullopt},
               "Knock");
    round_trip(hello_from(s), "Hello");
    round_trip(msg::Prepare{s.flag(), s.bits(64), s.integer(), s.integer(), s.text(), s.text(),
                            s.flag() ? std::optional<bool>(s.flag()) : std::nullopt},
               "Prepare");
    round_trip(plan_from(s), "Plan");
    msg::PairCue q{s.text(), static_cast<uint32_t>(s.bits(32)), s.text(), static_cast<uint16_t>(s.bits(16)), s.flag(),
                   s.bits(64), s.integer(), s.real(), s.real(), std::nullopt};
    if (s.flag()) q.fresh_port = s.flag();
    round_trip(q, "PairCue");
    round_trip(msg::Word{s.flag(), static_cast<int>(s.byte()), s.text()}, "Word");
    round_trip(ready_from(s), "Ready");
    round_trip(result_from(s), "Result");
    round_trip(msg::PairReport{s.text(), s.real(), s.text(), static_cast<uint32_t>(s.bits(32)), s.text(),
                               s.flag() ? std::optional<double>(s.byte() / 255.0) : std::nullopt,
                               s.flag() ? std::optional<uint32_t>(static_cast<uint32_t>(s.bits(32))) : std::nullopt,
                               s.flag() ? std::optional<double>(s.bits(16) / 8.0) : std::nullopt,
                               s.flag() ? std::optional<uint16_t>(static_cast<uint16_t>(1 + s.bits(16) % 65535)) : std::nullopt},
               "PairReport");
    round_trip(msg::GpuRetest{s.rows<int>([&] { return static_cast<int>(s.bits(32)); })}, "GpuRetest");
    round_trip(msg::GpuRetestReport{s.rows<double>([&] { return s.real(); }), s.text()}, "GpuRetestReport");
    built_liveness(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 8192) return 0;
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    framing(bytes);
    every_decoder(bytes.substr(std::min<std::size_t>(4, size)));  // past the frame's length
    built_messages(bytes);
    return 0;
}
