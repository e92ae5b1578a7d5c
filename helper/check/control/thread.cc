// SPDX-License-Identifier: Apache-2.0
// The control thread, the watchdog and the ways out (thread.h says what
// they own); how a process says it is starved (self.h).
#include "helper/check/control/thread.h"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "helper/check/control/line.h"
#include "helper/gpu.h"
#include "lib/check/preflight.h"
#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn::check {

namespace {

volatile sig_atomic_t g_alarm_code = kTimeout;

extern "C" void on_alarm(int) { _exit(g_alarm_code); }

}  // namespace

void exit_at(double seconds, int code) {
    g_alarm_code = code;
    struct sigaction sa {};
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, nullptr);
    itimerval t{};
    const double s = std::max(0.001, seconds);
    t.it_value.tv_sec = static_cast<time_t>(s);
    t.it_value.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(t.it_value.tv_sec)) * 1e6);
    setitimer(ITIMER_REAL, &t, nullptr);
}

[[noreturn]] void end_now(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    // Bounded whatever NCCL's abort does: a timer, not a thread (there may
    // be none to be had).
    exit_at(1.5, code);
    gpu::abort_nccl();
    std::fflush(stdout);
    _exit(code);
}

// ---- the control thread --------------------------------------------------------

namespace {

struct Control {
    std::mutex mu;
    std::condition_variable cv;
    std::function<bool()> job;
    bool in_job = false;
    bool started = false;
    std::thread::id id;
};

Control& control() {
    static Control c;
    return c;
}

[[noreturn]] void control_loop() {
    Control& c = control();
    {
        std::lock_guard<std::mutex> g(c.mu);
        c.id = std::this_thread::get_id();
    }
    while (true) {
        std::function<bool()> job;
        {
            std::lock_guard<std::mutex> g(c.mu);
            job = c.job;
            c.in_job = static_cast<bool>(job);
        }
        bool more = true;
        {
            // Nothing leaves this thread as an exception (that would be an abort).
            try {
                watchdog_turn();
                if (job) more = job();
                else std::this_thread::sleep_for(std::chrono::milliseconds(100));
            } catch (const std::bad_alloc&) {
                std::fprintf(stderr, "%s\n", starved("the control thread", ENOMEM).text().c_str());
                std::fflush(stderr);
                _exit(kCheckFailed);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "mn-preflight: the control thread: internal error: %s\n", e.what());
                std::fflush(stderr);
                _exit(kCheckFailed);
            }
        }
        std::lock_guard<std::mutex> g(c.mu);
        if (!more && c.job) c.job = nullptr;
        c.in_job = false;
        c.cv.notify_all();
    }
}

}  // namespace

Outcome<bool> start_control() {
    Control& c = control();
    std::lock_guard<std::mutex> g(c.mu);
    if (c.started) return true;
    auto t = start_thread("the control thread (heartbeats and the watchdog)", control_loop);
    if (!t) return t.problem();
    t.value().detach();
    c.started = true;
    return true;
}

void control_attach(std::function<bool()> turn) {
    Control& c = control();
    std::lock_guard<std::mutex> g(c.mu);
    c.job = std::move(turn);
}

void control_detach() {
    Control& c = control();
    std::unique_lock<std::mutex> g(c.mu);
    c.job = nullptr;
    if (std::this_thread::get_id() == c.id) return;  // from inside the job itself
    c.cv.wait(g, [&] { return !c.in_job; });
}

// ---- resources --------------------------------------------------------------

namespace {

struct Identity {
    std::mutex mu;
    std::string who = "mn-preflight";
};

Identity& identity() {
    static Identity i;
    return i;
}

}  // namespace

void set_identity(const Self& self) {
    std::lock_guard<std::mutex> g(identity().mu);
    identity().who = "mn-preflight: rank " + std::to_string(self.rank) + " on " + self.label;
}

Problem starved(const std::string& what, int err) {
    std::string who;
    {
        std::lock_guard<std::mutex> g(identity().mu);
        who = identity().who;
    }
    std::string fix;
    if (err == EAGAIN)
        fix = "the host's thread or process limit is reached: raise ulimit -u (RLIMIT_NPROC; slurmd's LimitNPROC "
              "with PropagateResourceLimits), the cgroup's pids.max (systemd's TasksMax) or kernel.threads-max";
    else if (err == EMFILE)
        fix = "this process's open-file limit is reached: raise ulimit -n (slurmd's LimitNOFILE with "
              "PropagateResourceLimits)";
    else if (err == ENFILE)
        fix = "the host's open-file table is full: raise fs.file-max";
    else if (err == ENOMEM)
        fix = "the host is out of memory (or of map areas: vm.max_map_count)";
    return Problem{who + ": " + what + ": " + std::strerror(err), fix};
}

// ---- the watchdog -------------------------------------------------------------

namespace {

struct Watchdog {
    std::mutex mu;
    std::string phase = "rendezvous";
    std::string waiting_for;  // rank 0: who has not reported
    bool done = false;
    // Armed by start_watchdog.
    bool armed = false;
    double until = 0, seconds = 0;
    Self self;
    bool json = false;
    Pulse pulse;
};

Watchdog& watchdog() {
    static Watchdog w;
    return w;
}

}  // namespace

void set_phase(const std::string& p, const std::string& waiting) {
    std::lock_guard<std::mutex> g(watchdog().mu);
    watchdog().phase = p;
    watchdog().waiting_for = waiting;
}

void mark_done() {
    std::lock_guard<std::mutex> g(watchdog().mu);
    watchdog().done = true;
}

void watchdog_turn() {
    Watchdog& w = watchdog();
    std::lock_guard<std::mutex> g(w.mu);
    if (!w.armed || w.done) return;
    // A process that was stopped (SIGSTOP) past its time does not claim
    // a time-out at once when it resumes: the control thread's next turns
    // first read what happened meanwhile (another rank's verdict, a stop).
    if (w.pulse.skipped()) w.until = std::max(w.until, now_s() + 2.0);
    if (now_s() < w.until) return;
    const std::string what = "phase " + w.phase + " did not finish within --timeout " + num(w.seconds, -1) + " s" +
                             (w.waiting_for.empty() ? "" : "; " + w.waiting_for);
    if (w.self.rank == 0) {
        if (w.json) {
            const Json j = {{"verdict", "FAIL"}, {"exit_code", kTimeout}, {"timed_out", json_text(what)}};
            std::fputs(json_line(j).c_str(), stdout);
        } else {
            std::printf("problem: time-out: %s\nFAIL (time-out)\n", what.c_str());
        }
    } else {
        std::fprintf(stderr, "mn-preflight: %s rank %u: time-out: %s\n", w.self.label.c_str(), w.self.rank,
                     what.c_str());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(kTimeout);
}

void watchdog_to_timer() {
    std::lock_guard<std::mutex> g(watchdog().mu);
    if (watchdog().armed && !watchdog().done) exit_at(watchdog().until - now_s(), kTimeout);
}

Outcome<bool> start_watchdog(double seconds, const Self& self, bool json) {
    {
        std::lock_guard<std::mutex> g(watchdog().mu);
        Watchdog& w = watchdog();
        w.armed = true;
        w.seconds = seconds;
        w.until = now_s() + seconds;
        w.self = self;
        w.json = json;
        w.pulse = Pulse();
    }
    return start_control();
}

}  // namespace mn::check
