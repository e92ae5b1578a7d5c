// SPDX-License-Identifier: Apache-2.0
#include "lib/check/stall.h"

#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>

#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn {

namespace {

// Spaces and a trailing newline off both ends.
std::string trim(const std::string& s) {
    const std::size_t a = s.find_first_not_of(" \n\t");
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(" \n\t") - a + 1);
}

// A signal's name (sigabbrev_np is glibc 2.32's, newer than RHEL 8's).
const char* signal_name(int sig) {
    switch (sig) {
        case SIGHUP: return "HUP";
        case SIGINT: return "INT";
        case SIGQUIT: return "QUIT";
        case SIGILL: return "ILL";
        case SIGABRT: return "ABRT";
        case SIGBUS: return "BUS";
        case SIGFPE: return "FPE";
        case SIGKILL: return "KILL";
        case SIGUSR1: return "USR1";
        case SIGSEGV: return "SEGV";
        case SIGUSR2: return "USR2";
        case SIGPIPE: return "PIPE";
        case SIGALRM: return "ALRM";
        case SIGTERM: return "TERM";
        case SIGXCPU: return "XCPU";
        default: return nullptr;
    }
}

}  // namespace

Outcome<ProcStat> parse_proc_stat(const std::string& text) {
    const std::size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open || open == 0)
        return Problem{"not a /proc/PID/stat line (no command name in parentheses)", ""};
    ProcStat p;
    const auto pid = whole_number(trim(text.substr(0, open)));
    if (!pid || *pid == 0 || *pid > 0x3fffffff) return Problem{"not a /proc/PID/stat line (no pid first)", ""};
    p.pid = static_cast<int>(*pid);
    p.comm = text.substr(open + 1, close - open - 1);
    // After the name: state ppid pgrp session tty tpgid flags minflt
    // cminflt majflt cmajflt utime stime ...
    std::vector<std::string> f;
    for (const std::string& w : split_list(trim(text.substr(close + 1)), ' '))
        if (!w.empty()) f.push_back(w);
    if (f.size() < 13 || f[0].size() != 1) return Problem{"a /proc/PID/stat line with too few fields", ""};
    p.state = f[0][0];
    // ppid: 0 for the first processes; -1 never, but stay whole.
    const auto ppid = whole_number(f[1]), utime = whole_number(f[11]), stime = whole_number(f[12]);
    if (!ppid || *ppid > 0x3fffffff || !utime || !stime) return Problem{"a /proc/PID/stat line with a bad number", ""};
    p.ppid = static_cast<int>(*ppid);
    p.ticks = *utime + *stime < *utime ? UINT64_MAX : *utime + *stime;
    return p;
}

std::vector<ProcStat> process_tree(const std::vector<ProcStat>& all, int root) {
    std::vector<ProcStat> out;
    std::set<int> in;
    for (const auto& p : all)
        if (p.pid == root) {
            out.push_back(p);
            in.insert(p.pid);
        }
    // Parents before children is not promised by /proc's order: repeat
    // until nothing joins (a cycle cannot join twice: `in` is checked).
    for (bool grew = !out.empty(); grew;) {
        grew = false;
        for (const auto& p : all)
            if (!in.count(p.pid) && in.count(p.ppid)) {
                out.push_back(p);
                in.insert(p.pid);
                grew = true;
            }
    }
    return out;
}

const char* stall_words(StallKind k) {
    return k == StallKind::Stopped ? "process stopped" : "process stuck in the kernel";
}

std::optional<Stall> StallWatch::look(double now, const std::vector<ProcStat>& tree) {
    std::map<int, Seen> next;
    std::optional<Stall> found;
    for (const auto& p : tree) {
        if (p.state != 'T' && p.state != 'D') continue;
        const auto was = seen_.find(p.pid);
        Seen s{p.state, p.ticks, now};
        // The same state as last time, and (in D) no CPU time since: the
        // clock runs on; else it starts now.
        if (was != seen_.end() && was->second.state == p.state && (p.state == 'T' || was->second.ticks == p.ticks))
            s.since = was->second.since;
        next[p.pid] = s;
        if (!found && now - s.since >= window_)
            found = Stall{p.state == 'T' ? StallKind::Stopped : StallKind::Stuck, p, now - s.since};
    }
    seen_ = std::move(next);
    return found;
}

