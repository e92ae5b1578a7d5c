// SPDX-License-Identifier: Apache-2.0
#include "lib/check/check_options.h"

#include <getopt.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lib/util/text.h"

namespace mn {
namespace {

constexpr unsigned kBoth = kCheckArgv | kInline;
constexpr unsigned kNode = kBoth | kPrologArgv;  // also the prolog's, for this node
constexpr unsigned kOnFail = kExecArgv | kInline;
constexpr double kGiB = 1024.0 * 1024 * 1024;

const std::vector<CheckOption> kTable = {
    {"cpu", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "",
     "the CPU path: an all-reduce over TCP on the socket interface, each node's ranks at its leader and the "
     "leaders in a ring (default: the GPU path when every rank has CUDA, NCCL and a GPU)",
     kBoth},
    {"gpu", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "",
     "the GPU path (NCCL); a rank without CUDA, NCCL or a GPU fails", kBoth},
    {"timeout", nullptr, "S", ValueKind::Number, 1, 600, false, "seconds, from 1 to 600", "30", "60",
     "the whole check's budget; it never hangs past it", kBoth},
    {"timeout", nullptr, "S", ValueKind::Number, 1, 600, false, "seconds, from 1 to 600", "30", "10",
     "this node's check's budget; it never hangs past it", kPrologArgv},
    {"min-busbw", nullptr, "GBPS", ValueKind::Number, 0, 1e6, true, "a bandwidth in GB/s above 0", "300", "none",
     "fail below this all-reduce busbw; name nodes whose pairs run below it", kBoth},
    {"size", nullptr, "BYTES", ValueKind::Bytes, 4096, 8 * kGiB, false, "4K to 8G", "64M", "1G on GPUs; on CPUs 4M / tasks per node, 256K at least",
     "the all-reduce's size, with a K, M or G suffix", kBoth},
    {"iters", nullptr, "N", ValueKind::Count, 1, 10000, false, "a whole number from 1 to 10000", "20",
     "20 on GPUs, 5 on CPUs", "timed iterations", kBoth},
    {"no-pairs", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "", "skip the pair tests", kBoth},
    {"mode", nullptr, "MODE", ValueKind::Mode, 0, 0, false, "auto, ib, roce or socket", "ib", "auto",
     "the fabric class the check expects", kNode},
    {"mode", nullptr, "MODE", ValueKind::Mode, 0, 0, false, "auto, ib, roce or socket", "ib", "auto",
     "the fabric class to choose, as srun --mn-nccl=MODE would", kDiscoverArgv},
    {"json", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "", "one JSON object instead of the table",
     kNode | kDiscoverArgv | kHistoryArgv},
    // mn-preflight's own from here on (not inline) but for exclude-file, history, metrics-dir, comment.
    {"exec", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "",
     "run the check, then PROGRAM (after --) in the same process on PASS: what srun --mn-preflight puts in "
     "front of each task", kExecArgv},
    {"port", nullptr, "P", ValueKind::Count, 1, 65535, false, "a port from 1 to 65535", "29501", "MASTER_PORT",
     "the check's own rendezvous port", kExecArgv},
    {"exclude-file", nullptr, "PATH", ValueKind::Path, 0, 0, false, "a file the batch script can read",
     "bad-nodes", "none",
     "where the nodes to exclude go, in Slurm's hostlist form: on FAIL rank 0 writes them; the watch adds a "
     "node its host's own evidence blames (a link or RDMA port down or garbled, a GPU stuck or a process dead where the "
     "GPU reported a hardware Xid)", kOnFail | kWatchArgv},
    {"history", nullptr, "DIR", ValueKind::Path, 0, 0, false, "a directory (shared, to see every node)", "/var/lib/mn-preflight/history",
     "none", "append one JSON line per node (job, verdict, findings, busbw) to DIR/NODE.jsonl; "
     "'mn-preflight history DIR' sums them up; the watch: a line for a node it adds to the exclude file",
     kNode | kWatchArgv},
    {"metrics-dir", nullptr, "DIR", ValueKind::Path, 0, 0, false, "a directory, e.g. node_exporter's textfile directory",
     "/var/lib/prometheus/node-exporter", "none",
     "write each node's mn_preflight_* gauges to DIR/mn_preflight_NODE.prom (atomically)", kNode},
    {"comment", "job-comment", "", ValueKind::Flag, 0, 0, false, "", "", "",
     "on FAIL, also put the nodes to exclude into the job's comment (scontrol update)", kOnFail},
    {"container", nullptr, "WHAT", ValueKind::Path, 0, 0, false, "what runs the task, as the plugin names it",
     "'pyxis --container-image=IMG'", "none",
     "the task runs in a container (the plugin says which, for pyxis): the exclude file's directory and "
     "scontrol (--job-comment) must be there, or the step stops before the check; a history or metrics "
     "directory that is not there is left out, with a note", kExecArgv},
    {"window", nullptr, "S", ValueKind::Number, 5, 3600, false, "seconds, from 5 to 3600", "30", "30",
     "how long a process of the task may stay stopped or stuck in the kernel, or a link not carry its data, "
     "before it is named", kWatchArgv},
    {"port", nullptr, "P", ValueKind::Count, 1, 65535, false, "a port from 1 to 65535", "24107", "MN_NCCL_WATCH_PORT",
     "where rank 0's watch takes the other nodes' findings, for one block per step (the plugin sets "
     "MN_NCCL_WATCH_PORT for every step); with neither, each node's watch says its own", kWatchArgv},
    {"abort", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "",
     "once a rank is named (or its program died), end the step (scancel), so that a retry loop goes on "
     "without the node", kWatchArgv},
    {"report-dir", nullptr, "DIR", ValueKind::Path, 0, 0, false, "a directory of the user's own", "/tmp/watch",
     "$TMPDIR/mn-nccl-watch.JOB.STEP (mode 0700)",
     "where each named rank's JSON report and the Flight Recorder's dumps go; made mode 0700, refused when "
     "another user owns it or can write to it", kWatchArgv},
    {"reason-file", nullptr, "PATH", ValueKind::Path, 0, 0, false, "a file", "/run/mn-preflight.reason", "none",
     "on failure also write the one-line reason there (for a drain reason); never through a link", kPrologArgv},
    {"sysfs-root", nullptr, "DIR", ValueKind::Path, 0, 0, false, "a directory laid out as /sys",
     "tests/fixtures/sysfs/ib", "/sys, or MN_NCCL_SYSFS_ROOT",
     "read DIR/class/... instead of /sys/class/...", kDiscoverArgv},
    {"since", nullptr, "T", ValueKind::Since, 0, 0, false, "unix seconds, or back from now: 7d, 24h, 30m, 90s, 2w, 1d12h",
     "7d", "all", "only the verdicts from T on", kHistoryArgv},
    {"drain", nullptr, "K/N", ValueKind::Ratio, 1, 1000, false, "K/N with 1 <= K <= N <= 1000", "2/3", "2/3",
     "drain candidates: nodes with K failures in their last N checks", kHistoryArgv},
};

bool digits(const std::string& v, std::size_t from, std::size_t to) {
    if (from >= to) return false;
    for (std::size_t i = from; i < to; ++i)
        if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
    return true;
}

// A plain decimal: no sign, space, inf or nan.
std::optional<double> number(const std::string& v) {
    if (v.empty() || v.size() > 24 || !(std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '.'))
        return std::nullopt;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (*end != '\0' || !std::isfinite(d)) return std::nullopt;
    return d;
}

// "64M" -> 67108864; digits and an optional K, M or G.
std::optional<double> bytes(const std::string& v) {
    std::size_t i = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    if (i == 0 || i > 12) return std::nullopt;
    double n = std::strtod(v.substr(0, i).c_str(), nullptr);
    const std::string unit = lower(v.substr(i));
    if (unit == "k") n *= 1024;
    else if (unit == "m") n *= 1024 * 1024;
    else if (unit == "g") n *= kGiB;
    else if (!unit.empty()) return std::nullopt;
    return n;
}

bool within(const CheckOption& o, double x) { return (o.lo_open ? x > o.lo : x >= o.lo) && x <= o.hi; }

void set_flag(const CheckOption& o, CheckSettings& into) {
    const std::string n = o.name;
    if (n == "cpu" || n == "gpu") into.check.path = n;
    else if (n == "no-pairs") into.check.pairs = false;
    else if (n == "json") into.check.json = true;
    else if (n == "comment") into.job_comment = true;
    else if (n == "exec") into.exec = true;
    else if (n == "abort") into.watch_abort = true;
}

void set_number(const CheckOption& o, double x, CheckSettings& into) {
    const std::string n = o.name;
    if (n == "timeout") into.check.timeout = x;
    else if (n == "min-busbw") into.check.min_busbw = x;
    else if (n == "iters") into.check.iters = static_cast<int>(x);
    else if (n == "port") into.port = static_cast<unsigned>(x);
    else if (n == "window") into.watch_window = x;
    // Whole floats: the all-reduce's elements are 4 bytes.
    else if (n == "size") into.check.bytes = static_cast<std::size_t>(x) / 4 * 4;
}

std::string meta_of(const CheckOption& o) { return o.kind == ValueKind::Flag ? "" : o.meta; }

// Words of TEXT from column `col` on, new lines indented to `indent`, none
// past kWidth unless a word is longer.
constexpr std::size_t kWidth = 100;
std::string wrap(const std::string& text, std::size_t col, std::size_t indent) {
    std::string out;
    for (const std::string& w : split_list(text, ' ')) {
        if (col + 1 + w.size() > kWidth && col > indent) {
            out += "\n" + std::string(indent, ' ');
            col = indent;
        } else if (!out.empty()) {
            out += ' ';
            ++col;
        }
        out += w;
        col += w.size();
    }
    return out;
}

}  // namespace

const std::vector<CheckOption>& check_option_table() { return kTable; }

const CheckOption* find_check_option(const std::string& name, unsigned places) {
    for (const CheckOption& o : kTable) {
        if (!(o.places & places)) continue;
        const bool inline_name = (places & kInline) && (o.places & kInline) && name == o.name;
        const bool argv_name = (places & kAnyArgv) && (o.places & kAnyArgv) && "--" + name == o.argv();
        if (inline_name || argv_name) return &o;
    }
    return nullptr;
}

bool set_check_option(const CheckOption& o, const std::string& value, CheckSettings& into) {
    switch (o.kind) {
        case ValueKind::Flag:
            set_flag(o, into);
            return true;
        case ValueKind::Number:
        case ValueKind::Count:
        case ValueKind::Bytes: {
            std::optional<double> x;
            if (o.kind == ValueKind::Number) x = number(value);
            else if (o.kind == ValueKind::Bytes) x = bytes(value);
            else if (digits(value, 0, value.size()) && value.size() <= 9) x = std::strtod(value.c_str(), nullptr);
            if (!x || !within(o, *x)) return false;
            set_number(o, *x, into);
            return true;
        }
        case ValueKind::Mode: {
            auto m = parse_mode(value, o.name);
            if (value.empty() || !m || *m == Mode::Off) return false;
            into.check.mode = *m;
            return true;
        }
        case ValueKind::Path: {
            if (value.empty()) return false;
            const std::string n = o.name;
            if (n == "history") into.check.history_dir = value;
            else if (n == "metrics-dir") into.check.metrics_dir = value;
            else if (n == "container") into.container = value;
            else if (n == "reason-file") into.reason_file = value;
            else if (n == "sysfs-root") into.sysfs_root = value;
            else if (n == "report-dir") into.watch_dir = value;
            else into.exclude_file = value;
            return true;
        }
        case ValueKind::Since:
            // Read against the clock by history itself (lib/check/history's
            // parse_since, in a library the plugin does not link).
            if (value.empty()) return false;
            into.since = value;
            return true;
        case ValueKind::Ratio: {
            const std::size_t slash = value.find('/');
            if (slash == std::string::npos || slash > 4 || value.size() - slash - 1 > 4 || !digits(value, 0, slash) ||
                !digits(value, slash + 1, value.size()))
                return false;
            const unsigned k = static_cast<unsigned>(std::stoul(value.substr(0, slash)));
            const unsigned n = static_cast<unsigned>(std::stoul(value.substr(slash + 1)));
            if (k < o.lo || n < k || n > o.hi) return false;
            into.drain_k = k;
            into.drain_n = n;
            return true;
        }
    }
    return false;
}

Problem bad_check_value(const CheckOption& o, Spelling s, const std::string& value, const std::string& source) {
    // A mode reads as --mn-nccl's own (parse_mode): "--mode='fast' is not a valid mode".
    if (s == Spelling::Argv && o.kind == ValueKind::Mode)
        return Problem{o.argv() + "='" + value + "' is not a valid mode",
                       std::string("use one of ") + o.want + ", e.g. " + o.argv() + " " + o.example};
    if (s == Spelling::Argv)
        return Problem{o.argv() + " needs " + o.want + ", e.g. " + o.argv() + " " + o.example + " (got '" + value + "')",
                       ""};
    return Problem{source + ": '" + std::string(o.name) + "=" + value + "' is not valid",
                   "give " + std::string(o.name) + "=" + o.meta + ": " + o.want + ", e.g. " + o.name + "=" + o.example};
}

Outcome<bool> take_check_arg(const std::vector<std::string>& args, std::size_t& i, unsigned places,
                             CheckSettings& into) {
    const std::string& a = args[i];
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) return false;
    const CheckOption* o = find_check_option(a.substr(2), places & ~kInline);
    if (!o) return false;
    std::string value;
    if (o->kind != ValueKind::Flag) {
        if (i + 1 >= args.size()) return Problem{a + " needs a value: " + o->want + ", e.g. " + a + " " + o->example, ""};
        value = args[++i];
    }
    if (!set_check_option(*o, value, into)) return bad_check_value(*o, Spelling::Argv, value);
    return true;
}

