// SPDX-License-Identifier: Apache-2.0
// The hang watch's rules (mn-preflight watch, helper/watch.cc), with no
// process of their own: a process as /proc/PID/stat shows it, which of a
// task's processes stayed stopped or stuck long enough to be named, how a
// program's end reads, and the report a named rank gets.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

// One process, from /proc/PID/stat.
struct ProcStat {
    int pid = 0;
    int ppid = 0;
    char state = '?';    // R, S, D, T (stopped by a signal), t (a debugger's stop), Z, ...
    std::string comm;    // its command name, as the kernel keeps it (15 bytes at most)
    uint64_t ticks = 0;  // user + system CPU time, in clock ticks
};

// /proc/PID/stat's text. The command name sits in parentheses and may hold
// spaces and ')' itself: it ends at the last ')'.
Outcome<ProcStat> parse_proc_stat(const std::string& text);

// `root` and its descendants among `all`, root first.
std::vector<ProcStat> process_tree(const std::vector<ProcStat>& all, int root);

// What the watch names. A stopped process (T: SIGSTOP, SIGTSTP, a job
// control stop) never moves again by itself; one stuck in the kernel (D,
// uninterruptible, its CPU time not moving) waits on a device or a file
// system that does not answer. A debugger's stop (t) is the user's own and
// is not named; nor is any sleep (S): a rank waiting in a collective for a
// named one, or every rank paused for a checkpoint, sleeps.
enum class StallKind { Stopped, Stuck };
const char* stall_words(StallKind k);  // "process stopped", "process stuck in the kernel"

struct Stall {
    StallKind kind = StallKind::Stopped;
    ProcStat proc;
    double seconds = 0;  // how long it has been so, when named
};

// Looks at a task's processes, one sample after another.
class StallWatch {
public:
    explicit StallWatch(double window) : window_(window) {}
    // The processes at time `now` (seconds, any clock that only goes
    // forward): the first one stopped, or stuck, for `window` seconds or
    // more; a process that left that state and came back starts again.
    std::optional<Stall> look(double now, const std::vector<ProcStat>& tree);

private:
    struct Seen {
        char state;
        uint64_t ticks;
        double since;  // in this state, with no CPU time, since
    };
    double window_;
    std::map<int, Seen> seen_;
};

// This process's own pause: a loop of its (rank 0's control thread) came
// round `seconds` late. The time it waited for a CPU meanwhile (run_delay
// in /proc/thread-self/schedstat) tells the two apart: a thread that was
// runnable most of the gap was starved by its node's load; one that was
// not was not running at all (SIGSTOP, a cgroup freezer, a paused VM).
struct OwnPause {
    double seconds = 0;
    std::optional<double> waited_for_cpu;  // unset where schedstat is not readable
};
enum class PauseKind { Stopped, Starved, Unknown };
PauseKind pause_kind(const OwnPause& p);
// "not running for 5.1 s (it waited 0.0 s of it for a CPU: stopped, as by
// SIGSTOP, a cgroup freezer or a paused machine)"; "starved of CPU for
// 5.1 s (it waited 4.9 s of it for a CPU: its node is overloaded)".
std::string pause_words(const OwnPause& p);
// The ranks waiting on this process give up after `silence` seconds
// without a word, and its words go every `beat` seconds: a pause this long
// may have made them give up.
bool pause_outlasts(const OwnPause& p, double silence, double beat);

// /proc/PID/schedstat's text ("exec_ns run_delay_ns timeslices"): the time
// spent waiting for a CPU, in seconds.
std::optional<double> parse_schedstat_delay(const std::string& text);

// How a program ended, from waitpid's status: "exited with code 3",
// "killed by signal 9 (SIGKILL)". `signal` is set for a death by signal.
std::string ended_words(int wait_status, int* signal = nullptr);

// A program killed by `signal`: "process dead", unless it aborted itself
// (SIGABRT) after PyTorch's watchdog dumped its Flight Recorder
// (`dumped`): then "ended by its watchdog", a rank that waited on another
// one's collective, not the rank at fault.
const char* death_kind(int signal, bool dumped);

// What a named rank's report carries.
struct WatchReport {
    std::string kind;  // stall_words(), "process dead", "program ended"
    std::string job, step, host;
    std::string rank, local_rank;  // as the process's SLURM_PROCID/RANK say; "?" when unknown
    int pid = 0;         // 0: a node's link is named, not a process (host: that node)
    std::string comm;
    std::string seen_from;  // a link named from another node: "node0 rank 0 (pid 4242)"
    std::string detail;  // "state T for 31 s", "killed by signal 9 (SIGKILL)"
    std::vector<std::string> evidence;  // "wchan do_signal_stop", "cpu 12.40 s, no progress", ...
    std::vector<std::string> dumps;     // the Flight Recorder's files in the report directory
    std::string report_file;            // where the JSON went ("" when it could not be written)
    std::string excluded;               // "node1 added to PATH", or why not (a link named, --exclude-file)
    bool host_evidence = false;         // the host's own evidence names it (a link the kernel gives up on): excluded
    std::string history;                // "line in DIR/node1.jsonl", or why not (a link named, --history)
    std::string action;                 // what the watch does next
};
// The one block on the step's stderr: its lines, each starting
// "mn-nccl watch: ".
std::string watch_report_text(const WatchReport& r);
// The JSON file's one line.
std::string watch_report_json(const WatchReport& r);

}  // namespace mn
