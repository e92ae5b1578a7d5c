// SPDX-License-Identifier: Apache-2.0
// Local (srun) and allocator (sbatch, salloc) context: refuse bad input
// before anything is launched. A failing init_post_opt stops srun only
// for a `required` plugstack line; with an `optional` one srun goes on,
// and slurmstepd's task_init refuses again (spank/slurmstepd.cc).
#include <sys/random.h>

#include <cstdlib>
#include <string>

#include "lib/plan/containers.h"
#include "lib/util/text.h"

#include "spank/plugin_state.h"

namespace mn::spank {
namespace {

int fail(const Problem& p) {
    slurm_error("%s", message(p.text()).c_str());
    return -1;
}

}  // namespace

int srun_init_post_opt(spank_t) {
    PluginState& s = state();
    if (auto p = resolve_user_choices(s, process_env())) return fail(*p);
    if (s.choice.mode != Mode::Off) {
        // A per-step secret for mn-preflight's ranks: random, so no one can
        // derive it from job ids; srun's environment reaches every task.
        unsigned char raw[32];
        if (getrandom(raw, sizeof raw, 0) == static_cast<ssize_t>(sizeof raw))
            setenv("MN_NCCL_STEP_SECRET", to_hex(raw, sizeof raw).c_str(), 1);
        // pyxis (srun --container-image) then keeps these names' host
        // values in the container, over the image's and enroot's hooks',
        // in either plugstack order (PYXIS_CONTAINER_ENV is its
        // --container-env default; the user's own names stay first).
        const char* users = std::getenv("PYXIS_CONTAINER_ENV");
        setenv("PYXIS_CONTAINER_ENV",
               pyxis_container_env(users ? std::optional<std::string>(users) : std::nullopt).c_str(), 1);
    }
    if (s.preflight.enabled) {
        // Without spank_prepend_task_argv the check cannot run inside the
        // step: refuse before anything is allocated or launched.
        if (auto p = preflight_unavailable(s.preflight)) return fail(*p);
        // sbatch's own mode does not matter: its script's sruns decide.
        if (s.choice.mode == Mode::Off && spank_context() == S_CTX_LOCAL)
            return fail(preflight_needs_mn_nccl(s.preflight));
    }
    if (s.watch.enabled && s.watch.source != kWatchSiteSource) {
        if (auto p = watch_unavailable(s.watch)) return fail(*p);
        if (s.choice.mode == Mode::Off && spank_context() == S_CTX_LOCAL) return fail(watch_needs_mn_nccl(s.watch));
    }
    if (s.choice.mode == Mode::Off && s.choice.emulate > 1) {
        // Emulation without the plugin's variables would run K times the
        // same ranks: refuse rather than run something silently wrong.
        return fail(Problem{s.emulate_source + " needs mn_nccl on",
                            "add --mn-nccl=auto (or MN_NCCL=auto)" +
                                (s.emulate_source == kEmulateEnv ? ", or unset " + std::string(kEmulateEnv) : "")});
    }
    // Only for the options: MN_NCCL_LAUNCH and MN_NCCL_EXPLAIN may be set
    // for every step of a session, most of them without mn_nccl.
    if (s.choice.mode == Mode::Off && (s.launch_option || s.explain_option))
        slurm_error("%s", message("--mn-nccl-launch and --mn-nccl-explain do nothing while mn_nccl is off; "
                                  "add --mn-nccl=auto (or MN_NCCL=auto)")
                              .c_str());
    return 0;
}

}  // namespace mn::spank