std::string check_options_synopsis(unsigned places, std::size_t column, const char* skip) {
    std::string out;
    for (const CheckOption& o : kTable) {
        if (!(o.places & places) || (skip && std::string(skip) == o.name)) continue;
        const std::string m = meta_of(o);
        // A non-breaking join inside one option: "[--timeout S]" stays whole.
        out += (out.empty() ? "[" : " [") + o.argv() + (m.empty() ? "" : "\x01" + m) + "]";
    }
    out = wrap(out, column, column);
    for (char& c : out)
        if (c == '\x01') c = ' ';
    return out;
}

std::string check_options_help(unsigned places) {
    std::string out;
    for (const CheckOption& o : kTable) {
        if (!(o.places & places)) continue;
        const std::string m = meta_of(o);
        const std::string name = o.argv() + (m.empty() ? "" : " " + m);
        // A name too long for its column gets a line of its own.
        const std::string head = name.size() < 18 ? "  " + pad(name, 18) : "  " + name + "\n" + std::string(21, ' ');
        std::string text = o.help;
        if (o.kind != ValueKind::Flag) text += std::string(" (") + o.want + "; default " + o.fallback + ")";
        out += head + wrap(text, name.size() < 18 ? head.size() : 21, 21) + "\n";
    }
    return out;
}

