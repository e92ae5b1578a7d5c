// SPDX-License-Identifier: Apache-2.0
// mn-preflight's options, written once: each option's name, value kind and
// limits, default, help and the subcommands that read it. mn-preflight's
// argv (--timeout 30, parsed by getopt_long from this table), the plugin's
// srun --mn-preflight=timeout=30 and MN_NCCL_PREFLIGHT, every --help text
// and the man pages' test all read it, so a limit, a name or a mode list
// cannot differ between them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/util/outcome.h"

namespace mn {

// What mn-preflight's check runs with (helper/check.cc).
struct CheckOptions {
    std::string path = "auto";  // auto, gpu, cpu
    double timeout = 60;        // the whole check, seconds
    std::optional<double> min_busbw;
    std::size_t bytes = 0;       // 0: the path's default
    int iters = 0;               // 0: the path's default
    std::size_t pair_bytes = 0;  // 0: the path's default
    bool pairs = true;
    bool json = false;
    Mode mode = Mode::Auto;
    std::string history_dir;  // rank 0 appends each node's verdict line there (lib/check/history)
    std::string metrics_dir;  // and writes each node's metrics file there (lib/check/metrics)
};

// Everything the table's options set: the check's own, and what the
// inline form (mn-preflight check --exec, srun --mn-preflight) does on FAIL.
struct CheckSettings {
    CheckOptions check;
    std::string exclude_file;  // rank 0 writes the nodes to exclude here
    bool job_comment = false;  // and also into the job's comment
    // mn-preflight's own, never in --mn-preflight=OPTIONS:
    bool exec = false;                  // check --exec: the check, then PROGRAM on PASS
    unsigned port = 0;                  // check --exec: the check's rendezvous port (0: MASTER_PORT); watch: rank 0's watch port (0: none)
    std::string container;              // check --exec: where the task runs (the plugin says)
    std::string reason_file;            // prolog: the one-line reason on failure
    std::string sysfs_root;             // discover: DIR/class/... instead of /sys/class/...
    std::string since;                  // history: as given; parse_since reads it against the clock
    unsigned drain_k = 2, drain_n = 3;  // history: K failures in the last N checks
    double watch_window = 30;           // watch: seconds stopped or stuck before a process is named
    bool watch_abort = false;           // watch: then end the step
    std::string watch_dir;              // watch: its reports and the Flight Recorder's dumps ("": the default)
};

enum class ValueKind {
    Flag,    // no value
    Number,  // a decimal number within [lo, hi] (above lo when lo_open)
    Count,   // a whole number within [lo, hi]
    Bytes,   // digits with an optional K, M or G, within [lo, hi] bytes
    Mode,    // a fabric class to expect: auto, ib, roce, socket
    Path,    // any non-empty text
    Since,   // unix seconds or a duration back from now: non-empty here, history reads it (parse_since)
    Ratio,   // K/N with 1 <= K <= N <= hi
};

// Where an option is read: mn-preflight check's argv, only with --exec
// there, --mn-preflight=OPTIONS (MN_NCCL_PREFLIGHT), and the argv of
// mn-preflight's other subcommands.
enum OptionPlace : unsigned {
    kCheckArgv = 1,
    kExecArgv = 2,
    kInline = 4,
    kPrologArgv = 8,
    kDiscoverArgv = 16,
    kHistoryArgv = 32,
    kWatchArgv = 64,
};
constexpr unsigned kAnyArgv = kCheckArgv | kExecArgv | kPrologArgv | kDiscoverArgv | kHistoryArgv | kWatchArgv;

struct CheckOption {
    const char* name;       // "min-busbw": --min-busbw and min-busbw=
    const char* argv_name;  // mn-preflight's spelling where it differs ("job-comment"), else nullptr
    const char* meta;       // "GBPS" in the help; "" for a flag
    ValueKind kind;
    double lo, hi;
    bool lo_open;           // lo itself is refused ("above 0")
    const char* want;       // the limits in words, for errors and help
    const char* example;    // a good value, for the fix
    const char* fallback;   // the default in words; "" for a flag
    const char* help;       // what it does
    unsigned places;

