// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/launcher.h"

#include <map>

#include "tests/unit/unit.h"

using namespace mn;

static void recognises_launchers(void**) {
    assert_true(is_node_launcher({"torchrun", "train.py"}));
    assert_true(is_node_launcher({"/usr/bin/torchrun", "--nnodes=2", "train.py"}));
    assert_true(is_node_launcher({"python3", "-m", "torch.distributed.run", "train.py"}));
    assert_true(is_node_launcher({"/usr/bin/python3.11", "-u", "-m", "torch.distributed.launch", "t.py"}));
    assert_false(is_node_launcher({"python3", "train.py", "-m", "torch.distributed.run"}));
    assert_false(is_node_launcher({"python3", "-m", "mymodule"}));
    assert_false(is_node_launcher({"bash", "-c", "torchrun x.py"}));
    assert_false(is_node_launcher({}));
    assert_true(launcher_in({"accelerate", "launch", "t.py"}) == Launcher::Accelerate);
    assert_true(launcher_in({"/opt/venv/bin/accelerate-launch", "t.py"}) == Launcher::Accelerate);
    assert_true(launcher_in({"python", "-m", "accelerate.commands.launch", "t.py"}) == Launcher::Accelerate);
    assert_true(launcher_in({"python3", "-m", "accelerate.commands.accelerate_cli", "launch", "t.py"}) ==
                Launcher::Accelerate);
    assert_true(launcher_in({"accelerate", "config"}) == Launcher::None);
    assert_true(launcher_in({"deepspeed", "t.py"}) == Launcher::Deepspeed);
    assert_true(launcher_in({"python3", "-m", "deepspeed.launcher.runner", "t.py"}) == Launcher::Deepspeed);
    assert_true(launcher_in({"torchrun", "t.py"}) == Launcher::Torchrun);
}

static void refuses_a_launcher_per_task(void**) {
    auto p = launcher_count_problem({"torchrun", "t.py"}, LaunchMode::Detect, 2, 8);
    assert_true(p.has_value());
    assert_contains(p->what, "torchrun would start 8 times on 2 nodes");
    assert_contains(p->fix, "srun --ntasks=2 --ntasks-per-node=1");
    // one per node, a plain script, or the user's explicit task mode: fine
    assert_false(launcher_count_problem({"torchrun", "t.py"}, LaunchMode::Detect, 2, 2).has_value());
    assert_false(launcher_count_problem({"python3", "t.py"}, LaunchMode::Detect, 2, 8).has_value());
    assert_false(launcher_count_problem({"torchrun", "t.py"}, LaunchMode::Task, 2, 8).has_value());
    p = launcher_count_problem({"accelerate", "launch", "t.py"}, LaunchMode::Detect, 2, 8);
    assert_contains(p->what, "accelerate launch would start 8 times on 2 nodes");
    p = launcher_count_problem({"deepspeed", "t.py"}, LaunchMode::Detect, 2, 8);
    assert_contains(p->fix, "run the training script itself once per GPU: srun --mn-nccl=auto python train.py");
}

using Files = std::map<std::string, std::string>;

