// SPDX-License-Identifier: Apache-2.0
#include "helper/gpu/lanes.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>

#include "helper/gpu.h"
#include "helper/gpu/libraries.h"
#include "lib/check/preflight.h"

namespace mn::gpu {
namespace {

// What prepare() set up, for run_allreduce(); and how far it is, for an
// early NCCL init (lanes_allocated).
struct Prepared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Lane> lanes;
    std::size_t bytes = 0;
    std::vector<int> opening;  // the devices prepare() opens
    std::size_t allocated = 0;  // of them, with their buffers and memory checked
    bool failed = false;        // one could not be
};

Prepared& prepared() {
    static Prepared p;
    return p;
}

// NCCL's own buffers, per GPU, beside the check's: about this much must
// stay free, or its init fails (the out-of-memory of a GPU another process
// holds).
constexpr std::size_t kNcclHeadroom = std::size_t(1) << 30;

// The memory left beside the check's buffers: read before NCCL's init
// (which may start as soon as this passes) takes its own.
std::string check_headroom(const Cuda& cu, const Lane& ln) {
    std::size_t free_b = 0, total_b = 0;
    CUresult r = cu.mem_info(&free_b, &total_b);
    if (r != CUDA_SUCCESS) return describe(ln.dev) + ": " + cu_error(r) + " reading its free memory";
    if (free_b < kNcclHeadroom)
        return describe(ln.dev) + ": only " + std::to_string(free_b >> 20) + " MiB of " + std::to_string(total_b >> 20) +
               " MiB free after the check's buffers; NCCL needs about " + std::to_string(kNcclHeadroom >> 20) +
               " MiB: another process holds the GPU's memory (nvidia-smi shows which)";
    return "";
}

// A copy there and back of a pattern, checked.
std::string check_copy(const Cuda& cu, const Lane& ln, std::size_t bytes, uint32_t pattern) {
    std::vector<float> tile(kPatternTile);
    fill_pattern(tile, pattern);
    CUresult r = put_tiles(cu, ln, bytes, tile);
    if (r != CUDA_SUCCESS) return describe(ln.dev) + ": " + cu_error(r) + " copying to the GPU";
    if (std::string bad = get_tiles(cu, ln, bytes, tile); !bad.empty())
        return describe(ln.dev) + ": a copy there and back: " + bad;
    return "";
}

// prepare()'s lane `ln` has its buffers (ok) or could not have them.
void note_allocated(bool ok) {
    std::lock_guard<std::mutex> g(prepared().mu);
    ++prepared().allocated;
    if (!ok) prepared().failed = true;
    prepared().cv.notify_all();
}

}  // namespace

