// mn-preflight: the srun-side helper of mn-nccl. Exit codes: 0 pass,
// 1 check failed, 2 usage or configuration error.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config.h"
#include "helper/discover.h"
#include "lib/netprobe.h"
#include "lib/step_plan.h"
#include "lib/verbs.h"

namespace {

const char kUsage[] =
    "usage: mn-preflight discover [--mode MODE] [--json] [--sysfs-root DIR]\n"
    "       mn-preflight --help | --version\n"
    "\n"
    "discover   show this node's RDMA ports, which ones mn_nccl would choose and why,\n"
    "           and the NCCL variables it would set (run it in a task: srun mn-preflight discover)\n"
    "  --mode MODE       auto (default), ib, roce or socket, as --mn-nccl=MODE\n"
    "  --json            one JSON object: host, mode, fabric, env, ports[], warnings[]\n"
    "  --sysfs-root DIR  read DIR/class/... instead of /sys/class/... (also MN_NCCL_SYSFS_ROOT)\n"
    "\n"
    "exit: 0 ok, 1 the forced fabric class is missing on this node, 2 usage error\n";

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "mn-preflight: %s\n%s", msg.c_str(), kUsage);
    return 2;
}

std::string host_name() {
    char buf[256] = {0};
    return gethostname(buf, sizeof buf - 1) == 0 ? buf : "?";
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
    const mn::EnvLookup env = [](const std::string& n) -> std::optional<std::string> {
        const char* v = std::getenv(n.c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
    };
    r.host = host_name();
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
        if (auto addr = mn::Ipv4::parse(*master)) {
            auto ifs = mn::local_interfaces();
            if (auto c = mn::choose_interface(*addr, ifs, mn::route_source(*addr))) {
                r.env.push_back({"NCCL_SOCKET_IFNAME", "=" + c->name});
                r.env.push_back({"GLOO_SOCKET_IFNAME", c->name});
            }
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
        if (args.empty()) return usage_error("say what to do");
        if (args[0] == "--help" || args[0] == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (args[0] == "--version") {
            std::printf("mn-preflight %s (GPU path: %s)\n", PACKAGE_VERSION,
#ifdef HAVE_NCCL
                        "CUDA + NCCL"
#else
                        "not built: configure found no CUDA + NCCL"
#endif
            );
            return 0;
        }
        if (args[0] == "discover") return discover({args.begin() + 1, args.end()});
        return usage_error("unknown command '" + args[0] + "'");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mn-preflight: internal error: %s\n", e.what());
        return 2;
    }
}
