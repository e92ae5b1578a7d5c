// SPDX-License-Identifier: Apache-2.0
// The handshake's acceptor side (helper/check/doorway's read_knock, what
// every listening port of mn-preflight runs on a caller's bytes) and the
// seal (helper/wire's Seal, take_frame).
// Input: secret '\0' nonce '\0' the bytes a caller sends.
//  - a caller's bytes, whatever they are, never prove a secret derived
//    from the input (so it differs from anything in it), and never open
//    a seal under that secret;
//  - a knock made with the secret is proven, with its words and its first
//    message whole; under another challenge nonce it is not (a replay);
//  - every strict prefix of a good knock asks for more, never a verdict.
#include <cstring>

#include "helper/check/control/doorway.h"
#include "helper/wire.h"
#include "lib/util/crypto.h"
#include "lib/util/text.h"
#include "tests/fuzz/fuzz.h"

namespace msg = mn::check::msg;
using mn::check::KnockReading;

namespace {

std::string hex_of(const std::string& s) {
    const mn::Mac m = mn::hmac_sha256("nonce", s);
    return mn::to_hex(m.data(), 16);
}

// A purpose of the program's own words, from arbitrary bytes.
std::string purpose_of(const std::string& s) {
    std::string p = "data:";
    for (unsigned char ch : s.substr(0, 20)) p += static_cast<char>('a' + ch % 26);
    return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 8192) return 0;
    auto f = fuzz::fields(data, size, '\0', 3);
    f.resize(3);
    const std::string &secret = f[0], &nonce = f[1], &peer = f[2];
    const std::string nonce_a = hex_of(nonce);
    const std::string step_secret = "step-secret:" + hex_of(secret + peer);

    // A stranger's bytes, as a knock with or without a first message.
    for (bool first : {true, false}) {
        const KnockReading r = mn::check::read_knock(peer, nonce_a, step_secret, first);
        FUZZ_CHECK(r.state != KnockReading::State::Proven, "a stranger's %zu bytes proved the step secret", peer.size());
        FUZZ_CHECK(r.state != KnockReading::State::Stranger || !r.what.empty(), "a stranger refused without a reason");
        // Its reason is one of the acceptor's own texts: a stranger's bytes are never quoted.
        bool known = r.what.empty();
        for (const char* own : {"sent what is not mn-preflight's", "spoke an older mn-preflight protocol (1)",
                                "did not prove the step secret", "sent more than its knock before its welcome"})
            known = known || r.what == own;
        if (r.what.rfind("spoke mn-preflight protocol ", 0) == 0)
            known = r.what.find_first_not_of("0123456789", 28) == std::string::npos;
        FUZZ_CHECK(known, "an unknown reason: '%s'", r.what.c_str());
    }
    // ... and as a sealed frame on an established connection.
    mn::wire::Seal seal(step_secret, 'a', 'c');
    std::size_t used = 0;
    auto framed = mn::wire::take_frame(peer, 1 << 16, &seal, &used);
    FUZZ_CHECK(!framed || !framed.value(), "a stranger's frame opened a seal");

    // A rank with the secret.
    const msg::Knock k{msg::kProtocol, purpose_of(nonce), static_cast<uint32_t>(peer.size()), hex_of(peer), std::nullopt};
    msg::Hello hello;
    hello.rank = k.rank;
    hello.label = peer.substr(0, 64);
    hello.gpu_why = peer;
    hello.problems = {nonce, secret};
    const mn::wire::Body first = msg::encode(hello);
    auto cseal = mn::check::connector_seal(secret, k, nonce_a);
    const std::string bytes = mn::check::knock_bytes(k, first, *cseal);
    const KnockReading good = mn::check::read_knock(bytes, nonce_a, secret, true);
    FUZZ_CHECK(good.state == KnockReading::State::Proven, "a knock with the secret was not proven: %s", good.what.c_str());
    FUZZ_CHECK(good.knock == k, "the knock changed on the way");
    FUZZ_CHECK(msg::decode<msg::Hello>(good.first) && msg::decode<msg::Hello>(good.first).value() == hello,
               "the first message changed on the way");
    FUZZ_CHECK(mn::check::read_knock(bytes, hex_of(nonce + "x"), secret, true).state != KnockReading::State::Proven,
               "a knock was proven under another challenge");
    for (std::size_t cut : {std::size_t{0}, std::size_t{3}, bytes.size() / 2, bytes.size() - 1})
        FUZZ_CHECK(mn::check::read_knock(bytes.substr(0, cut), nonce_a, secret, true).state == KnockReading::State::More,
                   "a prefix of %zu bytes of a good knock was judged", cut);
    // The acceptor's seal and the connector's agree from here on, once each.
    const std::string body = msg::encode(msg::Beat{});
    const std::string mac = good.seal->close(body);
    FUZZ_CHECK(cseal->open(body, mac) && !cseal->open(body, mac), "a sealed message was refused, or taken twice");
    return 0;
}
