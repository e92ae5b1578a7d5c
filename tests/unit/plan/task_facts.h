// SPDX-License-Identifier: Apache-2.0
// A task's facts by position, as the plan's tests build them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/plan/step_plan.h"

inline mn::TaskFacts facts(uint32_t local, uint32_t global, uint32_t gpus, std::vector<std::string> list = {}) {
    mn::TaskFacts t;
    t.local_id = local;
    t.global_id = global;
    t.gpus = gpus;
    t.gpu_list = std::move(list);
    return t;
}
