// SPDX-License-Identifier: Apache-2.0
#include "lib/check/preflight_request.h"

#include <algorithm>

#include "lib/check/check_options.h"
#include "lib/util/boolean.h"
#include "lib/util/text.h"

namespace mn {

std::optional<bool> preflight_switch(const std::string& value) {
    if (value.empty()) return true;  // the bare option
    return boolean_word(value);
}

Outcome<PreflightRequest> parse_preflight_request(const std::string& options, const std::string& source) {
    PreflightRequest r;
    r.source = source;
    if (auto on = preflight_switch(options)) {
        r.enabled = *on;
        return r;
    }
    r.enabled = true;
    CheckSettings s;
    for (const std::string& item : split_list(options)) {
        const std::size_t eq = item.find('=');
        const bool has_value = eq != std::string::npos;
        const std::string val = has_value ? item.substr(eq + 1) : "";
        const CheckOption* o = find_check_option(lower(item.substr(0, eq)), kInline);
        if (!o || has_value != (o->kind != ValueKind::Flag))
            return Problem{source + ": unknown option '" + item + "'",
                           "known: " + inline_options_list() + "; or the whole value 1 (on, yes, true) for the " +
                               "defaults, 0 (off, no, false) for no check; e.g. " + source +
                               "=timeout=30,exclude-file=bad-nodes"};
        if (!set_check_option(*o, val, s)) return bad_check_value(*o, Spelling::Inline, val, source);
        if (!(o->places & kCheckArgv)) continue;
        r.check_args.push_back(o->argv());
        if (o->kind != ValueKind::Flag) r.check_args.push_back(o->kind == ValueKind::Mode ? lower(val) : val);
    }
    r.exclude_file = s.exclude_file;
    r.job_comment = s.job_comment;
    return r;
}

Outcome<PreflightRequest> requested_preflight(const std::optional<std::string>& option, const EnvLookup& env) {
    if (option) return parse_preflight_request(*option, kPreflightOption);
    if (auto v = env(kPreflightEnv)) return parse_preflight_request(*v, kPreflightEnv);
    PreflightRequest none;
    return none;
}

std::vector<std::string> preflight_argv(const PreflightRequest& r, const std::string& bin, unsigned port,
                                        const SiteConfig& site, const std::string& container) {
    std::vector<std::string> argv{bin, "check", "--exec", "--port", std::to_string(port)};
    argv.insert(argv.end(), r.check_args.begin(), r.check_args.end());
    // The site's history and metrics directories, unless the user named others.
    auto given = [&](const char* opt) { return std::find(r.check_args.begin(), r.check_args.end(), opt) != r.check_args.end(); };
    if (!site.history_dir.empty() && !given("--history")) argv.insert(argv.end(), {"--history", site.history_dir});
    if (!site.metrics_dir.empty() && !given("--metrics-dir")) argv.insert(argv.end(), {"--metrics-dir", site.metrics_dir});
    if (!r.exclude_file.empty()) argv.insert(argv.end(), {"--exclude-file", r.exclude_file});
    if (r.job_comment) argv.push_back("--job-comment");
    if (!container.empty()) argv.insert(argv.end(), {"--container", container});
    argv.push_back("--");
    return argv;
}

unsigned preflight_port(unsigned master_port, unsigned range_lo, unsigned range_hi) {
    // Half the site's range away from MASTER_PORT: that region belongs to
    // steps of jobs far from this one in id, and never to this step.
    if (range_lo < range_hi && master_port >= range_lo && master_port <= range_hi) {
        const unsigned span = range_hi - range_lo + 1;
        return range_lo + (master_port - range_lo + span / 2) % span;
    }
    return master_port < 65535 ? master_port + 1 : master_port - 1;
}

std::string preflight_alternative() {
    return "in an sbatch script, run the check as its own step first:\n"
           "    srun --mn-nccl=auto mn-preflight || exit 1\n"
           "    srun --mn-nccl=auto python train.py";
}

}  // namespace mn
