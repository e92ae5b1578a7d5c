// SPDX-License-Identifier: Apache-2.0
// Which Slurm nodes a failed pre-flight check says to leave out, read back
// from the verdict mn-preflight printed (its table or its --json object), so
// that `sbatch --exclude=$(cat FILE)` can act on it.
#pragma once

#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

struct ExcludeList {
    std::vector<std::string> nodes;  // Slurm node names, in the step's order
    // False when the output held no verdict row at all (the check stopped
    // before its table): then nobody can be named, and nobody is.
    bool known = false;
};

// A node is excluded when a row of its own (its name, or NAME-emuK under
// --mn-emulate-nodes) has a verdict other than "ok" or "waited on ...", or
// when the verdict has rows but none from it (its ranks never arrived),
// unless the verdict says no node is to blame (strangers disturbed it, or
// ranks of another mn-preflight release came): then only its own rows.
ExcludeList nodes_to_exclude(const std::string& check_output, const std::vector<std::string>& step_hosts);

// An exclude file's text with `node` added (the hang watch names a node for
// its link): one line in Slurm's hostlist form, the nodes already there
// kept. Text that is not a host list is refused: `--exclude` could not
// take what it would become.
Outcome<std::string> add_to_exclude(const std::string& existing, const std::string& node);

}  // namespace mn
