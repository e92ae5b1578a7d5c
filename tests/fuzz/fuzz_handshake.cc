// mn-preflight's challenge: rank 0 sends a nonce, a rank answers with a
// hello (helper/check/messages.h) carrying its rank and HMAC-SHA-256(step
// secret, nonce ":" rank), and rank 0 takes it only when the proof matches
// (helper/check/rendezvous.cc); data connections open with a greeting
// proving HMAC(step secret, "data:" purpose ":" rank) (collective.cc).
// Input: secret '\0' nonce '\0' the bytes a peer sends back.
//  - our SHA-256 and HMAC agree with OpenSSL's on any key and message;
//  - the peer's bytes, whatever they are, are refused unless they carry the
//    proof for this secret and nonce, as a hello or as a data greeting;
//  - a rank that knows the secret is taken, and its hello reads back whole;
//  - a rank's report to a standby (rank 0 lost, takeover.cc) is taken only
//    with its own proof, HMAC(step secret, "takeover:" rank);
//  - the challenge itself travels intact.
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "tests/fuzz/fuzz.h"
#include "helper/check/messages.h"
#include "helper/wire.h"
#include "lib/util/sha256.h"

namespace {

std::string hex(const unsigned char* p, std::size_t n) { return mn::to_hex(p, n); }

namespace msg = mn::check::msg;

// Rank 0's side of the exchange, as rendezvous.cc does it: the hello
// decodes, and its proof is the one for its rank under this nonce.
bool accepted(const std::string& secret, const std::string& nonce, const mn::wire::Fields& f) {
    auto hello = msg::decode_hello(f);
    return hello && hello->proof == mn::hmac_hex(secret, nonce + ":" + std::to_string(hello->rank));
}

// A standby's side when rank 0 is lost (takeover.cc's take_reports).
bool report_accepted(const std::string& secret, const mn::wire::Fields& f) {
    auto r = msg::decode_takeover_report(f);
    return r && r->hello.proof == mn::hmac_hex(secret, "takeover:" + std::to_string(r->hello.rank));
}

// A data port's side (collective.cc's data_accept).
bool data_accepted(const std::string& secret, const std::string& purpose, uint32_t from, const mn::wire::Fields& f) {
    auto g = msg::decode_data_greeting(f);
    return g && g->purpose == purpose && g->rank == from &&
           g->proof == mn::hmac_hex(secret, "data:" + purpose + ":" + std::to_string(g->rank));
}

std::optional<mn::wire::Fields> over_socket(const std::string& bytes) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
    ssize_t sent = ::send(sv[1], bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ::close(sv[1]);
    std::string err;
    auto m = sent == static_cast<ssize_t>(bytes.size()) ? mn::wire::recv_msg(sv[0], mn::wire::Deadline::in(5), &err)
                                                        : std::nullopt;
    ::close(sv[0]);
    return m;
}

std::string frame(const std::string& body) {
    const uint32_t n = static_cast<uint32_t>(body.size());
    std::string out{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                    static_cast<char>(n)};
    return out + body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 4096) return 0;
    auto f = fuzz::fields(data, size, '\0', 3);
    f.resize(3);
    const std::string &secret = f[0], &nonce = f[1], &peer = f[2];

    // SHA-256 and HMAC against OpenSSL.
    unsigned char want[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(peer.data()), peer.size(), want);
    const auto got = mn::sha256(peer);
    FUZZ_CHECK(std::memcmp(got.data(), want, sizeof want) == 0, "SHA-256 of %zu bytes differs from OpenSSL", peer.size());
    unsigned int len = 0;
    const std::string msg = nonce + ":" + peer;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()),
         msg.size(), want, &len);
    FUZZ_CHECK(len == 32 && mn::hmac_hex(secret, msg) == hex(want, len), "HMAC (key %zu bytes, message %zu) differs",
               secret.size(), msg.size());

    // A stray peer: its bytes as the answer to a challenge with a secret it
    // cannot know (derived from the input, so it differs from anything in it).
    const std::string step_secret = "step-secret:" + mn::hmac_hex(secret, peer);
    if (auto stray = over_socket(peer)) {
        FUZZ_CHECK(!accepted(step_secret, nonce, *stray), "a stray peer was taken as a rank");
        FUZZ_CHECK(!data_accepted(step_secret, "ring", 1, *stray), "a stray peer was taken on a data port");
        FUZZ_CHECK(!report_accepted(step_secret, *stray), "a stray peer was taken as a rank's report to a standby");
    }

    // The challenge arrives as sent.
    auto c = over_socket(frame(mn::wire::encode(msg::encode(msg::Challenge{nonce}))));
    FUZZ_CHECK(c && msg::decode_challenge(*c) && msg::decode_challenge(*c)->nonce == nonce, "the nonce changed");

    // A rank with the secret: the hello it builds is taken and reads back whole.
    msg::Hello hello;
    for (unsigned char ch : peer.substr(0, 4)) hello.rank = hello.rank * 10 + ch % 10;
    hello.label = peer.substr(0, 64);
    hello.gpu_why = peer;
    hello.lane_gpus = {nonce, peer.substr(0, 8)};
    hello.proof = mn::hmac_hex(secret, nonce + ":" + std::to_string(hello.rank));
    auto back = over_socket(frame(mn::wire::encode(msg::encode(hello))));
    FUZZ_CHECK(back && accepted(secret, nonce, *back) && msg::decode_hello(*back).value() == hello,
               "rank %u with the secret refused or changed", hello.rank);
    // ... and refused under another nonce (a replayed greeting).
    FUZZ_CHECK(!accepted(secret, nonce + "x", *back), "a greeting was taken for another nonce");

    // A report to a standby with the secret: taken; the hello's challenge
    // proof is not one (another message, another proof).
    msg::TakeoverReport report{hello};
    report.hello.proof = mn::hmac_hex(secret, "takeover:" + std::to_string(hello.rank));
    auto rf = over_socket(frame(mn::wire::encode(msg::encode(report))));
    FUZZ_CHECK(rf && report_accepted(secret, *rf) && msg::decode_takeover_report(*rf).value() == report,
               "a report with the secret refused or changed");
    FUZZ_CHECK(!report_accepted(secret, msg::encode(msg::TakeoverReport{hello})) || nonce == "takeover",
               "a hello's proof was taken for a report");

    // A data greeting with the secret: taken for its purpose and rank only.
    const msg::DataGreeting g{nonce, hello.rank, mn::hmac_hex(secret, "data:" + nonce + ":" + std::to_string(hello.rank))};
    auto gf = over_socket(frame(mn::wire::encode(msg::encode(g))));
    FUZZ_CHECK(gf && data_accepted(secret, nonce, hello.rank, *gf), "a data greeting with the secret refused");
    FUZZ_CHECK(!data_accepted(secret, nonce + "x", hello.rank, *gf) && !data_accepted(secret, nonce, hello.rank + 1, *gf),
               "a data greeting was taken for another purpose or rank");
    return 0;
}
