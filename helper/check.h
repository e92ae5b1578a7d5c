// mn-preflight's collective check across the ranks of a step, and its
// single-node prolog check.
#pragma once

#include <optional>
#include <string>

#include "lib/plan/config.h"

namespace mn {

struct CheckOptions {
    std::string path = "auto";  // auto, gpu, cpu
    double timeout = 60;        // the whole check, seconds
    std::optional<double> min_busbw;
    std::size_t bytes = 0;       // 0: the path's default
    int iters = 0;               // 0: the path's default
    std::size_t pair_bytes = 0;  // 0: the path's default
    bool pairs = true;
    bool json = false;
    Mode mode = Mode::Auto;
};

// Runs as one rank of the step; every rank exits with the verdict's code.
int run_check(const CheckOptions& o);

struct PrologOptions {
    double timeout = 10;
    std::string reason_file;
    Mode mode = Mode::Auto;
    bool json = false;
};

int run_prolog(const PrologOptions& o);

}  // namespace mn
