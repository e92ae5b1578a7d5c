// SPDX-License-Identifier: Apache-2.0
// The plugin's option values and plugstack.conf arguments: --mn-nccl and
// MN_NCCL (parse_mode), --mn-nccl-launch, --mn-emulate-nodes, port_range and
// the other plugstack arguments (parse_site_config, watch= included), MASTER_PORT, and the GPU
// lists (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS). Input: lines; the first
// byte of each picks the parser. Every line is also a --mn-preflight value
// (MN_NCCL_PREFLIGHT) and, split at spaces, mn-preflight check's argv: both
// read the check's option table, and must agree.
#include <algorithm>
#include <cctype>

#include "tests/fuzz/fuzz.h"
#include "lib/check/check_options.h"
#include "lib/check/preflight_request.h"
#include "lib/check/watch_request.h"
#include "lib/plan/config.h"
#include "lib/plan/step_layout.h"
#include "lib/plan/step_plan.h"
#include "lib/util/boolean.h"
#include "lib/util/text.h"

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool plain_uint(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The number a digit string stands for, leading zeros dropped.
std::string canonical_uint(const std::string& s) {
    std::size_t k = s.find_first_not_of('0');
    return k == std::string::npos ? "0" : s.substr(k);
}

void one_value(char which, const std::string& v) {
    switch (which % 6) {
        case 0: {  // --mn-nccl=V, MN_NCCL=V
            auto m = mn::parse_mode(v, "MN_NCCL");
            if (m) FUZZ_CHECK(v.empty() ? *m == mn::Mode::Auto : lower(v) == mn::to_string(*m), "'%s'", v.c_str());
            else FUZZ_CHECK(m.problem().what.find("MN_NCCL='" + v + "'") == 0, "%s", m.problem().what.c_str());
            break;
        }
        case 1: {  // --mn-nccl-launch=V
            auto l = mn::parse_launch(v, "--mn-nccl-launch");
            if (l) FUZZ_CHECK(lower(v) == mn::to_string(*l), "'%s'", v.c_str());
            break;
        }
        case 2: {  // --mn-emulate-nodes=V
            auto k = mn::parse_emulate_nodes(v, "--mn-emulate-nodes");
            if (k) FUZZ_CHECK(plain_uint(v) && *k >= 1 && *k <= 4096 && std::to_string(*k) == canonical_uint(v),
                              "'%s' -> %u", v.c_str(), *k);
            break;
        }
        case 3: {  // MASTER_PORT=V
            auto p = mn::parse_user_port(v);
            if (p) FUZZ_CHECK(plain_uint(v) && *p >= 1 && std::to_string(*p) == canonical_uint(v), "'%s'", v.c_str());
            break;
        }
        case 4: {  // port_range=V
            auto r = mn::parse_port_range(v);
            if (r) {
                FUZZ_CHECK(r->lo >= 1024 && r->lo <= r->hi, "'%s' -> %u-%u", v.c_str(), r->lo, r->hi);
                FUZZ_CHECK(canonical_uint(v.substr(0, v.find('-'))) + "-" + canonical_uint(v.substr(v.find('-') + 1)) ==
                               std::to_string(r->lo) + "-" + std::to_string(r->hi),
                           "'%s' -> %u-%u", v.c_str(), r->lo, r->hi);
                // Every job and step gets a port inside the range.
                for (uint32_t job : {0u, 1u, 4242u, 0xffffffffu}) {
                    const uint16_t port = mn::derive_port(*r, job, job ^ 0x5a5a);
                    FUZZ_CHECK(port >= r->lo && port <= r->hi, "port %u outside %u-%u", port, r->lo, r->hi);
                }
            }
            break;
        }
        case 5: {  // CUDA_VISIBLE_DEVICES=V, and as SLURM_STEP_GPUS
            const auto list = mn::split_gpu_list(v);
            for (const auto& g : list) FUZZ_CHECK(!g.empty() && g.find(',') == std::string::npos, "'%s'", v.c_str());
            const uint32_t n = mn::count_gpus("", v, "");
            // Slurm writes these lists without empty fields; then the count
            // and the list agree, as emulation's GPU shares need.
            if (v.find(",,") == std::string::npos && (v.empty() || (v.front() != ',' && v.back() != ',')))
                FUZZ_CHECK(n == list.size(), "'%s': %u GPUs counted, %zu listed", v.c_str(), n, list.size());
            FUZZ_CHECK(mn::count_gpus(v, "7", "9") == (v.empty() ? 1u : n + (v == "NoDevFiles")),
                       "SLURM_STEP_GPUS='%s' not preferred", v.c_str());
            break;
        }
    }
}

// Whatever the table let through is inside its limits.
void within_limits(const mn::CheckSettings& s, const std::string& v) {
    const mn::CheckOptions& o = s.check;
    FUZZ_CHECK(o.timeout >= 1 && o.timeout <= 600, "'%s': timeout %g", v.c_str(), o.timeout);
    FUZZ_CHECK(!o.min_busbw || (*o.min_busbw > 0 && *o.min_busbw <= 1e6), "'%s': min-busbw", v.c_str());
    FUZZ_CHECK(o.bytes == 0 || (o.bytes >= 4096 && o.bytes <= (std::size_t(8) << 30) && o.bytes % 4 == 0),
               "'%s': size %zu", v.c_str(), o.bytes);
    FUZZ_CHECK(o.iters >= 0 && o.iters <= 10000, "'%s': iters %d", v.c_str(), o.iters);
    FUZZ_CHECK(o.mode != mn::Mode::Off && (o.path == "auto" || o.path == "cpu" || o.path == "gpu"), "'%s'",
               v.c_str());
}

// mn-preflight's argv, from the arguments it is given.
mn::Outcome<mn::CheckSettings> check_argv(const std::vector<std::string>& args) {
    mn::CheckSettings s;
    for (std::size_t i = 0; i < args.size(); ++i) {
        auto taken = mn::take_check_arg(args, i, mn::kCheckArgv | mn::kExecArgv, s);
        if (!taken) return taken.problem();
        if (!*taken) return mn::Problem{"unknown argument '" + args[i] + "'", ""};
    }
    return s;
}

// --mn-preflight=V: what srun accepts, mn-preflight takes back as the same
// settings; what it refuses is named with its source.
void preflight_value(const std::string& v) {
    auto r = mn::parse_preflight_request(v, mn::kPreflightEnv);
    if (!r) {
        FUZZ_CHECK(r.problem().what.find("MN_NCCL_PREFLIGHT: ") == 0, "%s", r.problem().what.c_str());
        return;
    }
    const auto sw = mn::preflight_switch(v);
    FUZZ_CHECK(sw ? r->enabled == *sw && r->check_args.empty() : r->enabled, "'%s'", v.c_str());
    auto back = check_argv(r->check_args);
    FUZZ_CHECK(back.ok(), "'%s': mn-preflight refuses what srun took: %s", v.c_str(), back.problem().text().c_str());
    within_limits(*back, v);
    const auto args = mn::preflight_argv(*r, "mn-preflight", 1);
    FUZZ_CHECK(args.back() == "--" && args.size() >= 6 + r->check_args.size(), "'%s'", v.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 2048) return 0;
    auto lines = fuzz::fields(data, size, '\n', 32);
    // Every line also goes to the plugstack.conf parser as one argument.
    std::vector<std::string> args;
    for (const auto& l : lines) {
        if (l.empty()) continue;
        one_value(l[0], l.substr(1));
        args.push_back(l.substr(1));
        preflight_value(l);
        if (auto argv = check_argv(mn::split_list(l, ' '))) within_limits(*argv, l);
    }
    const mn::ParsedSiteConfig parsed = mn::parse_site_config(args);
    FUZZ_CHECK(parsed.warnings.size() <= args.size(), "%zu warnings for %zu arguments", parsed.warnings.size(),
               args.size());
    // Each argument either is taken (the last one of a key wins) or warned
    // about; nothing else is in the config.
    mn::SiteConfig want;
    std::size_t bad = 0;
    for (const auto& a : args) {
        const std::size_t eq = a.find('=');
        std::string key = a.substr(0, eq);
        const std::string val = eq == std::string::npos ? "" : a.substr(eq + 1);
        // metrics-dir= is metrics_dir= (one spelling per key).
        std::replace(key.begin(), key.end(), '-', '_');
        bool ok = false;
        if (eq != std::string::npos && key == "default") {
            auto m = mn::parse_mode(val, "default");
            if ((ok = m && !val.empty())) want.default_mode = *m;
        } else if (eq != std::string::npos && key == "port_range") {
            auto r = mn::parse_port_range(val);
            if ((ok = r.ok())) want.ports = *r;
        } else if (eq != std::string::npos && key == "force") {
            // Slurm's spellings of a boolean (test_boolean pins them down).
            const auto f = mn::parse_boolean(val, "force");
            if ((ok = f.ok())) want.force = *f;
        } else if (eq != std::string::npos && key == "user_sysfs_root") {
            const auto f = mn::parse_boolean(val, "user_sysfs_root");
            if ((ok = f.ok())) want.user_sysfs_root = *f;
        } else if (eq != std::string::npos && key == "sysfs_root") {
            if ((ok = !val.empty() && val[0] == '/')) want.sysfs_root = val;
        } else if (eq != std::string::npos && key == "preflight") {
            if ((ok = !val.empty() && val[0] == '/')) want.preflight = val;
        } else if (eq != std::string::npos && key == "history") {
            if ((ok = !val.empty() && val[0] == '/')) want.history_dir = val;
        } else if (eq != std::string::npos && key == "metrics_dir") {
            if ((ok = !val.empty() && val[0] == '/')) want.metrics_dir = val;
        } else if (eq != std::string::npos && key == "watch") {
            auto w = mn::parse_watch_request(val, "watch");
            if ((ok = w.ok())) want.watch = *w;
        }
        bad += !ok;
    }
    FUZZ_CHECK(parsed.warnings.size() == bad, "%zu warnings, %zu bad arguments", parsed.warnings.size(), bad);
    for (const auto& w : parsed.warnings) FUZZ_CHECK(w.find("plugstack.conf: ") == 0, "warning '%s'", w.c_str());
    const mn::SiteConfig& got = parsed.config;
    FUZZ_CHECK(got.default_mode == want.default_mode && got.ports.lo == want.ports.lo && got.ports.hi == want.ports.hi &&
                   got.force == want.force && got.sysfs_root == want.sysfs_root &&
                   got.user_sysfs_root == want.user_sysfs_root &&
                   got.preflight == want.preflight && got.history_dir == want.history_dir &&
                   got.metrics_dir == want.metrics_dir && got.watch.enabled == want.watch.enabled &&
                   got.watch.abort == want.watch.abort && got.watch.window == want.watch.window &&
                   (!got.watch.enabled || got.watch.source == mn::kWatchSiteSource),
               "the config differs from the arguments taken");
    return 0;
}
