// SPDX-License-Identifier: Apache-2.0
// NCCL's RAS (2.24 and later): a thread in every NCCL process serves a
// report of the job's communicators at NCCL_RAS_ADDR (default
// localhost:28028, shared by every process of one user through
// SO_REUSEPORT, so two jobs of one user on a node answer for each other).
// The watch gives each step an address of its own on the loopback
// network and asks it once, when it ends a step: a STATUS asked while
// ranks are missing has crashed NCCL processes before 2.29.2
// (NVIDIA/nccl#1762), so it is never asked of a step that goes on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mn {

// "127.A.B.C:28028": the step's own loopback address (every 127/8
// address is the loopback interface's on Linux, in any network
// namespace), from its job and step; never 127.0.0.1, the default's.
std::string ras_address(uint32_t job, uint32_t step);

// What the report says that matters to a hang, as lines of evidence: its
// NCCL version; the communicators whose status is not RUNNING or whose
// errors are not OK; the lines of its Errors and Warnings (dead and
// missing ranks, time-outs, mismatched counts). At most 16 lines of at
// most 300 bytes each; none from text that is no RAS report.
struct RasSummary {
    std::string version;              // "NCCL version 2.28.9 compiled with CUDA 12.9", "" where none
    std::vector<std::string> lines;   // the telling ones
    bool troubled = false;            // any communicator or error line at all
};
RasSummary summarize_ras(const std::string& reply);

}  // namespace mn
