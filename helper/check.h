// SPDX-License-Identifier: Apache-2.0
// mn-preflight's collective check across the ranks of a step, and its
// single-node prolog check.
#pragma once

#include <optional>
#include <string>

#include "lib/check/check_options.h"
#include "lib/plan/config.h"

namespace mn {

// Runs as one rank of the step; every rank exits with the verdict's code.
int run_check(const CheckOptions& o);

struct PrologOptions {
    double timeout = 10;
    std::string reason_file;
    Mode mode = Mode::Auto;
    bool json = false;
    std::string history_dir, metrics_dir;  // as the check's --history and --metrics-dir, for this node
};

int run_prolog(const PrologOptions& o);

}  // namespace mn
