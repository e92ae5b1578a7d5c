// SPDX-License-Identifier: Apache-2.0
// One of Slurm's commands (scontrol, scancel) run from a task, as the
// job's user, and waited for.
#pragma once

#include <string>
#include <vector>

namespace mn {

// Runs ARGV (argv[0] looked up on PATH) and waits. False with `why` set
// ("scancel is not here", "scancel 7.0 exited with code 1") when it could
// not run or did not exit 0; *status: waitpid's status where it ran.
bool run_slurm_command(const std::vector<std::string>& argv, std::string& why, int* status = nullptr);

}  // namespace mn
