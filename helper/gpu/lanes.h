// A lane: one GPU of this process, opened for the check (context, stream,
// timing events, the all-reduce's buffer and the vote's two floats). prepare()
// opens them in readiness; run_allreduce() takes them over. Internal to
// helper/gpu/.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "helper/gpu/cuda.h"

namespace mn::gpu {

struct Lane {
    int dev = 0;
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
    CUdeviceptr buf = 0, vote = 0;
    CUevent t0 = nullptr, t1 = nullptr;
};

// Opens `ln.dev`, allocates `bytes` there, checks a copy there and back and
// that enough memory stays free for NCCL. "" when ready, else what failed,
// naming the GPU.
std::string open_lane(Lane& ln, std::size_t bytes);

// The lanes prepare() opened when they are these devices with at least
// `bytes`, else none.
std::vector<Lane> prepared_lanes(const std::vector<int>& devices, std::size_t bytes);

// Seconds between the lane's two events.
double lane_seconds(const Cuda& cu, const Lane& ln);

}  // namespace mn::gpu