PauseKind pause_kind(const OwnPause& p) {
    if (!p.waited_for_cpu) return PauseKind::Unknown;
    return *p.waited_for_cpu >= p.seconds / 2 ? PauseKind::Starved : PauseKind::Stopped;
}

std::string pause_words(const OwnPause& p) {
    const std::string waited =
        p.waited_for_cpu ? "it waited " + num(*p.waited_for_cpu, 1) + " s of it for a CPU: " : std::string();
    switch (pause_kind(p)) {
        case PauseKind::Stopped:
            return "not running for " + num(p.seconds, 1) + " s (" + waited +
                   "stopped, as by SIGSTOP, a cgroup freezer or a paused machine)";
        case PauseKind::Starved:
            return "starved of CPU for " + num(p.seconds, 1) + " s (" + waited + "its node is overloaded)";
        case PauseKind::Unknown: break;
    }
    return "not running for " + num(p.seconds, 1) + " s (stopped or starved: its CPU wait is not readable)";
}

bool pause_outlasts(const OwnPause& p, double silence, double beat) { return p.seconds + beat >= silence; }

std::optional<double> parse_schedstat_delay(const std::string& text) {
    const auto f = split_list(trim(text), ' ');
    if (f.size() != 3) return std::nullopt;
    const auto ns = whole_number(f[1]);
    if (!ns) return std::nullopt;
    return static_cast<double>(*ns) / 1e9;
}

std::string ended_words(int status, int* signal) {
    if (signal) *signal = 0;
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        if (signal) *signal = sig;
        const char* abbrev = signal_name(sig);
        return "killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "") +
               (WCOREDUMP(status) ? ", core dumped" : "");
    }
    if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
    return "ended (wait status " + std::to_string(status) + ")";
}

const char* death_kind(int signal, bool dumped) {
    return signal == SIGABRT && dumped ? "ended by its watchdog" : "process dead";
}

std::string watch_report_text(const WatchReport& r) {
    const std::string head = "mn-nccl watch: ";
    std::string out = head + r.kind + ": " + r.host;
    if (r.pid)
        out += " rank " + r.rank +
               (r.local_rank.empty() || r.local_rank == "?" ? "" : " (LOCAL_RANK " + r.local_rank + ")") + ", pid " +
               std::to_string(r.pid) + " (" + r.comm + ")";
    out += ": " + r.detail + "\n";
    if (!r.evidence.empty() || !r.seen_from.empty()) {
        out += head + "  evidence: ";
        for (std::size_t i = 0; i < r.evidence.size(); ++i) out += (i ? "; " : "") + r.evidence[i];
        if (!r.seen_from.empty()) out += (r.evidence.empty() ? "" : "; ") + std::string("seen from ") + r.seen_from;
        out += "\n";
    }
    if (!r.dumps.empty()) out += head + "  Flight Recorder dumps: " + join_list(r.dumps, ' ') + "\n";
    if (!r.report_file.empty()) out += head + "  report: " + r.report_file + "\n";
    if (!r.excluded.empty()) out += head + "  exclude file: " + r.excluded + "\n";
    if (!r.history.empty()) out += head + "  history: " + r.history + "\n";
    if (!r.action.empty()) out += head + "  " + r.action + "\n";
    return out;
}

std::string watch_report_json(const WatchReport& r) {
    Json j;
    j["kind"] = json_text(r.kind);
    j["job"] = json_text(r.job);
    j["step"] = json_text(r.step);
    j["host"] = json_text(r.host);
    j["rank"] = json_text(r.rank);
    j["local_rank"] = json_text(r.local_rank);
    j["pid"] = r.pid;
    j["comm"] = json_text(r.comm);
    if (!r.seen_from.empty()) j["seen_from"] = json_text(r.seen_from);
    j["detail"] = json_text(r.detail);
    j["evidence"] = json_texts(r.evidence);
    j["dumps"] = json_texts(r.dumps);
    j["action"] = json_text(r.action);
    if (!r.excluded.empty()) j["excluded"] = json_text(r.excluded);
    if (!r.history.empty()) j["history"] = json_text(r.history);
    return json_line(j);
}

}  // namespace mn
