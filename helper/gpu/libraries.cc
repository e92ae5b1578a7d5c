// SPDX-License-Identifier: Apache-2.0
#include "helper/gpu/libraries.h"

#include <cstdlib>

#include "helper/gpu.h"
#include "lib/check/fingerprint.h"

namespace mn::gpu {
namespace {

Libraries load() {
    Libraries x;
    void* cuda = open_cuda();
    if (!cuda) {
        x.why = "no CUDA driver (libcuda.so.1 not found)";
        return x;
    }
    if (!bind_cuda(cuda, x.cuda)) {
        x.why = "libcuda.so.1 lacks a driver API call mn-preflight needs (driver too old?)";
        return x;
    }
    x.cuda_bound = true;
    void* nccl = open_nccl(x.why);
    if (!nccl) return x;
    if (std::string e = bind_nccl(nccl, x.nccl); !e.empty()) {
        x.why = e;
        return x;
    }
    x.loaded = true;
    return x;
}

}  // namespace

const Libraries& libraries() {
    static const Libraries libs = load();
    return libs;
}

std::string describe(int dev) {
    const Libraries& libs = libraries();
    CUdevice d = 0;
    char bus[32] = {0};
    if (libs.loaded && libs.cuda.device_get(&d, dev) == CUDA_SUCCESS) libs.cuda.bus_id(bus, sizeof bus, d);
    return "GPU" + std::to_string(dev) + (bus[0] ? std::string(" (") + bus + ")" : "");
}

Availability probe() {
    Availability a;
    const Libraries& libs = libraries();
    if (!libs.loaded) {
        a.why = libs.why;
        // GPUs the driver shows that no NCCL can drive: counted, so that
        // the check never passes such a node on TCP alone.
        int n = 0;
        if (libs.cuda_bound && libs.cuda.init(0) == CUDA_SUCCESS && libs.cuda.device_count(&n) == CUDA_SUCCESS)
            a.devices = n;
        return a;
    }
    if (CUresult r = libs.cuda.init(0); r != CUDA_SUCCESS) {
        a.why = "cuInit failed: " + cu_error(r);
        return a;
    }
    if (CUresult r = libs.cuda.device_count(&a.devices); r != CUDA_SUCCESS) {
        a.why = "cuDeviceGetCount failed: " + cu_error(r);
        return a;
    }
    int v = 0;
    libs.nccl.version(&v);
    a.nccl_version = nccl_version_text(v);
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
    const Libraries& libs = libraries();
    int n = 0;
    if (!libs.loaded || libs.cuda.device_count(&n) != CUDA_SUCCESS) return out;
    for (int i = 0; i < n; ++i) {
        CUdevice d = 0;
        char name[128] = {0}, bus[32] = {0};
        if (libs.cuda.device_get(&d, i) != CUDA_SUCCESS) continue;
        libs.cuda.device_name(name, sizeof name, d);
        libs.cuda.bus_id(bus, sizeof bus, d);
        out.push_back({i, name, bus});
    }
    return out;
}

}  // namespace mn::gpu
