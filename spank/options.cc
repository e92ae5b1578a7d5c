// The option table. Callbacks run in srun at parse time (remote == 0), where
// a bad value must fail srun before launch, and again in slurmstepd
// (remote == 1, possibly twice), where failing would silently run no task.
#include <string>
#include <vector>

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

int on_option(int id, const char* optarg, int remote) {
    try {
        const std::string value = optarg ? optarg : "";
        PluginState& s = state();
        switch (id) {
            case kMode: {
                auto m = parse_mode(value, "--mn-nccl");
                if (!m) return refuse(remote, m.problem());
                s.choice.mode = *m;
                s.mode_given = true;
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
            case kPreflight: {
                auto r = parse_preflight_request(value, "--mn-preflight");
                if (!r) return refuse(remote, r.problem());
                s.preflight = *r;
                s.preflight_given = true;
                return 0;
            }
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
                       "(PET_* set). Default: node when every node runs one task."),
     1, kLaunch, on_option},
    {const_cast<char*>("mn-nccl-explain"), nullptr,
     const_cast<char*>("Each node prints one line with the values mn_nccl chose and why."), 0, kExplain,
     on_option},
    {const_cast<char*>("mn-emulate-nodes"), const_cast<char*>("K"),
     const_cast<char*>("Split each node into K emulated nodes (tasks, GPUs, NCCL_HOSTID), to test multi-node "
                       "code on one node."),
     1, kEmulate, on_option},
    {const_cast<char*>("mn-preflight"), const_cast<char*>("[OPTIONS]"),
     const_cast<char*>("Each task first runs mn-preflight's check (same ranks, GPUs and network); the program "
                       "starts only on PASS. OPTIONS: timeout=S,min-busbw=GBPS,size=B,iters=N,no-pairs,cpu,gpu,"
                       "mode=M,json,exclude-file=PATH,comment. Needs Slurm 24.11. Env form: MN_NCCL_PREFLIGHT."),
     2, kPreflight, on_option},
};

}  // namespace

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
        if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
            slurm_error("%s", message("could not register option --" + std::string(opt.name) +
                                      "; another plugin may use the same name")
                                  .c_str());
        }
    }
    return 0;
}

}  // namespace mn::spank
