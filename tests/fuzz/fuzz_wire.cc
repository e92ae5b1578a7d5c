// mn-preflight's messages: a 4-byte big-endian length, then "key=value"
// lines (helper/wire), each message typed by helper/check/messages. The
// input is what a peer sends on the socket: rank 0 reads it before it
// knows who sent it.
//  - recv_msg takes a whole frame and nothing else;
//  - decode -> encode -> decode is stable, encode is canonical, and any
//    fields made of legal keys (no '=' or newline) and any values survive
//    encode/decode exactly;
//  - every message's decoder takes the decoded fields without crashing; a
//    message it takes re-encodes to one it decodes to the same message, and
//    decode_from_lead/decode_from_rank agree with it; one it refuses is
//    refused with the message's name;
//  - each message built from the input's bytes (any strings, numbers,
//    lists, nested hellos) decodes from its encoding to itself:
//    decode(encode(x)) == x; only the heartbeat goes both ways.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/fuzz/fuzz.h"
#include "helper/check/messages.h"
#include "helper/wire.h"

using mn::wire::Fields;
namespace msg = mn::check::msg;

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
    if (m) FUZZ_CHECK(*m == mn::wire::decode(bytes.substr(4, n)), "recv_msg and decode differ");
    else FUZZ_CHECK(!err.empty(), "a refusal says why");
}

void fields(const std::string& bytes) {
    const Fields f = mn::wire::decode(bytes);
    const std::string text = mn::wire::encode(f);
    FUZZ_CHECK(mn::wire::decode(text) == f, "decode(encode(decode(x))) != decode(x)");
    FUZZ_CHECK(mn::wire::encode(mn::wire::decode(text)) == text, "encode is not canonical");
    for (const auto& [k, v] : f) FUZZ_CHECK(k.find('\n') == std::string::npos, "a key kept a newline");
    // Fields as the helper builds them (keys without '=' or newlines, any
    // value, newlines and backslashes included) come back exactly.
    Fields built;
    for (const auto& [k, v] : f) {
        std::string key = k;
        key.erase(std::remove(key.begin(), key.end(), '='), key.end());
        built[key] = v + bytes.substr(0, 3) + "\\\n\\n";
    }
    FUZZ_CHECK(mn::wire::decode(mn::wire::encode(built)) == built, "fields changed through encode/decode");
}

// A decoder on arbitrary fields: no crash; what it takes round-trips.
template <typename M, typename Decode>
void decoder(const Fields& f, Decode decode, const char* name) {
    auto m = decode(f);
    if (!m) {
        FUZZ_CHECK(m.problem().what.rfind(std::string(name) + ": ", 0) == 0, "%s refused without its name: %s", name,
                   m.problem().what.c_str());
        return;
    }
    auto again = decode(mn::wire::decode(mn::wire::encode(msg::encode(m.value()))));
    FUZZ_CHECK(again && again.value() == m.value(), "%s: a decoded message does not survive encode/decode", name);
}

