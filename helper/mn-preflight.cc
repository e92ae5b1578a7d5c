// mn-preflight: the srun-side helper of mn-nccl. Exit codes: 0 pass,
// 1 check failed, 2 usage or configuration error, 3 time-out.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "build_config.h"
#include "helper/check.h"
#include "helper/discover.h"
#include "helper/inline_exec.h"
#include "lib/plan/step_plan.h"
#include "lib/fabric/verbs.h"
#include "lib/util/text.h"

namespace {

const char kUsage[] =
    "usage: srun --mn-nccl=auto mn-preflight [check] [--cpu | --gpu] [--timeout S] [--min-busbw GBPS]\n"
    "                                        [--size BYTES] [--iters N] [--no-pairs] [--mode MODE] [--json]\n"
    "       mn-preflight check --exec [--port P] [--exclude-file PATH] [--job-comment] [OPTIONS] -- PROGRAM [ARGS]\n"
    "       mn-preflight --prolog [--reason-file PATH] [--timeout S] [--mode MODE] [--json]\n"
    "       mn-preflight discover [--mode MODE] [--json] [--sysfs-root DIR]\n"
    "       mn-preflight --help | --version\n"
    "\n"
    "check (default)  every task of the step is a rank: readiness (GPUs opened, buffers checked,\n"
    "                 NVML health) before NCCL, stopping every rank at the first failure; an\n"
    "                 all-reduce across all of them, checked and bounded by time (NCCL on GPUs,\n"
    "                 else a TCP ring on the socket interface); fabric consistency; pair tests\n"
    "                 between nodes and between a node's GPUs that name a slow node, GPU or link.\n"
    "                 Rank 0 prints a table (per node ok, waited on NODE, or the fault) and PASS\n"
    "                 or FAIL; every rank exits with the verdict.\n"
    "  --cpu | --gpu     force the path (default: GPU when every rank has CUDA, NCCL and a GPU)\n"
    "  --timeout S       the whole check's budget, 1 to 600 s (default 60); never hangs past it\n"
    "  --min-busbw GBPS  fail below this all-reduce busbw; name nodes whose pairs run below it\n"
    "  --size BYTES      all-reduce size, K/M/G suffixes (default 64M on GPUs, 4M on CPUs)\n"
    "  --iters N         timed iterations (default 20 on GPUs, 5 on CPUs)\n"
    "  --no-pairs        skip the pair tests\n"
    "  --mode MODE       the fabric class expected: auto (default), ib, roce, socket\n"
    "  --json            one JSON object instead of the table\n"
    "  --exec ... -- PROGRAM  what srun --mn-preflight runs in each task: the check (on port P, rank 0 writes\n"
    "                    the nodes to exclude to PATH on FAIL), then PROGRAM in the same process on PASS\n"
    "--prolog         this node alone, for a Slurm prolog: RDMA ports usable, every GPU takes an\n"
    "                 allocation and a copy, an NCCL all-reduce across its GPUs, NVML health\n"
    "                 (default --timeout 10)\n"
    "  --reason-file PATH  on failure also write the one-line reason there (for a drain reason)\n"
    "discover         this node's RDMA ports, GPU to HCA locality, what mn_nccl would choose and why\n"
    "  --sysfs-root DIR  read DIR/class/... instead of /sys/class/... (also MN_NCCL_SYSFS_ROOT)\n"
    "\n"
    "exit: 0 pass, 1 check failed, 2 usage or configuration error, 3 time-out\n";

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "mn-preflight: %s\n%s", msg.c_str(), kUsage);
    return 2;
}

// "64M" -> 67108864; 0 when not a size.
std::size_t parse_size(const std::string& v) {
    if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0]))) return 0;
    char* endp = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &endp, 10);
    std::string unit = endp;
    if (unit == "K" || unit == "k") n <<= 10;
    else if (unit == "M" || unit == "m") n <<= 20;
    else if (unit == "G" || unit == "g") n <<= 30;
    else if (!unit.empty()) return 0;
    return static_cast<std::size_t>(n);
}

// --mode for check and --prolog: a class to expect, never off.
bool parse_check_mode(const std::string& v, mn::Mode& out, std::string& err) {
    auto m = mn::parse_mode(v, "--mode");
    if (!m || *m == mn::Mode::Off) {
        err = m ? "--mode off has nothing to check" : m.problem().text();
        return false;
    }
    out = *m;
    return true;
}

// --timeout for check and --prolog: "" when v is 1 to 600 seconds.
std::string parse_timeout(const std::string& v, double& out) {
    char* endp = nullptr;
    const double t = std::strtod(v.c_str(), &endp);
    if (v.empty() || *endp != '\0' || !(t >= 1 && t <= 600))
        return "--timeout needs seconds, from 1 to 600 (got '" + v + "')";
    out = t;
    return "";
}

