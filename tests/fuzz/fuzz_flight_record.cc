// SPDX-License-Identifier: Apache-2.0
// PyTorch's Flight Recorder dump as mn-preflight watch reads it (outside
// input: the program writes the file). Properties: any bytes are read or
// refused, never crash, leak or recurse without end (nesting, memo
// references that would make cycles); a refusal says it is the dump's;
// what is read stays within the reader's bounds.
#include "lib/check/flight_record.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > (1u << 20)) return 0;
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    const auto s = mn::read_flight_record(bytes);
    if (!s) {
        FUZZ_CHECK(s.problem().text().rfind("Flight Recorder dump: ", 0) == 0, "refusal not named: %s",
                   s.problem().text().c_str());
        return 0;
    }
    FUZZ_CHECK(s->groups.size() <= 64, "%zu groups", s->groups.size());
    FUZZ_CHECK(s->version.size() <= 200 && s->comm_lib.size() <= 200, "unbounded text");
    const auto words = mn::flight_words(s.value());
    FUZZ_CHECK(words.size() == s->groups.size(), "a line per group");
    for (const auto& g : s->groups) FUZZ_CHECK(g.waiting_input.size() <= 300, "unbounded input words");
    return 0;
}
