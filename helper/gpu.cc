#include "helper/gpu.h"

#include "build_config.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

// Types and signatures: from the libraries' own headers when configure
// found them (--with-cuda-include), so nothing here is hand-copied.
#if HAVE_CUDA_H
#include <cuda.h>
#endif
#if HAVE_NCCL_H
#include <nccl.h>
#endif
#if HAVE_NVML_H
#include <nvml.h>
#endif

#if !HAVE_CUDA_H
// FALLBACK without cuda.h: the driver API calls used, declared (never
// defined: only their types are taken, the calls are dlsym'd) from the
// CUDA driver API's documented C signatures. Build with cuda.h to use the
// real ones.
extern "C" {
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
CUresult cuInit(unsigned int);
CUresult cuDeviceGetCount(int*);
CUresult cuDeviceGet(CUdevice*, int);
CUresult cuDeviceGetName(char*, int, CUdevice);
CUresult cuDeviceGetPCIBusId(char*, int, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*, size_t);
CUresult cuMemcpyDtoH_v2(void*, CUdeviceptr, size_t);
CUresult cuStreamCreate(CUstream*, unsigned int);
CUresult cuStreamQuery(CUstream);
CUresult cuEventCreate(CUevent*, unsigned int);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventElapsedTime(float*, CUevent, CUevent);
CUresult cuGetErrorString(CUresult, const char**);
}
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_READY 600
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DEFAULT 0
#endif

#if !HAVE_NCCL_H
// FALLBACK without nccl.h: NCCL's documented C signatures for the calls
// used, with the blocking init (a non-blocking one needs ncclConfig_t,
// whose layout only nccl.h may give). Build with nccl.h for stop words
// that reach a rank inside NCCL's init.
extern "C" {
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
ncclResult_t ncclGetVersion(int*);
ncclResult_t ncclGetUniqueId(ncclUniqueId*);
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int);
ncclResult_t ncclAllReduce(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclCommDestroy(ncclComm_t);
ncclResult_t ncclCommAbort(ncclComm_t);
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t*);
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t*, void*);
const char* ncclGetErrorString(ncclResult_t);
}
#define ncclSuccess 0
#define ncclUnhandledCudaError 1
#define ncclInvalidArgument 4
#define ncclInvalidUsage 5
#define ncclInProgress 7
#define ncclFloat32 7
#define ncclSum 0
#define NCCL_SPLIT_NOCOLOR -1
#endif

#if !HAVE_NVML_H
// FALLBACK without nvml.h: NVML's documented C signatures and constants for
// the calls used. Build with nvml.h (CUDA's include directory,
// libnvidia-ml-dev) to take them from there.
extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef int nvmlEnableState_t;
typedef int nvmlMemoryErrorType_t;
typedef int nvmlEccCounterType_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char*, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
nvmlReturn_t nvmlSystemGetProcessName(unsigned int, char*, unsigned int);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long*);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t, nvmlEnableState_t*);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t, unsigned int*);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t, unsigned int*);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t, unsigned int*);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t, unsigned int*);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t, unsigned long long*);
const char* nvmlErrorString(nvmlReturn_t);
}
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_FEATURE_ENABLED 1
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_NVLINK_MAX_LINKS 18
#define nvmlClocksThrottleReasonHwSlowdown 0x8ULL
#define nvmlClocksThrottleReasonSwThermalSlowdown 0x20ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x40ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x80ULL
#endif