int check(const std::vector<std::string>& args) {
    mn::CheckOptions o;
    mn::InlineOptions io;
    bool exec = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](std::string& v) {
            if (i + 1 >= args.size()) return false;
            v = args[++i];
            return true;
        };
        std::string v;
        if (a == "--") {
            io.program.assign(args.begin() + static_cast<long>(i) + 1, args.end());
            break;
        } else if (a == "--exec") exec = true;
        else if (a == "--job-comment") io.job_comment = true;
        else if (a == "--exclude-file") {
            if (!value(io.exclude_file) || io.exclude_file.empty()) return usage_error("--exclude-file needs a path");
        } else if (a == "--port") {
            char* endp = nullptr;
            long p = value(v) ? std::strtol(v.c_str(), &endp, 10) : 0;
            if (v.empty() || *endp != '\0' || p < 1 || p > 65535)
                return usage_error("--port needs a port from 1 to 65535 (got '" + v + "')");
            io.port = static_cast<unsigned>(p);
        } else if (a == "--cpu") o.path = "cpu";
        else if (a == "--gpu") o.path = "gpu";
        else if (a == "--json") o.json = true;
        else if (a == "--no-pairs") o.pairs = false;
        else if (a == "--timeout") {
            value(v);
            if (std::string err = parse_timeout(v, o.timeout); !err.empty()) return usage_error(err);
        } else if (a == "--min-busbw") {
            double b = 0;
            char* endp = nullptr;
            if (value(v)) b = std::strtod(v.c_str(), &endp);
            if (v.empty() || !endp || *endp != '\0' || !(b > 0))
                return usage_error("--min-busbw needs a bandwidth in GB/s above 0, e.g. --min-busbw 300 (got '" + v + "')");
            o.min_busbw = b;
        } else if (a == "--size") {
            if (!value(v) || (o.bytes = parse_size(v)) < 4096 || o.bytes > (std::size_t(8) << 30))
                return usage_error("--size needs 4K to 8G, e.g. --size 64M (got '" + v + "')");
            o.bytes -= o.bytes % 4;
        } else if (a == "--iters") {
            char* endp = nullptr;
            long n = value(v) ? std::strtol(v.c_str(), &endp, 10) : 0;
            if (v.empty() || *endp != '\0' || n < 1 || n > 10000)
                return usage_error("--iters needs a whole number from 1 to 10000 (got '" + v + "')");
            o.iters = static_cast<int>(n);
        } else if (a == "--mode") {
            std::string err;
            if (!value(v)) return usage_error("--mode needs a value");
            if (!parse_check_mode(v, o.mode, err)) return usage_error(err);
        } else {
            return usage_error("unknown argument '" + a + "'");
        }
    }
    if (exec) return mn::check_then_exec(o, io);
    if (!io.program.empty() || io.port || !io.exclude_file.empty() || io.job_comment)
        return usage_error("-- PROGRAM, --port, --exclude-file and --job-comment go with --exec");
    return mn::run_check(o);
}

int prolog(const std::vector<std::string>& args) {
    mn::PrologOptions o;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json") {
            o.json = true;
        } else if (a == "--reason-file" || a == "--timeout" || a == "--mode") {
            if (i + 1 >= args.size()) return usage_error(a + " needs a value");
            const std::string v = args[++i];
            if (a == "--reason-file") {
                o.reason_file = v;
            } else if (a == "--timeout") {
                if (std::string err = parse_timeout(v, o.timeout); !err.empty()) return usage_error(err);
            } else {
                std::string err;
                if (!parse_check_mode(v, o.mode, err)) return usage_error(err);
            }
        } else {
            return usage_error("unknown argument '" + a + "' for --prolog");
        }
    }
    return mn::run_prolog(o);
}

int discover(const std::vector<std::string>& args) {
    mn::DiscoverReport r;
    bool json = false;
    std::string root;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--json") {
            json = true;
        } else if (a == "--mode" || a == "--sysfs-root") {
            if (i + 1 >= args.size()) return usage_error(a + " needs a value");
            const std::string v = args[++i];
            if (a == "--sysfs-root") {
                root = v;
                continue;
            }
            auto m = mn::parse_mode(v, "--mode");
            if (!m || *m == mn::Mode::Off) return usage_error(m ? "--mode off has nothing to discover" : m.problem().text());
            r.mode = *m;
        } else {
            return usage_error("unknown argument '" + a + "'");
        }
    }
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
    // Under srun --mn-nccl the socket interface is the one towards MASTER_ADDR.
    if (auto master = env("MASTER_ADDR")) {
        const std::string ifname = mn::interface_towards(*master, mn::SystemNetwork{});
        if (!ifname.empty()) {
            r.env.push_back({"NCCL_SOCKET_IFNAME", "=" + ifname});
            r.env.push_back({"GLOO_SOCKET_IFNAME", ifname});
        }
    }
    for (const auto& kv : r.choice.env) r.env.push_back(kv);
    const std::string out = json ? mn::discover_json(r) : mn::discover_text(r);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::vector<std::string> args(argv + 1, argv + argc);
        if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (!args.empty() && args[0] == "--version") {
            std::printf("mn-preflight %s, built for Slurm %s (GPU path: libcuda.so.1, libnccl.so.2, libnvidia-ml.so.1 loaded at run time)%s\n",
                        PACKAGE_VERSION, MN_SLURM_SERIES,
#ifdef MN_TEST_HOOKS
                        "; test hooks built in (MN_PREFLIGHT_FAIL_SETUP, MN_PREFLIGHT_EXIT_IN_COLLECTIVE)"
#else
                        ""
#endif
            );
            return 0;
        }
        if (!args.empty() && args[0] == "discover") return discover({args.begin() + 1, args.end()});
        if (!args.empty() && args[0] == "--prolog") return prolog({args.begin() + 1, args.end()});
        if (!args.empty() && args[0] == "check") return check({args.begin() + 1, args.end()});
        return check(args);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mn-preflight: internal error: %s\n", e.what());
        return 2;
    }
}
