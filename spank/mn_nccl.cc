// SPDX-License-Identifier: Apache-2.0
// Entry points: SPANK_PLUGIN and the hooks. Each hook hands its context to
// srun.cc (srun, sbatch, salloc) or slurmstepd.cc, and no exception crosses
// a hook: what escapes becomes an error where the user sees it.
#include <unistd.h>

#include <exception>
#include <string>

#include "lib/util/text.h"
#include "spank/plugin_state.h"

extern "C" {
// Declared extern so that SPANK_PLUGIN's constants keep external linkage
// in C++; slurm's loader looks them up with dlsym.
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(mn_nccl, 1)

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
// From 25.11 a failing remote slurm_spank_init drains the node unless the
// plugin says the failure is the job's. mn_nccl never fails it on purpose
// (errors wait for task_init), and whatever could still fail there is never
// the node's fault: a user's mistake must not drain it.
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif
}

namespace mn::spank {

PluginState& state() {
    static PluginState s;
    return s;
}

const std::string& hostname() {
    static const std::string name = mn::host_name();
    return name;
}

std::string message(const std::string& text) { return "mn_nccl: " + hostname() + ": " + text; }

namespace {

enum class Failure { FailHook, Defer };

template <typename F>
int guarded(const char* hook, Failure on_failure, F&& body) {
    std::string what;
    try {
        return body();
    } catch (const std::exception& e) {
        what = e.what();
    } catch (...) {
        what = "unknown exception";
    }
    const std::string text = message(std::string("internal error in ") + hook + ": " + what +
                                     "; report this to your cluster admins");
    slurm_error("%s", text.c_str());
    if (on_failure == Failure::Defer) {
        state().deferred_error = text;
        return 0;
    }
    return -1;
}

bool local_side() {
    spank_context_t c = spank_context();
    return c == S_CTX_LOCAL || c == S_CTX_ALLOCATOR;
}

}  // namespace
}  // namespace mn::spank

using namespace mn::spank;

// plugstack.conf's arguments are the admin's: a bad one goes to slurmd's
// log (as slurmd starts, and from each training step's slurmstepd, since
// they read the file again at each launch), not to every user's srun,
// where only srun -v shows it.
extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
    if (local_side())
        return guarded("init", Failure::FailHook, [&] {
            local_restore_real_slurm();  // before srun reads its options from the environment
            return init_plugin(sp, ac, av, ConfigReport::Verbose);
        });
    if (spank_remote(sp))
        return guarded("init", Failure::Defer, [&] {
            uint32_t step = 0;
            const bool training = spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && mn::is_training_step(step);
            return init_plugin(sp, ac, av, training ? ConfigReport::Log : ConfigReport::Verbose);
        });
    if (spank_context() == S_CTX_SLURMD)
        return guarded("init", Failure::Defer, [&] {
            report_site_config(ac, av);
            return 0;
        });
    return 0;
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int, char**) {
    if (local_side())
        return guarded("init_post_opt", Failure::FailHook, [&] { return srun_init_post_opt(sp); });
    return 0;
}

extern "C" int slurm_spank_user_init(spank_t sp, int, char**) {
    return guarded("user_init", Failure::Defer, [&] { return stepd_user_init(sp); });
}

extern "C" int slurm_spank_task_init(spank_t sp, int, char**) {
    if (guarded("task_init", Failure::FailHook, [&] { return stepd_task_init(sp); }) == 0) return 0;
    // Slurm ignores a failing hook of an `optional` plugin (the line the
    // package installs), and the program would start without the check or
    // the environment the step asked for. task_init runs in the task's own
    // process, after fork and before exec: ending it here is what Slurm
    // does itself for a `required` plugin (exec_task's _exit(1)), and it
    // leaves slurmstepd, the other tasks' reports and the node alone.
    if (stepd_step_asked(sp)) _exit(kRefusedTaskExit);
    return 0;
}
