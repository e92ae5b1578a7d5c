// SPDX-License-Identifier: Apache-2.0
// A lane: one GPU of this process, opened for the check (context, stream,
// timing events, the all-reduce's buffer and the vote's floats). prepare()
// opens them in readiness; run_allreduce() takes them over. Internal to
// helper/gpu/.
#pragma once

#include <cstddef>
#include <cstdint>
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
    // Pinned host memory for copies to and from buf, kStageTiles tiles
    // (null where the driver gave none: the copies then go from pageable
    // memory, at about half the speed). Held until the process ends.
    void* stage = nullptr;
    int64_t pattern = -1;  // the fill_pattern position its buffer holds, -1 none
};

// Opens `ln.dev`, allocates `bytes` there, checks that enough memory stays
// free for NCCL and a copy there and back (of fill_pattern(`pattern`),
// which the buffer then holds). "" when ready, else what failed, naming
// the GPU. `for_prepare`: one of prepare()'s lanes, counted for
// lanes_allocated() once its memory is checked.
std::string open_lane(Lane& ln, std::size_t bytes, uint32_t pattern, bool for_prepare = false);

// Waits up to `seconds` for prepare() on exactly these devices to have
// allocated every lane's buffers and checked its free memory: NCCL's init
// may start then (its own memory no longer in the way of the check), beside
// the copies. False when one could not, or not in time.
bool lanes_allocated(const std::vector<int>& devices, double seconds);

// The lanes prepare() opened when they are these devices with at least
// `bytes`, else none.
std::vector<Lane> prepared_lanes(const std::vector<int>& devices, std::size_t bytes);

// Floats of a lane's vote (allreduce.cc's Agreed).
constexpr std::size_t kVoteFloats = 3;

// Tiles of kPatternTile floats in a lane's pinned stage.
constexpr std::size_t kStageTiles = 4;

// `bytes` of the lane's buf written with `tile` over and over (the pattern
// in tiles, lib/check/preflight's kPatternTile): the first stage's worth
// from the host, the rest copied on the GPU from what is there.
CUresult put_tiles(const Cuda& cu, const Lane& ln, std::size_t bytes, const std::vector<float>& tile);

// `bytes` of the lane's buf read back, through its stage, and compared
// with `tile` a tile at a time: "" when alike, else its first wrong
// element (lib/check/preflight's first_difference) or the CUDA error.
std::string get_tiles(const Cuda& cu, const Lane& ln, std::size_t bytes, const std::vector<float>& tile);

// Seconds between the lane's two events.
double lane_seconds(const Cuda& cu, const Lane& ln);

}  // namespace mn::gpu
