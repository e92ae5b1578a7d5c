// SPDX-License-Identifier: Apache-2.0
// --mn-nccl-watch[=WHAT] (MN_NCCL_WATCH=WHAT, plugstack watch=WHAT): the
// hang watch a step asks for, and the words the plugin puts in front of
// each task (mn-preflight watch ... --). No SPANK here: the plugin and the
// tests share it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

constexpr const char* kWatchOption = "--mn-nccl-watch";
constexpr const char* kWatchEnv = "MN_NCCL_WATCH";
constexpr const char* kWatchSiteSource = "plugstack.conf watch=";  // a site's default

struct WatchRequest {
    bool enabled = false;
    bool abort = false;         // end the step once a rank is named
    std::optional<double> window;  // seconds; mn-preflight watch's default when unset
    std::string exclude_file;   // a node named for its link is added there
    std::string history_dir;    // and gets a history line there
    std::string source;         // the option's spelling, the variable or "plugstack.conf watch="
};

// WHAT: a comma list of report (or 1, yes, true, on: watch and say), abort
// (say, then end the step), off (or 0, no, false), window=S (5 to 3600),
// exclude-file=PATH, history=DIR (as typed: a path keeps its case).
// Empty: report. `source` names it in messages.
Outcome<WatchRequest> parse_watch_request(const std::string& what, const std::string& source);

// What runs in front of the task: BIN watch [--abort] [--window S]
// [--exclude-file PATH] [--history DIR] --.
std::vector<std::string> watch_argv(const WatchRequest& r, const std::string& bin);

}  // namespace mn