std::string inline_options_list() {
    std::string out;
    for (const CheckOption& o : kTable) {
        if (!(o.places & kInline)) continue;
        const std::string m = meta_of(o);
        out += (out.empty() ? "" : ", ") + std::string(o.name) + (m.empty() ? "" : "=" + m);
    }
    return out;
}

// ---- mn-preflight's command line -------------------------------------------

namespace {

const std::vector<SubcommandInfo> kSubcommands = {
    {Subcommand::Check, "check", kCheckArgv | kExecArgv, "",
     "the default: every task of the step a rank, checked together (srun --mn-nccl=auto mn-preflight)"},
    {Subcommand::Prolog, "prolog", kPrologArgv, "", "this node alone, for a Slurm prolog (--prolog is the same)"},
    {Subcommand::Discover, "discover", kDiscoverArgv, "",
     "this node's RDMA ports, GPU to HCA locality, what mn_nccl would choose and why"},
    {Subcommand::History, "history", kHistoryArgv, "DIR",
     "the verdicts --history wrote to DIR, per node, and the nodes to drain"},
    {Subcommand::Watch, "watch", kWatchArgv, "-- PROGRAM [ARGS]",
     "run PROGRAM and watch it from outside: a rank stopped, stuck or dead is named (srun --mn-nccl-watch)"},
};

const SubcommandInfo* subcommand_named(const std::string& name) {
    for (const SubcommandInfo& s : kSubcommands)
        if (name == s.name) return &s;
    return nullptr;
}

// Edits from A to B: insertions, deletions, substitutions, and a swap of
// two neighbours ("jsno") as one, as typing goes wrong.
std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
        for (std::size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// "--timeout=30" -> "timeout"; "-x" -> "x".
std::string option_name(const std::string& element) {
    const std::size_t from = element.compare(0, 2, "--") == 0 ? 2 : element.compare(0, 1, "-") == 0 ? 1 : 0;
    return element.substr(from, element.find('=') == std::string::npos ? std::string::npos : element.find('=') - from);
}

// What is wrong with ELEMENT, an option SUB does not read: a guess among
// SUB's options, or where the option belongs.
std::string unknown_option(const std::string& element, const SubcommandInfo& sub) {
    const std::string name = option_name(element);
    if (const SubcommandInfo* other = subcommand_named(name))
        return "'" + element + "' is a subcommand and goes first: mn-preflight " + other->name + " [OPTIONS]";
    std::vector<std::string> own{"help"};
    for (const CheckOption& o : kTable)
        if (o.places & sub.places) own.push_back(o.argv().substr(2));
    if (element.compare(0, 2, "--") == 0 && std::find(own.begin(), own.end(), name) == own.end()) {
        std::string elsewhere;
        for (const SubcommandInfo& s : kSubcommands)
            if (s.sub != sub.sub && find_check_option(name, s.places))
                elsewhere += (elsewhere.empty() ? "" : " and ") + std::string(s.name);
        if (!elsewhere.empty()) return "--" + name + " is an option of " + elsewhere + ", not of " + sub.name;
    }
    const std::string guess = nearest_name(name, own);
    return "unknown option '" + element + "'" + (guess.empty() ? "" : "; did you mean --" + guess + "?");
}

// getopt_long's long options for SUB, from the table: val is 256 + the
// row's index; 'h' for --help.
std::vector<option> long_options(const SubcommandInfo& sub) {
    std::vector<option> out;
    for (std::size_t i = 0; i < kTable.size(); ++i) {
        const CheckOption& o = kTable[i];
        if (!(o.places & sub.places)) continue;
        out.push_back({o.argv_name ? o.argv_name : o.name, o.kind == ValueKind::Flag ? no_argument : required_argument,
                       nullptr, 256 + static_cast<int>(i)});
    }
    out.push_back({"help", no_argument, nullptr, 'h'});
    out.push_back({nullptr, 0, nullptr, 0});
    return out;
}

// The options of SUB in ARGS, through getopt_long. Everything is read in
// order ("-" first in the option string): no permutation, whatever
// POSIXLY_CORRECT says, and the element each result came from is known.
void read_options(const SubcommandInfo& sub, const std::vector<std::string>& args, CommandLine& c) {
    std::vector<std::string> words{std::string("mn-preflight ") + sub.name};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    const int argc = static_cast<int>(words.size());
    const std::vector<option> longs = long_options(sub);
    opterr = 0;
    optind = 0;  // glibc: start afresh, for every call
    for (int at = 1;; at = optind) {
        int index = -1;
        const int got = getopt_long(argc, argv.data(), "-:h", longs.data(), &index);
        if (got == -1) break;
        // In order, so the element is argv[at] (a short option's cluster starts there too).
        const std::string element = at < argc ? words[static_cast<std::size_t>(at)] : "";
        if (got == 1) {
            c.operands.push_back(optarg);
            continue;
        }
        if (got == 'h') {
            c.help = true;
            return;
        }
        if (got == '?') {
            const std::string name = option_name(element);
            const CheckOption* o = element.find('=') != std::string::npos ? find_check_option(name, sub.places) : nullptr;
            c.error = o && o->kind == ValueKind::Flag ? o->argv() + " takes no value (got '" + element + "')"
                                                       : unknown_option(element, sub);
            return;
        }
        const CheckOption& o = kTable[static_cast<std::size_t>((got == ':' ? optopt : got) - 256)];
        // getopt_long takes "--time" for --timeout; mn-preflight wants the whole name.
        if (option_name(element) != o.argv().substr(2)) {
            c.error = unknown_option(element, sub);
            return;
        }
        if (got == ':') {
            c.error = o.argv() + " needs a value: " + o.want + ", e.g. " + o.argv() + " " + o.example;
            return;
        }
        const std::string value = o.kind == ValueKind::Flag ? "" : optarg;
        if (!set_check_option(o, value, c.settings)) {
            c.error = bad_check_value(o, Spelling::Argv, value).text();
            return;
        }
        c.given.push_back(&o);
    }
    // What follows "--" (getopt_long stops past it).
    c.program.assign(words.begin() + optind, words.end());
}

// Beyond each option's own value: what goes together.
void check_together(const SubcommandInfo& sub, CommandLine& c) {
    if (sub.sub == Subcommand::Check) {
        if (!c.operands.empty()) {
            c.error = "unexpected argument '" + c.operands[0] + "'; a program to run goes after --exec [OPTIONS] --";
            return;
        }
        if (c.settings.exec) {
            if (c.program.empty()) c.error = "--exec needs a program after --";
            return;
        }
        for (const CheckOption* o : c.given)
            if (!(o->places & kCheckArgv)) {
                c.error = o->argv() + " goes with --exec: mn-preflight check --exec [OPTIONS] -- PROGRAM";
                return;
            }
        if (!c.program.empty()) c.error = "-- PROGRAM goes with --exec: mn-preflight check --exec [OPTIONS] -- PROGRAM";
        return;
    }
    if (sub.sub == Subcommand::Watch) {
        if (!c.operands.empty())
            c.error = "unexpected argument '" + c.operands[0] + "'; the program goes after --: mn-preflight watch "
                      "[OPTIONS] -- PROGRAM";
        else if (c.program.empty())
            c.error = "needs a program after --: mn-preflight watch [OPTIONS] -- PROGRAM";
        return;
    }
    // Other subcommands: operands only where the synopsis has them; nothing after --.
    c.operands.insert(c.operands.end(), c.program.begin(), c.program.end());
    c.program.clear();
    if (sub.sub == Subcommand::History) {
        if (c.operands.empty()) c.error = "needs the directory that --history wrote to: mn-preflight history DIR";
        else if (c.operands.size() > 1)
            c.error = "takes one DIR (got '" + c.operands[0] + "' and '" + c.operands[1] + "')";
        return;
    }
    if (!c.operands.empty()) c.error = "takes no arguments (got '" + c.operands[0] + "')";
}

}  // namespace

const std::vector<SubcommandInfo>& subcommand_table() { return kSubcommands; }

bool CommandLine::gave(const char* name) const {
    for (const CheckOption* o : given)
        if (std::string(o->name) == name) return true;
    return false;
}

std::string nearest_name(const std::string& given, const std::vector<std::string>& names) {
    std::string best;
    std::size_t best_d = 0;
    for (const std::string& n : names) {
        const std::size_t d = edit_distance(lower(given), n);
        if (best.empty() || d < best_d) {
            best = n;
            best_d = d;
        }
    }
    // A typo: at most 2 edits, and fewer than half the name.
    if (!best.empty() && best_d <= 2 && best_d * 2 < best.size()) return best;
    // The start of just one name ("--time" for --timeout).
    std::string only;
    for (const std::string& n : names)
        if (given.size() >= 2 && n.compare(0, given.size(), given) == 0) {
            if (!only.empty()) return "";
            only = n;
        }
    return only;
}

CommandLine parse_command_line(const std::vector<std::string>& args) {
    CommandLine c;
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "--version")) {
        c.sub = Subcommand::None;
        (args[0] == "--version" ? c.version : c.help) = true;
        // "mn-preflight --help history" as "mn-preflight history --help".
        const SubcommandInfo* of = args.size() == 2 && c.help ? subcommand_named(args[1]) : nullptr;
        if (of) c.sub = of->sub;
        else if (args.size() > 1) c.error = "unexpected argument '" + args[1] + "' after " + args[0];
        return c;
    }
    const std::string first = args.empty() ? "" : args[0];
    const SubcommandInfo* sub = subcommand_named(first == "--prolog" ? "prolog" : first);
    if (!sub && !first.empty() && first[0] != '-') {
        std::vector<std::string> names;
        for (const SubcommandInfo& s : kSubcommands) names.push_back(s.name);
        const std::string guess = nearest_name(first, names);
        c.sub = Subcommand::None;
        c.error = "unknown subcommand '" + first + "'" + (guess.empty() ? "" : "; did you mean " + guess + "?");
        return c;
    }
    // No subcommand named: check, with every word its option.
    const std::vector<std::string> rest(args.begin() + (sub ? 1 : 0), args.end());
    if (!sub) sub = subcommand_named("check");
    c.sub = sub->sub;
    read_options(*sub, rest, c);
    if (c.error.empty() && !c.help) check_together(*sub, c);
    return c;
}

std::string usage_error_text(const CommandLine& c) {
    std::string sub;
    for (const SubcommandInfo& s : kSubcommands)
        if (s.sub == c.sub) sub = s.name;
    return "mn-preflight: " + (sub.empty() ? "" : sub + ": ") + c.error + "\ntry 'mn-preflight " +
           (sub.empty() ? "" : sub + " ") + "--help'\n";
}

}  // namespace mn
