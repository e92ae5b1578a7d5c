// The option table. Callbacks run in srun at parse time (remote == 0), where
// a bad value must fail srun before launch, and again in slurmstepd
// (remote == 1, possibly twice), where failing would silently run no task.
#include <string>
#include <vector>

#include "lib/check/check_options.h"
#include "spank/plugin_state.h"

namespace mn::spank {
namespace {

enum OptionId { kMode = 1, kLaunch, kExplain, kEmulate, kPreflight };

int refuse(int remote, const Problem& p) {
    const std::string text = message(p.text());
    if (remote) {
        state().deferred_error = text;
        return 0;
    }
    slurm_error("%s", text.c_str());
    return -1;
}

// --mn-preflight's callback. In srun and sbatch (remote == 0) a failure
// here is the one Slurm obeys for an `optional` plugstack line too, so the
// release check is made here and not only in init_post_opt.
int on_preflight(const std::string& value, int remote) {
    PluginState& s = state();
    s.preflight_option = value;
    s.preflight_asked = preflight_switch(value) != false;
    auto r = parse_preflight_request(value, kPreflightOption);
    if (!r) return refuse(remote, r.problem());
    s.preflight = *r;
    if (auto p = preflight_unavailable(*r); p && !remote) return refuse(remote, *p);
    return 0;
}

int on_option(int id, const char* optarg, int remote) {
    try {
        const std::string value = optarg ? optarg : "";
        PluginState& s = state();
        switch (id) {
            case kMode: {
                auto m = parse_mode(value, "--mn-nccl");
                if (!m) return refuse(remote, m.problem());
                s.choice.mode = *m;
                s.mode_option = value;
                return 0;
            }
            case kLaunch: {
                auto l = parse_launch(value, "--mn-nccl-launch");
                if (!l) return refuse(remote, l.problem());
                s.choice.launch = *l;
                return 0;
            }
            case kExplain:
                s.choice.explain = true;
                return 0;
            case kEmulate: {
                auto k = parse_emulate_nodes(value, "--mn-emulate-nodes");
                if (!k) return refuse(remote, k.problem());
                s.choice.emulate = *k;
                return 0;
            }
            case kPreflight:
                return on_preflight(value, remote);
        }
        return 0;
    } catch (...) {
        return refuse(remote, Problem{"internal error while reading an --mn-nccl option", "report this"});
    }
}

struct spank_option kOptions[] = {
    {const_cast<char*>("mn-nccl"), const_cast<char*>("[MODE]"),
     const_cast<char*>("Set up each task's multi-node NCCL/PyTorch environment. MODE: auto (default), "
                       "ib, roce, socket, off. Env form: MN_NCCL=MODE."),
     2, kMode, on_option},
    {const_cast<char*>("mn-nccl-launch"), const_cast<char*>("task|node"),
     const_cast<char*>("task: one task per GPU (RANK etc. set); node: one launcher such as torchrun per node "
                       "(PET_* set). Default: node when every node runs one task, with RANK etc. too unless the "
                       "command is torchrun, accelerate or deepspeed."),
     1, kLaunch, on_option},
    {const_cast<char*>("mn-nccl-explain"), nullptr,
     const_cast<char*>("Each node prints one line with the values mn_nccl chose and why."), 0, kExplain,
     on_option},
    {const_cast<char*>("mn-emulate-nodes"), const_cast<char*>("K"),
     const_cast<char*>("Split each node into K emulated nodes (tasks, GPUs, NCCL_HOSTID), to test multi-node "
                       "code on one node."),
     1, kEmulate, on_option},
    // Its help comes from the check's option table: see preflight_help().
    {const_cast<char*>("mn-preflight"), const_cast<char*>("[OPTIONS]"), nullptr, 2, kPreflight, on_option},
};

const std::string& preflight_help() {
    static const std::string help =
        std::string("Each task first runs mn-preflight's check (same ranks, GPUs and network); the program "
                    "starts only on PASS. OPTIONS: 1 (the defaults), 0 (no check), or a comma list of ") +
        inline_options_list() + ". Needs Slurm " + kPreflightNeedsSlurm + ". Env form: " + kPreflightEnv + ".";
    return help;
}

#if !MN_HAVE_PREPEND_TASK_ARGV
// "22.05": named in the refusal on releases without the inline check.
std::string slurm_release() {
    const unsigned v = SLURM_VERSION_NUMBER;
    const unsigned minor = SLURM_VERSION_MINOR(v);
    return std::to_string(SLURM_VERSION_MAJOR(v)) + "." + (minor < 10 ? "0" : "") + std::to_string(minor);
}
#endif

// MN_NCCL unless --mn-nccl was given.
std::optional<Problem> resolve_mode(PluginState& s, const EnvLookup& env) {
    const std::optional<std::string> v = s.mode_option ? s.mode_option : env("MN_NCCL");
    if (!v) return std::nullopt;
    auto m = parse_mode(*v, s.mode_option ? "--mn-nccl" : "MN_NCCL");
    if (!m) return m.problem();
    s.choice.mode = *m;
    return std::nullopt;
}

}  // namespace

std::optional<Problem> resolve_user_choices(PluginState& s, const EnvLookup& env) {
    if (auto p = resolve_mode(s, env)) return p;
    auto r = requested_preflight(s.preflight_option, env);
    if (!r) {
        s.preflight_asked = true;  // asked for, wrongly: never run the program unchecked
        return r.problem();
    }
    s.preflight = *r;
    s.preflight_asked = r->enabled;
    return std::nullopt;
}

std::optional<Problem> preflight_unavailable(const PreflightRequest& r) {
#if MN_HAVE_PREPEND_TASK_ARGV
    (void)r;
    return std::nullopt;
#else
    if (!r.enabled) return std::nullopt;
    std::string fix = "instead, " + preflight_alternative();
    if (r.source == kPreflightEnv) fix += "\n(or set " + std::string(kPreflightEnv) + "=off to run without the check)";
    return Problem{r.source + " needs Slurm " + kPreflightNeedsSlurm + " or newer (spank_prepend_task_argv); this is Slurm " +
                       slurm_release() + ", so the program was not started",
                   fix};
#endif
}

Problem preflight_needs_mn_nccl(const PreflightRequest& r) {
    return Problem{r.source + " needs mn_nccl on (the check uses its ranks and MASTER_ADDR)",
                   "add --mn-nccl=auto (or MN_NCCL=auto)" +
                       std::string(r.source == kPreflightEnv ? ", or unset MN_NCCL_PREFLIGHT" : "")};
}

int init_plugin(spank_t sp, int ac, char** av, bool report_config) {
    PluginState& s = state();
    s.site = parse_site_config(std::vector<std::string>(av, av + ac));
    // An admin's typo is reported (by srun and sbatch, where users read it),
    // never fatal: its default stands.
    for (const auto& w : s.site.warnings) {
        if (report_config) slurm_error("%s", message(w).c_str());
        else slurm_verbose("%s", message(w).c_str());
    }
    s.choice.mode = s.site.config.default_mode;
    return register_options(sp);
}

int register_options(spank_t sp) {
    for (auto& opt : kOptions) {
        if (opt.val == kPreflight) opt.usage = const_cast<char*>(preflight_help().c_str());
        if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
            slurm_error("%s", message("could not register option --" + std::string(opt.name) +
                                      "; another plugin may use the same name")
                                  .c_str());
        }
    }
    return 0;
}

}  // namespace mn::spank
