// SPDX-License-Identifier: Apache-2.0
// Each phase's budget, and rank 0's progress lines.
#include "helper/check/step.h"

#include <algorithm>
#include <cstdio>

namespace mn::check {

Budgets Budgets::of(double t) {
    Budgets b;
    b.rendezvous = std::max(1.0, t * 0.5);
    b.readiness = std::max(b.rendezvous, t * 0.7);
    b.transfers = std::max(t * 0.5, t - 2.5);
    b.verdict = t - 0.5;
    // A slow node costs seconds, not a whole transfer at its speed. With
    // 3 s and 1 s (at the default 60 s) a node at 20 Mbit/s among 32 was
    // named 11.8 s after launch (one all-reduce, two pair rounds, two
    // retest rounds); a healthy round needs a fraction of either.
    b.collective = std::clamp(t * 0.05, 0.5, 2.0);
    b.pair = std::clamp(t * 0.01, 0.25, 0.5);
    return b;
}

void progress(const Self& self, const std::string& line) {
    if (self.rank == 0) std::fprintf(stderr, "mn-preflight: %s\n", line.c_str());
}

}  // namespace mn::check
