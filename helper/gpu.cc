#include "gpu.h"

#include "lib/preflight.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace mn::gpu {
namespace {

// The few CUDA driver and NCCL entry points used, declared from their
// documented C signatures; handles are opaque pointers, enums are int.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;
struct NcclId {
    char internal[128];
};

struct Api {
    bool loaded = false;
    std::string why;
    CUresult (*cuInit)(unsigned) = nullptr;
    CUresult (*cuDeviceGetCount)(int*) = nullptr;
    CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
    CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
    CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
    CUresult (*cuDevicePrimaryCtxRetain)(Handle*, CUdevice) = nullptr;
    CUresult (*cuCtxSetCurrent)(Handle) = nullptr;
    CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t) = nullptr;
    CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, std::size_t) = nullptr;
    CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, std::size_t) = nullptr;
    CUresult (*cuStreamCreate)(Handle*, unsigned) = nullptr;
    CUresult (*cuStreamSynchronize)(Handle) = nullptr;
    CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
    int (*ncclGetVersion)(int*) = nullptr;
    int (*ncclGetUniqueId)(NcclId*) = nullptr;
    int (*ncclCommInitRank)(Handle*, int, NcclId, int) = nullptr;
    int (*ncclAllReduce)(const void*, void*, std::size_t, int, int, Handle, Handle) = nullptr;
    int (*ncclGroupStart)() = nullptr;
    int (*ncclGroupEnd)() = nullptr;
    int (*ncclCommDestroy)(Handle) = nullptr;
    int (*ncclCommSplit)(Handle, int, int, Handle*, void*) = nullptr;  // NCCL >= 2.18
    const char* (*ncclGetErrorString)(int) = nullptr;
};

constexpr int kNcclFloat32 = 7;
constexpr int kNcclSum = 0;
constexpr int kNcclSplitNoColor = -1;

template <typename F>
bool sym(void* lib, const char* name, F& f) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
}

Api& api() {
    static Api a = [] {
        Api x;
        void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!cuda) {
            x.why = "no CUDA driver (libcuda.so.1 not found)";
            return x;
        }
        const char* nccl_path = std::getenv("MN_PREFLIGHT_NCCL");
        void* nccl = dlopen(nccl_path && *nccl_path ? nccl_path : "libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
        if (!nccl) {
            x.why = std::string("no NCCL (") + (nccl_path && *nccl_path ? nccl_path : "libnccl.so.2") +
                    " not found; set MN_PREFLIGHT_NCCL=/path/to/libnccl.so.2)";
            return x;
        }
        bool ok = sym(cuda, "cuInit", x.cuInit) && sym(cuda, "cuDeviceGetCount", x.cuDeviceGetCount) &&
                  sym(cuda, "cuDeviceGet", x.cuDeviceGet) && sym(cuda, "cuDeviceGetName", x.cuDeviceGetName) &&
                  sym(cuda, "cuDeviceGetPCIBusId", x.cuDeviceGetPCIBusId) &&
                  sym(cuda, "cuDevicePrimaryCtxRetain", x.cuDevicePrimaryCtxRetain) &&
                  sym(cuda, "cuCtxSetCurrent", x.cuCtxSetCurrent) && sym(cuda, "cuMemAlloc_v2", x.cuMemAlloc) &&
                  sym(cuda, "cuMemFree_v2", x.cuMemFree) && sym(cuda, "cuMemcpyHtoD_v2", x.cuMemcpyHtoD) &&
                  sym(cuda, "cuMemcpyDtoH_v2", x.cuMemcpyDtoH) && sym(cuda, "cuStreamCreate", x.cuStreamCreate) &&
                  sym(cuda, "cuStreamSynchronize", x.cuStreamSynchronize) &&
                  sym(cuda, "cuGetErrorString", x.cuGetErrorString);
        if (!ok) {
            x.why = "libcuda.so.1 lacks a driver API call mn-preflight needs (driver too old?)";
            return x;
        }
        ok = sym(nccl, "ncclGetVersion", x.ncclGetVersion) && sym(nccl, "ncclGetUniqueId", x.ncclGetUniqueId) &&
             sym(nccl, "ncclCommInitRank", x.ncclCommInitRank) && sym(nccl, "ncclAllReduce", x.ncclAllReduce) &&
             sym(nccl, "ncclGroupStart", x.ncclGroupStart) && sym(nccl, "ncclGroupEnd", x.ncclGroupEnd) &&
             sym(nccl, "ncclCommDestroy", x.ncclCommDestroy) && sym(nccl, "ncclGetErrorString", x.ncclGetErrorString);
        if (!ok) {
            x.why = "libnccl.so.2 lacks a call mn-preflight needs (NCCL too old?)";
            return x;
        }
        sym(nccl, "ncclCommSplit", x.ncclCommSplit);
        x.loaded = true;
        return x;
    }();
    return a;
}

