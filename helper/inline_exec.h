// SPDX-License-Identifier: Apache-2.0
// mn-preflight check --exec: the check as the first thing each task of a
// training step does (srun --mn-preflight puts it in front of the task's
// command), then, on PASS, the user's program in the same process.
#pragma once

#include <string>
#include <vector>

#include "helper/check.h"

namespace mn {

struct InlineOptions {
    unsigned port = 0;               // the check's own rendezvous port (0: MASTER_PORT)
    std::string exclude_file;        // rank 0 writes the nodes to exclude here on FAIL
    bool job_comment = false;        // rank 0 also puts them into the job's comment
    std::string container;           // where the task runs, when not the node ("pyxis --container-image=IMG")
    std::vector<std::string> program;  // what runs on PASS
};

// Runs the check in a child process, so that the program gets this
// process (its pid) and exactly its environment, untouched by the check;
// on PASS execs the program, on FAIL returns the check's exit code.
int check_then_exec(const CheckOptions& o, const InlineOptions& io);

}  // namespace mn
