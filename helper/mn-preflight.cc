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
#include "helper/check/step.h"
#include "helper/discover.h"
#include "helper/gpu.h"
#include "helper/inline_exec.h"
#include "lib/check/check_options.h"
#include "lib/check/history.h"
#include "lib/plan/step_plan.h"
#include "lib/fabric/verbs.h"
#include "lib/util/text.h"

namespace {

// mn-preflight's help: the check's options come from their table
// (lib/check/check_options), as the plugin's --mn-preflight help does.
std::string usage() {
    return "usage: srun --mn-nccl=auto mn-preflight [check] " + mn::check_options_synopsis(mn::kCheckArgv, 48) +
           "\n"
           "       mn-preflight check --exec [--port P] " + mn::check_options_synopsis(mn::kExecArgv, 44) +
           " [--container WHAT] [OPTIONS] -- PROGRAM [ARGS]\n"
           "       mn-preflight --prolog [--reason-file PATH] [--timeout S] [--mode MODE] [--json]\n"
           "                             [--history DIR] [--metrics-dir DIR]\n"
           "       mn-preflight discover [--mode MODE] [--json] [--sysfs-root DIR]\n"
           "       mn-preflight history DIR [--since T] [--drain K/N] [--json]\n"
           "       mn-preflight --help | --version\n"
           "\n"
           "check (default)  every task of the step is a rank: readiness (GPUs opened, buffers checked,\n"
           "                 NVML health) before NCCL, stopping every rank at the first failure; an\n"
           "                 all-reduce across all of them, checked and bounded by time (NCCL on GPUs,\n"
           "                 else over TCP on the socket interface: each node's ranks at its leader, the\n"
           "                 leaders in a ring); fabric consistency; pair tests between nodes and between\n"
           "                 a node's GPUs, whose suspects are retested before a slow node, GPU or link\n"
           "                 is named.\n"
           "                 Rank 0 prints a table (per node ok, waited on NODE, or the fault) and PASS\n"
           "                 or FAIL; every rank exits with the verdict.\n" +
           mn::check_options_help(mn::kCheckArgv) +
           "  --exec ... -- PROGRAM  what srun --mn-preflight runs in each task: the check, then PROGRAM\n"
           "                     in the same process on PASS; with --exec only:\n"
           "  --port P           the check's own rendezvous port (default MASTER_PORT)\n" +
           mn::check_options_help(mn::kExecArgv) +
           "  --container WHAT   the task runs in a container (the plugin says which, for pyxis): the\n"
           "                     exclude file's directory and scontrol (--job-comment) must be there, or\n"
           "                     the step stops before the check; a history or metrics directory\n"
           "                     that is not there is left out, with a note\n" +
           "--prolog         this node alone, for a Slurm prolog: RDMA ports usable, every GPU takes an\n"
           "                 allocation and a copy, an NCCL all-reduce across its GPUs, NVML health;\n"
           "                 --timeout, --mode, --json, --history and --metrics-dir as for check\n"
           "                 (default --timeout 10)\n"
           "  --reason-file PATH  on failure also write the one-line reason there (for a drain reason)\n"
           "discover         this node's RDMA ports, GPU to HCA locality, what mn_nccl would choose and why;\n"
           "                 --mode and --json as for check\n"
           "  --sysfs-root DIR  read DIR/class/... instead of /sys/class/... (also MN_NCCL_SYSFS_ROOT)\n"
           "history DIR      the verdicts --history wrote to DIR, per node: checks, failures by kind, the\n"
           "                 last failure, and the nodes failing in K of their last N checks (to drain)\n"
           "  --since T          from T on: unix seconds, or back from now: 7d, 24h, 30m, 2w, 1d12h\n"
           "  --drain K/N        drain candidates: K failures in the last N checks (default 2/3)\n"
           "  --json             one JSON object instead of the table\n"
           "\n"
           "exit: 0 pass, 1 check failed, 2 usage or configuration error, 3 time-out\n";
}

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "mn-preflight: %s\n%s", msg.c_str(), usage().c_str());
    return 2;
}

// --port P of check --exec: "" when P is a port.
std::string parse_port(const std::vector<std::string>& args, std::size_t& i, unsigned& out) {
    const std::string v = i + 1 < args.size() ? args[++i] : "";
    char* endp = nullptr;
    const long p = std::strtol(v.c_str(), &endp, 10);
    if (v.empty() || *endp != '\0' || p < 1 || p > 65535)
        return "--port needs a port from 1 to 65535 (got '" + v + "')";
    out = static_cast<unsigned>(p);
    return "";
}

int check(const std::vector<std::string>& args) {
    mn::CheckSettings s;
    mn::InlineOptions io;
    bool exec = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") {
            io.program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
            break;
        }
        if (a == "--exec") {
            exec = true;
        } else if (a == "--port") {
            if (std::string err = parse_port(args, i, io.port); !err.empty()) return usage_error(err);
        } else if (a == "--container") {
            // Put there by the plugin: where the task runs (pyxis).
            if (i + 1 >= args.size() || args[i + 1].empty()) return usage_error("--container needs what runs the task");
            io.container = args[++i];
        } else {
            auto taken = mn::take_check_arg(args, i, mn::kCheckArgv | mn::kExecArgv, s);
            if (!taken) return usage_error(taken.problem().text());
            if (!*taken) return usage_error("unknown argument '" + a + "'");
        }
    }
    io.exclude_file = s.exclude_file;
    io.job_comment = s.job_comment;
    if (exec) return mn::check_then_exec(s.check, io);
    if (!io.program.empty() || io.port || !io.exclude_file.empty() || io.job_comment || !io.container.empty())
        return usage_error("-- PROGRAM, --port, --exclude-file, --job-comment and --container go with --exec");
    const int code = mn::run_check(s.check);
    // NCCL's communicators are left to the process's end (gpu.h): its
    // threads still run, so no exit() destructors.
    if (mn::gpu::nccl_left_open()) {
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(code);
    }
    return code;
}