std::string cu_error(CUresult r) {
    const char* s = nullptr;
    if (api().cuGetErrorString) api().cuGetErrorString(r, &s);
    return "CUDA error " + std::to_string(r) + (s ? std::string(" (") + s + ")" : "");
}

std::string nccl_error(int r) {
    return "NCCL error " + std::to_string(r) + " (" + api().ncclGetErrorString(r) + ")";
}

std::string describe(int dev) {
    Api& a = api();
    CUdevice d = 0;
    char bus[32] = {0};
    if (a.cuDeviceGet(&d, dev) == 0) a.cuDeviceGetPCIBusId(bus, sizeof bus, d);
    return "GPU" + std::to_string(dev) + (bus[0] ? std::string(" (") + bus + ")" : "");
}

struct Lane {
    int dev = 0;
    Handle ctx = nullptr;
    Handle stream = nullptr;
    Handle comm = nullptr;
    CUdeviceptr buf = 0;
};

std::vector<std::string> transports_in(const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return nccl_transports(text);
}

}  // namespace

Availability probe() {
    Availability a;
    Api& x = api();
    if (!x.loaded) {
        a.why = x.why;
        return a;
    }
    if (CUresult r = x.cuInit(0); r != 0) {
        a.why = "cuInit failed: " + cu_error(r);
        return a;
    }
    if (CUresult r = x.cuDeviceGetCount(&a.devices); r != 0) {
        a.why = "cuDeviceGetCount failed: " + cu_error(r);
        return a;
    }
    int v = 0;
    x.ncclGetVersion(&v);
    // 2.9+ encodes major*10000 + minor*100 + patch.
    a.nccl_version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    if (a.devices == 0) {
        a.why = "no GPU visible (CUDA_VISIBLE_DEVICES='" +
                std::string(std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "") + "')";
        return a;
    }
    a.ok = true;
    return a;
}

std::vector<DeviceInfo> devices() {
    std::vector<DeviceInfo> out;
    Api& x = api();
    int n = 0;
    if (!x.loaded || x.cuDeviceGetCount(&n) != 0) return out;
    for (int i = 0; i < n; ++i) {
        CUdevice d = 0;
        char name[128] = {0}, bus[32] = {0};
        if (x.cuDeviceGet(&d, i) != 0) continue;
        x.cuDeviceGetName(name, sizeof name, d);
        x.cuDeviceGetPCIBusId(bus, sizeof bus, d);
        out.push_back({i, name, bus});
    }
    return out;
}

std::string unique_id() {
    NcclId id{};
    if (api().ncclGetUniqueId(&id) != 0) return "";
    std::string hex;
    static const char kDigits[] = "0123456789abcdef";
    for (char c : id.internal) {
        hex.push_back(kDigits[(static_cast<unsigned char>(c) >> 4) & 15]);
        hex.push_back(kDigits[static_cast<unsigned char>(c) & 15]);
    }
    return hex;
}

