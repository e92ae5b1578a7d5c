// SPDX-License-Identifier: Apache-2.0
// The hang watch's third signal (helper/watch.cc): where every rank stands
// in its collectives, from the Flight Recorder each rank's watch asked its
// program for while no collective completed, compared across the step by
// rank 0's watch. A process can look healthy from outside (running,
// sleeping, its link up) and still hold the step: a rank that never calls
// the collective the others wait in (it waits on something else: an
// application desync), one that calls another collective at the same
// place, or one whose GPU never starts the collective because a kernel
// before it does not end. Only the comparison shows these; no node is
// blamed for them (no host evidence).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/check/flight_record.h"
#include "lib/check/stall.h"

namespace mn {

// One rank as its node's watch saw it: its Flight Recorder, unchanged
// (no collective enqueued or completed) for `still` seconds, and the CPU
// its task's processes used meanwhile.
struct RankPosition {
    std::string rank, host, local_rank, comm, gpu;  // gpu: CUDA_VISIBLE_DEVICES as the task has it ("" unknown)
    int pid = 0;
    double still = 0;     // seconds its position has not moved
    double cpu = 0;       // its task's CPU over those seconds, in cores (0.02: 2 % of one core)
    FlightSummary flight;
    // The hardware Xid events of its node's GPUs since the step began, as
    // its node's watch saw them (lib/check/gpu_events.h's xid_words): the
    // host evidence that blames a node for a GPU stuck on it.
    std::vector<std::string> gpu_events;
    // The dump its position was read from, on its own host ("" unknown):
    // where every rank's Flight Recorder lies, for fr_trace.
    std::string dump;
};

struct PositionRules {
    // Below this many cores over the still time, a rank outside the
    // collectives is idle: it waits on something that is not the others
    // (torch's own threads wake a few times a second and use well under 1 %).
    double idle_cpu = 0.1;
    // A rank busy in its own code while the others wait (rank 0 alone
    // writing a checkpoint) is named only after this long: 600 s, the
    // time-out at which PyTorch's own watchdog ends such a job.
    double busy_after = 600;
};

// What the positions show, as reports for the step's block: every rank
// that holds the others, none where all stand at the same place (a pause
// every rank shares: a checkpoint, an evaluation) or where the positions
// do not say who holds whom. Kinds: "application desync" (never called the
// collective the others wait in, idle; or called another one at the same
// place), "busy outside collectives" (busy_after passed), "GPU stuck" (its
// collective scheduled, the others' started). Only a GPU stuck on a node
// whose GPUs reported a hardware Xid carries host evidence (its node is
// excluded); the others blame no node.
std::vector<WatchReport> compare_positions(const std::vector<RankPosition>& ranks, const PositionRules& rules = {});

}  // namespace mn
