// SPDX-License-Identifier: Apache-2.0
// What this process is (Self, from Slurm's and the plugin's variables), and
// how it says it ran out of threads, sockets or memory: every room of the
// check knows these, the control plane (control/) included.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "lib/util/outcome.h"

namespace mn::check {

struct Self {
    uint32_t rank = 0, world = 1;
    uint32_t node = 0;      // NODE_RANK (emulation-aware), else SLURM_NODEID
    std::string label;      // the host, or NCCL_HOSTID under emulation
    std::string master;
    uint16_t port = 0;
    std::string secret;
    bool task_mode = true;  // LOCAL_WORLD_SIZE set and no PET_*: one GPU per task
    uint32_t local_rank = 0;
    uint32_t local_world = 1;  // this node's tasks (LOCAL_WORLD_SIZE, else SLURM_NTASKS_PER_NODE's)
};
Outcome<Self> read_self();  // rendezvous.cc

// ---- resources (control/thread.cc) -------------------------------------------
// At 8,192 ranks on one host a process may find no thread, socket or memory
// left: it says so, naming itself and what it could not get, and ends with
// kCheckFailed, never an abort (issue 29).

// Who this process is, for such messages (after read_self).
void set_identity(const Self& self);
// "mn-preflight: rank 17 on node3: cannot start the control thread:
// Resource temporarily unavailable" and the fix for that errno.
Problem starved(const std::string& what, int err);
// A thread, or the problem naming `what` and this rank.
template <typename Fn>
Outcome<std::thread> start_thread(const std::string& what, Fn&& fn) {
    try {
        return std::thread(std::forward<Fn>(fn));
    } catch (const std::system_error& e) {
        return starved("cannot start " + what, e.code().value());
    }
}

}  // namespace mn::check
