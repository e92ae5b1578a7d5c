// SPDX-License-Identifier: Apache-2.0
// mn-preflight: the srun-side helper of mn-nccl. Exit codes: 0 pass,
// 1 check failed, 2 usage or configuration error, 3 time-out.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "build_config.h"
#include "helper/check.h"
#include "helper/check/fleet.h"
#include "helper/check/self.h"
#include "helper/discover.h"
#include "helper/watch.h"
#include "helper/gpu.h"
#include "helper/inline_exec.h"
#include "lib/check/check_options.h"
#include "lib/check/history.h"
#include "lib/plan/step_plan.h"
#include "lib/fabric/verbs.h"
#include "lib/util/text.h"

namespace {

constexpr const char* kExit = "exit: 0 pass, 1 check failed, 2 usage or configuration error, 3 time-out\n";

// Every message names the tool once: a Problem's text that already starts
// with "mn-preflight: " (lib/check/history's) keeps just that one.
std::string once(const std::string& text) {
    const std::string tool = "mn-preflight: ";
    return text.compare(0, tool.size(), tool) == 0 ? text.substr(tool.size()) : text;
}

// Each help is the subcommand's synopsis, what it does, and its options
// from their table (lib/check/check_options), as the plugin's
// --mn-preflight help is.
std::string top_help() {
    std::string out =
        "usage: mn-preflight [SUBCOMMAND] [OPTIONS]   (check when none is named)\n"
        "       mn-preflight --help | --version\n\n";
    for (const mn::SubcommandInfo& s : mn::subcommand_table())
        out += "  " + mn::pad(s.name, 10) + s.summary + "\n";
    return out +
           "\n'mn-preflight SUBCOMMAND --help' lists its options; --version says what it was built for.\n" + kExit;
}

std::string check_help() {
    return "usage: srun --mn-nccl=auto mn-preflight [check] " + mn::check_options_synopsis(mn::kCheckArgv, 48) +
           "\n"
           "       mn-preflight check --exec " + mn::check_options_synopsis(mn::kExecArgv, 33, "exec") +
           "\n                                 [OPTIONS] -- PROGRAM [ARGS]\n"
           "\n"
           "Every task of the step is a rank: readiness (GPUs opened, buffers checked, NVML health) before\n"
           "NCCL, stopping every rank at the first failure; an all-reduce across all of them, checked and\n"
           "bounded by time (NCCL on GPUs, else over TCP on the socket interface: each node's ranks at its\n"
           "leader, the leaders in a ring); fabric consistency; pair tests between nodes and between a\n"
           "node's GPUs, whose suspects are retested before a slow node, GPU or link is named. Rank 0\n"
           "prints a table (per node ok, waited on NODE, or the fault) and PASS or FAIL; every rank exits\n"
           "with the verdict.\n"
           "\n"
           "options:\n" +
           mn::check_options_help(mn::kCheckArgv) +
           "with --exec only (srun --mn-preflight puts this form in front of each task):\n" +
           mn::check_options_help(mn::kExecArgv) +
           "  -h, --help         this help\n" + kExit;
}

std::string prolog_help() {
    return "usage: mn-preflight prolog " + mn::check_options_synopsis(mn::kPrologArgv, 27) +
           "\n"
           "       (mn-preflight --prolog ... is the same)\n"
           "\n"
           "This node alone, for a Slurm prolog: RDMA ports usable, every GPU takes an allocation and a\n"
           "copy, an NCCL all-reduce across its GPUs, NVML health. It prints one line; on failure that line\n"
           "is the reason, fit for a drain reason.\n"
           "\n"
           "options:\n" +
           mn::check_options_help(mn::kPrologArgv) + "  -h, --help         this help\n" + kExit;
}

std::string discover_help() {
    return "usage: mn-preflight discover " + mn::check_options_synopsis(mn::kDiscoverArgv, 29) +
           "\n"
           "\n"
           "This node's RDMA ports, GPU to HCA locality, the fabric mn_nccl would choose and why, and the\n"
           "variables it would set.\n"
           "\n"
           "options:\n" +
           mn::check_options_help(mn::kDiscoverArgv) + "  -h, --help         this help\n" +
           "exit: 0 discovered, 1 the node lacks what --mode asks for, 2 usage error\n";
}

std::string history_help() {
    return "usage: mn-preflight history DIR " + mn::check_options_synopsis(mn::kHistoryArgv, 32) +
           "\n"
           "\n"
           "The verdicts that check --history DIR (or srun --mn-preflight=history=DIR) wrote to DIR, per\n"
           "node: checks, failures by kind, the last failure, and the nodes failing in K of their last N\n"
           "checks (to drain).\n"
           "\n"
           "options:\n" +
           mn::check_options_help(mn::kHistoryArgv) + "  -h, --help         this help\n" +
           "exit: 0 summed up, 1 DIR cannot be read, 2 usage error\n";
}

std::string watch_help() {
    return "usage: mn-preflight watch " + mn::check_options_synopsis(mn::kWatchArgv, 26) +
           "\n                          -- PROGRAM [ARGS]\n"
           "\n"
           "Runs PROGRAM (a task of the step) and watches it from outside, what srun --mn-nccl-watch puts\n"
           "in front of each task. PROGRAM gets PyTorch's Flight Recorder armed (TORCH_FR_BUFFER_SIZE, its\n"
           "dump on a time-out and on demand, into the report directory; MN_NCCL_WATCH_DIR names it),\n"
           "where it did not set them itself. A process of the task stopped (state T) or stuck in the\n"
           "kernel (D, no CPU time) for --window seconds, or PROGRAM killed by a signal, is named on\n"
           "stderr (\"mn-nccl watch: ...\": rank, host, pid, the evidence) and in a JSON report. A rank\n"
           "that only waits (sleeping, as in a collective or a checkpoint pause) is never named. A link\n"
           "whose TCP data is not acknowledged for the window (retransmitted, this node's interface up;\n"
           "or behind this node's interface that is down) is named \"link down\", the peer by its node;\n"
           "so is an RDMA port of the step's out of ACTIVE, or ACTIVE and taking in nothing while the\n"
           "ranks wait in a collective and its senders time out or its link's errors climb (the errors\n"
           "blame the node, the time-outs do not). Every sixth of the window the ranks' Flight\n"
           "Recorders are asked where they stand, and rank 0's watch compares the positions that held:\n"
           "\"application desync\" (a rank idle outside the collective the others wait in, or in another\n"
           "one), \"GPU stuck\" (its collective scheduled, the others' started), \"busy outside\n"
           "collectives\" (after 600 s). The node's first watch hears NVML's critical Xids: a GPU stuck\n"
           "or a process dead where the GPU reported a hardware Xid blames the node. NCCL's RAS is set to\n"
           "the step's own loopback address and asked once, when --abort ends the step.\n"
           "\n"
           "options:\n" +
           mn::check_options_help(mn::kWatchArgv) + "  -h, --help         this help\n" +
           "exit: PROGRAM's (128 + N when signal N ended it), 2 usage error or no report directory,\n"
           "127 PROGRAM cannot be run\n";
}

std::string help_of(mn::Subcommand sub) {
    switch (sub) {
        case mn::Subcommand::Check: return check_help();
        case mn::Subcommand::Prolog: return prolog_help();
        case mn::Subcommand::Discover: return discover_help();
        case mn::Subcommand::History: return history_help();
        case mn::Subcommand::Watch: return watch_help();
        case mn::Subcommand::None: break;
    }
    return top_help();
}

// The check's end. Threads may still run past its verdict: NCCL's, whose
// communicators are left to the process's end (gpu.h), and the node's
// readings when the check failed early (one loading libnccl or
// libibverbs: exit()'s destructors under it crashed 2 runs in 160 of a
// rank with 5 open files on a loaded machine). So the process ends here,
// its output flushed. A sanitized build returns, for LeakSanitizer's
// report, unless NCCL is left open.
int ended(int code) {
#if defined(__SANITIZE_ADDRESS__)
    if (!mn::gpu::nccl_left_open()) return code;
#endif
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
}

int check(const mn::CommandLine& c) {
    const mn::CheckSettings& s = c.settings;
    if (s.exec) {
        mn::InlineOptions io;
        io.port = s.port;
        io.container = s.container;
        io.exclude_file = s.exclude_file;
        io.job_comment = s.job_comment;
        io.program = c.program;
        return mn::check_then_exec(s.check, io);
    }
    return ended(mn::run_check(s.check));
}

// The prolog's own defaults (PrologOptions) hold where no option was given.
int prolog(const mn::CommandLine& c) {
    const mn::CheckSettings& s = c.settings;
    mn::PrologOptions o;
    if (c.gave("timeout")) o.timeout = s.check.timeout;
    if (c.gave("mode")) o.mode = s.check.mode;
    if (c.gave("json")) o.json = s.check.json;
    o.reason_file = s.reason_file;
    o.history_dir = s.check.history_dir;
    o.metrics_dir = s.check.metrics_dir;
    return mn::run_prolog(o);
}

// mn-preflight history DIR [--since T] [--json] [--drain K/N]: the
// verdicts remembered in DIR, per node, and the nodes to drain.
int history(const mn::CommandLine& c) {
    const mn::CheckSettings& s = c.settings;
    int64_t since = 0;
    if (!s.since.empty()) {
        // The table takes any text; its form is parse_since's to judge.
        auto t = mn::parse_since(s.since, static_cast<int64_t>(std::time(nullptr)));
        if (!t) {
            mn::CommandLine bad = c;
            bad.error = once(t.problem().text());
            std::fputs(mn::usage_error_text(bad).c_str(), stderr);
            return 2;
        }
        since = *t;
    }
    auto sum = mn::summarise(c.operands.at(0), since, s.drain_k, s.drain_n);
    if (!sum) {
        std::fprintf(stderr, "mn-preflight: history: %s\n", once(sum.problem().text()).c_str());
        return 1;
    }
    for (const auto& w : sum->warnings) std::fprintf(stderr, "mn-preflight: history: warning: %s\n", once(w).c_str());
    const std::string out = s.check.json ? mn::history_json(*sum) : mn::history_table(*sum);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

// The fabric rules name the plugin's option (--mn-nccl=ib); here the user
// gave --mode ib.
std::string as_mode_option(std::string text) {
    const std::string plugin = "--mn-nccl=";
    for (std::size_t at = text.find(plugin); at != std::string::npos; at = text.find(plugin, at))
        text.replace(at, plugin.size(), "--mode ");
    return text;
}

int discover(const mn::CommandLine& c) {
    const mn::CheckSettings& s = c.settings;
    mn::DiscoverReport r;
    const std::string& root = s.sysfs_root;
    r.mode = s.check.mode;
    const bool json = s.check.json;
    const mn::EnvLookup env = mn::process_env();
    r.host = mn::host_name();
    r.sysfs_root = !root.empty() ? root : mn::user_sysfs_root(env);
    auto choice = mn::choose_fabric(mn::discover_ports(r.sysfs_root), r.mode);
    if (!choice) {
        std::fprintf(stderr, "mn-preflight: %s: %s\n", r.host.c_str(), as_mode_option(choice.problem().text()).c_str());
        return 1;
    }
    r.choice = *choice;
    for (auto& v : r.choice.ports) v.reason = as_mode_option(v.reason);
    r.locality = mn::gpu_locality(r.sysfs_root, r.choice);
    for (auto& w : mn::plugin_variable_findings(r.choice, env)) r.choice.warnings.push_back(std::move(w));
    // Under srun --mn-nccl the socket interface is the one towards MASTER_ADDR
    // (on Google's A3 the control NIC, as take_fabric puts it).
    if (auto master = env("MASTER_ADDR")) {
        const std::string ifname =
            !r.choice.control_netdev.empty() ? r.choice.control_netdev : mn::interface_towards(*master, mn::SystemNetwork{});
        if (!ifname.empty()) {
            r.env.push_back({"NCCL_SOCKET_IFNAME", "=" + ifname});
            r.env.push_back({"GLOO_SOCKET_IFNAME", ifname});
        }
    }
    for (const auto& kv : r.choice.env) r.env.push_back(kv);
    r.fingerprint = mn::check::node_fingerprint(r.host);
    const std::string out = json ? mn::discover_json(r) : mn::discover_text(r);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const mn::CommandLine c = mn::parse_command_line({argv + 1, argv + argc});
        if (!c.error.empty()) {
            std::fputs(mn::usage_error_text(c).c_str(), stderr);
            return 2;
        }
        if (c.help) {
            std::fputs(help_of(c.sub).c_str(), stdout);
            return 0;
        }
        if (c.version) {
            std::printf("mn-preflight %s, built for Slurm %s (GPU path: libcuda.so.1, libnccl.so.2, libnvidia-ml.so.1 "
                        "loaded at run time); needs %s%s\n",
                        PACKAGE_VERSION, MN_SLURM_SERIES, MN_PREFLIGHT_NEEDS,
#ifdef MN_TEST_HOOKS
                        "; test hooks built in (MN_PREFLIGHT_FAIL_SETUP, MN_PREFLIGHT_EXIT_IN_COLLECTIVE, "
                        "MN_PREFLIGHT_QUIET_ABOVE and others)"
#else
                        ""
#endif
            );
            return 0;
        }
        switch (c.sub) {
            case mn::Subcommand::Prolog: return prolog(c);
            case mn::Subcommand::Discover: return discover(c);
            case mn::Subcommand::History: return history(c);
            case mn::Subcommand::Watch: return mn::run_watch(c);
            case mn::Subcommand::Check:
            case mn::Subcommand::None: break;
        }
        return check(c);
    } catch (const std::bad_alloc&) {
        // Out of memory (8,192 ranks on one host): said, never an abort.
        std::fprintf(stderr, "%s\n", mn::check::starved("cannot allocate memory", ENOMEM).text().c_str());
        return ended(1);
    } catch (const std::system_error& e) {
        // what() ends with the errno's text, which starved() adds itself.
        std::string what = e.what();
        const std::string tail = ": " + e.code().message();
        if (what.size() > tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0)
            what.resize(what.size() - tail.size());
        std::fprintf(stderr, "%s\n", mn::check::starved(what, e.code().value()).text().c_str());
        return ended(1);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mn-preflight: internal error: %s\n", e.what());
        return 2;
    }
}
