// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <map>
#include <set>

#include "lib/plan/containers.h"
#include "lib/plan/launcher.h"
#include "lib/plan/step_plan.h"
#include "tests/unit/plan/task_facts.h"
#include "tests/unit/unit.h"

using namespace mn;

static std::map<std::string, std::string> as_map(const std::vector<EnvVar>& v) {
    std::map<std::string, std::string> m;
    for (const auto& e : v) {
        if (m.count(e.name)) fail_msg("%s set twice", e.name.c_str());
        m[e.name] = e.value;
    }
    return m;
}

// A plan of 2 nodes x 2 tasks with GPUs, in the given launch mode.
static StepPlan plan(LaunchMode launch, std::vector<std::string> argv = {"python", "train.py"}) {
    StepPlan p;
    p.launch = launch;
    p.master_addr = "10.0.0.10";
    p.master_port = 20016;
    p.ifname = "eth0";
    p.rdzv = "7.0";
    p.host = "node0";
    p.facts.nnodes = 2;
    p.facts.total_tasks = launch == LaunchMode::Task ? 4 : 2;
    p.facts.local_tasks = launch == LaunchMode::Task ? 2 : 1;
    p.facts.argv = std::move(argv);
    return p;
}

// What the GPU runtime and Slurm own: never a container's to set, so not
// in the list pyxis is given.
static bool gpu_variable(const std::string& n) {
    return n == "CUDA_VISIBLE_DEVICES" || n == "ROCR_VISIBLE_DEVICES" || n == "CUDA_DEVICE_ORDER";
}

// Every name task_environment gives, in every mode and fabric, is in
// plugin_variable_names (or is the GPU list): a name added there and
// forgotten here would be left to the container's value.
static void every_variable_the_plugin_sets_is_listed(void**) {
    std::vector<StepPlan> plans = {plan(LaunchMode::Task), plan(LaunchMode::Node, {"torchrun", "train.py"})};
    StepPlan ranks_too = plan(LaunchMode::Node);
    ranks_too.ranks_too = true;
    plans.push_back(ranks_too);
    StepPlan ib = plan(LaunchMode::Task);
    ib.fabric.env = {{"NCCL_IB_HCA", "=mlx5_0:1"}, {"NCCL_IB_GID_INDEX", "3"}};
    plans.push_back(ib);
    StepPlan efa = plan(LaunchMode::Task);
    efa.fabric.env = {{"FI_PROVIDER", "efa"}, {"FI_EFA_USE_DEVICE_RDMA", "1"}, {"NCCL_NET", "Socket"}};
    plans.push_back(efa);
    StepPlan socket = plan(LaunchMode::Task);
    socket.fabric.env = {{"NCCL_IB_DISABLE", "1"}};
    plans.push_back(socket);
    // Google's A3: the plugin's NIC variables, as choose_fabric gives them.
    for (unsigned n : {5u, 9u}) {
        std::vector<RdmaPort> gvnics;
        for (unsigned i = 0; i < n; ++i) {
            RdmaPort g;
            g.hca = g.netdev = "eth" + std::to_string(i);
            g.gvnic = true;
            g.link_layer = "gVNIC";
            g.state = "ACTIVE";
            g.netdev_state = "up";
            gvnics.push_back(g);
        }
        StepPlan a3 = plan(LaunchMode::Task);
        take_fabric(a3, *choose_fabric(gvnics, Mode::Auto));
        plans.push_back(a3);
    }
    StepPlan emulated = plan(LaunchMode::Task);
    emulated.emulate = 2;
    emulated.facts.local_tasks = 4;
    emulated.facts.total_tasks = 8;
    plans.push_back(emulated);
    std::set<std::string> seen;
    for (const auto& p : plans)
        for (uint32_t local = 0; local < p.facts.local_tasks; ++local)
            for (const auto& v : task_environment(p, facts(local, local, 4, {"0", "1", "2", "3"}))) {
                seen.insert(v.name);
                if (!is_plugin_variable(v.name) && !gpu_variable(v.name))
                    fail_msg("task_environment sets %s, which plugin_variable_names lacks", v.name.c_str());
            }
    // The walk saw the modes' own names (it ran what it claims to).
    for (const char* n : {"MASTER_ADDR", "RANK", "PET_NNODES", "NCCL_IB_HCA", "FI_PROVIDER", "NCCL_IB_DISABLE",
                          "NCCL_HOSTID", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "NCCL_FASTRAK_CTRL_DEV"})
        if (!seen.count(n)) fail_msg("no plan gave %s", n);
}

