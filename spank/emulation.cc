// SPDX-License-Identifier: Apache-2.0
// --mn-nccl-emulate-nodes and Slurm's own variables: the emulated view written
// into each task (slurmstepd), and the real one put back for srun, sbatch
// and salloc started inside an emulated step (their own process).
#include <cstdlib>
#include <string>
#include <vector>

#include "lib/plan/emulated_slurm.h"
#include "spank/plugin_state.h"

namespace mn::spank {

int stepd_emulated_slurm_view(spank_t sp, const StepPlan& plan, const TaskFacts& task, const EnvLookup& env) {
    auto view = emulated_slurm_env(plan, task, env);
    if (!view) {
        if (task.local_id == 0) slurm_error("%s", message(view.problem().text()).c_str());
        return -1;
    }
    for (const EnvVar& v : *view) {
        if (spank_setenv(sp, v.name.c_str(), v.value.c_str(), 1) != ESPANK_SUCCESS) {
            slurm_error("%s", message("could not set " + v.name + " in the task's environment").c_str());
            return -1;
        }
    }
    return 0;
}

void local_restore_real_slurm() {
    // srun reads SLURM_NNODES, SLURM_NTASKS_PER_NODE and the like as its
    // options after this hook: the emulated ones would ask for nodes the
    // job does not have.
    for (const EnvChange& c : real_slurm_env(process_env())) {
        if (c.value) setenv(c.name.c_str(), c.value->c_str(), 1);
        else unsetenv(c.name.c_str());
    }
}

}  // namespace mn::spank