namespace mn::gpu {
namespace {

// NVML, loaded on first use; absent on CPU nodes and in containers without
// the driver's user libraries.
struct Nvml {
    bool loaded = false;
    std::string why;
    decltype(&nvmlInit_v2) init = nullptr;
    decltype(&nvmlDeviceGetHandleByPciBusId_v2) by_bus = nullptr;
    decltype(&nvmlDeviceGetComputeRunningProcesses_v3) processes = nullptr;
    decltype(&nvmlSystemGetProcessName) process_name = nullptr;
    decltype(&nvmlDeviceGetTotalEccErrors) ecc = nullptr;
    decltype(&nvmlDeviceGetRetiredPagesPendingStatus) retire_pending = nullptr;
    decltype(&nvmlDeviceGetRemappedRows) remapped = nullptr;
    decltype(&nvmlDeviceGetCurrPcieLinkGeneration) gen = nullptr;
    decltype(&nvmlDeviceGetMaxPcieLinkGeneration) gen_max = nullptr;
    decltype(&nvmlDeviceGetCurrPcieLinkWidth) width = nullptr;
    decltype(&nvmlDeviceGetMaxPcieLinkWidth) width_max = nullptr;
    decltype(&nvmlDeviceGetNvLinkState) nvlink = nullptr;
    // nvmlDeviceGetCurrentClocksEventReasons in newer drivers, the same
    // call under its older name before.
    nvmlReturn_t (*events)(nvmlDevice_t, unsigned long long*) = nullptr;
    decltype(&nvmlErrorString) error_string = nullptr;
};

Nvml& nvml() {
    static Nvml n = [] {
        Nvml x;
        void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
            x.why = "libnvidia-ml.so.1 not found";
            return x;
        }
        auto get = [&](const char* name, auto& f) {
            f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
            return f != nullptr;
        };
        bool ok = get("nvmlInit_v2", x.init) && get("nvmlDeviceGetHandleByPciBusId_v2", x.by_bus);
        if (!ok) {
            x.why = "libnvidia-ml.so.1 lacks nvmlInit_v2 (driver too old)";
            return x;
        }
        get("nvmlDeviceGetComputeRunningProcesses_v3", x.processes);
        get("nvmlSystemGetProcessName", x.process_name);
        get("nvmlDeviceGetTotalEccErrors", x.ecc);
        get("nvmlDeviceGetRetiredPagesPendingStatus", x.retire_pending);
        get("nvmlDeviceGetRemappedRows", x.remapped);
        get("nvmlDeviceGetCurrPcieLinkGeneration", x.gen);
        get("nvmlDeviceGetMaxPcieLinkGeneration", x.gen_max);
        get("nvmlDeviceGetCurrPcieLinkWidth", x.width);
        get("nvmlDeviceGetMaxPcieLinkWidth", x.width_max);
        get("nvmlDeviceGetNvLinkState", x.nvlink);
        if (!get("nvmlDeviceGetCurrentClocksEventReasons", x.events))
            get("nvmlDeviceGetCurrentClocksThrottleReasons", x.events);
        get("nvmlErrorString", x.error_string);
        if (nvmlReturn_t r = x.init(); r != NVML_SUCCESS) {
            x.why = std::string("nvmlInit failed: ") + (x.error_string ? x.error_string(r) : std::to_string(r).c_str());
            return x;
        }
        x.loaded = true;
        return x;
    }();
    return n;
}

struct Api {
    bool loaded = false;
    std::string why;
    decltype(&cuInit) init = nullptr;
    decltype(&cuDeviceGetCount) device_count = nullptr;
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDeviceGetName) device_name = nullptr;
    decltype(&cuDeviceGetPCIBusId) bus_id = nullptr;
    decltype(&cuDevicePrimaryCtxRetain) ctx_retain = nullptr;
    decltype(&cuCtxSetCurrent) ctx_set = nullptr;
    decltype(&cuMemAlloc_v2) mem_alloc = nullptr;
    decltype(&cuMemFree_v2) mem_free = nullptr;
    decltype(&cuMemGetInfo_v2) mem_info = nullptr;
    decltype(&cuMemcpyHtoD_v2) htod = nullptr;
    decltype(&cuMemcpyDtoH_v2) dtoh = nullptr;
    decltype(&cuStreamCreate) stream_create = nullptr;
    decltype(&cuStreamQuery) stream_query = nullptr;
    decltype(&cuEventCreate) event_create = nullptr;
    decltype(&cuEventRecord) event_record = nullptr;
    decltype(&cuEventElapsedTime) event_elapsed = nullptr;
    decltype(&cuGetErrorString) error_string = nullptr;
    decltype(&ncclGetVersion) nccl_version = nullptr;
    decltype(&ncclGetUniqueId) unique_id = nullptr;
#if HAVE_NCCL_H
    decltype(&ncclCommInitRankConfig) comm_init = nullptr;  // non-blocking (NCCL >= 2.14)
#else
    decltype(&ncclCommInitRank) comm_init = nullptr;
#endif
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclGroupStart) group_start = nullptr;
    decltype(&ncclGroupEnd) group_end = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclCommAbort) comm_abort = nullptr;
    decltype(&ncclCommGetAsyncError) async_error = nullptr;
    decltype(&ncclCommSplit) comm_split = nullptr;  // NCCL >= 2.18
    decltype(&ncclGetErrorString) nccl_error_string = nullptr;
};

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
        bool ok = sym(cuda, "cuInit", x.init) && sym(cuda, "cuDeviceGetCount", x.device_count) &&
                  sym(cuda, "cuDeviceGet", x.device_get) && sym(cuda, "cuDeviceGetName", x.device_name) &&
                  sym(cuda, "cuDeviceGetPCIBusId", x.bus_id) && sym(cuda, "cuDevicePrimaryCtxRetain", x.ctx_retain) &&
                  sym(cuda, "cuCtxSetCurrent", x.ctx_set) && sym(cuda, "cuMemAlloc_v2", x.mem_alloc) &&
                  sym(cuda, "cuMemFree_v2", x.mem_free) && sym(cuda, "cuMemGetInfo_v2", x.mem_info) &&
                  sym(cuda, "cuMemcpyHtoD_v2", x.htod) && sym(cuda, "cuMemcpyDtoH_v2", x.dtoh) &&
                  sym(cuda, "cuStreamCreate", x.stream_create) && sym(cuda, "cuStreamQuery", x.stream_query) &&
                  sym(cuda, "cuEventCreate", x.event_create) && sym(cuda, "cuEventRecord", x.event_record) &&
                  // _v2 from CUDA 12.8 drivers; the same signature before.
                  (sym(cuda, "cuEventElapsedTime_v2", x.event_elapsed) ||
                   sym(cuda, "cuEventElapsedTime", x.event_elapsed)) &&
                  sym(cuda, "cuGetErrorString", x.error_string);
        if (!ok) {
            x.why = "libcuda.so.1 lacks a driver API call mn-preflight needs (driver too old?)";
            return x;
        }
