// SPDX-License-Identifier: Apache-2.0
// The step secret's cryptography, from OpenSSL's libcrypto (on every Slurm
// node; Slurm's own auth plugins and munge use it): HMAC-SHA-256, random
// bytes from the kernel's generator, and comparison in constant time.
// mn-preflight alone links it: the plugin in slurmstepd never does.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace mn {

using Mac = std::array<uint8_t, 32>;

Mac hmac_sha256(const std::string& key, const std::string& message);
// n random bytes (RAND_bytes); throws std::runtime_error when the
// generator fails, which no caller can work around.
std::string random_bytes(std::size_t n);
// Whether two byte strings are equal, in time that depends on their
// length only (CRYPTO_memcmp): a proof is never compared with std::string's !=.
bool same_bytes(const std::string& a, const std::string& b);

}  // namespace mn
