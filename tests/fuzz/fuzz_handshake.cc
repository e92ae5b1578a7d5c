// mn-preflight's challenge: rank 0 sends a nonce, a rank answers with its
// rank and HMAC-SHA-256(step secret, nonce ":" rank) in a framed message,
// and rank 0 takes it only when the proof matches (helper/check.cc).
// Input: secret '\0' nonce '\0' the bytes a peer sends back.
//  - our SHA-256 and HMAC agree with OpenSSL's on any key and message;
//  - the peer's bytes, whatever they are, are refused unless they carry the
//    proof for this secret and nonce;
//  - a rank that knows the secret is taken, and its rank reads back.
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "tests/fuzz/fuzz.h"
#include "helper/wire.h"
#include "lib/util/sha256.h"

namespace {

std::string hex(const unsigned char* p, std::size_t n) { return mn::to_hex(p, n); }

// Rank 0's side of the exchange, as check.cc does it: the proof over the
// rank field as sent, compared with the expected one.
bool accepted(const std::string& secret, const std::string& nonce, mn::wire::Fields& hello) {
    return hello["proof"] == mn::hmac_hex(secret, nonce + ":" + hello["rank"]);
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
    if (auto hello = over_socket(peer)) {
        FUZZ_CHECK(!accepted(step_secret, nonce, *hello), "a stray peer was taken as rank '%s'",
                   (*hello)["rank"].c_str());
    }

    // A rank with the secret: the greeting it builds is taken and names it.
    std::string rank = peer.substr(0, 10);
    for (auto& c : rank) c = static_cast<char>('0' + static_cast<unsigned char>(c) % 10);
    mn::wire::Fields hello{{"rank", rank}, {"node", "0"}, {"label", peer.substr(0, 64)}};
    hello["proof"] = mn::hmac_hex(secret, nonce + ":" + hello["rank"]);
    auto back = over_socket(frame(mn::wire::encode(hello)));
    FUZZ_CHECK(back && accepted(secret, nonce, *back) && (*back)["rank"] == rank, "rank '%s' with the secret refused",
               rank.c_str());
    // ... and refused under another nonce (a replayed greeting).
    FUZZ_CHECK(!accepted(secret, nonce + "x", *back), "a greeting was taken for another nonce");
    return 0;
}