AllreduceResult run_allreduce(const AllreduceJob& job) {
    AllreduceResult res;
    Api& x = api();
    NcclId id{};
    if (job.id.size() != 2 * sizeof id.internal) {
        res.error = "rank 0 sent no NCCL unique id";
        return res;
    }
    for (std::size_t i = 0; i < sizeof id.internal; ++i)
        id.internal[i] = static_cast<char>(std::strtoul(job.id.substr(2 * i, 2).c_str(), nullptr, 16));
    // NCCL_DEBUG_FILE=job.log_path was set before NCCL's first call.

    const std::size_t count = job.bytes / sizeof(float);
    std::vector<Lane> lanes(job.devices.size());
    std::vector<float> host(count);
    for (std::size_t l = 0; l < lanes.size(); ++l) {
        Lane& ln = lanes[l];
        ln.dev = job.devices[l];
        CUdevice d = 0;
        CUresult r = x.cuDeviceGet(&d, ln.dev);
        if (r == 0) r = x.cuDevicePrimaryCtxRetain(&ln.ctx, d);
        if (r == 0) r = x.cuCtxSetCurrent(ln.ctx);
        if (r == 0) r = x.cuStreamCreate(&ln.stream, 1);
        if (r == 0) r = x.cuMemAlloc(&ln.buf, job.bytes);
        if (r == 0) {
            fill_pattern(host, static_cast<uint32_t>(job.first_rank) + static_cast<uint32_t>(l));
            r = x.cuMemcpyHtoD(ln.buf, host.data(), job.bytes);
        }
        if (r != 0) {
            res.error = describe(ln.dev) + ": " + cu_error(r);
            return res;
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    int nr = x.ncclGroupStart();
    for (std::size_t l = 0; l < lanes.size() && nr == 0; ++l) {
        x.cuCtxSetCurrent(lanes[l].ctx);
        nr = x.ncclCommInitRank(&lanes[l].comm, job.nranks, id, job.first_rank + static_cast<int>(l));
    }
    int end = x.ncclGroupEnd();
    if (nr == 0) nr = end;
    res.init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (nr != 0) {
        res.error = "ncclCommInitRank on " + describe(lanes.empty() ? 0 : lanes[0].dev) + ": " + nccl_error(nr);
        return res;
    }
    auto one_round = [&]() -> std::string {
        int rc = x.ncclGroupStart();
        for (auto& ln : lanes) {
            x.cuCtxSetCurrent(ln.ctx);
            if (rc == 0) rc = x.ncclAllReduce(reinterpret_cast<void*>(ln.buf), reinterpret_cast<void*>(ln.buf), count,
                                              kNcclFloat32, kNcclSum, ln.comm, ln.stream);
        }
        int e = x.ncclGroupEnd();
        if (rc == 0) rc = e;
        return rc == 0 ? "" : "ncclAllReduce: " + nccl_error(rc);
    };
    auto sync = [&]() -> std::string {
        for (auto& ln : lanes) {
            x.cuCtxSetCurrent(ln.ctx);
            if (CUresult r = x.cuStreamSynchronize(ln.stream); r != 0) return describe(ln.dev) + ": " + cu_error(r);
        }
        return "";
    };
    // One checked all-reduce, then warm-up, then the timed loop.
    std::string err = one_round();
    if (err.empty()) err = sync();
    if (!err.empty()) {
        res.error = err;
        return res;
    }
    res.ran = true;
    res.correct = true;
    for (auto& ln : lanes) {
        x.cuCtxSetCurrent(ln.ctx);
        x.cuMemcpyDtoH(host.data(), ln.buf, job.bytes);
        if (std::string bad = check_pattern(host, static_cast<uint32_t>(job.nranks)); !bad.empty()) {
            res.correct = false;
            res.error = describe(ln.dev) + ": wrong all-reduce result, " + bad;
            break;
        }
    }
    for (int i = 0; i < job.warmup && err.empty(); ++i) err = one_round();
    if (err.empty()) err = sync();
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < job.iters && err.empty(); ++i) err = one_round();
    if (err.empty()) err = sync();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() /
                  std::max(1, job.iters);
    // NCCL (2.22+) connects channels at the first collective, so its
    // transport lines exist only now.
    res.transports = transports_in(job.log_path);
    if (!err.empty()) {
        res.error = err;
        return res;
    }
    // Pair rounds: split the communicator so each pair of nodes runs alone.
    const std::size_t pcount = job.pair_bytes / sizeof(float);
    for (int color : job.pair_colors) {
        if (!x.ncclCommSplit) {
            res.pair_error = "this NCCL has no ncclCommSplit (needs 2.18 or newer)";
            break;
        }
        std::vector<Handle> sub(lanes.size(), nullptr);
        int rc = x.ncclGroupStart();
        for (std::size_t l = 0; l < lanes.size() && rc == 0; ++l) {
            x.cuCtxSetCurrent(lanes[l].ctx);
            rc = x.ncclCommSplit(lanes[l].comm, color < 0 ? kNcclSplitNoColor : color,
                                 job.first_rank + static_cast<int>(l), &sub[l], nullptr);
        }
        int e = x.ncclGroupEnd();
        if (rc == 0) rc = e;
        if (rc != 0) {
            res.pair_error = "ncclCommSplit: " + nccl_error(rc);
            break;
        }
        if (color < 0) {
            res.pair_seconds.push_back(-1);
            continue;
        }
        auto pair_round = [&]() {
            int r2 = x.ncclGroupStart();
            for (std::size_t l = 0; l < lanes.size(); ++l) {
                x.cuCtxSetCurrent(lanes[l].ctx);
                if (r2 == 0) r2 = x.ncclAllReduce(reinterpret_cast<void*>(lanes[l].buf),
                                                  reinterpret_cast<void*>(lanes[l].buf), pcount, kNcclFloat32,
                                                  kNcclSum, sub[l], lanes[l].stream);
            }
            int e2 = x.ncclGroupEnd();
            return r2 == 0 ? e2 : r2;
        };
        rc = pair_round();  // warm-up
        if (rc == 0 && !sync().empty()) rc = -1;
        const auto p0 = std::chrono::steady_clock::now();
        const int piters = std::max(1, job.iters / 2);
        for (int i = 0; i < piters && rc == 0; ++i) rc = pair_round();
        if (rc == 0 && !sync().empty()) rc = -1;
        res.pair_seconds.push_back(
            rc == 0 ? std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count() / piters : 0);
        for (std::size_t l = 0; l < lanes.size(); ++l) {
            x.cuCtxSetCurrent(lanes[l].ctx);
            if (sub[l]) x.ncclCommDestroy(sub[l]);
        }
    }
    for (auto& ln : lanes) {
        x.cuCtxSetCurrent(ln.ctx);
        x.ncclCommDestroy(ln.comm);
        x.cuMemFree(ln.buf);
    }
    return res;
}

std::string local_check(double budget_seconds) {
    (void)budget_seconds;  // the caller's watchdog enforces it
    Availability a = probe();
    if (!a.ok) return "";  // a CPU node: nothing to check here
    Api& x = api();
    constexpr std::size_t kBytes = 16 << 20;
    std::vector<float> host(kBytes / sizeof(float)), back(host.size());
    fill_pattern(host, 0);
    std::vector<int> devs;
    for (int i = 0; i < a.devices; ++i) {
        CUdevice d = 0;
        Handle ctx = nullptr;
        CUdeviceptr p = 0;
        CUresult r = x.cuDeviceGet(&d, i);
        if (r == 0) r = x.cuDevicePrimaryCtxRetain(&ctx, d);
        if (r == 0) r = x.cuCtxSetCurrent(ctx);
        if (r == 0) r = x.cuMemAlloc(&p, kBytes);
        if (r == 0) r = x.cuMemcpyHtoD(p, host.data(), kBytes);
        if (r == 0) r = x.cuMemcpyDtoH(back.data(), p, kBytes);
        if (p) x.cuMemFree(p);
        if (r != 0) return describe(i) + " failed a 16 MiB copy: " + cu_error(r);
        if (back != host) return describe(i) + " returned different data from a 16 MiB copy";
        devs.push_back(i);
    }
    if (devs.size() < 2) return "";
    AllreduceJob job;
    job.devices = devs;
    job.nranks = static_cast<int>(devs.size());
    job.id = unique_id();
    job.bytes = kBytes;
    job.iters = 2;
    AllreduceResult r = run_allreduce(job);
    if (!r.ran || !r.correct) return "NCCL all-reduce across the node's " + std::to_string(devs.size()) + " GPUs: " + r.error;
    return "";
}

}  // namespace mn::gpu