static void pyxis_list_keeps_the_users_names_first(void**) {
    const std::string ours = pyxis_container_env(std::nullopt);
    assert_true(ours.rfind("MASTER_ADDR,MASTER_PORT,", 0) == 0);
    assert_int_equal(ours.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
    const std::string merged = pyxis_container_env(std::string(" HF_TOKEN, MASTER_PORT ,WANDB_API_KEY,"));
    assert_true(merged.rfind("HF_TOKEN,MASTER_PORT,WANDB_API_KEY,MASTER_ADDR,NNODES,", 0) == 0);
    // Each name once, and nothing lost.
    std::set<std::string> names;
    std::size_t count = 0, start = 0;
    while (start <= merged.size()) {
        std::size_t end = merged.find(',', start);
        if (end == std::string::npos) end = merged.size();
        names.insert(merged.substr(start, end - start));
        ++count;
        start = end + 1;
    }
    assert_int_equal(names.size(), count);
    assert_int_equal(count, plugin_variable_names().size() + 2);
    assert_str(pyxis_container_env(ours), ours);  // srun inside an sbatch that set it: the same
}

static void container_env_option_left_out(void**) {
    auto out = left_out_of("HF_TOKEN,MASTER_ADDR");
    assert_true(std::find(out.begin(), out.end(), "MASTER_ADDR") == out.end());
    assert_true(std::find(out.begin(), out.end(), "MASTER_PORT") != out.end());
    assert_int_equal(out.size(), plugin_variable_names().size() - 1);
    assert_int_equal(left_out_of(pyxis_container_env(std::nullopt)).size(), 0);
    assert_int_equal(left_out_of("").size(), plugin_variable_names().size());
}

static void users_values_kept_others_replaced(void**) {
    const std::set<std::string> users = {"MASTER_PORT"};
    assert_true(keeps_existing("MASTER_PORT", users, false, false));    // the user's
    assert_false(keeps_existing("MASTER_ADDR", users, false, false));   // pyxis' (enroot's hook)
    assert_false(keeps_existing("MASTER_PORT", users, true, false));    // --mn-nccl-force
    assert_false(keeps_existing("MASTER_PORT", users, false, true));    // the plugin must (emulation)
}

static void apptainer_command_lines(void**) {
    auto c = apptainer_command({"/usr/bin/apptainer", "exec", "--nv", "-B", "/data:/data", "--env=A=1", "--cleanenv",
                                "img.sif", "torchrun", "train.py"});
    assert_true(c.has_value());
    assert_str(c->runtime, "apptainer");
    assert_str(c->image, "img.sif");
    assert_int_equal(c->command, 8);
    c = apptainer_command({"singularity", "--debug", "run", "--bind", "/a", "x.sif", "python", "t.py"});
    assert_true(c.has_value());
    assert_str(c->runtime, "singularity");
    assert_str(c->image, "x.sif");
    assert_int_equal(c->command, 6);
    c = apptainer_command({"apptainer", "exec", "--", "img.sif", "python"});
    assert_true(c && c->image == "img.sif");
    assert_false(apptainer_command({"apptainer", "shell", "img.sif"}).has_value());
    assert_false(apptainer_command({"apptainer", "exec", "--bind"}).has_value());  // no image
    assert_false(apptainer_command({"apptainer", "exec", "img.sif"}).has_value() &&
                 apptainer_command({"apptainer", "exec", "img.sif"})->command != 3);
    assert_false(apptainer_command({"python", "exec", "img.sif"}).has_value());
    assert_false(apptainer_command({}).has_value());
}

// The launcher checks look past the container runtime: torchrun once per
// task inside apptainer is refused as it is bare.
static void launcher_inside_apptainer(void**) {
    const std::vector<std::string> tr = {"apptainer", "exec", "--nv", "img.sif", "torchrun", "--nproc-per-node=4", "t.py"};
    assert_int_equal(static_cast<int>(launcher_in(tr)), static_cast<int>(Launcher::Torchrun));
    auto p = launcher_count_problem(tr, LaunchMode::Detect, 2, 8);
    assert_true(p.has_value());
    assert_true(p->what.find("torchrun would start 8 times on 2 nodes") != std::string::npos);
    assert_false(launcher_count_problem(tr, LaunchMode::Detect, 2, 2).has_value());
    const std::vector<std::string> py = {"singularity", "exec", "img.sif", "python", "-m", "torch.distributed.run", "t.py"};
    assert_int_equal(static_cast<int>(launcher_in(py)), static_cast<int>(Launcher::Torchrun));
    assert_int_equal(static_cast<int>(launcher_in({"apptainer", "exec", "img.sif", "python", "train.py"})),
                     static_cast<int>(Launcher::None));
    // An option the table does not know takes no value: the image is the
    // next word, never the launcher.
    assert_int_equal(static_cast<int>(launcher_in({"apptainer", "exec", "--newflag", "img.sif", "torchrun"})),
                     static_cast<int>(Launcher::Torchrun));
}

// Under apptainer each variable also goes as APPTAINERENV_NAME (or
// SINGULARITYENV_), which --cleanenv keeps and which wins over the image's.
static void apptainer_gets_prefixed_copies(void**) {
    auto e = as_map(task_environment(plan(LaunchMode::Task, {"apptainer", "exec", "--cleanenv", "img.sif", "python", "t.py"}),
                                     facts(1, 3, 0)));
    assert_str(e.at("MASTER_ADDR"), "10.0.0.10");
    assert_str(e.at("APPTAINERENV_MASTER_ADDR"), "10.0.0.10");
    assert_str(e.at("APPTAINERENV_MASTER_PORT"), "20016");
    assert_str(e.at("APPTAINERENV_RANK"), "3");
    assert_str(e.at("APPTAINERENV_NCCL_SOCKET_IFNAME"), "=eth0");
    assert_int_equal(e.count("SINGULARITYENV_RANK"), 0);
    e = as_map(task_environment(plan(LaunchMode::Task, {"singularity", "run", "img.sif"}), facts(0, 0, 0)));
    assert_str(e.at("SINGULARITYENV_RANK"), "0");
    e = as_map(task_environment(plan(LaunchMode::Task), facts(0, 0, 0)));
    for (const auto& [name, value] : e) assert_int_equal(name.rfind("APPTAINERENV_", 0), std::string::npos);
}

// enroot's mounts.d lines (fstab(5)): the target is the second field;
// comments, blank and one-field lines mount nothing.
static void enroot_mounts_reads_targets(void**) {
    const std::string shipped =
        "# mn-nccl: mn-preflight in every container\n"
        "/usr/local/bin/mn-preflight /usr/local/bin/mn-preflight none x-create=file,bind,ro,nosuid,nodev,private\n";
    assert_true(enroot_mounts(shipped, "/usr/local/bin/mn-preflight"));
    assert_false(enroot_mounts(shipped, "/usr/bin/mn-preflight"));
    assert_false(enroot_mounts(shipped, "/usr/local/bin/mn"));
    // Another source mounted onto the path counts; the source alone does not.
    assert_true(enroot_mounts("/opt/mp\t/usr/bin/mn-preflight none bind\n", "/usr/bin/mn-preflight"));
    assert_false(enroot_mounts("/usr/bin/mn-preflight /opt/mp none bind\n", "/usr/bin/mn-preflight"));
    assert_false(enroot_mounts("#/usr/bin/mn-preflight /usr/bin/mn-preflight none bind\n", "/usr/bin/mn-preflight"));
    assert_false(enroot_mounts("  # /x /usr/bin/mn-preflight\n\n/usr/bin/mn-preflight\n", "/usr/bin/mn-preflight"));
    assert_true(enroot_mounts("\n  /a /b none bind\n/c /usr/bin/mn-preflight", "/usr/bin/mn-preflight"));
    assert_false(enroot_mounts("", "/usr/bin/mn-preflight"));
    assert_false(enroot_mounts("/a /b none bind\n", ""));
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_variable_the_plugin_sets_is_listed),
        cmocka_unit_test(pyxis_list_keeps_the_users_names_first),
        cmocka_unit_test(container_env_option_left_out),
        cmocka_unit_test(users_values_kept_others_replaced),
        cmocka_unit_test(apptainer_command_lines),
        cmocka_unit_test(launcher_inside_apptainer),
        cmocka_unit_test(apptainer_gets_prefixed_copies),
        cmocka_unit_test(enroot_mounts_reads_targets),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
