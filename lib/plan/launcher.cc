// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/launcher.h"

#include <algorithm>
#include <cstdlib>

#include "lib/plan/containers.h"

namespace mn {

namespace {

std::string base(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct Found {
    Launcher kind = Launcher::None;
    std::size_t args = 0;  // where the launcher's own options begin
};

Found find_launcher(const std::vector<std::string>& argv) {
    if (argv.empty()) return {};
    // apptainer exec [options] IMAGE torchrun ...: the launcher is the
    // command the container runs.
    if (auto c = apptainer_command(argv)) {
        Found inner = find_launcher(std::vector<std::string>(argv.begin() + static_cast<std::ptrdiff_t>(c->command), argv.end()));
        if (inner.kind != Launcher::None) inner.args += c->command;
        return inner;
    }
    const std::string cmd = base(argv[0]);
    if (cmd == "torchrun") return {Launcher::Torchrun, 1};
    if (cmd == "deepspeed") return {Launcher::Deepspeed, 1};
    if (cmd == "accelerate-launch") return {Launcher::Accelerate, 1};
    if (cmd == "accelerate") return argv.size() > 1 && argv[1] == "launch" ? Found{Launcher::Accelerate, 2} : Found{};
    if (cmd.rfind("python", 0) != 0) return {};
    for (std::size_t i = 1; i + 1 < argv.size(); ++i) {
        if (argv[i] == "-m") {
            const std::string& mod = argv[i + 1];
            if (mod == "torch.distributed.run" || mod == "torch.distributed.launch") return {Launcher::Torchrun, i + 2};
            if (mod == "deepspeed.launcher.runner") return {Launcher::Deepspeed, i + 2};
            if (mod == "accelerate.commands.launch") return {Launcher::Accelerate, i + 2};
            if (mod == "accelerate.commands.accelerate_cli" && i + 2 < argv.size() && argv[i + 2] == "launch")
                return {Launcher::Accelerate, i + 3};
            return {};
        }
        if (argv[i].empty() || argv[i][0] != '-') return {};  // a script: not the launcher
    }
    return {};
}

const char* name_of(Launcher l) {
    switch (l) {
        case Launcher::Torchrun: return "torchrun";
        case Launcher::Accelerate: return "accelerate launch";
        case Launcher::Deepspeed: return "deepspeed";
        case Launcher::None: break;
    }
    return "";
}

// accelerate launch's options that take no value (its parser's store_true
// ones); every other option takes one. Hyphens and underscores are the same
// to it.
bool accelerate_flag(const std::string& key) {
    static const char* const flags[] = {
        "q", "quiet", "cpu", "multi_gpu", "tpu", "enable_cpu_affinity", "dynamo_use_fullgraph",
        "dynamo_use_dynamic", "dynamo_use_regional_compilation", "use_deepspeed", "use_fsdp",
        "use_parallelism_config", "use_megatron_lm", "same_network", "m", "module", "no_python", "tpu_cluster",
        "no_tpu_cluster", "tpu_use_sudo", "downcast_bf16", "fp8_use_autocast_during_eval", "debug", "h", "help"};
    return std::find(std::begin(flags), std::end(flags), key) != std::end(flags);
}

struct AccelerateArgs {
    bool multi = false;  // --multi_gpu, --use_deepspeed, --use_fsdp, --use_megatron_lm
    std::optional<std::string> config_file, num_machines;
    bool machine_rank = false;
};

// The options before the training script.
AccelerateArgs accelerate_args(const std::vector<std::string>& argv, std::size_t i) {
    AccelerateArgs a;
    for (; i < argv.size() && argv[i].size() > 1 && argv[i][0] == '-'; ++i) {
        const std::string& tok = argv[i];
        const auto eq = tok.find('=');
        const auto from = tok.find_first_not_of('-');
        std::string key = tok.substr(from, eq == std::string::npos ? std::string::npos : eq - from);
        std::replace(key.begin(), key.end(), '-', '_');
        if (accelerate_flag(key)) {
            a.multi = a.multi || key == "multi_gpu" || key == "use_deepspeed" || key == "use_fsdp" ||
                      key == "use_megatron_lm";
            continue;
        }
        std::string value;
        if (eq != std::string::npos) value = tok.substr(eq + 1);
        else if (i + 1 < argv.size()) value = argv[++i];
        if (key == "config_file") a.config_file = value;
        if (key == "num_machines") a.num_machines = value;
        if (key == "machine_rank") a.machine_rank = true;
    }
    return a;
}

std::string trimmed(const std::string& s, const char* junk = " \t\r\"',{}") {
    const auto b = s.find_first_not_of(junk);
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(junk) - b + 1);
}

// A top-level key of accelerate's YAML (or old JSON) config: "key: value".
std::optional<std::string> config_value(const std::string& text, const std::string& key) {
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        start = end + 1;
        const auto colon = line.find(':');
        if (colon != std::string::npos && trimmed(line.substr(0, colon)) == key) return trimmed(line.substr(colon + 1));
    }
    return std::nullopt;
}

// accelerate's default config: $HF_HOME, else $XDG_CACHE_HOME/huggingface,
// else ~/.cache/huggingface; then accelerate/default_config.yaml.
std::optional<std::string> default_config(const LauncherView& v) {
    auto get = [&](const char* n) { return v.env ? v.env(n) : std::nullopt; };
    const std::string home = get("HOME").value_or("");
    auto expand = [&](std::string p) { return p.rfind("~", 0) == 0 && !home.empty() ? home + p.substr(1) : p; };
    std::string hf;
    if (auto h = get("HF_HOME"); h && !h->empty()) hf = expand(*h);
    else if (auto x = get("XDG_CACHE_HOME"); x && !x->empty()) hf = expand(*x) + "/huggingface";
    else if (!home.empty()) hf = home + "/.cache/huggingface";
    else return std::nullopt;
    return hf + "/accelerate/default_config.yaml";
}

bool multi_process(const std::string& distributed_type) {
    return distributed_type.rfind("MULTI_", 0) == 0 || distributed_type == "DEEPSPEED" ||
           distributed_type == "FSDP" || distributed_type == "MEGATRON_LM";
}

std::optional<Problem> accelerate_problem(const std::vector<std::string>& argv, std::size_t at, const LauncherView& v) {
    const AccelerateArgs a = accelerate_args(argv, at);
    const std::string n = std::to_string(v.launchers);
    std::optional<std::string> path = a.config_file;
    if (path && !path->empty() && (*path)[0] != '/') {
        auto pwd = v.env ? v.env("PWD") : std::nullopt;
        if (!pwd) return std::nullopt;  // cannot tell where it is: no judgement
        path = *pwd + "/" + *path;
    }
    if (!path) path = default_config(v);
    const std::optional<std::string> config = path && v.read ? v.read(*path) : std::nullopt;
    if (a.config_file && !config) return std::nullopt;  // accelerate itself says the file is missing
    const std::string source =
        a.config_file ? "--config_file " + *a.config_file : "the default config " + path.value_or("");

    bool multi = a.multi;
    std::string alone_why;
    if (!multi && config) {
        const std::string type = config_value(*config, "distributed_type").value_or("NO");
        multi = multi_process(type);
        alone_why = source + " says distributed_type: " + type;
    } else if (!multi) {
        multi = v.gpus > 1;  // accelerate turns --multi_gpu on itself then
        alone_why = "no --multi_gpu and " + std::to_string(v.gpus) + " GPU" + (v.gpus == 1 ? "" : "s") + " per node";
    }
    if (!multi)
        return Problem{"accelerate launch would train alone on each of the " + n + " nodes (" + alone_why +
                           ": it runs its one-process launcher, which never joins the other nodes, and exits 0)",
                       v.gpus == 0 && !config
                           ? "give the step GPUs (--gres=gpu:N) and add --multi_gpu, or train on CPUs with "
                             "torchrun train.py (gloo), which takes the nodes from the plugin's PET_ variables"
                           : "add --multi_gpu (accelerate launch --multi_gpu train.py): it then starts torchrun, "
                             "which takes the nodes from the plugin's PET_NNODES, PET_NODE_RANK and PET_MASTER_ADDR"};
    std::optional<std::string> machines = a.num_machines;
    if (!machines && config) machines = config_value(*config, "num_machines");
    if (machines && std::strtol(machines->c_str(), nullptr, 10) > 1 && !a.machine_rank)
        return Problem{"accelerate launch would give all " + n + " nodes the same machine rank: num_machines is " +
                           *machines + (a.num_machines ? " (--num_machines)" : " (" + source + ")") +
                           " and machine_rank comes from the config, the same on every node",
                       "pass each node its own: srun ... bash -c 'exec accelerate launch --machine_rank $NODE_RANK "
                       "--main_process_ip $MASTER_ADDR --main_process_port $MASTER_PORT train.py', or set "
                       "num_machines: 1 and num_processes to the GPUs of one node (torchrun then takes the nodes "
                       "from the plugin's PET_ variables)"};
    return std::nullopt;
}

}  // namespace

