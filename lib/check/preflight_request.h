// SPDX-License-Identifier: Apache-2.0
// srun --mn-preflight[=OPTIONS] (or MN_NCCL_PREFLIGHT=OPTIONS): the check a
// step runs in each task before the user's program, and what it leaves for
// a batch script when it fails. Plain values, parsed once in srun (where a
// bad value stops srun) and again in slurmstepd. The options and their
// limits are the check's own table (lib/check/check_options.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lib/plan/step_plan.h"
#include "lib/util/outcome.h"

namespace mn {

struct PreflightRequest {
    bool enabled = false;
    // Where it was asked for, for messages: "--mn-nccl-preflight" (or its
    // alias "--mn-preflight") or "MN_NCCL_PREFLIGHT".
    std::string source;
    // mn-preflight check's own options, in its spelling ("--timeout", "30").
    std::vector<std::string> check_args;
    // On FAIL, the nodes to exclude in Slurm's hostlist form go here.
    std::string exclude_file;
    // On FAIL, also put them into the job's comment (scontrol update).
    bool job_comment = false;
};

// A whole value that is a switch rather than options: on with the defaults
// ("" (the bare option) or a true word of lib/util/boolean.h) or off (a
// false word); nullopt for anything else.
std::optional<bool> preflight_switch(const std::string& value);

// OPTIONS is a switch word or a comma list of the table's inline options:
//   timeout=S  min-busbw=GBPS  size=BYTES  iters=N  no-pairs  cpu  gpu
//   mode=MODE  json  exclude-file=PATH  comment
// `source` names where the text came from in the error ("--mn-preflight").
Outcome<PreflightRequest> parse_preflight_request(const std::string& options, const std::string& source);

// The check a step asked for, by one rule in every context: the option's
// value when it was given, else MN_NCCL_PREFLIGHT's, else none. `env` is
// the context's lookup (getenv in srun, spank_getenv in slurmstepd).
constexpr const char* kPreflightOption = "--mn-nccl-preflight";
constexpr const char* kPreflightAlias = "--mn-preflight";  // the older spelling, still read
constexpr const char* kPreflightEnv = "MN_NCCL_PREFLIGHT";
Outcome<PreflightRequest> requested_preflight(const std::optional<std::string>& option, const EnvLookup& env);

// The argv put in front of each task's command:
//   BIN check --exec --port PORT [check args] [--exclude-file P] [--job-comment]
//       [--container WHAT] --
// The site's history= and metrics_dir= (plugstack.conf) are added unless
// the user named their own. `container` says where the task runs when it
// is not the node ("pyxis --container-image=IMG"), for the check's words
// about its outputs there.
std::vector<std::string> preflight_argv(const PreflightRequest& r, const std::string& bin, unsigned port,
                                        const SiteConfig& site = SiteConfig{}, const std::string& container = "");

// The port the check listens on: never the program's MASTER_PORT, the same
// on every node (derived from values every node has).
unsigned preflight_port(unsigned master_port, unsigned range_lo, unsigned range_hi);

// The Slurm release the inline check needs (spank_prepend_task_argv).
constexpr const char* kPreflightNeedsSlurm = "23.11";
// What a user of an older Slurm does instead, for the refusal message.
std::string preflight_alternative();

}  // namespace mn
