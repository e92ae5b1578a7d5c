// SPDX-License-Identifier: Apache-2.0
// NVML (libnvidia-ml.so.1, loaded on first use) and its readings of each
// GPU for health(); absent on CPU nodes and in containers without the
// driver's user libraries. NVML's types stay in this file.
#include "helper/gpu.h"

#include "build_config.h"

#include <dlfcn.h>

#include <cstdio>

#include <atomic>
#include <cstring>
#include <thread>

#include "helper/gpu/libraries.h"
#include "lib/util/symbols.h"

#if HAVE_NVML_H
#include <nvml.h>
#else
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
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t, unsigned int*, unsigned int*);
const char* nvmlErrorString(nvmlReturn_t);
}
#define NVML_DEVICE_MIG_ENABLE 1
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

// The GPU's NVLink fabric (multi-node NVLink, NVL systems): its domain's
// ClusterUUID and clique once the fabric manager registered it. Declared
// here, nvml.h or not: the nvml.h of CUDA 11 has no such call.
struct FabricInfo {  // nvmlGpuFabricInfo_t
    unsigned char cluster_uuid[16];
    nvmlReturn_t status;
    unsigned int clique;
    unsigned char state;
};
enum : unsigned char { kFabricNotSupported, kFabricNotStarted, kFabricInProgress, kFabricCompleted };

// The Xid watch's NVML calls, declared here with the ABI of nvml.h's
// nvmlEventData_t and nvmlPciInfo_t (v3), nvml.h or not.
struct EventData {
    nvmlDevice_t device;
    unsigned long long type, data;
    unsigned int gpu_instance, compute_instance;
};
struct PciInfo {
    char bus_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};
using EventSet = struct EventSetOpaque*;
constexpr unsigned long long kXidCritical = 0x8ULL;  // nvmlEventTypeXidCriticalError

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
    decltype(&nvmlDeviceGetEccMode) ecc_mode = nullptr;
    decltype(&nvmlDeviceGetMigMode) mig_mode = nullptr;
    nvmlReturn_t (*fabric)(nvmlDevice_t, FabricInfo*) = nullptr;  // nvmlDeviceGetGpuFabricInfo
    // nvmlDeviceGetCurrentClocksEventReasons in newer drivers, the same
    // call under its older name before.
    nvmlReturn_t (*events)(nvmlDevice_t, unsigned long long*) = nullptr;
    decltype(&nvmlErrorString) error_string = nullptr;
    // The Xid watch's (gpu_events): every GPU this process sees, an event set.
    nvmlReturn_t (*count)(unsigned int*) = nullptr;                      // nvmlDeviceGetCount_v2
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t*) = nullptr;     // nvmlDeviceGetHandleByIndex_v2
    nvmlReturn_t (*pci)(nvmlDevice_t, PciInfo*) = nullptr;               // nvmlDeviceGetPciInfo_v3
    nvmlReturn_t (*event_set)(EventSet*) = nullptr;                      // nvmlEventSetCreate
    nvmlReturn_t (*enroll)(nvmlDevice_t, unsigned long long, EventSet) = nullptr;  // nvmlDeviceRegisterEvents
    nvmlReturn_t (*event_wait)(EventSet, EventData*, unsigned int) = nullptr;      // nvmlEventSetWait_v2
};

// NVML's text for `r`, or its number when the library has none.
std::string nvml_error(const Nvml& n, nvmlReturn_t r) {
    return n.error_string ? n.error_string(r) : std::to_string(r).c_str();
}

// The calls past init: each optional (an older driver lacks some, and
// health() reads only what it has).
void bind_readings(void* lib, Nvml& x) {
    sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3", x.processes);
    sym(lib, "nvmlSystemGetProcessName", x.process_name);
    sym(lib, "nvmlDeviceGetTotalEccErrors", x.ecc);
    sym(lib, "nvmlDeviceGetRetiredPagesPendingStatus", x.retire_pending);
    sym(lib, "nvmlDeviceGetRemappedRows", x.remapped);
    sym(lib, "nvmlDeviceGetCurrPcieLinkGeneration", x.gen);
    sym(lib, "nvmlDeviceGetMaxPcieLinkGeneration", x.gen_max);
    sym(lib, "nvmlDeviceGetCurrPcieLinkWidth", x.width);
    sym(lib, "nvmlDeviceGetMaxPcieLinkWidth", x.width_max);
    sym(lib, "nvmlDeviceGetNvLinkState", x.nvlink);
    sym(lib, "nvmlDeviceGetEccMode", x.ecc_mode);
    sym(lib, "nvmlDeviceGetMigMode", x.mig_mode);
    sym(lib, "nvmlDeviceGetGpuFabricInfo", x.fabric);
    if (!sym(lib, "nvmlDeviceGetCurrentClocksEventReasons", x.events))
        sym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", x.events);
    sym(lib, "nvmlErrorString", x.error_string);
    sym(lib, "nvmlDeviceGetCount_v2", x.count);
    sym(lib, "nvmlDeviceGetHandleByIndex_v2", x.by_index);
    sym(lib, "nvmlDeviceGetPciInfo_v3", x.pci);
    sym(lib, "nvmlEventSetCreate", x.event_set);
    sym(lib, "nvmlDeviceRegisterEvents", x.enroll);
    sym(lib, "nvmlEventSetWait_v2", x.event_wait);
}

