// SPDX-License-Identifier: Apache-2.0
// Shared by the fuzz targets: a property that does not hold is a crash, so
// libFuzzer keeps the input and the replay runs fail on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define FUZZ_CHECK(cond, ...)                                                            \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, "  " __VA_ARGS__);                                      \
            std::fprintf(stderr, "\n");                                                  \
            std::abort();                                                                \
        }                                                                                \
    } while (0)

namespace fuzz {

// Splits the input at a separator byte: how a target gets several fields
// out of one input while staying readable in the corpus.
inline std::vector<std::string> fields(const uint8_t* data, std::size_t size, char sep, std::size_t max) {
    std::vector<std::string> out(1);
    for (std::size_t i = 0; i < size; ++i) {
        if (static_cast<char>(data[i]) == sep && out.size() < max) out.emplace_back();
        else out.back() += static_cast<char>(data[i]);
    }
    return out;
}

}  // namespace fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);
