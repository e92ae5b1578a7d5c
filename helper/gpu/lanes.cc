#include "helper/gpu/lanes.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "helper/gpu.h"
#include "helper/gpu/libraries.h"
#include "lib/check/preflight.h"

namespace mn::gpu {
namespace {

// What prepare() set up, for run_allreduce().
struct Prepared {
    std::mutex mu;
    std::vector<Lane> lanes;
    std::size_t bytes = 0;
};

Prepared& prepared() {
    static Prepared p;
    return p;
}

// NCCL's own buffers, per GPU, beside the check's: about this much must
// stay free, or its init fails (the out-of-memory of a GPU another process
// holds).
constexpr std::size_t kNcclHeadroom = std::size_t(1) << 30;

// A copy there and back of a pattern, checked; then the memory left.
std::string check_lane(const Cuda& cu, const Lane& ln, std::size_t bytes, uint32_t pattern) {
    std::vector<float> tile(kPatternTile);
    fill_pattern(tile, pattern);
    CUresult r = put_tiles(cu, ln.buf, bytes, tile);
    if (r != CUDA_SUCCESS) return describe(ln.dev) + ": " + cu_error(r) + " copying to the GPU";
    if (std::string bad = get_tiles(cu, ln.buf, bytes, tile); !bad.empty())
        return describe(ln.dev) + ": a copy there and back: " + bad;
    std::size_t free_b = 0, total_b = 0;
    r = cu.mem_info(&free_b, &total_b);
    if (r != CUDA_SUCCESS) return describe(ln.dev) + ": " + cu_error(r) + " reading its free memory";
    if (free_b < kNcclHeadroom)
        return describe(ln.dev) + ": only " + std::to_string(free_b >> 20) + " MiB of " + std::to_string(total_b >> 20) +
               " MiB free after the check's buffers; NCCL needs about " + std::to_string(kNcclHeadroom >> 20) +
               " MiB: another process holds the GPU's memory (nvidia-smi shows which)";
    return "";
}

}  // namespace

std::string open_lane(Lane& ln, std::size_t bytes, uint32_t pattern) {
    const Cuda& cu = libraries().cuda;
    CUdevice d = 0;
    CUresult r = cu.device_get(&d, ln.dev);
    if (r == CUDA_SUCCESS) r = cu.ctx_retain(&ln.ctx, d);
    if (r == CUDA_SUCCESS) r = cu.ctx_set(ln.ctx);
    if (r == CUDA_SUCCESS) r = cu.stream_create(&ln.stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = cu.event_create(&ln.t0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.event_create(&ln.t1, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.mem_alloc(&ln.vote, 2 * sizeof(float));
    if (r == CUDA_SUCCESS) r = cu.mem_alloc(&ln.buf, bytes);
    if (r != CUDA_SUCCESS)
        return describe(ln.dev) + ": " + cu_error(r) + " opening it and allocating " + std::to_string(bytes >> 20) +
               " MiB";
    std::string e = check_lane(cu, ln, bytes, pattern);
    if (e.empty()) ln.pattern = pattern;
    return e;
}

std::vector<Lane> prepared_lanes(const std::vector<int>& devices, std::size_t bytes) {
    std::lock_guard<std::mutex> g(prepared().mu);
    const std::vector<Lane>& lanes = prepared().lanes;
    bool same = prepared().bytes >= bytes && lanes.size() == devices.size();
    for (std::size_t l = 0; same && l < devices.size(); ++l) same = lanes[l].dev == devices[l];
    return same ? lanes : std::vector<Lane>{};
}

CUresult put_tiles(const Cuda& cu, CUdeviceptr buf, std::size_t bytes, const std::vector<float>& tile) {
    const std::size_t step = tile.size() * sizeof(float);
    for (std::size_t off = 0; off < bytes; off += step)
        if (CUresult r = cu.htod(buf + off, tile.data(), std::min(step, bytes - off)); r != CUDA_SUCCESS) return r;
    return CUDA_SUCCESS;
}

std::string get_tiles(const Cuda& cu, CUdeviceptr buf, std::size_t bytes, const std::vector<float>& tile) {
    const std::size_t step = tile.size() * sizeof(float);
    std::vector<float> piece(tile.size());
    for (std::size_t off = 0; off < bytes; off += step) {
        const std::size_t len = std::min(step, bytes - off);
        if (CUresult r = cu.dtoh(piece.data(), buf + off, len); r != CUDA_SUCCESS)
            return cu_error(r) + " copying from the GPU";
        if (std::memcmp(piece.data(), tile.data(), len) == 0) continue;
        piece.resize(len / sizeof(float));
        return first_difference(piece, tile, off / sizeof(float));
    }
    return "";
}

double lane_seconds(const Cuda& cu, const Lane& ln) {
    float ms = 0;
    cu.ctx_set(ln.ctx);
    return cu.event_elapsed(&ms, ln.t0, ln.t1) == CUDA_SUCCESS ? ms / 1e3 : 0;
}

std::string prepare(const std::vector<int>& devs, std::size_t bytes, uint32_t first_pattern) {
    if (!libraries().loaded) return libraries().why;
    std::vector<Lane> lanes(devs.size());
    for (std::size_t l = 0; l < devs.size(); ++l) {
        lanes[l].dev = devs[l];
        if (std::string e = open_lane(lanes[l], bytes, first_pattern + static_cast<uint32_t>(l)); !e.empty()) return e;
    }
    std::lock_guard<std::mutex> g(prepared().mu);
    prepared().lanes = lanes;
    prepared().bytes = bytes;
    return "";
}

}  // namespace mn::gpu
