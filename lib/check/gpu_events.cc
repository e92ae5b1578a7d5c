// SPDX-License-Identifier: Apache-2.0
#include "lib/check/gpu_events.h"

#include <ctime>

namespace mn {

XidMeaning xid_meaning(uint64_t xid) {
    // NVIDIA's "Xid Errors" catalogue: the hardware's (and its firmware's)
    // first, then the program's, which say nothing of the node.
    switch (xid) {
    case 48: return {true, "a double-bit ECC error in GPU memory"};
    case 62: return {true, "the GPU's internal micro-controller halted"};
    case 64: return {true, "the GPU could not record a row remapping (ECC)"};
    case 74: return {true, "an NVLink error"};
    case 79: return {true, "the GPU has fallen off the bus"};
    case 94: return {true, "a contained ECC error (the program on that memory was ended)"};
    case 95: return {true, "an uncontained ECC error"};
    case 119: return {true, "the GPU's GSP did not answer (RPC time-out)"};
    case 120: return {true, "an error in the GPU's GSP"};
    case 140: return {true, "an unrecovered ECC error in GPU memory"};
    case 13: return {false, "an exception in a kernel (the program's, or its driver's)"};
    case 31: return {false, "a GPU memory page fault (mostly the program's)"};
    case 43: return {false, "the GPU stopped the program's work (its own fault)"};
    case 45: return {false, "the driver ended a context (after another error)"};
    default: return {false, "not one the watch takes for the hardware's"};
    }
}

std::string xid_words(const std::string& busid, uint64_t xid, int64_t at_epoch) {
    const XidMeaning m = xid_meaning(xid);
    char when[32] = "?";
    const time_t t = static_cast<time_t>(at_epoch);
    tm utc{};
    if (gmtime_r(&t, &utc)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return "Xid " + std::to_string(xid) + " on GPU " + busid + " at " + when + ": " + m.words +
           (m.hardware ? " (the GPU's own fault: reset the GPU or drain the node)" : "");
}

}  // namespace mn
