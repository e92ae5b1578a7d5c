// SPDX-License-Identifier: Apache-2.0
#include "helper/gpu/nccl.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include "helper/gpu.h"
#include "helper/gpu/libraries.h"
#include "lib/util/symbols.h"
#include "lib/check/fingerprint.h"
#include "lib/check/preflight.h"
#include "lib/util/bounded_file.h"

namespace mn::gpu {
namespace {

// Every live communicator, for abort_nccl(), and whether it was called.
struct Tracking {
    std::mutex mu;
    std::vector<ncclComm_t> comms;
    std::atomic<bool> aborted{false};
};

Tracking& tracking() {
    static Tracking t;
    return t;
}

std::string& nccl_log_path() {
    static std::string path;
    return path;
}

// NCCL's log for one check: INFO lines for a few hundred connections.
constexpr std::size_t kNcclLogMax = 64 << 20;

// The log lies in a directory others can write (/tmp): only a regular file
// of this process's user, never a link, is NCCL's. Anything else (planted
// lines naming transports or warnings) reads as no log at all.
std::string nccl_log_text(const std::string& path) {
    auto f = read_bounded_file(path, kNcclLogMax, LastLink::refuse);
    if (!f || f->owner != geteuid()) return "";
    return std::move(f.value().text);
}

std::string nccl_log() { return nccl_log_text(nccl_log_path()); }

// NCCL's own reason for an error: the last WARN line it wrote to our log.
std::string nccl_warning() {
    std::istringstream in(nccl_log());
    std::string line, last;
    while (std::getline(in, line))
        if (line.find("NCCL WARN") != std::string::npos) last = line;
    const auto at = last.find("NCCL WARN");
    return at == std::string::npos ? "" : last.substr(at);
}

}  // namespace

std::optional<std::string> libnccl_path() {
    for (const char* var : {"MN_PREFLIGHT_LIBNCCL", "MN_PREFLIGHT_NCCL"})
        if (const char* v = std::getenv(var); v && *v) return std::string(v);
    return std::nullopt;
}

void* open_nccl(std::string& why) {
    const std::string name = libnccl_path().value_or("libnccl.so.2");
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        // The loader's words: a file missing, or one of its own libraries.
        const char* e = dlerror();
        std::string detail = e ? e : "";
        if (detail.rfind(name + ": ", 0) == 0) detail.erase(0, name.size() + 2);
        why = "no NCCL (" + name + ": " + (detail.empty() ? "not found" : detail) +
              "; install NCCL or set MN_PREFLIGHT_LIBNCCL=/path/to/libnccl.so.2)";
    }
    return lib;
}

std::string bind_nccl(void* lib, Nccl& n) {
#if HAVE_NCCL_H
    const char* init_name = "ncclCommInitRankConfig";
#else
    const char* init_name = "ncclCommInitRank";
#endif
    std::string missing;
    auto need = [&](const char* name, auto& f) {
        if (!sym(lib, name, f) && missing.empty()) missing = name;
    };
    need("ncclGetVersion", n.version);
    need("ncclGetUniqueId", n.unique_id);
    need(init_name, n.comm_init);
    need("ncclAllReduce", n.all_reduce);
    need("ncclGroupStart", n.group_start);
    need("ncclGroupEnd", n.group_end);
    need("ncclCommDestroy", n.comm_destroy);
    need("ncclCommAbort", n.comm_abort);
    need("ncclCommGetAsyncError", n.async_error);
    need("ncclGetErrorString", n.error_string);
    sym(lib, "ncclCommSplit", n.comm_split);  // optional: pair tests need it (2.18+)
    if (missing.empty()) return "";
    // Which file, and which release: two NCCLs on one node are a common way here.
    std::string file = "libnccl.so.2", release;
    Dl_info info{};
    void* any = dlsym(lib, "ncclGetVersion");
    if (any && dladdr(any, &info) && info.dli_fname) file = info.dli_fname;
    int code = 0;
    if (n.version && n.version(&code) == ncclSuccess && code > 0) release = " (NCCL " + nccl_version_text(code) + ")";
    return file + release + " lacks " + missing + ", which mn-preflight needs (NCCL 2.14 or newer; point " +
           "MN_PREFLIGHT_LIBNCCL at the NCCL the job uses)";
}

ncclResult_t comm_init(const Nccl& n, InitConfig& c, ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank) {
#if HAVE_NCCL_H
    return n.comm_init(comm, nranks, id, rank, &c.config);
#else
    (void)c;
    return n.comm_init(comm, nranks, id, rank);
#endif
}

ncclResult_t group_end(const Nccl& n) {
    ncclResult_t r = n.group_end();
    return r == ncclInProgress ? ncclSuccess : r;
}

void set_nccl_log(const std::string& path) { nccl_log_path() = path; }

std::string nccl_error(ncclResult_t r) {
    std::string what = "NCCL error " + std::to_string(static_cast<int>(r)) + " (" +
                       libraries().nccl.error_string(r) + ")";
    const std::string warn = nccl_warning();
    return warn.empty() ? what : what + ": " + warn;
}

bool nccl_is_peer(ncclResult_t r) {
    return r != ncclUnhandledCudaError && r != ncclInvalidArgument && r != ncclInvalidUsage;
}

std::vector<std::string> transports_in(const std::string& path) {
    return nccl_transports(nccl_log_text(path));
}

std::string unique_id() {
    ncclUniqueId id{};
    if (libraries().nccl.unique_id(&id) != ncclSuccess) return "";
    std::string hex;
    static const char kDigits[] = "0123456789abcdef";
    for (char c : id.internal) {
        hex.push_back(kDigits[(static_cast<unsigned char>(c) >> 4) & 15]);
        hex.push_back(kDigits[static_cast<unsigned char>(c) & 15]);
    }
    return hex;
}

bool unique_id_from_hex(const std::string& hex, ncclUniqueId& id) {
    if (hex.size() != 2 * sizeof id.internal) return false;
    for (std::size_t i = 0; i < sizeof id.internal; ++i)
        id.internal[i] = static_cast<char>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
    return true;
}

void track(ncclComm_t c) {
    std::lock_guard<std::mutex> g(tracking().mu);
    tracking().comms.push_back(c);
}

bool untrack(ncclComm_t c) {
    std::lock_guard<std::mutex> g(tracking().mu);
    auto& v = tracking().comms;
    auto it = std::find(v.begin(), v.end(), c);
    if (it == v.end()) return false;
    v.erase(it);
    return true;
}

bool stopped() { return tracking().aborted; }

void abort_nccl() {
    tracking().aborted = true;
    // The polling waits see the flag within microseconds and stop touching
    // their communicators; a thread inside a blocking NCCL call is what
    // ncclCommAbort from here is for.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<ncclComm_t> comms;
    {
        std::lock_guard<std::mutex> g(tracking().mu);
        comms.swap(tracking().comms);
    }
    const Libraries& libs = libraries();
    if (!libs.loaded) return;
    for (ncclComm_t c : comms) libs.nccl.comm_abort(c);
}

}  // namespace mn::gpu
