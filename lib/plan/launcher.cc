#include "lib/plan/launcher.h"

namespace mn {

static std::string base(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_node_launcher(const std::vector<std::string>& argv) {
    if (argv.empty()) return false;
    const std::string cmd = base(argv[0]);
    if (cmd == "torchrun") return true;
    if (cmd.rfind("python", 0) != 0) return false;
    for (std::size_t i = 1; i + 1 < argv.size(); ++i) {
        if (argv[i] == "-m")
            return argv[i + 1] == "torch.distributed.run" || argv[i + 1] == "torch.distributed.launch";
        if (argv[i].empty() || argv[i][0] != '-') return false;  // a script: not the launcher
    }
    return false;
}

std::optional<Problem> launcher_count_problem(const std::vector<std::string>& argv, LaunchMode asked,
                                              uint32_t nnodes, uint32_t ntasks) {
    if (asked == LaunchMode::Task || ntasks == nnodes || !is_node_launcher(argv)) return std::nullopt;
    return Problem{base(argv[0]) + " would start " + std::to_string(ntasks) + " times on " +
                       std::to_string(nnodes) + " nodes, but it is a per-node launcher",
                   "run it with srun --ntasks=" + std::to_string(nnodes) + " --ntasks-per-node=1"};
}

}  // namespace mn