Nvml load() {
    Nvml x;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        x.why = "libnvidia-ml.so.1 not found";
        return x;
    }
    if (!sym(lib, "nvmlInit_v2", x.init) || !sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", x.by_bus)) {
        x.why = "libnvidia-ml.so.1 lacks nvmlInit_v2 (driver too old)";
        return x;
    }
    bind_readings(lib, x);
    if (nvmlReturn_t r = x.init(); r != NVML_SUCCESS) {
        x.why = "nvmlInit failed: " + nvml_error(x, r);
        return x;
    }
    x.loaded = true;
    return x;
}

const Nvml& nvml() {
    static const Nvml n = load();
    return n;
}

// The compute processes on the GPU, by base name and MiB held.
void read_processes(const Nvml& n, nvmlDevice_t h, GpuReadings& g) {
    if (!n.processes) return;
    std::vector<nvmlProcessInfo_t> p(64);
    unsigned count = static_cast<unsigned>(p.size());
    if (n.processes(h, &count, p.data()) != NVML_SUCCESS) return;
    for (unsigned i = 0; i < count && i < p.size(); ++i) {
        char name[256] = {0};
        if (n.process_name) n.process_name(p[i].pid, name, sizeof name);
        std::string base = name;
        if (auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
        g.processes.push_back({p[i].pid, base, p[i].usedGpuMemory >> 20});
    }
}

// Uncorrected ECC errors, page retirement and row remapping.
void read_memory(const Nvml& n, nvmlDevice_t h, GpuReadings& g) {
    unsigned long long ecc = 0;
    if (n.ecc && n.ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS)
        g.ecc_uncorrected = ecc;
    nvmlEnableState_t pending{};
    if (n.retire_pending && n.retire_pending(h, &pending) == NVML_SUCCESS)
        g.retirement_pending = pending == NVML_FEATURE_ENABLED;
    // The modes in force (not those pending a reset): compared across nodes.
    nvmlEnableState_t ecc_now{}, ecc_next{};
    if (n.ecc_mode && n.ecc_mode(h, &ecc_now, &ecc_next) == NVML_SUCCESS) g.ecc_enabled = ecc_now == NVML_FEATURE_ENABLED;
    unsigned mig_now = 0, mig_next = 0;
    if (n.mig_mode && n.mig_mode(h, &mig_now, &mig_next) == NVML_SUCCESS)
        g.mig_enabled = mig_now == NVML_DEVICE_MIG_ENABLE;
    // The NVLink fabric where the GPU has one (not supported elsewhere).
    FabricInfo f{};
    if (n.fabric && n.fabric(h, &f) == NVML_SUCCESS) {
        if (f.state == kFabricCompleted && f.status == NVML_SUCCESS) {
            char uuid[40];
            const unsigned char* u = f.cluster_uuid;
            std::snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                          u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
            g.fabric_domain = std::string(uuid) + " clique " + std::to_string(f.clique);
        } else if (f.state == kFabricCompleted) {
            g.fabric_unready = "registration failed (" + nvml_error(n, f.status) + ")";
        } else if (f.state == kFabricNotStarted) {
            g.fabric_unready = "registration not started";
        } else if (f.state == kFabricInProgress) {
            g.fabric_unready = "registration in progress";
        }
    }
    unsigned corr = 0, unc = 0, is_pending = 0, failed = 0;
    if (n.remapped && n.remapped(h, &corr, &unc, &is_pending, &failed) == NVML_SUCCESS) {
        g.remap_pending = is_pending != 0;
        g.remap_failed = failed != 0;
    }
}

// PCIe generation and width, now and at most, and the NVLinks up.
void read_links(const Nvml& n, nvmlDevice_t h, GpuReadings& g) {
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
}

// Why the clocks are held down now: slowdown, thermal, power brake.
void read_clock_events(const Nvml& n, nvmlDevice_t h, GpuReadings& g) {
    unsigned long long reasons = 0;
    if (!n.events || n.events(h, &reasons) != NVML_SUCCESS) return;
    g.hw_slowdown = reasons & nvmlClocksThrottleReasonHwSlowdown;
    g.sw_thermal = reasons & nvmlClocksThrottleReasonSwThermalSlowdown;
    g.hw_thermal = reasons & nvmlClocksThrottleReasonHwThermalSlowdown;
    g.power_brake = reasons & nvmlClocksThrottleReasonHwPowerBrakeSlowdown;
}

// One CUDA device's readings, found in NVML by its PCI bus id.
GpuReadings read_gpu(const Nvml& n, int dev) {
    GpuReadings g;
    g.gpu = describe(dev);
    const Libraries& libs = libraries();
    char bus[32] = {0};
    CUdevice d = 0;
    if (!n.loaded) {
        g.nvml_error = n.why;
        return g;
    }
    if (!libs.loaded || libs.cuda.device_get(&d, dev) != CUDA_SUCCESS ||
        libs.cuda.bus_id(bus, sizeof bus, d) != CUDA_SUCCESS) {
        g.nvml_error = "no PCI bus id from CUDA";
        return g;
    }
    nvmlDevice_t h = nullptr;
    if (nvmlReturn_t r = n.by_bus(bus, &h); r != NVML_SUCCESS) {
        g.nvml_error = std::string("NVML does not know ") + bus + " (" + nvml_error(n, r) + ")";
        return g;
    }
    g.nvml = true;
    read_processes(n, h, g);
    read_memory(n, h, g);
    read_links(n, h, g);
    read_clock_events(n, h, g);
    return g;
}

std::atomic<EventSet> xid_set{nullptr};

// NVML loaded (nvml()) and an event set with every GPU this process sees
// registered for critical Xids; none where NVML, its event calls or a GPU
// that takes the events is missing.
EventSet open_xid_set() {
    const Nvml& n = nvml();
    if (!n.loaded || !n.count || !n.by_index || !n.pci || !n.event_set || !n.enroll || !n.event_wait) return nullptr;
    unsigned int gpus = 0;
    EventSet set = nullptr;
    if (n.count(&gpus) != NVML_SUCCESS || n.event_set(&set) != NVML_SUCCESS) return nullptr;
    unsigned int enrolled = 0;
    for (unsigned int i = 0; i < gpus; ++i) {
        nvmlDevice_t h = nullptr;
        // A GPU outside the job's cgroup, or one that has no such events,
        // is not watched; the others are.
        if (n.by_index(i, &h) == NVML_SUCCESS && n.enroll(h, kXidCritical, set) == NVML_SUCCESS) ++enrolled;
    }
    return enrolled ? set : nullptr;
}

}  // namespace

