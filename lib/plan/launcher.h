// Recognises a per-node launcher (torchrun) in a step's command line, so
// that torchrun started once per task, the classic wrong count, is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/util/outcome.h"

namespace mn {

// torchrun, python -m torch.distributed.run / .launch, with any path.
bool is_node_launcher(const std::vector<std::string>& argv);

// A launcher must run once per node. Returns the problem when the step
// would start it once per task instead (unless the user said
// --mn-nccl-launch=task on purpose).
std::optional<Problem> launcher_count_problem(const std::vector<std::string>& argv, LaunchMode asked,
                                              uint32_t nnodes, uint32_t ntasks);

}  // namespace mn
