// SPDX-License-Identifier: Apache-2.0
// The user's choices (--mn-nccl and friends) and the site's plugstack.conf
// arguments, parsed once into plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

#include "lib/check/watch_request.h"

namespace mn {

// The user's options (srun, sbatch, salloc) and their environment forms:
// one family, --mn-nccl-*, each with an MN_NCCL_* variable; the command
// line wins. The older spellings stay as aliases.
constexpr const char* kModeOption = "--mn-nccl";
constexpr const char* kModeEnv = "MN_NCCL";
constexpr const char* kLaunchOption = "--mn-nccl-launch";
constexpr const char* kLaunchEnv = "MN_NCCL_LAUNCH";
constexpr const char* kExplainOption = "--mn-nccl-explain";
constexpr const char* kExplainEnv = "MN_NCCL_EXPLAIN";
constexpr const char* kEmulateOption = "--mn-nccl-emulate-nodes";
constexpr const char* kEmulateAlias = "--mn-emulate-nodes";
constexpr const char* kEmulateEnv = "MN_NCCL_EMULATE_NODES";

enum class Mode { Off, Auto, Ib, Roce, Socket };
enum class LaunchMode { Detect, Task, Node };

const char* to_string(Mode m);
const char* to_string(LaunchMode m);

// "auto" when the value is empty: `--mn-nccl` alone means auto.
Outcome<Mode> parse_mode(const std::string& value, const std::string& source);
Outcome<LaunchMode> parse_launch(const std::string& value, const std::string& source);
Outcome<unsigned> parse_emulate_nodes(const std::string& value, const std::string& source);

struct PortRange {
    uint16_t lo = 20000;  // below Linux's default ephemeral range 32768-60999
    uint16_t hi = 29999;
    unsigned span() const { return unsigned(hi) - lo + 1; }
};
Outcome<PortRange> parse_port_range(const std::string& value);
// A MASTER_PORT the user set: 1-65535.
Outcome<uint16_t> parse_user_port(const std::string& value);

// plugstack.conf: `required mn_nccl.so default=off port_range=20000-29999 force=no`.
// Keys are written with underscores, as pyxis's are; a dash is accepted
// for one (metrics-dir=, as mn-preflight's --metrics-dir).
struct SiteConfig {
    Mode default_mode = Mode::Off;
    PortRange ports;
    bool force = false;        // overwrite variables the user already set
    std::string sysfs_root;    // fabric discovery reads here instead of /sys
    bool user_sysfs_root = false;  // slurmstepd reads a step's MN_NCCL_SYSFS_ROOT (test rigs)
    std::string preflight;     // mn-preflight for --mn-preflight ("": the installed one)
    std::string history_dir;   // every inline check's --history, unless the user gave one
    std::string metrics_dir;   // and --metrics-dir
    WatchRequest watch;        // every step's --mn-nccl-watch unless the user gave one (off: none)
};

struct ParsedSiteConfig {
    SiteConfig config;
    // One line per bad argument: the argument, why, and the default kept.
    // For the admin (slurmd's and slurmstepd's log), not every user's srun.
    std::vector<std::string> warnings;
};

// Never fails: an admin's typo must not stop jobs or drain nodes. Each bad
// argument is reported and its default is used.
ParsedSiteConfig parse_site_config(const std::vector<std::string>& args);

}  // namespace mn
