// SPDX-License-Identifier: Apache-2.0
#include "lib/util/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace mn {

Mac hmac_sha256(const std::string& key, const std::string& message) {
    Mac out{};
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
              reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len) ||
        len != out.size())
        throw std::runtime_error("libcrypto's HMAC-SHA-256 failed");
    return out;
}

std::string random_bytes(std::size_t n) {
    std::string out(n, '\0');
    if (n && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
        throw std::runtime_error("libcrypto's random generator failed");
    return out;
}

bool same_bytes(const std::string& a, const std::string& b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace mn
