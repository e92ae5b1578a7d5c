// SPDX-License-Identifier: Apache-2.0
// A GPU's own word that it is at fault: the Xid events NVML delivers
// (helper/gpu/nvml.cc watches them for the hang watch). Some Xids are the
// hardware's (an ECC error it could not contain, a GPU off the bus, its
// GSP not answering), others the program's (a page fault, an exception in
// a kernel it ran): only the first are host evidence, so that a node is
// excluded for its GPU and never for the program's own error.
#pragma once

#include <cstdint>
#include <string>

namespace mn {

struct XidMeaning {
    bool hardware = false;  // the GPU or its driver, not the program
    std::string words;      // "the GPU has fallen off the bus"
};

// What NVIDIA's Xid catalogue says of `xid`, as far as the watch needs it.
XidMeaning xid_meaning(uint64_t xid);

// One line of evidence: "Xid 79 on GPU 0000:3b:00.0 at 2026-12-06T16:50:02Z:
// the GPU has fallen off the bus (hardware: reset or drain the node)".
std::string xid_words(const std::string& busid, uint64_t xid, int64_t at_epoch);

}  // namespace mn
