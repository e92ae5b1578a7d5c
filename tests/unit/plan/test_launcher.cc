#include "lib/plan/launcher.h"
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
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recognises_launchers),
        cmocka_unit_test(refuses_a_launcher_per_task),
    };
    return cmocka_run_group_tests_name("launcher", tests, nullptr, nullptr);
}
