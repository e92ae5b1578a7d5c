// SPDX-License-Identifier: Apache-2.0
#include "helper/gpu/cuda.h"

#include <dlfcn.h>

#include "helper/gpu/libraries.h"
#include "lib/util/symbols.h"

namespace mn::gpu {

void* open_cuda() { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL); }

bool bind_cuda(void* lib, Cuda& c) {
    sym(lib, "cuDriverGetVersion", c.driver_version);
    sym(lib, "cuMemHostAlloc", c.host_alloc);
    sym(lib, "cuMemcpyDtoD_v2", c.dtod);
    return sym(lib, "cuInit", c.init) && sym(lib, "cuDeviceGetCount", c.device_count) &&
           sym(lib, "cuDeviceGet", c.device_get) && sym(lib, "cuDeviceGetName", c.device_name) &&
           sym(lib, "cuDeviceGetPCIBusId", c.bus_id) && sym(lib, "cuDevicePrimaryCtxRetain", c.ctx_retain) &&
           sym(lib, "cuCtxSetCurrent", c.ctx_set) && sym(lib, "cuMemAlloc_v2", c.mem_alloc) &&
           sym(lib, "cuMemFree_v2", c.mem_free) && sym(lib, "cuMemGetInfo_v2", c.mem_info) &&
           sym(lib, "cuMemcpyHtoD_v2", c.htod) && sym(lib, "cuMemcpyDtoH_v2", c.dtoh) &&
           sym(lib, "cuStreamCreate", c.stream_create) && sym(lib, "cuStreamQuery", c.stream_query) &&
           sym(lib, "cuEventCreate", c.event_create) && sym(lib, "cuEventRecord", c.event_record) &&
           // _v2 from CUDA 12.8 drivers; the same signature before.
           (sym(lib, "cuEventElapsedTime_v2", c.event_elapsed) || sym(lib, "cuEventElapsedTime", c.event_elapsed)) &&
           sym(lib, "cuGetErrorString", c.error_string);
}

std::string cu_error(CUresult r) {
    const char* s = nullptr;
    const Cuda& cu = libraries().cuda;
    if (cu.error_string) cu.error_string(r, &s);
    return "CUDA error " + std::to_string(static_cast<int>(r)) + (s ? std::string(" (") + s + ")" : "");
}

}  // namespace mn::gpu
