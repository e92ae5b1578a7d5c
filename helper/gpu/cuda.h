// SPDX-License-Identifier: Apache-2.0
// CUDA's driver API as mn-preflight uses it: libcuda.so.1's calls, dlsym'd
// into a table. Internal to helper/gpu/: CUDA's types stay in this room.
#pragma once

#include "build_config.h"

#include <string>

// Types and signatures: from cuda.h when configure found it
// (--with-cuda-include), so nothing here is hand-copied.
#if HAVE_CUDA_H
#include <cuda.h>
#else
// FALLBACK without cuda.h: the driver API calls used, declared (never
// defined: only their types are taken, the calls are dlsym'd) from the
// CUDA driver API's documented C signatures. Build with cuda.h to use the
// real ones.
#include <cstddef>
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
CUresult cuDriverGetVersion(int*);
CUresult cuMemHostAlloc(void**, size_t, unsigned int);
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t);
}
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_READY 600
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DEFAULT 0
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#endif

namespace mn::gpu {

// The driver API calls used, from libcuda.so.1.
struct Cuda {
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
    decltype(&cuDriverGetVersion) driver_version = nullptr;  // optional: the fingerprint's
    decltype(&cuMemHostAlloc) host_alloc = nullptr;  // optional: pinned staging (lanes)
    decltype(&cuMemcpyDtoD_v2) dtod = nullptr;       // optional: the pattern copied on the GPU (lanes)
};

// dlopen("libcuda.so.1"): the driver's user library; null without it.
void* open_cuda();

// Fills `c` from `lib`; false when a call is missing (a driver too old).
bool bind_cuda(void* lib, Cuda& c);

// "CUDA error 2 (out of memory)".
std::string cu_error(CUresult r);

}  // namespace mn::gpu
