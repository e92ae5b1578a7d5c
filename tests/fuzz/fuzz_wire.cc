// mn-preflight's messages: a 4-byte big-endian length, then "key=value"
// lines (helper/wire). The input is what a peer sends on the socket: rank 0
// reads it before it knows who sent it. recv_msg takes a whole frame and
// nothing else; a decoded message re-encodes to bytes that decode to it
// again, and fields made of legal keys survive encode/decode unchanged.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "tests/fuzz/fuzz.h"
#include "helper/wire.h"

using mn::wire::Fields;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 8192) return 0;
    const std::string bytes(reinterpret_cast<const char*>(data), size);

    // Framing, over a real socket: the peer sends the bytes and closes.
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    FUZZ_CHECK(::send(sv[1], bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()),
               "socketpair send");
    ::close(sv[1]);
    std::string err;
    auto m = mn::wire::recv_msg(sv[0], mn::wire::Deadline::in(5), &err);
    ::close(sv[0]);
    const uint32_t n = size < 4 ? 0
                                : uint32_t(data[0]) << 24 | uint32_t(data[1]) << 16 | uint32_t(data[2]) << 8 | data[3];
    const bool whole = size >= 4 && n <= (1u << 20) && size - 4 >= n;
    FUZZ_CHECK(m.has_value() == whole, "recv_msg %s a frame of %u bytes with %zu sent (%s)",
               m ? "took" : "refused", n, size, err.c_str());
    if (m) FUZZ_CHECK(*m == mn::wire::decode(bytes.substr(4, n)), "recv_msg and decode differ");
    else FUZZ_CHECK(!err.empty(), "a refusal says why");

    // decode -> encode -> decode is stable, and encode is canonical.
    const Fields f = mn::wire::decode(bytes);
    const std::string text = mn::wire::encode(f);
    FUZZ_CHECK(mn::wire::decode(text) == f, "decode(encode(decode(x))) != decode(x)");
    FUZZ_CHECK(mn::wire::encode(mn::wire::decode(text)) == text, "encode is not canonical");
    for (const auto& [k, v] : f) FUZZ_CHECK(k.find('\n') == std::string::npos && v.find('\n') == std::string::npos, "newline kept");

    // Fields as the helper builds them (keys without '=' or newlines, any
    // value): values come back with newlines as spaces, nothing else changed.
    Fields built;
    for (const auto& [k, v] : f) {
        std::string key = k, value = v + bytes.substr(0, 3);
        key.erase(std::remove(key.begin(), key.end(), '='), key.end());
        if (key.empty()) continue;
        built[key] = value;
    }
    const Fields back = mn::wire::decode(mn::wire::encode(built));
    FUZZ_CHECK(back.size() == built.size(), "%zu fields sent, %zu back", built.size(), back.size());
    for (const auto& [k, v] : built) {
        std::string want = v;
        for (auto& c : want) c = c == '\n' ? ' ' : c;
        auto it = back.find(k);
        FUZZ_CHECK(it != back.end() && it->second == want, "field '%s' changed", k.c_str());
    }
    return 0;
}
