// SPDX-License-Identifier: Apache-2.0
// mn-preflight watch [OPTIONS] -- PROGRAM: what srun --mn-nccl-watch puts in
// front of each task. It runs PROGRAM as its child, armed to keep evidence
// (the Flight Recorder's buffer and dumps, into a directory private to the
// user), and watches it from outside, with no thread in it: a process of
// the task stopped or stuck in the kernel for --window seconds, or the
// program dead by a signal, is named in one block on the step's stderr and
// a JSON report; with --abort the step ends (scancel).
#pragma once

#include "lib/check/check_options.h"

namespace mn {

// PROGRAM's own exit status (128 + N for a death by signal N), 2 for a
// usage error, 127 when PROGRAM cannot be run.
int run_watch(const CommandLine& c);

}  // namespace mn
