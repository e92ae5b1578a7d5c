// SPDX-License-Identifier: Apache-2.0
// Remote context (slurmstepd): plan once per node and step in user_init,
// then give each task its environment in task_init. Errors found before
// task_init are kept and reported there: failing remote init or user_init
// would run no task while srun exits 0.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "build_config.h"
#include "lib/plan/containers.h"
#include "lib/plan/step_layout.h"
#include "lib/util/bounded_file.h"
#include "lib/util/mounts.h"
#include "lib/fabric/topology.h"
#include "lib/fabric/verbs.h"
#include "spank/plugin_state.h"

namespace mn::spank {

std::optional<std::string> pyxis_option(spank_t sp, const char* name);

namespace {

std::optional<std::string> step_env(spank_t sp, const std::string& name) {
    std::vector<char> buf(256);
    for (int tries = 0; tries < 8; ++tries) {
        spank_err_t rc = spank_getenv(sp, name.c_str(), buf.data(), static_cast<int>(buf.size()));
        if (rc == ESPANK_SUCCESS) return std::string(buf.data());
        if (rc != ESPANK_NOSPACE) return std::nullopt;
        buf.resize(buf.size() * 4);
    }
    return std::nullopt;
}

template <typename T>
bool item(spank_t sp, spank_item_t what, T& out) {
    return spank_get_item(sp, what, &out) == ESPANK_SUCCESS;
}

// For --mn-nccl-explain and fabric warnings: the task's stderr is the user's
// terminal or output file, and the line should read as ours, without
// slurmstepd's prefix.
void tell_user(const std::string& text) {
    std::string line = text + "\n";
    ssize_t rc = write(STDERR_FILENO, line.data(), line.size());
    (void)rc;
}

// This process's mount namespace ("mnt:[4026531841]"); "" when unreadable.
std::string mount_namespace() {
    char buf[64] = {0};
    const ssize_t n = readlink("/proc/self/ns/mnt", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// Whether this task is already in a mount namespace other than
// slurmstepd's: pyxis, listed before mn_nccl, entered its container.
bool in_container() {
    return !state().stepd_mnt_ns.empty() && mount_namespace() != state().stepd_mnt_ns;
}

// The container pyxis runs this step in, in the words the check's messages
// use; nullopt when pyxis runs none (or is not loaded).
std::optional<std::string> pyxis_container(spank_t sp) {
    if (auto v = pyxis_option(sp, "container-image")) return "pyxis --container-image=" + *v;
    if (auto v = pyxis_option(sp, "container-name")) return "pyxis --container-name=" + *v;
    if (auto v = step_env(sp, "PYXIS_CONTAINER_IMAGE")) return "pyxis, PYXIS_CONTAINER_IMAGE=" + *v;
    if (auto v = step_env(sp, "PYXIS_CONTAINER_NAME")) return "pyxis, PYXIS_CONTAINER_NAME=" + *v;
    return std::nullopt;
}

#if MN_HAVE_PREPEND_TASK_ARGV
// Whether enroot's mounts.d (the site's, or the user's own config) mounts
// something at `bin` in every container.
bool enroot_mounts_everywhere(const std::string& bin, const std::optional<std::string>& home) {
    std::vector<std::string> dirs = {"/etc/enroot/mounts.d"};
    if (home && !home->empty()) dirs.push_back(*home + "/.config/enroot/mounts.d");
    for (const auto& d : dirs) {
        DIR* dir = opendir(d.c_str());
        if (!dir) continue;
        bool found = false;
        for (struct dirent* e; !found && (e = readdir(dir));) {
            const std::string name = e->d_name;
            if (name.size() < 7 || name.compare(name.size() - 6, 6, ".fstab") != 0) continue;
            if (auto text = read_bounded_text(d + "/" + name, 1 << 16)) found = enroot_mounts(*text, bin);
        }
        closedir(dir);
        if (found) return true;
    }
    return false;
}
#endif

#if MN_HAVE_PREPEND_TASK_ARGV
// mn-preflight, where the task will run it: false (said on the node's
// first task) when it is not there, and the program must not start.
bool helper_here(const std::string& bin, const std::string& source, uint32_t local_id) {
    if (access(bin.c_str(), X_OK) != 0) {
        // pyxis entered the container before this task_init: the check
        // would start there, and the image lacks it.
        if (local_id == 0 && in_container())
            slurm_error("%s", message(source + ": " + bin + " is not in the container (pyxis), so the program "
                                      "was not started; the site mounts it into every container with enroot's "
                                      "mounts.d/50-mn-preflight.fstab (the mn-nccl package ships it), or run the "
                                      "check as a step of its own first: srun --container-image=... --mn-nccl=auto "
                                      "--container-mounts=" + bin + " " + bin)
                                  .c_str());
        else if (local_id == 0)
            slurm_error("%s", message(source + ": " + bin + " is not an executable here, so the program was "
                                      "not started; install mn-preflight on every node, or set preflight=PATH in "
                                      "plugstack.conf")
                                  .c_str());
        return false;
    }
    return true;
}

// The mn-preflight the plugin puts in front of tasks.
std::string helper_bin(const SiteConfig& site) {
    return site.preflight.empty() ? std::string(MN_PREFLIGHT_BIN) : site.preflight;
}

// ARGS in front of the task's command, `what` naming them in the error;
// false (said) when Slurm refuses, and the program must not start.
bool prepend_args(spank_t sp, const std::vector<std::string>& args, const std::string& source, const char* what) {
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    if (spank_prepend_task_argv(sp, static_cast<int>(args.size()), argv.data()) == ESPANK_SUCCESS) return true;
    slurm_error("%s", message(source + ": Slurm refused to put " + what + " in front of the task "
                              "(spank_prepend_task_argv), so the program was not started; report this with "
                              "the Slurm version")
                          .c_str());
    return false;
}
#endif

// --mn-nccl-watch: mn-preflight watch ... -- in front of the task's command:
// the program runs as its child, watched from outside.
int prepend_watch(spank_t sp, const WatchRequest& req, const SiteConfig& site, uint32_t local_id) {
#if MN_HAVE_PREPEND_TASK_ARGV
    const std::string bin = helper_bin(site);
    if (!helper_here(bin, req.source, local_id)) return -1;
    spank_unsetenv(sp, "_SLURM_SPANK_OPTION_mn_nccl_mn_nccl_watch");
    return prepend_args(sp, watch_argv(req, bin), req.source, "the watch") ? 0 : -1;
#else
    (void)sp, (void)site;
    if (local_id == 0) slurm_error("%s", message(watch_unavailable(req)->text()).c_str());
    return -1;
#endif
}

// --mn-nccl-preflight: mn-preflight check --exec ... -- in front of the task's
// command, so the check runs in this task and then becomes the program.
int prepend_preflight(spank_t sp, const StepPlan& plan, const PreflightRequest& req, const SiteConfig& site,
                      uint32_t local_id) {
#if MN_HAVE_PREPEND_TASK_ARGV
    const std::string bin = helper_bin(site);
    if (!helper_here(bin, req.source, local_id)) return -1;
    // pyxis: the check will run in the container; it says so about its outputs.
    const std::string container = pyxis_container(sp).value_or("");
    // pyxis still to come (listed after mn_nccl): the check will be looked
    // up in the image, which nothing here can see; the site's mounts can be.
    if (!container.empty() && !in_container() && local_id == 0 && !enroot_mounts_everywhere(bin, step_env(sp, "HOME")))
        tell_user(message("warning: " + req.source + ": pyxis runs after mn_nccl here and enroot's mounts.d does not "
                          "mount " + bin + " into containers: unless the image has it, every task ends with "
                          "'execve(): " + bin + ": No such file or directory'; fix: the site installs "
                          "/etc/enroot/mounts.d/50-mn-preflight.fstab (the mn-nccl package ships it), or add "
                          "--container-mounts=" + bin));
    const std::vector<std::string> args =
        preflight_argv(req, bin, preflight_port(plan.master_port, site.ports.lo, site.ports.hi), site, container);
    // Slurm (23.11 onwards) leaves the option's own variable in the task's
    // environment: without this the program would see one variable more
    // than without --mn-nccl-preflight (or its alias).
    spank_unsetenv(sp, "_SLURM_SPANK_OPTION_mn_nccl_mn_nccl_preflight");
    spank_unsetenv(sp, "_SLURM_SPANK_OPTION_mn_nccl_mn_preflight");
    return prepend_args(sp, args, req.source, "the check") ? 0 : -1;
#else
    (void)sp, (void)plan, (void)site;
    if (local_id == 0) slurm_error("%s", message(preflight_unavailable(req)->text()).c_str());
    return -1;
#endif
}

}  // namespace


// A pyxis option's value (spank_option_getopt finds options by name, any
// plugin's); nullopt when not given or pyxis is not loaded.
std::optional<std::string> pyxis_option(spank_t sp, const char* name) {
    struct spank_option o = {const_cast<char*>(name), const_cast<char*>("ARG"), const_cast<char*>(""), 1, 0, nullptr};
    char* arg = nullptr;
    if (spank_option_getopt(sp, &o, &arg) != ESPANK_SUCCESS) return std::nullopt;
    return std::string(arg ? arg : "");
}

// pyxis still to run (its task_init after this one: the task is not in the
// container's mount namespace yet) with a --container-env that leaves out
// names this task gets: the container's own values of those would replace
// the plugin's, and nothing here can stop it.
std::optional<std::string> container_warning(spank_t sp, const std::vector<EnvVar>& env) {
    if (!pyxis_container(sp) || state().stepd_mnt_ns.empty() || in_container()) return std::nullopt;
    const std::optional<std::string> option = pyxis_option(sp, "container-env");
    const std::string list = option ? *option : step_env(sp, "PYXIS_CONTAINER_ENV").value_or("");
    std::string missing;
    for (const auto& n : left_out_of(list))
        for (const auto& v : env)
            if (v.name == n) missing += (missing.empty() ? "" : ",") + n;
    if (missing.empty()) return std::nullopt;
    return "pyxis runs after mn_nccl here and " + (option ? "--container-env=" + *option : std::string("no --container-env")) +
           " leaves out " + missing + ": values the image or enroot's hooks set for these (enroot's pytorch hook: "
           "MASTER_ADDR, MASTER_PORT, WORLD_SIZE) replace mn_nccl's; fix: add them (--container-env=" +
           (option && !option->empty() ? *option + "," : std::string()) + missing +
           "), or have the site list mn_nccl after pyxis in plugstack.conf";
}

int stepd_user_init(spank_t sp) {
    PluginState& s = state();
    StepFacts f;
    if (!item(sp, S_JOB_STEPID, f.step_id) || !is_training_step(f.step_id)) return 0;

    const EnvLookup env = [&](const std::string& n) { return step_env(sp, n); };
    if (auto p = resolve_user_choices(s, env)) {
        s.active = true;  // the user asked for mn_nccl or its check, wrongly: say so
        s.deferred_error = message(p->text());
        return 0;
    }
    if (s.choice.mode == Mode::Off) return 0;
    s.active = true;
    if (!s.deferred_error.empty()) return 0;
    s.users_vars.clear();

    bool ok = item(sp, S_JOB_ID, f.job_id) && item(sp, S_JOB_NNODES, f.nnodes) &&
              item(sp, S_JOB_NODEID, f.node_id) && item(sp, S_JOB_LOCAL_TASK_COUNT, f.local_tasks) &&
              item(sp, S_JOB_TOTAL_TASK_COUNT, f.total_tasks);
    if (!ok) {
        s.deferred_error = message("Slurm did not give the step's ids and counts; report this with the Slurm version");
        return 0;
    }
    // What the user set, before any task_init: kept; later values are
    // another plugin's (pyxis) and replaced.
    for (const auto& n : plugin_variable_names())
        if (step_env(sp, n)) s.users_vars.insert(n);
    s.stepd_mnt_ns = mount_namespace();
    f.nodelist = step_env(sp, "SLURM_STEP_NODELIST").value_or("");
    f.tasks_per_node = step_env(sp, "SLURM_STEP_TASKS_PER_NODE").value_or("");
    int argc = 0;
    char** argv = nullptr;
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argv)
        f.argv.assign(argv, argv + argc);

    // A tree other than the kernel's /sys (the site's sysfs_root=, a user's
    // under user_sysfs_root=yes) is read only where no read can hold
    // slurmstepd without end (lib/util/mounts.h).
    const std::string root = sysfs_root(env, s.site.config);
    std::optional<HangProofReads> hang_proof;
    if (root != "/sys") {
        hang_proof.emplace(MountTable::of_this_process());
        if (auto h = hanging_mount(root, hang_proof->mounts())) {
            s.deferred_error = message("the sysfs tree " + *h +
                                       ", whose reads could hold slurmstepd without end: not read; put the tree on "
                                       "a local filesystem (or unset MN_NCCL_SYSFS_ROOT)");
            return 0;
        }
    }
    SystemNetwork net;
    auto plan = plan_step(f, s.choice, s.site.config, env, net);
    if (!plan) {
        s.deferred_error = message(plan.problem().text());
        return 0;
    }
    auto fabric = choose_fabric(discover_ports(root), s.choice.mode);
    if (!fabric) {
        s.deferred_error = message(fabric.problem().text());
        return 0;
    }
    // Google's plugin variables as the site or user set them (kept): named
    // when they name other NICs than this node's.
    for (auto& w : plugin_variable_findings(*fabric, env)) fabric.value().warnings.push_back(std::move(w));
    if (auto w = unread_sysfs_root(env, s.site.config); !w.empty()) fabric.value().warnings.push_back(std::move(w));
    take_fabric(plan.value(), std::move(fabric.value()));
    // pyxis's containers with a network of their own: the node's network
    // is not theirs (lib/plan/step_plan: own_network).
    std::optional<std::string> unshare = pyxis_option(sp, "container-unshare");
    std::string unshare_source = "pyxis --container-unshare=" + unshare.value_or("");
    if (!unshare && (unshare = step_env(sp, "PYXIS_CONTAINER_UNSHARE")))
        unshare_source = "pyxis, PYXIS_CONTAINER_UNSHARE=" + *unshare;
    if (unshare && unshares_network(*unshare) && pyxis_container(sp)) {
        if (auto p = own_network(plan.value(), unshare_source)) {
            s.deferred_error = message(p->text());
            return 0;
        }
    }
    // hwloc's topology load costs milliseconds: only when the user asked to
    // see the choice, once per node and step.
    if (s.choice.explain) {
        const LocalityReport l = gpu_locality(root, plan.value().fabric);
        plan.value().locality = l.known ? locality_summary(l.gpus) : l.note;
        for (const auto& w : l.warnings) plan.value().fabric.warnings.push_back(w);
    }
    s.plan = std::move(plan.value());
    return 0;
}

bool stepd_step_asked(spank_t sp) {
    const PluginState& s = state();
    uint32_t step = 0;
    if (!item(sp, S_JOB_STEPID, step) || !is_training_step(step)) return false;
    return s.active || s.mode_option || s.preflight_asked || (s.watch.enabled && s.watch_option);
}

int stepd_task_init(spank_t sp) {
    PluginState& s = state();
    // Errors matter only to steps that asked for mn_nccl or its check: an
    // internal error in a step without the option (the batch script, say)
    // is logged by the guard and must not fail it.
    if (!stepd_step_asked(sp)) return 0;
    std::string refusal = s.deferred_error;
    if (refusal.empty() && s.preflight_asked && !s.active)
        refusal = message(preflight_unavailable(s.preflight).value_or(preflight_needs_mn_nccl(s.preflight)).text());
    if (refusal.empty() && s.watch.enabled && s.watch_option && !s.active)
        refusal = message(watch_unavailable(s.watch).value_or(watch_needs_mn_nccl(s.watch)).text());
    if (!refusal.empty()) {
        // slurm_error from a task reaches the user's stderr; one line per
        // node is enough.
        int local_id = 0;
        item(sp, S_TASK_ID, local_id);
        if (local_id == 0) slurm_error("%s", refusal.c_str());
        else slurm_verbose("%s", refusal.c_str());
        return -1;
    }
    if (!s.active || !s.plan) return 0;

    TaskFacts t;
    int local_id = 0;
    if (!item(sp, S_TASK_ID, local_id) || !item(sp, S_TASK_GLOBAL_ID, t.global_id)) {
        slurm_error("%s", message("Slurm did not give this task's ids; report this with the Slurm version").c_str());
        return -1;
    }
    t.local_id = static_cast<uint32_t>(local_id);
    read_task_gpus(t, [&](const std::string& n) { return step_env(sp, n); }, *s.plan);
    if (auto p = task_problem(*s.plan, t)) {
        if (t.local_id == 0) slurm_error("%s", message(p->text()).c_str());
        return -1;
    }

    const std::vector<EnvVar> env = task_environment(*s.plan, t);
    std::string replaced;  // what another plugin set before this task_init
    for (const EnvVar& v : env) {
        const std::optional<std::string> was = step_env(sp, v.name);
        const bool overwrite = is_plugin_variable(v.name) ? !keeps_existing(v.name, s.users_vars, s.plan->force, v.replace)
                                                          : s.plan->force || v.replace;
        if (was && overwrite && *was != v.value && is_plugin_variable(v.name) && !s.users_vars.count(v.name))
            replaced += " " + v.name + "=" + *was;
        if (spank_setenv(sp, v.name.c_str(), v.value.c_str(), overwrite ? 1 : 0) != ESPANK_SUCCESS && !was) {
            slurm_error("%s", message("could not set " + v.name + " in the task's environment").c_str());
            return -1;
        }
    }
    if (t.local_id == 0) {
        if (!replaced.empty()) {
            const std::string l = message("replaced what was set after srun (pyxis: the container's environment):" +
                                          replaced + "; the program gets mn_nccl's (--mn-nccl-explain shows them)");
            if (s.choice.explain) tell_user(l);
            else slurm_verbose("%s", l.c_str());
        }
        if (auto w = container_warning(sp, env)) tell_user(message("warning: " + *w));
    }
    if (s.plan->emulate > 1 &&
        stepd_emulated_slurm_view(sp, *s.plan, t, [&](const std::string& n) { return step_env(sp, n); }) != 0)
        return -1;
    // The watch first, so that the check (prepended after it) runs before it.
    if (s.watch.enabled && prepend_watch(sp, s.watch, s.site.config, t.local_id) != 0) return -1;
    if (s.preflight.enabled && prepend_preflight(sp, *s.plan, s.preflight, s.site.config, t.local_id) != 0) return -1;
    if (const std::string l = s.choice.explain ? task_explain_line(*s.plan, t, hostname()) : ""; !l.empty()) tell_user(l);
    if (t.local_id == 0) {
        for (const auto& w : s.plan->fabric.warnings) tell_user(message("warning: " + w));
        if (s.choice.explain) {
            tell_user(explain_line(*s.plan, hostname()));
            // Which build runs here: Slurm loads a plugin only into the series it was built for.
            const char* running = nullptr;
            spank_get_item(sp, S_SLURM_VERSION, &running);
            tell_user(message("mn-nccl " PACKAGE_VERSION " built for Slurm " MN_SLURM_SERIES ", running in Slurm " +
                              std::string(running ? running : "?")));
            // The site's plugstack.conf mistakes (slurmd's log has them),
            // once per step, for a user who asks why a value is what it is.
            if (s.plan->facts.node_id == 0)
                for (const auto& w : s.site.warnings)
                    tell_user(message("the site's " + w + " (for the cluster admins)"));
        }
    }
    return 0;
}

}  // namespace mn::spank
