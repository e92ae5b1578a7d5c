// SPDX-License-Identifier: Apache-2.0
// NCCL's RAS report as mn-preflight watch condenses it (outside input: any
// process of the node may answer at the step's RAS address). Properties:
// any text condenses without crashing, to at most 16 lines of at most 300
// bytes, a version of at most 120, and "troubled" whenever a line is kept
// from a communicator or an error.
#include "lib/check/nccl_ras.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 65536) return 0;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const mn::RasSummary s = mn::summarize_ras(text);
    FUZZ_CHECK(s.lines.size() <= 16, "%zu lines", s.lines.size());
    FUZZ_CHECK(s.version.size() <= 120, "version of %zu bytes", s.version.size());
    bool kept = false;
    for (const std::string& l : s.lines) {
        FUZZ_CHECK(l.size() <= 300, "a line of %zu bytes", l.size());
        kept |= l != "No communicator data collected!";
    }
    FUZZ_CHECK(!kept || s.troubled, "lines kept, not troubled");
    return 0;
}
