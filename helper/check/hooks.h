// SPDX-License-Identifier: Apache-2.0
// mn-preflight's test hooks: environment variables obeyed only by a build
// configured with --enable-test-hooks (scripts/build.sh, the sanitizer
// build; never the packages, and test-package.sh checks it). Each moves
// one bound or plays one fault, so a test shows a path without the
// hardware or the scale that takes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "helper/check/self.h"

namespace mn::check {

// A bound a test hook may move: the variable's number in a build with
// --enable-test-hooks when it is set, else `dflt`.
uint32_t hook_bound(const char* var, uint32_t dflt);
// The test hook MN_PREFLIGHT_START_LOG=FILE: every rank appends "RANK
// UNIX-SECONDS" (its check's start, wall clock) to FILE, so that a
// benchmark can tell launch skew from the rendezvous' own time.
void log_start(const Self& self, double start);
// The same file (test hook): "RANK UNIX_TIME WHAT" when the rank is done
// with WHAT ("checked": its check over; what the process's end frees,
// NCCL's communicators, comes after; "rendezvous": rank 0's, every rank
// came).
void log_end(const Self& self, const char* what);

// The test hook MN_PREFLIGHT_PROFILE=FILE: rank 0 samples where its CPU
// time goes (SIGPROF every millisecond of the process's CPU, the
// interrupted call stack of whichever thread ran) and writes the samples to
// FILE at its end: "base ADDR" (where the program is loaded), then one line
// of addresses per sample, innermost first.
// scripts/bench/profile-report.sh names them with the unstripped build.
void start_profile(const Self& self);

// Test hooks, obeyed only by a build configured with --enable-test-hooks
// (scripts/build.sh; never the packages).
// The test hook MN_PREFLIGHT_FAIL_SETUP=RANK[,RANK]: those ranks' set-up
// fails on purpose, so the failure path can be shown without a broken GPU.
bool setup_fails_on_purpose(uint32_t rank);
// The test hook MN_PREFLIGHT_EXIT_IN_COLLECTIVE=RANK[,RANK]: those ranks'
// processes end as the collective starts, leaving the others inside NCCL's
// init (or the ring's connect) waiting for them, where the stop word must
// reach them.
bool exits_on_purpose(uint32_t rank);
// The test hooks MN_PREFLIGHT_STALL_PAIRS=RANK[,RANK] (the first pair
// rounds only: noise that a retest must clear) and
// MN_PREFLIGHT_STALL_RETESTS=RANK[,RANK] (the retests too: a slow node
// that they must confirm), GPU path: those ranks' hosts wait kStall
// seconds before each launch of a pair's timed loop, and the GPU idles.
bool stalls_pairs(uint32_t rank, bool retest);
constexpr double kStall = 0.05;
// The test hook MN_PREFLIGHT_SLOW_FROM_ROUND=K, CPU path: every pair of
// the first rounds from round K (0-based) on, and every retest and
// control, waits kPassPause seconds per pass, or 4 times the pass's own
// time if longer: load that arrives in the middle of the check and slows
// every node alike, by a factor of 5 or more on any build.
bool slowed_from_round(const std::string& tag);
// The test hook MN_PREFLIGHT_SIM_SHARE=1, for mn-rank-sim
// (tests/bench/mn_rank_sim.cc: the other ranks played in one process, over
// the real protocol, with no data path): rank 0's own share of the CPU
// all-reduce counts as done, 1 ms a pass, without its ring.
bool shares_simulated();
// The test hook MN_PREFLIGHT_GPU_BUSES=ADDR[,ADDR]: the PCI addresses the
// fingerprint reads the GPUs' PCIe links of (lib/check/node_reading), for
// nodes without GPUs given a sysfs fixture tree; none when not set.
std::optional<std::vector<std::string>> gpu_buses_on_purpose();
constexpr double kPassPause = 0.02;

// MN_PREFLIGHT_QUIET_ABOVE moves quiet_rendezvous' bound (control/line.h),
// MN_PREFLIGHT_GATHER_ABOVE gathers' (step.h).

}  // namespace mn::check