void start_gpu_events() {
    std::thread([] { xid_set.store(open_xid_set()); }).detach();
}

std::vector<GpuXid> gpu_events() {
    std::vector<GpuXid> out;
    const EventSet set = xid_set.load();
    if (!set) return out;  // NVML still starting, or nothing to watch
    const Nvml& n = nvml();
    // Without waiting: each look takes what came since the last.
    for (int i = 0; i < 64; ++i) {
        EventData e{};
        if (n.event_wait(set, &e, 0) != NVML_SUCCESS) break;  // NVML_ERROR_TIMEOUT: none left
        if (!(e.type & kXidCritical)) continue;
        PciInfo p{};
        std::string bus = "?";
        if (n.pci(e.device, &p) == NVML_SUCCESS) bus = std::string(p.bus_id, strnlen(p.bus_id, sizeof p.bus_id));
        out.push_back({bus, e.data});
    }
    return out;
}

void start_health() {
    // nvml()'s static: a later call waits for this one's init to end.
    std::thread([] { nvml(); }).detach();
}

std::vector<GpuReadings> health(const std::vector<int>& devs) {
    std::vector<GpuReadings> out;
    const Nvml& n = nvml();
    for (int dev : devs) out.push_back(read_gpu(n, dev));
    return out;
}

}  // namespace mn::gpu