// Two nodes, `gpus` GPUs each, a user whose home is /home/u, in /work.
static LauncherView two_nodes(uint32_t gpus, const Files& files = {},
                              std::map<std::string, std::string> env = {{"HOME", "/home/u"}, {"PWD", "/work"}}) {
    LauncherView v;
    v.launchers = 2;
    v.gpus = gpus;
    v.env = [env](const std::string& n) -> std::optional<std::string> {
        auto it = env.find(n);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    v.read = [files](const std::string& path) -> std::optional<std::string> {
        auto it = files.find(path);
        return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    return v;
}

static bool joins(const std::vector<std::string>& argv, const LauncherView& v) {
    return !launcher_join_problem(argv, v).has_value();
}

static const char* kDefault = "/home/u/.cache/huggingface/accelerate/default_config.yaml";

static void accelerate_alone_on_each_node_is_refused(void**) {
    // The report: one GPU per node, no --multi_gpu, no config: two trainings.
    auto p = launcher_join_problem({"accelerate", "launch", "train.py"}, two_nodes(1));
    assert_true(p.has_value());
    assert_contains(p->what, "accelerate launch would train alone on each of the 2 nodes (no --multi_gpu and 1 GPU per node");
    assert_contains(p->fix, "add --multi_gpu");
    // With it, or with several GPUs (accelerate turns multi-GPU on itself): torchrun, PET_*.
    assert_true(joins({"accelerate", "launch", "--multi_gpu", "train.py"}, two_nodes(1)));
    assert_true(joins({"accelerate", "launch", "--multi-gpu", "train.py"}, two_nodes(1)));
    assert_true(joins({"accelerate", "launch", "--use_fsdp", "train.py"}, two_nodes(1)));
    assert_true(joins({"accelerate", "launch", "train.py"}, two_nodes(8)));
    // The script's own --multi_gpu is not accelerate's.
    assert_true(launcher_join_problem({"accelerate", "launch", "--mixed_precision", "bf16", "train.py", "--multi_gpu"},
                                      two_nodes(1)).has_value());
    // No GPU at all: --multi_gpu would start no process either.
    p = launcher_join_problem({"accelerate", "launch", "train.py"}, two_nodes(0));
    assert_contains(p->what, "no --multi_gpu and 0 GPUs per node");
    assert_contains(p->fix, "give the step GPUs (--gres=gpu:N) and add --multi_gpu, or train on CPUs with torchrun");
    // One node: nothing to join.
    LauncherView one = two_nodes(1);
    one.launchers = 1;
    assert_true(joins({"accelerate", "launch", "train.py"}, one));
}

static void accelerate_configs(void**) {
    // The default config decides (HOME, then XDG_CACHE_HOME, then HF_HOME).
    Files f = {{kDefault, "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_processes: 1\n"}};
    auto p = launcher_join_problem({"accelerate", "launch", "train.py"}, two_nodes(8, f));
    assert_contains(p->what, "the default config /home/u/.cache/huggingface/accelerate/default_config.yaml says distributed_type: NO");
    Files xdg = {{"/x/huggingface/accelerate/default_config.yaml", "distributed_type: NO\n"}};
    assert_true(launcher_join_problem({"accelerate", "launch", "t.py"},
                                      two_nodes(8, xdg, {{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/x"}})).has_value());
    Files hf = {{"/hf/accelerate/default_config.yaml", "distributed_type: MULTI_GPU\nnum_machines: 1\n"}};
    assert_true(joins({"accelerate", "launch", "t.py"},
                                       two_nodes(1, hf, {{"HOME", "/home/u"}, {"HF_HOME", "/hf"}})));
    // --config_file, relative to the step's directory; --config-file=.
    Files mine = {{"/work/acc.yaml", "distributed_type: MULTI_GPU\nnum_machines: 2\nmachine_rank: 0\n"}};
    p = launcher_join_problem({"accelerate", "launch", "--config_file", "acc.yaml", "t.py"}, two_nodes(4, mine));
    assert_contains(p->what, "would give all 2 nodes the same machine rank: num_machines is 2 (--config_file acc.yaml)");
    assert_contains(p->fix, "--machine_rank $NODE_RANK");
    assert_true(joins({"accelerate", "launch", "--config-file=acc.yaml", "--machine_rank", "1", "t.py"},
                                       two_nodes(4, mine)));
    // --multi_gpu with a default config that says 2 machines: the same trap.
    Files two = {{kDefault, "distributed_type: MULTI_GPU\nnum_machines: 2\n"}};
    assert_true(launcher_join_problem({"accelerate", "launch", "--multi_gpu", "t.py"}, two_nodes(4, two)).has_value());
    assert_true(launcher_join_problem({"accelerate", "launch", "--multi_gpu", "--num_machines=2", "t.py"}, two_nodes(4))
                    .has_value());
    // A config that cannot be read: accelerate says so itself; no judgement.
    assert_true(joins({"accelerate", "launch", "--config_file", "/nope.yaml", "t.py"}, two_nodes(1)));
    // Old JSON configs.
    Files json = {{kDefault, "{\n  \"distributed_type\": \"DEEPSPEED\",\n  \"num_machines\": 1\n}\n"}};
    assert_true(joins({"accelerate", "launch", "t.py"}, two_nodes(1, json)));
}

static void deepspeed_per_node_is_refused(void**) {
    auto p = launcher_join_problem({"deepspeed", "train.py", "--deepspeed_config", "ds.json"}, two_nodes(8));
    assert_contains(p->what, "deepspeed would run each of the 2 nodes on its own");
    assert_contains(p->fix, "deepspeed.init_distributed() reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT");
    LauncherView one = two_nodes(8);
    one.launchers = 1;
    assert_true(joins({"deepspeed", "train.py"}, one));
    assert_true(joins({"torchrun", "train.py"}, two_nodes(1)));
    assert_true(joins({"python3", "train.py"}, two_nodes(1)));
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recognises_launchers),
        cmocka_unit_test(refuses_a_launcher_per_task),
        cmocka_unit_test(accelerate_alone_on_each_node_is_refused),
        cmocka_unit_test(accelerate_configs),
        cmocka_unit_test(deepspeed_per_node_is_refused),
    };
    return cmocka_run_group_tests_name("launcher", tests, nullptr, nullptr);
}
