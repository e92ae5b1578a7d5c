// Local (srun) and allocator (sbatch, salloc) context: refuse bad input
// before anything is launched.
#include <sys/random.h>

#include <cstdlib>
#include <string>

#include "lib/util/sha256.h"

#include "spank/plugin_state.h"

namespace mn::spank {

int srun_init_post_opt(spank_t) {
    PluginState& s = state();
    if (auto p = resolve_user_choices(s, process_env())) {
        slurm_error("%s", message(p->text()).c_str());
        return -1;
    }
    if (s.choice.mode != Mode::Off) {
        // A per-step secret for mn-preflight's ranks: random, so no one can
        // derive it from job ids; srun's environment reaches every task.
        unsigned char raw[32];
        if (getrandom(raw, sizeof raw, 0) == static_cast<ssize_t>(sizeof raw))
            setenv("MN_NCCL_STEP_SECRET", to_hex(raw, sizeof raw).c_str(), 1);
    }
    if (s.preflight.enabled) {
#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(24, 11, 0)
        // Without spank_prepend_task_argv the check cannot run inside the
        // step: refuse before anything is allocated or launched.
        slurm_error("%s", message(std::string("--mn-preflight (MN_NCCL_PREFLIGHT) needs Slurm ") +
                                  kPreflightNeedsSlurm + " or newer (spank_prepend_task_argv); this is Slurm " +
                                  std::to_string(SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER)) + "." +
                                  (SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER) < 10 ? "0" : "") +
                                  std::to_string(SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER)) + ". Instead, " + preflight_alternative())
                              .c_str());
        return -1;
#endif
        if (s.choice.mode == Mode::Off) {
            slurm_error("%s", message("--mn-preflight needs mn_nccl on (the check uses its ranks and "
                                      "MASTER_ADDR); add --mn-nccl=auto (or MN_NCCL=auto)")
                                  .c_str());
            return -1;
        }
    }
    if (s.choice.mode == Mode::Off && s.choice.emulate > 1) {
        // Emulation without the plugin's variables would run K times the
        // same ranks: refuse rather than run something silently wrong.
        slurm_error("%s", message("--mn-emulate-nodes needs mn_nccl on; add --mn-nccl=auto (or MN_NCCL=auto)").c_str());
        return -1;
    }
    if (s.choice.mode == Mode::Off && (s.choice.launch != LaunchMode::Detect || s.choice.explain))
        slurm_error("%s", message("--mn-nccl-launch and --mn-nccl-explain do nothing while mn_nccl is off; "
                                  "add --mn-nccl=auto (or MN_NCCL=auto)")
                              .c_str());
    return 0;
}

}  // namespace mn::spank