// --timeout, --mode and --json of --prolog and discover: the check's own,
// from the same table.
bool shared_option(const std::string& a) { return a == "--timeout" || a == "--mode" || a == "--json"; }
bool fleet_option(const std::string& a) { return a == "--history" || a == "--metrics-dir"; }

int prolog(const std::vector<std::string>& args) {
    mn::PrologOptions o;
    mn::CheckSettings s;
    s.check.timeout = o.timeout;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--reason-file") {
            if (i + 1 >= args.size() || args[i + 1].empty()) return usage_error("--reason-file needs a path");
            o.reason_file = args[++i];
        } else if (shared_option(a) || fleet_option(a)) {
            auto taken = mn::take_check_arg(args, i, mn::kCheckArgv, s);
            if (!taken) return usage_error(taken.problem().text());
        } else {
            return usage_error("unknown argument '" + a + "' for --prolog");
        }
    }
    o.history_dir = s.check.history_dir;
    o.metrics_dir = s.check.metrics_dir;
    o.timeout = s.check.timeout;
    o.mode = s.check.mode;
    o.json = s.check.json;
    return mn::run_prolog(o);
}

// mn-preflight history DIR [--since T] [--json] [--drain K/N]: the
// verdicts remembered in DIR, per node, and the nodes to drain.
int history(const std::vector<std::string>& args) {
    std::string dir, since_text;
    bool json = false;
    unsigned k = 2, n = 3;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--since" || a == "--drain") {
            if (i + 1 >= args.size()) return usage_error(a + " needs a value");
            const std::string v = args[++i];
            if (a == "--since") {
                since_text = v;
                continue;
            }
            unsigned kk = 0, nn = 0;
            char slash = 0, extra = 0;
            if (std::sscanf(v.c_str(), "%u%c%u%c", &kk, &slash, &nn, &extra) != 3 || slash != '/' || kk < 1 || nn < kk || nn > 1000)
                return usage_error("--drain '" + v + "' is not K/N with 1 <= K <= N <= 1000 (e.g. --drain 2/3)");
            k = kk;
            n = nn;
        } else if (a == "--json") {
            json = true;
        } else if (dir.empty() && !a.empty() && a[0] != '-') {
            dir = a;
        } else {
            return usage_error("unknown argument '" + a + "' for history");
        }
    }
    if (dir.empty()) return usage_error("history needs the directory that --history wrote to");
    int64_t since = 0;
    if (!since_text.empty()) {
        auto t = mn::parse_since(since_text, static_cast<int64_t>(std::time(nullptr)));
        if (!t) return usage_error("--since: " + t.problem().text());
        since = *t;
    }
    auto sum = mn::summarise(dir, since, k, n);
    if (!sum) {
        std::fprintf(stderr, "mn-preflight: history: %s\n", sum.problem().text().c_str());
        return 1;
    }
    for (const auto& w : sum->warnings) std::fprintf(stderr, "mn-preflight: history: warning: %s\n", w.c_str());
    const std::string out = json ? mn::history_json(*sum) : mn::history_table(*sum);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

int discover(const std::vector<std::string>& args) {
    mn::DiscoverReport r;
    mn::CheckSettings s;
    std::string root;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--sysfs-root") {
            if (i + 1 >= args.size() || args[i + 1].empty()) return usage_error("--sysfs-root needs a directory");
            root = args[++i];
        } else if (a != "--timeout" && shared_option(a)) {
            auto taken = mn::take_check_arg(args, i, mn::kCheckArgv, s);
            if (!taken) return usage_error(taken.problem().text());
        } else {
            return usage_error("unknown argument '" + a + "'");
        }
    }
    r.mode = s.check.mode;
    const bool json = s.check.json;
    const mn::EnvLookup env = mn::process_env();
    r.host = mn::host_name();
    r.sysfs_root = !root.empty() ? root : mn::sysfs_root(env, mn::SiteConfig{});
    auto choice = mn::choose_fabric(mn::discover_ports(r.sysfs_root), r.mode);
    if (!choice) {
        std::fprintf(stderr, "mn-preflight: %s: %s\n", r.host.c_str(), choice.problem().text().c_str());
        return 1;
    }
    r.choice = *choice;
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
        std::vector<std::string> args(argv + 1, argv + argc);
        if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
            std::fputs(usage().c_str(), stdout);
            return 0;
        }
        if (!args.empty() && args[0] == "--version") {
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
        if (!args.empty() && args[0] == "discover") return discover({args.begin() + 1, args.end()});
        if (!args.empty() && args[0] == "history") return history({args.begin() + 1, args.end()});
        if (!args.empty() && args[0] == "--prolog") return prolog({args.begin() + 1, args.end()});
        if (!args.empty() && args[0] == "check") return check({args.begin() + 1, args.end()});
        return check(args);
    } catch (const std::bad_alloc&) {
        // Out of memory (8,192 ranks on one host): said, never an abort.
        std::fprintf(stderr, "%s\n", mn::check::starved("cannot allocate memory", ENOMEM).text().c_str());
        return 1;
    } catch (const std::system_error& e) {
        // what() ends with the errno's text, which starved() adds itself.
        std::string what = e.what();
        const std::string tail = ": " + e.code().message();
        if (what.size() > tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0)
            what.resize(what.size() - tail.size());
        std::fprintf(stderr, "%s\n", mn::check::starved(what, e.code().value()).text().c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mn-preflight: internal error: %s\n", e.what());
        return 2;
    }
}
