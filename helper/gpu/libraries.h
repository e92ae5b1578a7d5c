// SPDX-License-Identifier: Apache-2.0
// CUDA and NCCL, loaded together on first use: the GPU path needs both, and
// a node with neither is a CPU node. Internal to helper/gpu/.
#pragma once

#include <string>

#include "helper/gpu/cuda.h"
#include "helper/gpu/nccl.h"

namespace mn::gpu {

struct Libraries {
    bool loaded = false;
    std::string why;  // why not: the library or the call missing
    // The driver alone, bound even where NCCL is missing: a node with GPUs
    // and no NCCL is not a CPU node, and says so.
    bool cuda_bound = false;
    Cuda cuda;
    Nccl nccl;
};

// Loads libcuda.so.1 and libnccl.so.2 on the first call, once.
const Libraries& libraries();

}  // namespace mn::gpu
