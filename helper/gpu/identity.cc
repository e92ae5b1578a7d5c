// What this node runs, for the fingerprint (lib/check/fingerprint): the
// NCCL a check would load and the file it comes from, the CUDA driver, the
// GPUs' model. Each part is loaded on its own, so a node without CUDA still
// says which NCCL it has (and the CPU path compares that too).
#include <dlfcn.h>

#include <cstdlib>
#include <set>

#include "helper/gpu.h"
#include "helper/gpu/libraries.h"
#include "helper/gpu/symbols.h"

namespace mn::gpu {

Identity identity() {
    Identity id;
    std::string why;
    if (void* lib = open_nccl(why)) {
        int (*version)(int*) = nullptr;
        int code = 0;
        if (sym(lib, "ncclGetVersion", version) && version(&code) == 0) id.nccl_code = code;
        Dl_info info{};
        if (version && dladdr(reinterpret_cast<void*>(version), &info) && info.dli_fname) id.nccl_path = info.dli_fname;
    }
    if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
        int (*driver)(int*) = nullptr;
        int code = 0;
        if (sym(cuda, "cuDriverGetVersion", driver) && driver(&code) == 0) id.cuda_code = code;
    }
    const Libraries& libs = libraries();
    int n = 0;
    if (libs.loaded && libs.cuda.init(0) == CUDA_SUCCESS && libs.cuda.device_count(&n) == CUDA_SUCCESS) {
        id.gpus = n;
        std::set<std::string> models;
        for (int i = 0; i < n; ++i) {
            CUdevice d = 0;
            char name[256] = {0};
            if (libs.cuda.device_get(&d, i) == CUDA_SUCCESS && libs.cuda.device_name(name, sizeof name, d) == CUDA_SUCCESS)
                models.insert(name);
        }
        for (const auto& m : models) id.gpu_model += (id.gpu_model.empty() ? "" : " + ") + m;
    }
    return id;
}

}  // namespace mn::gpu
