// SPDX-License-Identifier: Apache-2.0
#include "helper/gpu/wait.h"

#include <chrono>
#include <thread>

#include "helper/gpu.h"
#include "helper/gpu/libraries.h"
#include "lib/util/text.h"

namespace mn::gpu {

std::optional<Failure> settle(const std::vector<ncclComm_t>& comms, double until, const std::string& what) {
    const Nccl& nc = libraries().nccl;
    // A connected communicator leaves ncclInProgress within microseconds of
    // its launch: polled without sleeping for a while first. A sleep of
    // 20 us (50 more of the kernel's timer slack) after each of the timed
    // loop's launches left the GPU idle between rounds: 8 MiB rounds read
    // a third of all_reduce_perf's busbw on 2 H200.
    const double spin_until = now_s() + 0.001;
    while (true) {
        bool busy = false;
        if (stopped()) return Failure{what + ": stopped by rank 0", true};
        for (ncclComm_t c : comms) {
            if (!c) continue;
            ncclResult_t st = ncclSuccess;
            ncclResult_t r = nc.async_error(c, &st);
            if (r != ncclSuccess) return Failure{what + ": " + nccl_error(r), nccl_is_peer(r)};
            if (st == ncclInProgress) busy = true;
            else if (st != ncclSuccess) return Failure{what + ": " + nccl_error(st), nccl_is_peer(st)};
        }
        if (!busy) return std::nullopt;
        const double now = now_s();
        if (now > until) return Failure{what + ": did not finish in time (waiting on another rank)", true};
        if (now < spin_until) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

std::optional<Failure> drain(const std::vector<Lane>& lanes, const std::vector<ncclComm_t>& comms, double until,
                             const std::string& what) {
    const Libraries& libs = libraries();
    while (true) {
        bool busy = false;
        for (const Lane& ln : lanes) {
            libs.cuda.ctx_set(ln.ctx);
            CUresult r = libs.cuda.stream_query(ln.stream);
            if (r == CUDA_ERROR_NOT_READY) busy = true;
            else if (r != CUDA_SUCCESS) return Failure{describe(ln.dev) + ": " + what + ": " + cu_error(r), false};
        }
        if (stopped()) return Failure{what + ": stopped by rank 0", true};
        for (ncclComm_t c : comms) {
            ncclResult_t st = ncclSuccess;
            if (!c || libs.nccl.async_error(c, &st) != ncclSuccess) continue;
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

}  // namespace mn::gpu