void every_decoder(const std::string& bytes) {
    Fields f = mn::wire::decode(bytes);
    decoder<msg::Challenge>(f, msg::decode_challenge, "challenge");
    decoder<msg::Hello>(f, msg::decode_hello, "hello");
    decoder<msg::Prepare>(f, msg::decode_prepare, "prepare");
    decoder<msg::Plan>(f, msg::decode_plan, "plan");
    decoder<msg::PairCue>(f, msg::decode_pair_cue, "pair_cue");
    decoder<msg::Word>(f, msg::decode_word, "word");
    decoder<msg::Ready>(f, msg::decode_ready, "ready");
    decoder<msg::Result>(f, msg::decode_result, "result");
    decoder<msg::PairReport>(f, msg::decode_pair_report, "pair_report");
    decoder<msg::GpuRetest>(f, msg::decode_gpu_retest, "gpu_retest");
    decoder<msg::GpuRetestReport>(f, msg::decode_gpu_retest_report, "gpu_retest_report");
    decoder<msg::Knock>(f, msg::decode_knock, "knock");
    decoder<msg::Welcome>(f, msg::decode_welcome, "welcome");
    decoder<msg::Refused>(f, msg::decode_refused, "refused");
    decoder<msg::Beat>(f, msg::decode_beat, "beat");
    decoder<msg::Roster>(f, msg::decode_roster, "roster");
    decoder<msg::Superseded>(f, msg::decode_superseded, "superseded");
    decoder<msg::TakeoverReport>(f, msg::decode_takeover_report, "takeover");
    auto lead = msg::decode_from_lead(f);
    if (lead) {
        auto back = msg::decode_from_lead(msg::encode(lead.value()));
        FUZZ_CHECK(back && back.value() == lead.value(), "a message from rank 0 changed through encode/decode");
    }
    auto rank = msg::decode_from_rank(f);
    if (rank) {
        auto back = msg::decode_from_rank(msg::encode(rank.value()));
        FUZZ_CHECK(back && back.value() == rank.value(), "a message to rank 0 changed through encode/decode");
    }
    FUZZ_CHECK(!(lead && rank) || std::holds_alternative<msg::Beat>(lead.value()), "one message taken both ways");
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
    std::string word() {  // the lib's GPU readings keep only tame names
        std::string s;
        for (int n = byte() % 12; n > 0; --n) s += "abcGPU0123 (:.)"[byte() % 15];
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

template <typename M, typename Decode>
void round_trip(const M& m, Decode decode, const char* name) {
    auto back = decode(mn::wire::decode(mn::wire::encode(msg::encode(m))));
    FUZZ_CHECK(back, "%s built from the input does not decode: %s", name, back.problem().what.c_str());
    FUZZ_CHECK(back.value() == m, "%s: decode(encode(x)) != x", name);
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
    return r;
}

msg::Ready ready_from(Source& s) {
    msg::Ready r;
    r.error = s.text();
    for (int n = s.byte() % 3; n > 0; --n) {
        mn::GpuReadings g;
        g.gpu = s.word();
        g.nvml = s.flag();
        g.nvml_error = s.word();
        if (s.flag()) g.processes.push_back({static_cast<unsigned>(s.bits(32)), s.word(), s.bits(32)});
        if (s.flag()) g.ecc_uncorrected = s.bits(32);
        if (s.flag()) g.remap_pending = s.flag();
        if (s.flag()) g.pcie_gen = static_cast<unsigned>(s.bits(8));
        g.nvlinks = static_cast<int>(s.bits(8));
        g.hw_slowdown = s.flag();
        r.health.push_back(g);
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

// The messages of liveness and takeover (helper/check/liveness.cc, takeover.cc).
void built_liveness(Source& s) {
    round_trip(msg::Beat{static_cast<msg::Stage>(s.byte() % 5)}, msg::decode_beat, "beat");
    round_trip(roster_from(s), msg::decode_roster, "roster");
    round_trip(msg::Superseded{static_cast<uint32_t>(s.bits(32)), s.text(), static_cast<int>(s.byte())},
               msg::decode_superseded, "superseded");
    round_trip(msg::TakeoverReport{hello_from(s)}, msg::decode_takeover_report, "takeover");
    round_trip(msg::Welcome{static_cast<uint32_t>(s.bits(32))}, msg::decode_welcome, "welcome");
    round_trip(msg::Refused{s.text()}, msg::decode_refused, "refused");
    // A message from the wrong side is refused, naming what it is.
    const Fields beat = msg::encode(msg::Beat{msg::Stage::Pairs});
    FUZZ_CHECK(msg::decode_from_lead(beat) && msg::decode_from_rank(beat), "a heartbeat goes both ways");
    FUZZ_CHECK(!msg::decode_from_lead(msg::encode(msg::Superseded{})), "rank 0 never sends superseded");
    FUZZ_CHECK(!msg::decode_from_rank(msg::encode(roster_from(s))), "a rank never sends a roster");
}

void built_messages(const std::string& bytes) {
    Source s(bytes);
    round_trip(msg::Challenge{static_cast<uint32_t>(s.bits(32)), s.text()}, msg::decode_challenge, "challenge");
    round_trip(msg::Knock{static_cast<uint32_t>(s.bits(32)), s.text(), static_cast<uint32_t>(s.bits(32)), s.text()},
               msg::decode_knock, "knock");
    round_trip(hello_from(s), msg::decode_hello, "hello");
    round_trip(msg::Prepare{s.flag(), s.bits(64)}, msg::decode_prepare, "prepare");
    round_trip(plan_from(s), msg::decode_plan, "plan");
    msg::PairCue q{s.text(), static_cast<uint32_t>(s.bits(32)), s.text(), static_cast<uint16_t>(s.bits(16)), s.flag(),
                   s.bits(64), s.integer(), s.real(), s.real()};
    round_trip(q, msg::decode_pair_cue, "pair_cue");
    round_trip(msg::Word{s.flag(), static_cast<int>(s.byte()), s.text()}, msg::decode_word, "word");
    round_trip(ready_from(s), msg::decode_ready, "ready");
    round_trip(result_from(s), msg::decode_result, "result");
    round_trip(msg::PairReport{s.text(), s.real(), s.text()}, msg::decode_pair_report, "pair_report");
    round_trip(msg::GpuRetest{s.rows<int>([&] { return static_cast<int>(s.bits(32)); })}, msg::decode_gpu_retest,
               "gpu_retest");
    round_trip(msg::GpuRetestReport{s.rows<double>([&] { return s.real(); }), s.text()},
               msg::decode_gpu_retest_report, "gpu_retest_report");
    built_liveness(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 8192) return 0;
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    framing(bytes);
    fields(bytes);
    every_decoder(bytes);
    built_messages(bytes);
    return 0;
}
