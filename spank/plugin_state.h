// SPDX-License-Identifier: Apache-2.0
// The state one process keeps between hooks: srun (local), sbatch/salloc
// (allocator) or slurmstepd (remote). One struct, no other mutable globals.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/check/preflight_request.h"
#include "lib/check/watch_request.h"
#include "lib/plan/step_plan.h"
#include "spank/spank_api.h"

namespace mn::spank {

struct PluginState {
    ParsedSiteConfig site;
    UserChoice choice;
    // The options' values as given (command line, or via sbatch), kept by
    // the callbacks; resolve_user_choices adds the environment forms,
    // which count only where the option was not given.
    std::optional<std::string> mode_option;       // --mn-nccl
    std::optional<std::string> launch_option;     // --mn-nccl-launch
    bool explain_option = false;                  // --mn-nccl-explain
    std::optional<std::string> emulate_option;    // --mn-nccl-emulate-nodes
    std::optional<std::string> preflight_option;  // --mn-nccl-preflight
    std::optional<std::string> watch_option;      // --mn-nccl-watch
    // The spelling given, for messages: an alias keeps its own name.
    std::string emulate_spelling = kEmulateOption;
    std::string preflight_spelling = kPreflightOption;
    // Where the emulation was asked for (the option or MN_NCCL_EMULATE_NODES).
    std::string emulate_source = kEmulateOption;
    // --mn-nccl-preflight (or MN_NCCL_PREFLIGHT): the check before the program.
    PreflightRequest preflight;
    // The step asked for the check, even with a bad value: it runs the
    // check or does not start.
    bool preflight_asked = false;
    // --mn-nccl-watch (MN_NCCL_WATCH, plugstack watch=): the hang watch.
    WatchRequest watch;
    // Set in remote user_init, used by each task_init.
    bool active = false;
    std::optional<StepPlan> plan;
    // The plugin's variables the user set (in the step's environment at
    // user_init, before any task_init): kept. Others found at task_init
    // came from another plugin (pyxis: the container's) and are replaced.
    std::set<std::string> users_vars;
    // slurmstepd's mount namespace at user_init: a task_init in another one
    // runs after pyxis entered the container.
    std::string stepd_mnt_ns;
    // An error found where failing would run no task silently (remote init,
    // option callbacks, user_init): reported from task_init instead.
    std::string deferred_error;
};

PluginState& state();

// "mn_nccl: HOST: what; fix"
std::string message(const std::string& text);
const std::string& hostname();

// slurm_spank_init: parse plugstack.conf arguments, report bad ones where
// the admin reads them (`log`: slurmd's and slurmstepd's log; otherwise
// only srun -v shows them), register the option table.
enum class ConfigReport { Log, Verbose };
int init_plugin(spank_t sp, int ac, char** av, ConfigReport report);
// slurmd itself: the plugstack.conf arguments, checked once as it starts.
void report_site_config(int ac, char** av);
int register_options(spank_t sp);

// The one rule for options with an environment form (MN_NCCL,
// MN_NCCL_LAUNCH, MN_NCCL_EXPLAIN, MN_NCCL_EMULATE_NODES,
// MN_NCCL_PREFLIGHT), in every context: the option's value when it was
// given, else the variable's. `env` is the context's lookup (getenv in
// srun, spank_getenv in slurmstepd); the caller reports the problem as its
// context must (srun fails, slurmstepd keeps it for task_init).
std::optional<Problem> resolve_user_choices(PluginState& s, const EnvLookup& env);

// Why the check a step asked for cannot run: the release lacks
// spank_prepend_task_argv (before 23.11), or mn_nccl is off.
std::optional<Problem> preflight_unavailable(const PreflightRequest& r);
Problem preflight_needs_mn_nccl(const PreflightRequest& r);
// The same for --mn-nccl-watch (its source named).
std::optional<Problem> watch_unavailable(const WatchRequest& r);
Problem watch_needs_mn_nccl(const WatchRequest& r);

// task_init failed in a step that asked for mn_nccl or its check: the
// task's process ends before the program starts, whatever plugstack.conf
// says (Slurm ignores a failing hook of an `optional` plugin).
constexpr int kRefusedTaskExit = 2;

// Per context (srun.cc, slurmstepd.cc).
int srun_init_post_opt(spank_t sp);
int stepd_user_init(spank_t sp);
int stepd_task_init(spank_t sp);
// A training step that asked for mn_nccl or its check (slurmstepd).
bool stepd_step_asked(spank_t sp);

// --mn-nccl-emulate-nodes (emulation.cc): Slurm's variables of the emulated
// layout in a task; the real ones back in srun started inside such a task.
int stepd_emulated_slurm_view(spank_t sp, const StepPlan& plan, const TaskFacts& task, const EnvLookup& env);
void local_restore_real_slurm();

}  // namespace mn::spank