std::string open_lane(Lane& ln, std::size_t bytes, uint32_t pattern, bool for_prepare) {
    const Cuda& cu = libraries().cuda;
    CUdevice d = 0;
    CUresult r = cu.device_get(&d, ln.dev);
    if (r == CUDA_SUCCESS) r = cu.ctx_retain(&ln.ctx, d);
    if (r == CUDA_SUCCESS) r = cu.ctx_set(ln.ctx);
    if (r == CUDA_SUCCESS) r = cu.stream_create(&ln.stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = cu.event_create(&ln.t0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.event_create(&ln.t1, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.mem_alloc(&ln.vote, kVoteFloats * sizeof(float));
    if (r == CUDA_SUCCESS) r = cu.mem_alloc(&ln.buf, bytes);
    std::string e;
    if (r != CUDA_SUCCESS)
        e = describe(ln.dev) + ": " + cu_error(r) + " opening it and allocating " + std::to_string(bytes >> 20) + " MiB";
    if (e.empty()) e = check_headroom(cu, ln);
    if (for_prepare) note_allocated(e.empty());
    if (!e.empty()) return e;
    // Pinned: 1 GiB there and back from pageable memory took about 0.3 s
    // of readiness on H100; none (no such call, or no memory to pin) is
    // only slower.
    if (cu.host_alloc && cu.host_alloc(&ln.stage, kStageTiles * kPatternTile * sizeof(float), CU_MEMHOSTALLOC_PORTABLE) !=
                             CUDA_SUCCESS)
        ln.stage = nullptr;
    e = check_copy(cu, ln, bytes, pattern);
    if (e.empty()) ln.pattern = pattern;
    return e;
}

bool lanes_allocated(const std::vector<int>& devices, double seconds) {
    std::unique_lock<std::mutex> g(prepared().mu);
    Prepared& p = prepared();
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    p.cv.wait_until(g, until, [&] { return p.opening == devices && (p.failed || p.allocated == devices.size()); });
    return p.opening == devices && !p.failed && p.allocated == devices.size();
}

std::vector<Lane> prepared_lanes(const std::vector<int>& devices, std::size_t bytes) {
    std::lock_guard<std::mutex> g(prepared().mu);
    const std::vector<Lane>& lanes = prepared().lanes;
    bool same = prepared().bytes >= bytes && lanes.size() == devices.size();
    for (std::size_t l = 0; same && l < devices.size(); ++l) same = lanes[l].dev == devices[l];
    return same ? lanes : std::vector<Lane>{};
}

CUresult put_tiles(const Cuda& cu, const Lane& ln, std::size_t bytes, const std::vector<float>& tile) {
    const std::size_t step = tile.size() * sizeof(float);
    const void* from = tile.data();
    std::size_t chunk = step;
    if (ln.stage) {
        char* s = static_cast<char*>(ln.stage);
        for (std::size_t k = 0; k < kStageTiles; ++k) std::memcpy(s + k * step, tile.data(), step);
        from = s;
        chunk = kStageTiles * step;
    }
    // The first piece from the host, the rest copied from what is already
    // there, doubling (1 GiB: 6 copies on the GPU rather than 1 GiB over
    // PCIe). get_tiles reads all of it back.
    const std::size_t first = std::min(chunk, bytes);
    if (CUresult r = cu.htod(ln.buf, from, first); r != CUDA_SUCCESS) return r;
    std::size_t done = first;
    while (cu.dtod && done < bytes) {
        const std::size_t n = std::min(done, bytes - done);
        if (CUresult r = cu.dtod(ln.buf + done, ln.buf, n); r != CUDA_SUCCESS) return r;
        done += n;
    }
    // The copies on the GPU return before they end, on the context's
    // default stream, which NCCL's non-blocking stream does not wait for: a
    // read of the last float waits for them.
    if (done > first) {
        float last = 0;
        if (CUresult r = cu.dtoh(&last, ln.buf + (bytes / sizeof(float) - 1) * sizeof(float), sizeof last);
            r != CUDA_SUCCESS)
            return r;
    }
    for (std::size_t off = done; off < bytes; off += chunk)
        if (CUresult r = cu.htod(ln.buf + off, from, std::min(chunk, bytes - off)); r != CUDA_SUCCESS) return r;
    return CUDA_SUCCESS;
}

namespace {

// The first tile of `at` (len bytes, whole tiles but the last) unlike
// `tile`: its offset in `at`, or len when all are alike. Tiles compared
// on threads of their own: one core's memcmp reads about 10 GB/s, a
// 1 GiB buffer's worth is 0.1 s.
std::size_t first_unlike(const char* at, std::size_t len, const std::vector<float>& tile) {
    const std::size_t step = tile.size() * sizeof(float);
    auto alike = [&](std::size_t off) { return std::memcmp(at + off, tile.data(), std::min(step, len - off)) == 0; };
    std::vector<std::future<bool>> same;
    for (std::size_t off = step; off < len; off += step) same.push_back(std::async(std::launch::async, alike, off));
    std::size_t bad = alike(0) ? len : 0;
    for (std::size_t k = 0; k < same.size(); ++k)
        if (!same[k].get() && bad == len) bad = (k + 1) * step;
    return bad;
}

}  // namespace

std::string get_tiles(const Cuda& cu, const Lane& ln, std::size_t bytes, const std::vector<float>& tile) {
    const std::size_t step = tile.size() * sizeof(float);
    std::vector<float> own;
    if (!ln.stage) own.resize(tile.size());
    char* to = ln.stage ? static_cast<char*>(ln.stage) : reinterpret_cast<char*>(own.data());
    const std::size_t chunk = ln.stage ? kStageTiles * step : step;
    for (std::size_t off = 0; off < bytes; off += chunk) {
        const std::size_t len = std::min(chunk, bytes - off);
        if (CUresult r = cu.dtoh(to, ln.buf + off, len); r != CUDA_SUCCESS) return cu_error(r) + " copying from the GPU";
        const std::size_t at = first_unlike(to, len, tile);
        if (at == len) continue;
        std::vector<float> piece(std::min(step, len - at) / sizeof(float));
        std::memcpy(piece.data(), to + at, piece.size() * sizeof(float));
        return first_difference(piece, tile, (off + at) / sizeof(float));
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
    // NVML's init beside the GPUs' opening: health() reads right after.
    start_health();
    {
        std::lock_guard<std::mutex> g(prepared().mu);
        prepared().opening = devs;
        prepared().allocated = 0;
        prepared().failed = false;
        prepared().cv.notify_all();
    }
    // Each GPU on its own thread (a context, its buffer written and read
    // back): a node's GPUs cost the slowest one's time, not their sum.
    std::vector<Lane> lanes(devs.size());
    std::vector<std::future<std::string>> opened;
    for (std::size_t l = 0; l < devs.size(); ++l) {
        lanes[l].dev = devs[l];
        opened.push_back(std::async(std::launch::async, [&lanes, l, bytes, first_pattern] {
            return open_lane(lanes[l], bytes, first_pattern + static_cast<uint32_t>(l), true);
        }));
    }
    std::string first;
    for (auto& o : opened)
        if (std::string e = o.get(); first.empty()) first = e;
    if (!first.empty()) return first;
    std::lock_guard<std::mutex> g(prepared().mu);
    prepared().lanes = lanes;
    prepared().bytes = bytes;
    return "";
}

}  // namespace mn::gpu