    std::string argv() const { return std::string("--") + (argv_name ? argv_name : name); }
};

// The table, in --help's order. A name may have two rows where its meaning
// or default differs by subcommand (prolog's --timeout, discover's --mode);
// their places never overlap.
const std::vector<CheckOption>& check_option_table();

// The option NAME (its --mn-preflight name, or mn-preflight's spelling
// without "--") that is read in one of `places`; nullptr when none.
const CheckOption* find_check_option(const std::string& name, unsigned places);

// Sets the option from VALUE (ignored for a flag); false when VALUE is not
// of the option's kind or outside its limits.
bool set_check_option(const CheckOption& o, const std::string& value, CheckSettings& into);

// A bad value, in the spelling it came in, naming the option, the value
// and the fix. source: "--mn-preflight" or "MN_NCCL_PREFLIGHT" for the
// inline form; unused for argv.
enum class Spelling { Argv, Inline };
Problem bad_check_value(const CheckOption& o, Spelling s, const std::string& value, const std::string& source = "");

// mn-preflight's argv: when ARGS[i] is "--NAME" of an option read in
// `places`, takes it (and its value, ARGS[i+1]; i moves past it) into
// `into` and gives true; false when ARGS[i] is none of them.
Outcome<bool> take_check_arg(const std::vector<std::string>& args, std::size_t& i, unsigned places,
                             CheckSettings& into);

// For --help, of the options read in any of `places`: "[--cpu] [--gpu]
// [--timeout S] ...", starting at `column` and wrapped to it, and one entry
// per option ("  --timeout S        the whole check's budget ... (seconds,
// from 1 to 600; default 60)"), both within 100 columns.
// `skip`: an option the caller writes itself ("exec" in "check --exec [...]").
std::string check_options_synopsis(unsigned places, std::size_t column, const char* skip = nullptr);
std::string check_options_help(unsigned places);
// For the plugin's help and errors: "timeout=S, min-busbw=GBPS, ..., comment".
std::string inline_options_list();

// ---- mn-preflight's command line -------------------------------------------

enum class Subcommand { None, Check, Prolog, Discover, History, Watch };

struct SubcommandInfo {
    Subcommand sub;
    const char* name;     // "history"
    unsigned places;      // the options it reads
    const char* operand;  // its synopsis' operands ("DIR"), "" for none
    const char* summary;  // one line, for mn-preflight --help
};
const std::vector<SubcommandInfo>& subcommand_table();

// One command line, read. With `error` set, nothing else is to be trusted
// but `sub` (for the message's prefix and its try line).
struct CommandLine {
    Subcommand sub = Subcommand::Check;  // None: mn-preflight --help, --version, or no such subcommand
    bool help = false;                   // SUB --help (or mn-preflight --help)
    bool version = false;                // mn-preflight --version
    CheckSettings settings;
    std::vector<const CheckOption*> given;  // the options read, in order
    std::vector<std::string> operands;      // history's DIR
    std::vector<std::string> program;       // check --exec ... -- PROGRAM [ARGS], watch ... -- PROGRAM [ARGS]
    std::string error;                      // one line: what is wrong, and a guess where there is one

    bool gave(const char* name) const;
};

// Reads mn-preflight's arguments (without argv[0]): an optional subcommand
// (check when none; --prolog is prolog), then its options through
// getopt_long, driven by the table. Options are taken as spelled in full
// ("--timeout 30" or "--timeout=30"), never abbreviated; an unknown one is
// named with the nearest option of that subcommand.
CommandLine parse_command_line(const std::vector<std::string>& args);

// The usage error's two lines: "mn-preflight: SUB: WHAT\ntry 'mn-preflight SUB --help'\n".
std::string usage_error_text(const CommandLine& c);

// The name in `names` nearest to `given` (a typo, or the start of just one
// of them); "" when none is near enough to guess.
std::string nearest_name(const std::string& given, const std::vector<std::string>& names);

}  // namespace mn
