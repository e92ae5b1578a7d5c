// SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), for mn-preflight's
// step secret: ranks prove they know it without sending it.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace mn {

std::array<uint8_t, 32> sha256(const std::string& data);
std::array<uint8_t, 32> hmac_sha256(const std::string& key, const std::string& message);
std::string to_hex(const uint8_t* data, std::size_t n);
std::string hmac_hex(const std::string& key, const std::string& message);

}  // namespace mn
