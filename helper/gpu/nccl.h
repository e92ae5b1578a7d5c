// SPDX-License-Identifier: Apache-2.0
// NCCL as mn-preflight uses it: libnccl.so.2 (or MN_PREFLIGHT_LIBNCCL) loaded
// at run time, its calls in a table, its log read back for the reason of
// an error and the transports, and every live communicator tracked so that
// abort_nccl() can reach it. Internal to helper/gpu/.
#pragma once

#include "build_config.h"

#include <optional>
#include <string>
#include <vector>

#include "helper/gpu/cuda.h"

#if HAVE_NCCL_H
#include <nccl.h>
#else
// FALLBACK without nccl.h: NCCL's documented C signatures for the calls
// used, with the blocking init (a non-blocking one needs ncclConfig_t,
// whose layout only nccl.h may give). Build with nccl.h for stop words
// that reach a rank inside NCCL's init.
extern "C" {
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
typedef int ncclRedOp_t;
ncclResult_t ncclGetVersion(int*);
ncclResult_t ncclGetUniqueId(ncclUniqueId*);
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int);
ncclResult_t ncclAllReduce(const void*, void*, size_t, int, ncclRedOp_t, ncclComm_t, CUstream);
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
#define ncclMax 2
#define NCCL_SPLIT_NOCOLOR -1
#endif

namespace mn::gpu {

// NCCL's calls used, from libnccl.so.2.
struct Nccl {
    decltype(&ncclGetVersion) version = nullptr;
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
    decltype(&ncclCommSplit) comm_split = nullptr;  // NCCL >= 2.18, else null
    decltype(&ncclGetErrorString) error_string = nullptr;
};

// The libnccl a node names: MN_PREFLIGHT_LIBNCCL (a path, for NCCL
// installed outside the loader's path), else the deprecated
// MN_PREFLIGHT_NCCL (its name in earlier releases, an anagram of
// MN_NCCL_PREFLIGHT: still read, so that sites' scripts keep working);
// nullopt when neither is set.
std::optional<std::string> libnccl_path();

// dlopen of libnccl_path() or libnccl.so.2; null with `why` set when absent.
void* open_nccl(std::string& why);

// Fills `n` from `lib`: "" when bound, else what is missing, naming the
// file, its release and the call (NCCL before 2.14, or not NCCL).
std::string bind_nccl(void* lib, Nccl& n);

// The init's configuration, alive across the group of inits that use it:
// non-blocking with nccl.h, nothing without (the blocking init).
struct InitConfig {
#if HAVE_NCCL_H
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    InitConfig() { config.blocking = 0; }
#endif
};

// A split's configuration: blocking, so that its launches run on the
// calling thread. A non-blocking communicator's ncclGroupEnd hands every
// launch to a thread NCCL starts for it (NCCL 2.23 and newer): about 80 us
// a launch on H100, longer than an 8 MiB round over NVLink. Null (the
// parent's configuration) without nccl.h.
struct BlockingConfig {
#if HAVE_NCCL_H
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    BlockingConfig() { config.blocking = 1; }
    ncclConfig_t* get() { return &config; }
#else
    void* get() { return nullptr; }
#endif
};
// Whether BlockingConfig makes a blocking communicator (nccl.h was there).
#if HAVE_NCCL_H
constexpr bool kBlockingSplit = true;
#else
constexpr bool kBlockingSplit = false;
#endif

// ncclCommInitRankConfig (or ncclCommInitRank without nccl.h) for one rank.
ncclResult_t comm_init(const Nccl& n, InitConfig& c, ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank);

// ncclGroupEnd in non-blocking mode says ncclInProgress: not an error.
ncclResult_t group_end(const Nccl& n);

// Where NCCL writes its lines for this check (NCCL_DEBUG_FILE, set before
// NCCL's first call): read back by nccl_error() for NCCL's own reason.
void set_nccl_log(const std::string& path);

// "NCCL error 6 (remote process exited or there was a network error): NCCL
// WARN ..." with the last WARN line of the log, when there is one.
std::string nccl_error(ncclResult_t r);

// A CUDA error, or NCCL's for CUDA or for its own use, is this rank's; the
// rest (remote, network, internal) is most likely another rank's.
bool nccl_is_peer(ncclResult_t r);

// The transports NCCL's log at `path` names ("NET/Socket", "P2P/CUMEM"):
// none unless it is a regular file of this process's user (it lies in
// /tmp), at most 64 MiB, reached without a link.
std::vector<std::string> transports_in(const std::string& path);

// unique_id()'s hex back into NCCL's id; false when it is not one.
bool unique_id_from_hex(const std::string& hex, ncclUniqueId& id);

// Every live communicator is tracked, for abort_nccl().
void track(ncclComm_t c);
// True when the caller now owns `c` (abort_nccl() did not take it).
bool untrack(ncclComm_t c);
// abort_nccl() was called: every wait stops.
bool stopped();

}  // namespace mn::gpu
