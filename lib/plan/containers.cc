// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/containers.h"

#include <algorithm>

#include "lib/util/text.h"

namespace mn {

namespace {

std::string base(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> split_names(const std::string& list) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= list.size()) {
        std::size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        std::string n = list.substr(start, end - start);
        const auto b = n.find_first_not_of(" \t");
        n = b == std::string::npos ? "" : n.substr(b, n.find_last_not_of(" \t") - b + 1);
        if (!n.empty()) out.push_back(n);
        start = end + 1;
    }
    return out;
}

// Apptainer's and Singularity's exec/run options that take a value (their
// other options are flags); --opt=value needs no table.
bool takes_value(const std::string& opt) {
    static const char* const with_value[] = {
        "-B", "--bind", "-H", "--home", "-o", "--overlay", "-S", "--scratch", "-W", "--workdir", "--pwd",
        "--env", "--env-file", "--app", "--apply-cgroups", "--add-caps", "--drop-caps", "--security",
        "--network", "--network-args", "--hostname", "--dns", "--fusemount", "--mount", "--cpus", "--cpu-shares",
        "--cpuset-cpus", "--cpuset-mems", "--memory", "--memory-reservation", "--memory-swap", "--pids-limit",
        "--blkio-weight", "--blkio-weight-device", "--device", "--docker-host", "--pem-path", "--cdi-dirs",
        "--data", "--sif-fuse-path"};
    return std::find(std::begin(with_value), std::end(with_value), opt) != std::end(with_value);
}

}  // namespace

const std::vector<std::string>& plugin_variable_names() {
    static const std::vector<std::string> names = {
        "MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "RANK", "LOCAL_RANK", "WORLD_SIZE",
        "LOCAL_WORLD_SIZE", "GPUS_PER_NODE", "NPROC_PER_NODE", "PET_NNODES", "PET_NPROC_PER_NODE",
        "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_RDZV_ID", "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_HOSTID",
        "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_GPUDIRECTTCPX_CTRL_DEV",
        "NCCL_FASTRAK_IFNAME", "NCCL_FASTRAK_CTRL_DEV"};
    return names;
}

bool is_plugin_variable(const std::string& name) {
    const auto& n = plugin_variable_names();
    return std::find(n.begin(), n.end(), name) != n.end();
}

std::string pyxis_container_env(const std::optional<std::string>& users) {
    std::vector<std::string> names = users ? split_names(*users) : std::vector<std::string>{};
    for (const auto& n : plugin_variable_names())
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
    return out;
}

std::vector<std::string> left_out_of(const std::string& container_env) {
    const std::vector<std::string> listed = split_names(container_env);
    std::vector<std::string> out;
    for (const auto& n : plugin_variable_names())
        if (std::find(listed.begin(), listed.end(), n) == listed.end()) out.push_back(n);
    return out;
}

bool keeps_existing(const std::string& name, const std::set<std::string>& users, bool force, bool replace) {
    return !force && !replace && users.count(name) > 0;
}

std::optional<ContainerCommand> apptainer_command(const std::vector<std::string>& argv) {
    if (argv.empty()) return std::nullopt;
    ContainerCommand c;
    c.runtime = base(argv[0]);
    if (c.runtime != "apptainer" && c.runtime != "singularity") return std::nullopt;
    std::size_t i = 1;
    // Global flags (--debug, -q, --nocolor) come before the subcommand.
    while (i < argv.size() && !argv[i].empty() && argv[i][0] == '-') ++i;
    if (i >= argv.size() || (argv[i] != "exec" && argv[i] != "run")) return std::nullopt;
    for (++i; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a.size() < 2 || a[0] != '-') break;
        if (a.find('=') == std::string::npos && takes_value(a)) ++i;
    }
    if (i >= argv.size()) return std::nullopt;
    c.image = argv[i];
    c.command = i + 1;
    return c;
}

bool enroot_mounts(const std::string& fstab, const std::string& path) {
    if (path.empty()) return false;
    for (const std::string& line : split_list(fstab, '\n')) {
        // The second field: what the line mounts onto.
        std::size_t a = line.find_first_not_of(" \t");
        if (a == std::string::npos || line[a] == '#') continue;
        a = line.find_first_not_of(" \t", line.find_first_of(" \t", a));
        if (a == std::string::npos) continue;
        if (line.compare(a, line.find_first_of(" \t", a) - a, path) == 0) return true;
    }
    return false;
}

std::string apptainer_env_prefix(const std::string& runtime) {
    return runtime == "singularity" ? "SINGULARITYENV_" : "APPTAINERENV_";
}

}  // namespace mn
