// srun --mn-preflight[=OPTIONS] (or MN_NCCL_PREFLIGHT=OPTIONS): the check a
// step runs in each task before the user's program, and what it leaves for
// a batch script when it fails. Plain values, parsed once in srun (where a
// bad value stops srun) and again in slurmstepd.
#pragma once

#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

struct PreflightRequest {
    bool enabled = false;
    // mn-preflight check's own options, in its spelling ("--timeout", "30").
    std::vector<std::string> check_args;
    // On FAIL, the nodes to exclude in Slurm's hostlist form go here.
    std::string exclude_file;
    // On FAIL, also put them into the job's comment (scontrol update).
    bool job_comment = false;
};

// OPTIONS is a comma list; "" (the bare option) means the defaults, and
// "off" or "0" means no check (so MN_NCCL_PREFLIGHT=off undoes a default).
//   timeout=S  min-busbw=GBPS  size=BYTES  iters=N  no-pairs  cpu  gpu
//   mode=MODE  json  exclude-file=PATH  comment
// `source` names where the text came from in the error ("--mn-preflight").
Outcome<PreflightRequest> parse_preflight_request(const std::string& options, const std::string& source);

// The argv put in front of each task's command:
//   BIN check --exec --port PORT [check args] [--exclude-file P] [--job-comment] --
std::vector<std::string> preflight_argv(const PreflightRequest& r, const std::string& bin, unsigned port);

// The port the check listens on: never the program's MASTER_PORT, the same
// on every node (derived from values every node has).
unsigned preflight_port(unsigned master_port, unsigned range_lo, unsigned range_hi);

// The Slurm release the inline check needs (spank_prepend_task_argv).
constexpr const char* kPreflightNeedsSlurm = "24.11";
// What a user of an older Slurm does instead, for the refusal message.
std::string preflight_alternative();

}  // namespace mn
