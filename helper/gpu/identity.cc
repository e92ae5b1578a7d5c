// SPDX-License-Identifier: Apache-2.0
// What this node runs, for the fingerprint (lib/check/fingerprint): the
// NCCL a check would load and the file it comes from, the CUDA driver, the
// GPUs' model. Each part is loaded on its own, so a node without CUDA still
// says which NCCL it has (and the CPU path compares that too).
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "helper/gpu.h"
#include "helper/gpu/libraries.h"
#include "lib/util/symbols.h"

namespace mn::gpu {

namespace {

// NCCL's lookup of its network plugin: NCCL_NET_PLUGIN=none: none; a name
// N: libnccl-net-N.so (or N itself when it names a file); unset:
// libnccl-net.so. The newest ncclNetPlugin_vK it exports is its API.
void net_plugin(Identity& id) {
    const char* env = std::getenv("NCCL_NET_PLUGIN");
    const std::string want = env ? env : "";
    id.net_known = true;
    if (want == "none") return;
    std::vector<std::string> names;
    if (want.empty()) names = {"libnccl-net.so"};
    else names = {"libnccl-net-" + want + ".so", want};
    for (const auto& n : names) {
        void* lib = dlopen(n.c_str(), RTLD_LAZY | RTLD_LOCAL);
        if (!lib) continue;
        for (int v = 12; v >= 2; --v) {
            void* s = dlsym(lib, ("ncclNetPlugin_v" + std::to_string(v)).c_str());
            if (!s) continue;
            id.net_api = "v" + std::to_string(v);
            Dl_info info{};
            if (dladdr(s, &info) && info.dli_fname) id.net_path = info.dli_fname;
            break;
        }
        id.net_name = want.empty() ? "libnccl-net.so" : want;
        return;
    }
    // A name that loads nothing: NCCL falls back to its own transports.
}

// NCCL's version and file (NCCL alone: a node without CUDA still says
// which NCCL it has).
void nccl_of_node(Identity& id) {
    std::string why;
    if (void* lib = open_nccl(why)) {
        int (*version)(int*) = nullptr;
        int code = 0;
        if (sym(lib, "ncclGetVersion", version) && version(&code) == 0) id.nccl_code = code;
        Dl_info info{};
        if (version && dladdr(reinterpret_cast<void*>(version), &info) && info.dli_fname) id.nccl_path = info.dli_fname;
    }
}

// The driver's version, and its GPUs counted and named: the driver alone,
// so a node without NCCL still has its GPUs (the check says NCCL is what
// it lacks). cuInit is the slow part; the GPU path's probe() has done it
// by now, so this is only its answer read again.
void gpus_of_node(Identity& id) {
    const Libraries& libs = libraries();
    if (!libs.cuda_bound || !libs.cuda.driver_version) {
        // A driver too old for the check still says its version.
        if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
            int (*driver)(int*) = nullptr;
            int code = 0;
            if (sym(cuda, "cuDriverGetVersion", driver) && driver(&code) == 0) id.cuda_code = code;
        }
        if (!libs.cuda_bound) return;
    } else {
        libs.cuda.driver_version(&id.cuda_code);
    }
    int n = 0;
    if (libs.cuda.init(0) != CUDA_SUCCESS || libs.cuda.device_count(&n) != CUDA_SUCCESS) return;
    id.gpus = n;
    std::set<std::string> models;
    for (int i = 0; i < n; ++i) {
        CUdevice d = 0;
        char name[256] = {0};
        if (libs.cuda.device_get(&d, i) != CUDA_SUCCESS) continue;
        if (libs.cuda.device_name(name, sizeof name, d) == CUDA_SUCCESS) models.insert(name);
        // CUDA says "0000:1B:00.0"; sysfs "0000:1b:00.0".
        char bus[32] = {0};
        if (libs.cuda.bus_id(bus, sizeof bus, d) == CUDA_SUCCESS) {
            std::string b = bus;
            for (char& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            id.gpu_buses.push_back(b);
        }
    }
    for (const auto& m : models) id.gpu_model += (id.gpu_model.empty() ? "" : " + ") + m;
}

}  // namespace

Identity identity() {
    // The parts at once, each on its own (a plugin's dlopen pulls in its
    // libraries; cuInit on a node without the GPU path takes a while): the
    // read costs its slowest part, not their sum.
    Identity net, nccl;
    auto a = std::async(std::launch::async, [&net] { net_plugin(net); });
    auto b = std::async(std::launch::async, [&nccl] { nccl_of_node(nccl); });
    Identity id;
    gpus_of_node(id);
    a.get();
    b.get();
    id.net_known = net.net_known;
    id.net_name = net.net_name;
    id.net_api = net.net_api;
    id.net_path = net.net_path;
    id.nccl_code = nccl.nccl_code;
    id.nccl_path = nccl.nccl_path;
    return id;
}

}  // namespace mn::gpu