#if HAVE_NCCL_H
        const char* init_name = "ncclCommInitRankConfig";
#else
        const char* init_name = "ncclCommInitRank";
#endif
        ok = sym(nccl, "ncclGetVersion", x.nccl_version) && sym(nccl, "ncclGetUniqueId", x.unique_id) &&
             sym(nccl, init_name, x.comm_init) && sym(nccl, "ncclAllReduce", x.all_reduce) &&
             sym(nccl, "ncclGroupStart", x.group_start) && sym(nccl, "ncclGroupEnd", x.group_end) &&
             sym(nccl, "ncclCommDestroy", x.comm_destroy) && sym(nccl, "ncclCommAbort", x.comm_abort) &&
             sym(nccl, "ncclCommGetAsyncError", x.async_error) &&
             sym(nccl, "ncclGetErrorString", x.nccl_error_string);
        if (!ok) {
            x.why = "libnccl.so.2 lacks a call mn-preflight needs (NCCL too old? 2.14 or newer)";
            return x;
        }
        sym(nccl, "ncclCommSplit", x.comm_split);
        x.loaded = true;
        return x;
    }();
    return a;
}

std::string cu_error(CUresult r) {
    const char* s = nullptr;
    if (api().error_string) api().error_string(r, &s);
    return "CUDA error " + std::to_string(static_cast<int>(r)) + (s ? std::string(" (") + s + ")" : "");
}

// Where NCCL writes its lines for this check (NCCL_DEBUG_FILE), if known.
std::string& nccl_log_path() {
    static std::string path;
    return path;
}

// NCCL's own reason for an error: the last WARN line it wrote to our log.
std::string nccl_warning() {
    std::ifstream in(nccl_log_path());
    std::string line, last;
    while (std::getline(in, line))
        if (line.find("NCCL WARN") != std::string::npos) last = line;
    const auto at = last.find("NCCL WARN");
    return at == std::string::npos ? "" : last.substr(at);
}

std::string nccl_error(ncclResult_t r) {
    std::string what = "NCCL error " + std::to_string(static_cast<int>(r)) + " (" + api().nccl_error_string(r) + ")";
    const std::string warn = nccl_warning();
    return warn.empty() ? what : what + ": " + warn;
}

// A CUDA error, or NCCL's for CUDA or for its own use, is this rank's; the
// rest (remote, network, internal) is most likely another rank's.
bool nccl_is_peer(ncclResult_t r) {
    return r != ncclUnhandledCudaError && r != ncclInvalidArgument && r != ncclInvalidUsage;
}

struct Lane {
    int dev = 0;
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
    ncclComm_t comm = nullptr;
    CUdeviceptr buf = 0, vote = 0;
    CUevent t0 = nullptr, t1 = nullptr;
};

// What prepare() set up, and every live communicator, for abort_nccl().
struct Session {
    std::mutex mu;
    std::vector<Lane> lanes;
    std::size_t bytes = 0;
    std::vector<ncclComm_t> comms;
    std::atomic<bool> aborted{false};
};

Session& session() {
    static Session s;
    return s;
}

void track(ncclComm_t c) {
    std::lock_guard<std::mutex> g(session().mu);
    session().comms.push_back(c);
}

