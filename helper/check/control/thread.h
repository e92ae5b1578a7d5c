// SPDX-License-Identifier: Apache-2.0
// The process's one control thread, from launch: the watchdog's look at
// the time every turn, and beside it one job (rank 0's hub or a rank's
// inbox, each a turn of at most 0.1 s). Also the ways out that need no
// thread: a timer, and leaving NCCL with a code.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "helper/check/self.h"

namespace mn::check {

// ---- the job -----------------------------------------------------------------
// One turn of the hub's or the inbox's loop (waiting 0.1 s at most); false
// when it is done. One job at a time: control_attach replaces the one
// attached.
void control_attach(std::function<bool()> turn);
// Starts the control thread (start_watchdog does, at launch): the problem
// naming this rank when the system gives no thread.
Outcome<bool> start_control();
// Detaches the job and returns once the control thread is out of it.
void control_detach();
// The end of the hub or the inbox (each a job's shared State with `mu`,
// `stop` and its `mux`): marked stopped, the thread woken from its wait,
// then detached.
template <class State>
void control_stop(const std::shared_ptr<State>& st) {
    if (!st) return;
    {
        std::lock_guard<std::mutex> g(st->mu);
        st->stop = true;
    }
    st->mux.wake();
    control_detach();
}

// ---- the watchdog: nothing outlives --timeout ----------------------------------
// set_phase names what a time-out would name (and, on rank 0, who it waits
// for); start_watchdog starts the control thread, or says why it cannot.
void set_phase(const std::string& p, const std::string& waiting = "");
Outcome<bool> start_watchdog(double seconds, const Self& self, bool json);
// One look at the time, from the control thread's every turn.
void watchdog_turn();
// The control thread leaves its turns for good (a takeover): what is left
// of --timeout goes to a timer instead (exit_at).
void watchdog_to_timer();
void mark_done();

// ---- ways out --------------------------------------------------------------------
// Ends the process with `code` in `seconds`, by SIGALRM: no thread needed.
void exit_at(double seconds, int code);
// Leaves NCCL and ends the process with `code` (bounded, whatever NCCL does).
[[noreturn]] void end_now(int code);

}  // namespace mn::check
