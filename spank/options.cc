// SPDX-License-Identifier: Apache-2.0
// The option table. Callbacks run in srun at parse time (remote == 0), where
// a bad value must fail srun before launch, and again in slurmstepd
// (remote == 1, possibly twice), where failing would silently run no task.
#include <string>
#include <vector>

#include "lib/check/check_options.h"
#include "lib/util/boolean.h"
#include "spank/plugin_state.h"

namespace mn::spank {
namespace {

// Each option's id; an alias has an id of its own, so that messages name
// the spelling the user wrote.
enum OptionId { kMode = 1, kLaunch, kExplain, kEmulate, kPreflight, kEmulateOld, kPreflightOld, kWatch };

int refuse(int remote, const Problem& p) {
    const std::string text = message(p.text());
    if (remote) {
        state().deferred_error = text;
        return 0;
    }
    slurm_error("%s", text.c_str());
    return -1;
}

// --mn-nccl-preflight's callback. In srun and sbatch (remote == 0) a
// failure here is the one Slurm obeys for an `optional` plugstack line
// too, so the release check is made here and not only in init_post_opt.
int on_preflight(const std::string& value, const char* spelling, int remote) {
    PluginState& s = state();
    s.preflight_option = value;
    s.preflight_spelling = spelling;
    s.preflight_asked = preflight_switch(value) != false;
    auto r = parse_preflight_request(value, spelling);
    if (!r) return refuse(remote, r.problem());
    s.preflight = *r;
    if (auto p = preflight_unavailable(*r); p && !remote) return refuse(remote, *p);
    return 0;
}

// The callbacks keep what was given and refuse a bad value at once (srun
// fails before launch); resolve_user_choices makes it the step's choice.
int on_option(int id, const char* optarg, int remote) {
    try {
        const std::string value = optarg ? optarg : "";
        PluginState& s = state();
        switch (id) {
            case kMode: {
                auto m = parse_mode(value, kModeOption);
                if (!m) return refuse(remote, m.problem());
                s.mode_option = value;
                return 0;
            }
            case kLaunch: {
                auto l = parse_launch(value, kLaunchOption);
                if (!l) return refuse(remote, l.problem());
                s.launch_option = value;
                return 0;
            }
            case kExplain:
                s.explain_option = true;
                return 0;
            case kEmulate:
            case kEmulateOld: {
                const char* spelling = id == kEmulate ? kEmulateOption : kEmulateAlias;
                auto k = parse_emulate_nodes(value, spelling);
                if (!k) return refuse(remote, k.problem());
                s.emulate_option = value;
                s.emulate_spelling = spelling;
                return 0;
            }
            case kPreflight:
                return on_preflight(value, kPreflightOption, remote);
            case kPreflightOld:
                return on_preflight(value, kPreflightAlias, remote);
            case kWatch: {
                auto w = parse_watch_request(value, kWatchOption);
                if (!w) return refuse(remote, w.problem());
                s.watch_option = value;
                if (auto p = watch_unavailable(*w); p && !remote) return refuse(remote, *p);
                return 0;
            }
        }
        return 0;
    } catch (...) {
        return refuse(remote, Problem{"internal error while reading an --mn-nccl option", "report this"});
    }
}

char* text(const char* s) { return const_cast<char*>(s); }

// srun --help lists them in this order: the family, then the older
// spellings, which stay as aliases.
struct spank_option kOptions[] = {
    {text("mn-nccl"), text("[MODE]"),
     text("Set up each task's multi-node NCCL/PyTorch environment. MODE: auto (default), ib, roce, socket, off. "
          "Env form: MN_NCCL=MODE."),
     2, kMode, on_option},
    {text("mn-nccl-launch"), text("task|node"),
     text("task: one task per GPU (RANK etc. set); node: one launcher such as torchrun per node (PET_* set). "
          "Default: node when every node runs one task, with RANK etc. too unless the command is torchrun, "
          "accelerate or deepspeed. Env form: MN_NCCL_LAUNCH."),
     1, kLaunch, on_option},
    {text("mn-nccl-explain"), nullptr,
     text("Each node prints one line with the values mn_nccl chose and why. Env form: MN_NCCL_EXPLAIN=1."), 0,
     kExplain, on_option},
    {text("mn-nccl-emulate-nodes"), text("K"),
     text("Split each node into K emulated nodes (tasks, GPUs, NCCL_HOSTID), to test multi-node code on one "
          "node. Env form: MN_NCCL_EMULATE_NODES=K."),
     1, kEmulate, on_option},
    // Its help comes from the check's option table: see preflight_help().
    {text("mn-nccl-preflight"), text("[OPTIONS]"), nullptr, 2, kPreflight, on_option},
    {text("mn-nccl-watch"), text("[WHAT]"),
     text("Watch each task from outside (mn-preflight watch): a rank stopped, stuck in the kernel or dead is named "
          "with its node, pid and evidence on stderr, and PyTorch's Flight Recorder is armed. WHAT: report "
          "(default), abort (then end the step), off; window=S (default 30) how long a process may stay stopped. "
          "Needs Slurm 23.11. Env form: MN_NCCL_WATCH=WHAT."),
     2, kWatch, on_option},
    {text("mn-emulate-nodes"), text("K"), text("Alias of --mn-nccl-emulate-nodes."), 1, kEmulateOld, on_option},
    {text("mn-preflight"), text("[OPTIONS]"), text("Alias of --mn-nccl-preflight."), 2, kPreflightOld, on_option},
};

const std::string& preflight_help() {
    static const std::string help =
        std::string("Each task first runs mn-preflight's check (same ranks, GPUs and network); the program "
                    "starts only on PASS. OPTIONS: 1 (or yes, true, on: the defaults), 0 (or no, false, off: no "
                    "check), or a comma list of ") +
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

// A setting's text and where it came from, for messages: the option's
// spelling or the variable's name.
struct Given {
    std::string value;
    std::string source;
};

// The option's value when it was given, else its variable's.
std::optional<Given> given(const std::optional<std::string>& option, const std::string& spelling, const char* var,
                           const EnvLookup& env) {
    if (option) return Given{*option, spelling};
    if (auto v = env(var)) return Given{*v, var};
    return std::nullopt;
}

// An admin's typo in plugstack.conf never stops a job: its default stands.
void report_warnings(const ParsedSiteConfig& site, ConfigReport report) {
    for (const auto& w : site.warnings) {
        if (report == ConfigReport::Log) slurm_error("%s", message(w).c_str());
        else slurm_verbose("%s", message(w).c_str());
    }
}

}  // namespace

std::optional<Problem> resolve_user_choices(PluginState& s, const EnvLookup& env) {
    if (auto g = given(s.mode_option, kModeOption, kModeEnv, env)) {
        auto m = parse_mode(g->value, g->source);
        if (!m) return m.problem();
        s.choice.mode = *m;
    }
    if (auto g = given(s.launch_option, kLaunchOption, kLaunchEnv, env)) {
        auto l = parse_launch(g->value, g->source);
        if (!l) return l.problem();
        s.choice.launch = *l;
    }
    if (s.explain_option) {
        s.choice.explain = true;
    } else if (auto v = env(kExplainEnv)) {
        auto e = parse_boolean(*v, kExplainEnv);
        if (!e) return Problem{e.problem().what, e.problem().fix + ", or unset " + kExplainEnv};
        s.choice.explain = *e;
    }
    if (auto g = given(s.emulate_option, s.emulate_spelling, kEmulateEnv, env)) {
        auto k = parse_emulate_nodes(g->value, g->source);
        if (!k) return k.problem();
        s.choice.emulate = *k;
        s.emulate_source = g->source;
    }
    auto r = s.preflight_option ? parse_preflight_request(*s.preflight_option, s.preflight_spelling)
                                : requested_preflight(std::nullopt, env);
    if (!r) {
        s.preflight_asked = true;  // asked for, wrongly: never run the program unchecked
        return r.problem();
    }
    s.preflight = *r;
    s.preflight_asked = r->enabled;
    // The watch: the option, else MN_NCCL_WATCH, else the site's default
    // (only where the release can put it in front of the task).
    s.watch = WatchRequest{};
    if (auto g = given(s.watch_option, kWatchOption, kWatchEnv, env)) {
        auto w = parse_watch_request(g->value, g->source);
        if (!w) return w.problem();
        s.watch = *w;
    } else if (MN_HAVE_PREPEND_TASK_ARGV) {
        s.watch = s.site.config.watch;
    }
    return std::nullopt;
}

std::optional<Problem> watch_unavailable(const WatchRequest& r) {
#if MN_HAVE_PREPEND_TASK_ARGV
    (void)r;
    return std::nullopt;
#else
    if (!r.enabled) return std::nullopt;
    return Problem{r.source + " needs Slurm " + kPreflightNeedsSlurm + " or newer (spank_prepend_task_argv); this is "
                       "Slurm " + slurm_release() + ", so the program was not started",
                   "instead, put the watch in front of the program yourself: srun --mn-nccl=auto mn-preflight watch "
                   "-- PROGRAM" + std::string(r.source == kWatchEnv ? " (or unset MN_NCCL_WATCH)" : "")};
#endif
}

Problem watch_needs_mn_nccl(const WatchRequest& r) {
    return Problem{r.source + " needs mn_nccl on (the watch names ranks and nodes by its plan)",
                   "add --mn-nccl=auto (or MN_NCCL=auto)" +
                       std::string(r.source == kWatchEnv ? ", or unset MN_NCCL_WATCH" : "")};
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

int init_plugin(spank_t sp, int ac, char** av, ConfigReport report) {
    PluginState& s = state();
    s.site = parse_site_config(std::vector<std::string>(av, av + ac));
    report_warnings(s.site, report);
    s.choice.mode = s.site.config.default_mode;
    return register_options(sp);
}

void report_site_config(int ac, char** av) {
    report_warnings(parse_site_config(std::vector<std::string>(av, av + ac)), ConfigReport::Log);
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
