// SPDX-License-Identifier: Apache-2.0
// The hang watch's rules (lib/check/stall), rank 0's own pauses, and its request
// (lib/check/watch_request), on /proc lines as the kernel writes them.
#include <sys/wait.h>

#include <csignal>

#include "lib/check/check_options.h"
#include "lib/check/stall.h"
#include "lib/check/watch_request.h"
#include "lib/util/json.h"
#include "tests/unit/unit.h"

using namespace mn;

namespace {

ProcStat proc(int pid, int ppid, char state, uint64_t ticks = 0) {
    ProcStat p;
    p.pid = pid;
    p.ppid = ppid;
    p.state = state;
    p.ticks = ticks;
    p.comm = "python3";
    return p;
}

}  // namespace

// A real line (Linux 6.1), and a command name with spaces and ')' in it.
static void proc_stat_lines(void**) {
    const auto p = parse_proc_stat(
        "31803 (sleep) T 31800 31800 31790 34816 31800 1073741824 95 0 0 0 7 3 0 0 20 0 1 0 2952051 5685248 231 "
        "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
    assert_true(p.ok());
    assert_int_equal(p->pid, 31803);
    assert_int_equal(p->ppid, 31800);
    assert_int_equal(p->state, 'T');
    assert_str(p->comm, "sleep");
    assert_int_equal(p->ticks, 10);
    const auto q = parse_proc_stat("42 (a) b) (c) S 1 42 42 0 -1 4194560 1 0 0 0 100 23 0 0 20 0 1 0 5 1 1");
    assert_true(q.ok());
    assert_str(q->comm, "a) b) (c");
    assert_int_equal(q->state, 'S');
    assert_int_equal(q->ticks, 123);
    // Garbled: each refused, none crashes.
    for (const char* bad : {"", "42", "42 (x)", "(x) S 1 2 3 4 5 6 7 8 9 10 11", "x (y) S 1 2 3 4 5 6 7 8 9 10 11",
                            "42 (y) SS 1 2 3 4 5 6 7 8 9 10 11", "42 (y) S 1 2 3 4 5 6 7 8 9 10 ten",
                            "0 (y) S 1 2 3 4 5 6 7 8 9 10 11", "42 (y) S 99999999999999999999999 2 3 4 5 6 7 8 9 10 11"})
        assert_false(parse_proc_stat(bad).ok());
}

static void the_task_tree_only(void**) {
    // 10 is the task's program; 11 and 12 its children, 13 a grandchild
    // listed before its parent; 20 another process of the user.
    const std::vector<ProcStat> all = {proc(13, 12, 'S'), proc(20, 1, 'T'), proc(10, 9, 'S'), proc(11, 10, 'S'),
                                       proc(12, 10, 'S')};
    const auto t = process_tree(all, 10);
    assert_int_equal(t.size(), 4);
    assert_int_equal(t[0].pid, 10);
    for (const auto& p : t) assert_true(p.pid != 20);
    assert_int_equal(process_tree(all, 99).size(), 0);
}

// Stopped for the window: named once the window is up, not before; a
// debugger's stop (t) and sleeping ranks never; a stop that ended starts over.
static void stopped_for_the_window(void**) {
    StallWatch w(30);
    assert_false(w.look(0, {proc(10, 1, 'S'), proc(11, 10, 'T')}).has_value());
    assert_false(w.look(29, {proc(10, 1, 'S'), proc(11, 10, 'T')}).has_value());
    const auto s = w.look(30.5, {proc(10, 1, 'S'), proc(11, 10, 'T')});
    assert_true(s.has_value());
    assert_int_equal(s->proc.pid, 11);
    assert_true(s->kind == StallKind::Stopped);
    assert_true(s->seconds >= 30);
    assert_str(stall_words(s->kind), "process stopped");
    // Resumed, then stopped again: the clock starts again.
    assert_false(w.look(31, {proc(11, 10, 'R')}).has_value());
    assert_false(w.look(32, {proc(11, 10, 'T')}).has_value());
    assert_false(w.look(61, {proc(11, 10, 'T')}).has_value());
    assert_true(w.look(62, {proc(11, 10, 'T')}).has_value());
    // Every rank asleep for hours (a checkpoint, a collective waiting on
    // another node), a debugger's stop: nobody.
    StallWatch quiet(30);
    for (double t = 0; t < 7200; t += 60)
        assert_false(quiet.look(t, {proc(10, 1, 'S'), proc(11, 10, 't'), proc(12, 10, 'Z')}).has_value());
}

// Stuck in the kernel: D with no CPU time for the window; D that moves is
// I/O going on.
static void stuck_in_the_kernel(void**) {
    StallWatch w(10);
    assert_false(w.look(0, {proc(10, 1, 'D', 500)}).has_value());
    assert_false(w.look(9, {proc(10, 1, 'D', 501)}).has_value());  // it moved: starts again at 9
    assert_false(w.look(18, {proc(10, 1, 'D', 501)}).has_value());
    const auto s = w.look(19, {proc(10, 1, 'D', 501)});
    assert_true(s.has_value());
    assert_true(s->kind == StallKind::Stuck);
    assert_str(stall_words(s->kind), "process stuck in the kernel");
}

static void how_a_program_ended(void**) {
    int sig = -1;
    assert_str(ended_words(W_EXITCODE(3, 0), &sig), "exited with code 3");
    assert_int_equal(sig, 0);
    assert_str(ended_words(W_EXITCODE(0, SIGKILL), &sig), "killed by signal 9 (SIGKILL)");
    assert_int_equal(sig, SIGKILL);
    assert_str(ended_words(W_EXITCODE(0, SIGSEGV) | WCOREFLAG, &sig), "killed by signal 11 (SIGSEGV), core dumped");
    assert_str(ended_words(W_EXITCODE(0, 40)), "killed by signal 40");
    assert_str(death_kind(SIGKILL, false), "process dead");
    assert_str(death_kind(SIGKILL, true), "process dead");
    assert_str(death_kind(SIGABRT, false), "process dead");
    assert_str(death_kind(SIGABRT, true), "ended by its watchdog");
}

static void the_report(void**) {
    WatchReport r;
    r.kind = "process stopped";
    r.job = "7";
    r.step = "0";
    r.host = "node1";
    r.rank = "3";
    r.local_rank = "1";
    r.pid = 4242;
    r.comm = "python3";
    r.detail = "state T for 31 s";
    r.evidence = {"wchan do_signal_stop", "cpu 12.40 s, none since"};
    r.report_file = "/tmp/w/node1.rank3.json";
    r.action = "--abort: ending step 7.0 (scancel)";
    const std::string t = watch_report_text(r);
    assert_contains(t, "mn-nccl watch: process stopped: node1 rank 3 (LOCAL_RANK 1), pid 4242 (python3): state T for 31 s\n");
    assert_contains(t, "mn-nccl watch:   evidence: wchan do_signal_stop; cpu 12.40 s, none since\n");
    assert_contains(t, "mn-nccl watch:   report: /tmp/w/node1.rank3.json\n");
    const auto j = Json::parse(watch_report_json(r));
    assert_str(j["kind"].get<std::string>(), "process stopped");
    assert_str(j["rank"].get<std::string>(), "3");
    assert_int_equal(j["pid"].get<int>(), 4242);
    assert_int_equal(j["evidence"].size(), 2);
    assert_false(j.contains("seen_from"));
    // A peer's link, named from another node: no process of its own.
    WatchReport l;
    l.kind = "link down";
    l.host = "node1";
    l.detail = "node1 (10.250.0.11) does not acknowledge the program's data from node0: ...";
    l.evidence = {"the kernel on node0 retransmits to 10.250.0.11 and hears no acknowledgement"};
    l.seen_from = "node0 rank 0 (pid 77)";
    const std::string lt = watch_report_text(l);
    assert_contains(lt, "mn-nccl watch: link down: node1: node1 (10.250.0.11) does not acknowledge");
    assert_contains(lt, "hears no acknowledgement; seen from node0 rank 0 (pid 77)\n");
    assert_true(lt.find(" pid 0") == std::string::npos && lt.find(" rank :") == std::string::npos);
    assert_str(Json::parse(watch_report_json(l))["seen_from"].get<std::string>(), "node0 rank 0 (pid 77)");
}

static void watch_requests(void**) {
    auto r = parse_watch_request("", "--mn-nccl-watch");
    assert_true(r.ok() && r->enabled && !r->abort && !r->window);
    r = parse_watch_request("abort,window=20", "--mn-nccl-watch");
    assert_true(r.ok() && r->enabled && r->abort && r->window && *r->window == 20);
    const auto a = watch_argv(*r, "/usr/bin/mn-preflight");
    const std::vector<std::string> want = {"/usr/bin/mn-preflight", "watch", "--abort", "--window", "20", "--"};
    assert_true(a == want);
    r = parse_watch_request("off", "MN_NCCL_WATCH");
    assert_true(r.ok() && !r->enabled);
    r = parse_watch_request("yes", "MN_NCCL_WATCH");
    assert_true(r.ok() && r->enabled);
    // A path keeps its case; the words around it do not matter.
    r = parse_watch_request("ABORT,exclude-file=/Shared/Bad,window=10,history=/Hist", "--mn-nccl-watch");
    assert_true(r.ok() && r->abort && r->exclude_file == "/Shared/Bad" && r->history_dir == "/Hist");
    const std::vector<std::string> with_file = {"/bin/mn-preflight", "watch", "--abort", "--window", "10",
                                                "--exclude-file", "/Shared/Bad", "--history", "/Hist", "--"};
    assert_true(watch_argv(*r, "/bin/mn-preflight") == with_file);
    for (const char* bad : {"window=2", "window=", "window=1e9", "abrt", "window=30s", "exclude-file=", "history="}) {
        const auto b = parse_watch_request(bad, "MN_NCCL_WATCH");
        assert_false(b.ok());
        assert_contains(b.problem().text(), "MN_NCCL_WATCH");
        assert_contains(b.problem().text(), "abort,window=30");
    }
}

// mn-preflight watch's command line.
static void watch_command_line(void**) {
    auto c = parse_command_line({"watch", "--window", "12", "--abort", "--", "python3", "train.py", "--lr", "1"});
    assert_str(c.error, "");
    assert_true(c.sub == Subcommand::Watch);
    assert_true(c.settings.watch_abort);
    assert_true(c.settings.watch_window == 12);
    assert_int_equal(c.program.size(), 4);
    assert_str(c.program[2], "--lr");
    assert_int_equal(c.settings.port, 0);
    c = parse_command_line({"watch", "--port", "24107", "--", "python3"});
    assert_str(c.error, "");
    assert_int_equal(c.settings.port, 24107);
    c = parse_command_line({"watch", "--port", "0", "--", "python3"});
    assert_contains(c.error, "--port needs a port from 1 to 65535");
    c = parse_command_line({"watch"});
    assert_str(c.error, "needs a program after --: mn-preflight watch [OPTIONS] -- PROGRAM");
    c = parse_command_line({"watch", "python3"});
    assert_contains(c.error, "unexpected argument 'python3'");
    c = parse_command_line({"watch", "--window", "1", "--", "x"});
    assert_contains(c.error, "--window needs seconds, from 5 to 3600");
    c = parse_command_line({"check", "--window", "30"});
    assert_contains(c.error, "--window is an option of watch, not of check");
}

// Rank 0's own pause: the CPU wait of /proc/thread-self/schedstat tells a
// stopped process from a starved one, and only a pause the waiting ranks
// could have given up over counts.
static void own_pauses(void**) {
    assert_true(parse_schedstat_delay("1843220871 4800000000 1227\n") == 4.8);
    assert_false(parse_schedstat_delay("1843220871 48x 1227").has_value());
    assert_false(parse_schedstat_delay("1843220871").has_value());
    assert_false(parse_schedstat_delay("").has_value());

    OwnPause stopped{5.1, 0.02};
    assert_true(pause_kind(stopped) == PauseKind::Stopped);
    assert_str(pause_words(stopped),
               "not running for 5.1 s (it waited 0.0 s of it for a CPU: stopped, as by SIGSTOP, a cgroup freezer or "
               "a paused machine)");
    OwnPause starved{5.1, 4.9};
    assert_true(pause_kind(starved) == PauseKind::Starved);
    assert_str(pause_words(starved), "starved of CPU for 5.1 s (it waited 4.9 s of it for a CPU: its node is overloaded)");
    // Half the gap spent waiting is the line between the two.
    assert_true(pause_kind(OwnPause{4.0, 2.0}) == PauseKind::Starved);
    assert_true(pause_kind(OwnPause{4.0, 1.9}) == PauseKind::Stopped);
    OwnPause unknown{3.2, std::nullopt};
    assert_true(pause_kind(unknown) == PauseKind::Unknown);
    assert_contains(pause_words(unknown), "stopped or starved");

    // Silence 3 s, a word every 0.5 s: a 2.5 s pause may have been 3 s of silence.
    assert_true(pause_outlasts(OwnPause{2.5, 0.0}, 3.0, 0.5));
    assert_false(pause_outlasts(OwnPause{2.4, 0.0}, 3.0, 0.5));
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(proc_stat_lines),      cmocka_unit_test(the_task_tree_only),
        cmocka_unit_test(stopped_for_the_window), cmocka_unit_test(stuck_in_the_kernel),
        cmocka_unit_test(how_a_program_ended),  cmocka_unit_test(the_report),
        cmocka_unit_test(watch_requests),       cmocka_unit_test(watch_command_line),
        cmocka_unit_test(own_pauses),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