Launcher launcher_in(const std::vector<std::string>& argv) { return find_launcher(argv).kind; }

bool is_node_launcher(const std::vector<std::string>& argv) { return launcher_in(argv) != Launcher::None; }

std::optional<Problem> launcher_count_problem(const std::vector<std::string>& argv, LaunchMode asked,
                                              uint32_t nnodes, uint32_t ntasks) {
    const Launcher l = launcher_in(argv);
    if (asked == LaunchMode::Task || ntasks == nnodes || l == Launcher::None) return std::nullopt;
    const std::string what = std::string(name_of(l)) + " would start " + std::to_string(ntasks) + " times on " +
                             std::to_string(nnodes) + " nodes, but it is a per-node launcher";
    if (l == Launcher::Deepspeed)
        return Problem{what, "run the training script itself once per GPU: srun --mn-nccl=auto python train.py "
                             "(deepspeed.init_distributed() reads RANK, WORLD_SIZE, LOCAL_RANK and MASTER_ADDR)"};
    return Problem{what, "run it with srun --ntasks=" + std::to_string(nnodes) + " --ntasks-per-node=1"};
}

std::optional<Problem> launcher_join_problem(const std::vector<std::string>& argv, const LauncherView& view) {
    const Found f = find_launcher(argv);
    if (view.launchers <= 1) return std::nullopt;
    if (f.kind == Launcher::Accelerate) return accelerate_problem(argv, f.args, view);
    if (f.kind == Launcher::Deepspeed)
        return Problem{"deepspeed would run each of the " + std::to_string(view.launchers) +
                           " nodes on its own: its launcher takes nodes from a hostfile and ssh, never from Slurm "
                           "(without a hostfile it trains this node alone with MASTER_ADDR 127.0.0.1; with one, "
                           "every node would start the whole job again)",
                       "run the training script itself once per GPU, without the launcher: srun "
                       "--ntasks-per-node=<GPUs per node> --mn-nccl=auto python train.py "
                       "(deepspeed.init_distributed() reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and "
                       "MASTER_PORT)"};
    return std::nullopt;
}

}  // namespace mn