// True when the caller now owns `c` (abort_nccl() did not take it).
bool untrack(ncclComm_t c) {
    std::lock_guard<std::mutex> g(session().mu);
    auto& v = session().comms;
    auto it = std::find(v.begin(), v.end(), c);
    if (it == v.end()) return false;
    v.erase(it);
    return true;
}

struct Failure {
    std::string what;
    bool peer = false;
};

// Waits for NCCL's non-blocking calls on `comms` to settle, polling, until
// `until` or abort_nccl().
std::optional<Failure> settle(const std::vector<ncclComm_t>& comms, double until, const std::string& what) {
    Api& x = api();
    while (true) {
        bool busy = false;
        if (session().aborted) return Failure{what + ": stopped by rank 0", true};
        for (ncclComm_t c : comms) {
            if (!c) continue;
            ncclResult_t st = ncclSuccess;
            ncclResult_t r = x.async_error(c, &st);
            if (r != ncclSuccess) return Failure{what + ": " + nccl_error(r), nccl_is_peer(r)};
            if (st == ncclInProgress) busy = true;
            else if (st != ncclSuccess) return Failure{what + ": " + nccl_error(st), nccl_is_peer(st)};
        }
        if (!busy) return std::nullopt;
        if (now_s() > until) return Failure{what + ": did not finish in time (waiting on another rank)", true};
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

// Waits for the lanes' streams, polling (a stuck collective never blocks
// a thread), and for NCCL's errors on their communicators.
std::optional<Failure> drain(std::vector<Lane>& lanes, const std::vector<ncclComm_t>& comms, double until,
                             const std::string& what) {
    Api& x = api();
    while (true) {
        bool busy = false;
        for (auto& ln : lanes) {
            x.ctx_set(ln.ctx);
            CUresult r = x.stream_query(ln.stream);
            if (r == CUDA_ERROR_NOT_READY) busy = true;
            else if (r != CUDA_SUCCESS) return Failure{describe(ln.dev) + ": " + what + ": " + cu_error(r), false};
        }
        if (session().aborted) return Failure{what + ": stopped by rank 0", true};
        for (ncclComm_t c : comms) {
            ncclResult_t st = ncclSuccess;
            if (!c || x.async_error(c, &st) != ncclSuccess) continue;
            // Non-blocking: an operation still in progress may not be on
            // the stream yet.
            if (st == ncclInProgress) busy = true;
            else if (st != ncclSuccess) return Failure{what + ": " + nccl_error(st), nccl_is_peer(st)};
        }
        if (!busy) return std::nullopt;
        if (now_s() > until) return Failure{what + ": did not finish in time (waiting on another rank)", true};
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

// ncclGroupEnd in non-blocking mode says ncclInProgress: not an error.
ncclResult_t group_end() {
    ncclResult_t r = api().group_end();
    return r == ncclInProgress ? ncclSuccess : r;
}

std::vector<std::string> transports_in(const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return nccl_transports(text);
}

// NCCL's own buffers, per GPU, beside the check's: about this much must
// stay free, or its init fails (the out-of-memory of a GPU another process
// holds).
constexpr std::size_t kNcclHeadroom = std::size_t(1) << 30;

std::string open_lane(Lane& ln, std::size_t bytes) {
    Api& x = api();
    CUdevice d = 0;
    CUresult r = x.device_get(&d, ln.dev);
    if (r == CUDA_SUCCESS) r = x.ctx_retain(&ln.ctx, d);
    if (r == CUDA_SUCCESS) r = x.ctx_set(ln.ctx);
    if (r == CUDA_SUCCESS) r = x.stream_create(&ln.stream, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = x.event_create(&ln.t0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = x.event_create(&ln.t1, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = x.mem_alloc(&ln.vote, sizeof(float));
    if (r == CUDA_SUCCESS) r = x.mem_alloc(&ln.buf, bytes);
    if (r != CUDA_SUCCESS)
        return describe(ln.dev) + ": " + cu_error(r) + " opening it and allocating " + std::to_string(bytes >> 20) +
               " MiB";
    // A copy there and back of a pattern, checked.
    std::vector<float> host(bytes / sizeof(float)), back(host.size());
    fill_pattern(host, 3);
    r = x.htod(ln.buf, host.data(), bytes);
    if (r == CUDA_SUCCESS) r = x.dtoh(back.data(), ln.buf, bytes);
    if (r != CUDA_SUCCESS) return describe(ln.dev) + ": " + cu_error(r) + " copying to and from the GPU";
    if (back != host) return describe(ln.dev) + ": returned different data from a copy there and back";
    std::size_t free_b = 0, total_b = 0;
    r = x.mem_info(&free_b, &total_b);
    if (r != CUDA_SUCCESS) return describe(ln.dev) + ": " + cu_error(r) + " reading its free memory";
    if (free_b < kNcclHeadroom)
        return describe(ln.dev) + ": only " + std::to_string(free_b >> 20) + " MiB of " + std::to_string(total_b >> 20) +
               " MiB free after the check's buffers; NCCL needs about " + std::to_string(kNcclHeadroom >> 20) +
               " MiB: another process holds the GPU's memory (nvidia-smi shows which)";
    return "";
}

// Per lane: time between its two events, seconds.
double lane_seconds(Lane& ln) {
    float ms = 0;
    api().ctx_set(ln.ctx);
    return api().event_elapsed(&ms, ln.t0, ln.t1) == CUDA_SUCCESS ? ms / 1e3 : 0;
}

}  // namespace

std::string describe(int dev) {
    Api& a = api();
    CUdevice d = 0;
    char bus[32] = {0};
    if (a.loaded && a.device_get(&d, dev) == CUDA_SUCCESS) a.bus_id(bus, sizeof bus, d);
    return "GPU" + std::to_string(dev) + (bus[0] ? std::string(" (") + bus + ")" : "");
}

Availability probe() {
    Availability a;
    Api& x = api();
    if (!x.loaded) {
        a.why = x.why;
        return a;
    }
    if (CUresult r = x.init(0); r != CUDA_SUCCESS) {
        a.why = "cuInit failed: " + cu_error(r);
        return a;
    }
    if (CUresult r = x.device_count(&a.devices); r != CUDA_SUCCESS) {
        a.why = "cuDeviceGetCount failed: " + cu_error(r);
        return a;
    }
    int v = 0;
    x.nccl_version(&v);
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
    if (!x.loaded || x.device_count(&n) != CUDA_SUCCESS) return out;
    for (int i = 0; i < n; ++i) {
        CUdevice d = 0;
        char name[128] = {0}, bus[32] = {0};
        if (x.device_get(&d, i) != CUDA_SUCCESS) continue;
        x.device_name(name, sizeof name, d);
        x.bus_id(bus, sizeof bus, d);
        out.push_back({i, name, bus});
    }
    return out;
}

std::vector<GpuReadings> health(const std::vector<int>& devs) {
    std::vector<GpuReadings> out;
    Nvml& n = nvml();
    for (int dev : devs) {
        GpuReadings g;
        g.gpu = describe(dev);
        char bus[32] = {0};
        CUdevice d = 0;
        if (!n.loaded) {
            g.nvml_error = n.why;
        } else if (!api().loaded || api().device_get(&d, dev) != CUDA_SUCCESS ||
                   api().bus_id(bus, sizeof bus, d) != CUDA_SUCCESS) {
            g.nvml_error = "no PCI bus id from CUDA";
        } else {
            nvmlDevice_t h = nullptr;
            if (nvmlReturn_t r = n.by_bus(bus, &h); r != NVML_SUCCESS) {
                g.nvml_error = std::string("NVML does not know ") + bus + " (" +
                               (n.error_string ? n.error_string(r) : std::to_string(r).c_str()) + ")";
            } else {
                g.nvml = true;
                if (n.processes) {
                    std::vector<nvmlProcessInfo_t> p(64);
                    unsigned count = static_cast<unsigned>(p.size());
                    if (n.processes(h, &count, p.data()) == NVML_SUCCESS) {
                        for (unsigned i = 0; i < count && i < p.size(); ++i) {
                            char name[256] = {0};
                            if (n.process_name) n.process_name(p[i].pid, name, sizeof name);
                            std::string base = name;
                            if (auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
                            g.processes.push_back({p[i].pid, base, p[i].usedGpuMemory >> 20});
                        }
                    }
                }
                unsigned long long ecc = 0;
                if (n.ecc && n.ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS)
                    g.ecc_uncorrected = ecc;
                nvmlEnableState_t pending{};
                if (n.retire_pending && n.retire_pending(h, &pending) == NVML_SUCCESS)
                    g.retirement_pending = pending == NVML_FEATURE_ENABLED;
                unsigned corr = 0, unc = 0, is_pending = 0, failed = 0;
                if (n.remapped && n.remapped(h, &corr, &unc, &is_pending, &failed) == NVML_SUCCESS) {
                    g.remap_pending = is_pending != 0;
                    g.remap_failed = failed != 0;
                }
                unsigned v = 0;
                if (n.gen && n.gen(h, &v) == NVML_SUCCESS) g.pcie_gen = v;
                if (n.gen_max && n.gen_max(h, &v) == NVML_SUCCESS) g.pcie_gen_max = v;
                if (n.width && n.width(h, &v) == NVML_SUCCESS) g.pcie_width = v;
                if (n.width_max && n.width_max(h, &v) == NVML_SUCCESS) g.pcie_width_max = v;
                for (unsigned link = 0; n.nvlink && link < NVML_NVLINK_MAX_LINKS; ++link) {
                    nvmlEnableState_t up{};
                    if (n.nvlink(h, link, &up) != NVML_SUCCESS) continue;  // no such link
                    ++g.nvlinks;
                    if (up == NVML_FEATURE_ENABLED) ++g.nvlinks_up;
                }
                unsigned long long reasons = 0;
                if (n.events && n.events(h, &reasons) == NVML_SUCCESS) {
                    g.hw_slowdown = reasons & nvmlClocksThrottleReasonHwSlowdown;
                    g.sw_thermal = reasons & nvmlClocksThrottleReasonSwThermalSlowdown;
                    g.hw_thermal = reasons & nvmlClocksThrottleReasonHwThermalSlowdown;
                    g.power_brake = reasons & nvmlClocksThrottleReasonHwPowerBrakeSlowdown;
                }
            }
        }
        out.push_back(g);
    }
    return out;
}

std::string prepare(const std::vector<int>& devs, std::size_t bytes) {
    if (!api().loaded) return api().why;
    std::vector<Lane> lanes(devs.size());
    for (std::size_t l = 0; l < devs.size(); ++l) {
        lanes[l].dev = devs[l];
        if (std::string e = open_lane(lanes[l], bytes); !e.empty()) return e;
    }
    std::lock_guard<std::mutex> g(session().mu);
    session().lanes = lanes;
    session().bytes = bytes;
    return "";
}

void abort_nccl() {
    session().aborted = true;
    // The polling waits see the flag within microseconds and stop touching
    // their communicators; a thread inside a blocking NCCL call is what
    // ncclCommAbort from here is for.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<ncclComm_t> comms;
    {
        std::lock_guard<std::mutex> g(session().mu);
        comms.swap(session().comms);
    }
    if (!api().loaded) return;
    for (ncclComm_t c : comms) api().comm_abort(c);
}

std::string unique_id() {
    ncclUniqueId id{};
    if (api().unique_id(&id) != ncclSuccess) return "";
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
    const double until = now_s() + job.deadline_s;
    auto fail = [&](const Failure& f) {
        res.error = f.what;
        res.peer = f.peer;
        return res;
    };
    ncclUniqueId id{};
    if (job.id.size() != 2 * sizeof id.internal) return fail({"rank 0 sent no NCCL unique id", true});
    for (std::size_t i = 0; i < sizeof id.internal; ++i)
        id.internal[i] = static_cast<char>(std::strtoul(job.id.substr(2 * i, 2).c_str(), nullptr, 16));
    // NCCL_DEBUG_FILE=job.log_path was set before NCCL's first call.

    // The lanes readiness opened, or open them now (the prolog's use).
    std::vector<Lane> lanes;
    {
        std::lock_guard<std::mutex> g(session().mu);
        bool same = session().bytes >= job.bytes && session().lanes.size() == job.devices.size();
        for (std::size_t l = 0; same && l < job.devices.size(); ++l) same = session().lanes[l].dev == job.devices[l];
        if (same) lanes = session().lanes;
    }
    if (lanes.empty()) {
        lanes.resize(job.devices.size());
        for (std::size_t l = 0; l < lanes.size(); ++l) {
            lanes[l].dev = job.devices[l];
            if (std::string e = open_lane(lanes[l], job.bytes); !e.empty()) return fail({e, false});
        }
    }
    const std::size_t count = job.bytes / sizeof(float);
    std::vector<float> host(count);
    for (std::size_t l = 0; l < lanes.size(); ++l) {
        fill_pattern(host, static_cast<uint32_t>(job.first_rank) + static_cast<uint32_t>(l));
        x.ctx_set(lanes[l].ctx);
        if (CUresult r = x.htod(lanes[l].buf, host.data(), job.bytes); r != CUDA_SUCCESS)
            return fail({describe(lanes[l].dev) + ": " + cu_error(r), false});
    }
    std::vector<ncclComm_t> comms(lanes.size(), nullptr);
    auto release = [&](std::vector<ncclComm_t>& cs) {
        for (std::size_t l = 0; l < cs.size(); ++l) {
            if (!cs[l]) continue;
            if (!untrack(cs[l])) {  // abort_nccl() has it
                cs[l] = nullptr;
                continue;
            }
            x.ctx_set(lanes[l].ctx);
            if (session().aborted) x.comm_abort(cs[l]);
            else x.comm_destroy(cs[l]);
            cs[l] = nullptr;
        }
    };

    nccl_log_path() = job.log_path;
    // ---- init, non-blocking: rank 0's stop word reaches this rank here.
    const auto t0 = std::chrono::steady_clock::now();
#if HAVE_NCCL_H
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
#endif
    ncclResult_t nr = x.group_start();
    for (std::size_t l = 0; l < lanes.size() && nr == ncclSuccess; ++l) {
        x.ctx_set(lanes[l].ctx);
#if HAVE_NCCL_H
        nr = x.comm_init(&comms[l], job.nranks, id, job.first_rank + static_cast<int>(l), &config);
#else
        nr = x.comm_init(&comms[l], job.nranks, id, job.first_rank + static_cast<int>(l));
#endif
        if (nr == ncclInProgress) nr = ncclSuccess;
    }
    ncclResult_t ge = group_end();
    if (nr == ncclSuccess) nr = ge;
    for (ncclComm_t c : comms)
        if (c) track(c);
    std::optional<Failure> f;
    if (nr != ncclSuccess) f = Failure{"ncclCommInitRank on " + describe(lanes[0].dev) + ": " + nccl_error(nr), nccl_is_peer(nr)};
    else f = settle(comms, until, "NCCL init on " + describe(lanes[0].dev));
    res.init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (f) {
        release(comms);
        return fail(*f);
    }
    for (std::size_t l = 0; l < lanes.size(); ++l) lanes[l].comm = comms[l];

    // One round of `n` floats from each lane's `buf` on communicators `cs`.
    auto enqueue = [&](const std::vector<ncclComm_t>& cs, bool vote, std::size_t n) -> std::optional<Failure> {
        ncclResult_t rc = x.group_start();
        for (std::size_t l = 0; l < lanes.size(); ++l) {
            if (!cs[l]) continue;
            x.ctx_set(lanes[l].ctx);
            void* p = reinterpret_cast<void*>(vote ? lanes[l].vote : lanes[l].buf);
            ncclResult_t r = x.all_reduce(p, p, vote ? 1 : n, ncclFloat32, ncclSum, cs[l], lanes[l].stream);
            if (rc == ncclSuccess && r != ncclInProgress) rc = r;
        }
        ncclResult_t e = group_end();
        if (rc == ncclSuccess) rc = e;
        if (rc != ncclSuccess) return Failure{"ncclAllReduce: " + nccl_error(rc), nccl_is_peer(rc)};
        // Non-blocking communicators: the next call on one is refused
        // (ncclInvalidArgument) until this one has left ncclInProgress.
        return settle(cs, until, "ncclAllReduce");
    };
    // Blocks of up to five rounds, timed per lane by CUDA events; after
    // each, every member votes (an all-reduce of one float) whether its
    // budget is spent, so all stop after the same block.
    auto timed_loop = [&](const std::vector<ncclComm_t>& cs, std::size_t n, int iters, double budget,
                          std::vector<double>& per_lane) -> std::optional<Failure> {
        per_lane.assign(lanes.size(), 0);
        const double start = now_s();
        int done = 0;
        while (done < iters) {
            const int k = std::min(5, iters - done);
            for (auto& ln : lanes) {
                x.ctx_set(ln.ctx);
                x.event_record(ln.t0, ln.stream);
            }
            for (int i = 0; i < k; ++i)
                if (auto e = enqueue(cs, false, n)) return e;
            // Every operation on its stream before the closing event.
            if (auto e = settle(cs, until, "ncclAllReduce")) return e;
            for (auto& ln : lanes) {
                x.ctx_set(ln.ctx);
                x.event_record(ln.t1, ln.stream);
            }
            if (auto e = drain(lanes, cs, until, "ncclAllReduce")) return e;
            for (std::size_t l = 0; l < lanes.size(); ++l)
                if (cs[l]) per_lane[l] += lane_seconds(lanes[l]);
            done += k;
            if (done >= iters) break;
            const float mine = now_s() - start > budget ? 1.0f : 0.0f;
            for (auto& ln : lanes) {
                x.ctx_set(ln.ctx);
                x.htod(ln.vote, &mine, sizeof mine);
            }
            if (auto e = enqueue(cs, true, 1)) return e;
            if (auto e = drain(lanes, cs, until, "the time vote")) return e;
            float sum = 0;
            for (std::size_t l = 0; l < lanes.size(); ++l)
                if (cs[l]) {
                    x.ctx_set(lanes[l].ctx);
                    x.dtoh(&sum, lanes[l].vote, sizeof sum);
                    break;
                }
            if (sum > 0) break;
        }
        for (auto& s : per_lane) s /= std::max(1, done);
        return std::nullopt;
    };

    // One checked all-reduce, then warm-up, then the timed loop.
    f = enqueue(comms, false, count);
    if (!f) f = drain(lanes, comms, until, "the first all-reduce");
    if (f) {
        release(comms);
        return fail(*f);
    }
    res.ran = true;
    res.correct = true;
    for (auto& ln : lanes) {
        x.ctx_set(ln.ctx);
        x.dtoh(host.data(), ln.buf, job.bytes);
        if (std::string bad = check_pattern(host, static_cast<uint32_t>(job.nranks)); !bad.empty()) {
            res.correct = false;
            res.error = describe(ln.dev) + ": wrong all-reduce result, " + bad;
            break;
        }
    }
    std::vector<double> secs;
    f = timed_loop(comms, count, std::max(1, job.warmup), job.budget / 2, secs);
    if (!f) f = timed_loop(comms, count, std::max(1, job.iters), job.budget, secs);
    if (!secs.empty()) res.seconds = *std::max_element(secs.begin(), secs.end());
    // NCCL (2.22+) connects channels at the first collective, so its
    // transport lines exist only now.
    res.transports = transports_in(job.log_path);
    if (f) {
        release(comms);
        return fail(*f);
    }
    // Pair rounds: split the communicator so each pair runs alone.
    // Pairs use the start of the all-reduce's buffer: never past its end.
    const std::size_t pcount = std::min(job.pair_bytes, job.bytes) / sizeof(float);
    for (const auto& colors : job.pair_colors) {
        if (!x.comm_split) {
            res.pair_error = "this NCCL has no ncclCommSplit (needs 2.18 or newer)";
            break;
        }
        std::vector<ncclComm_t> sub(lanes.size(), nullptr);
        ncclResult_t rc = x.group_start();
        for (std::size_t l = 0; l < lanes.size() && rc == ncclSuccess; ++l) {
            x.ctx_set(lanes[l].ctx);
            const int color = l < colors.size() && colors[l] >= 0 ? colors[l] : NCCL_SPLIT_NOCOLOR;
            rc = x.comm_split(comms[l], color, job.first_rank + static_cast<int>(l), &sub[l], nullptr);
            if (rc == ncclInProgress) rc = ncclSuccess;
        }
        ncclResult_t e = group_end();
        if (rc == ncclSuccess) rc = e;
        for (ncclComm_t c : sub)
            if (c) track(c);
        std::optional<Failure> sf;
        if (rc != ncclSuccess) sf = Failure{"ncclCommSplit: " + nccl_error(rc), nccl_is_peer(rc)};
        else sf = settle(comms, until, "ncclCommSplit");
        if (!sf) sf = settle(sub, until, "ncclCommSplit");
        if (sf) {
            res.pair_error = sf->what;
            release(sub);
            break;
        }
        std::vector<double> round(lanes.size(), -1);
        bool any = std::any_of(sub.begin(), sub.end(), [](ncclComm_t c) { return c != nullptr; });
        if (any) {
            std::vector<double> warm;
            std::optional<Failure> pf = timed_loop(sub, pcount, 1, job.pair_budget, warm);
            std::vector<double> ps;
            if (!pf) pf = timed_loop(sub, pcount, std::max(1, job.iters / 2), job.pair_budget, ps);
            for (std::size_t l = 0; l < lanes.size(); ++l)
                if (sub[l]) round[l] = pf ? 0 : ps[l];
        }
        res.pair_seconds.push_back(round);
        release(sub);
    }
    release(comms);
    return res;
}

std::string local_check(double budget_seconds) {
    Availability a = probe();
    if (!a.ok) return "";  // a CPU node: nothing to check here
    constexpr std::size_t kBytes = 16 << 20;
    std::vector<int> devs;
    for (int i = 0; i < a.devices; ++i) devs.push_back(i);
    if (std::string e = prepare(devs, kBytes); !e.empty()) return e;
    if (devs.size() < 2) return "";
    AllreduceJob job;
    job.devices = devs;
    job.nranks = static_cast<int>(devs.size());
    job.id = unique_id();
    job.bytes = kBytes;
    job.iters = 2;
    job.deadline_s = budget_seconds;
    AllreduceResult r = run_allreduce(job);
    if (!r.ran || !r.correct) return "NCCL all-reduce across the node's " + std::to_string(devs.size()) + " GPUs: " + r.error;
    return "";
}

}  // namespace mn::gpu
