#include "lib/check/check_options.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "lib/util/text.h"

namespace mn {
namespace {

constexpr unsigned kBoth = kCheckArgv | kInline;
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
    {"min-busbw", nullptr, "GBPS", ValueKind::Number, 0, 1e6, true, "a bandwidth in GB/s above 0", "300", "none",
     "fail below this all-reduce busbw; name nodes whose pairs run below it", kBoth},
    {"size", nullptr, "BYTES", ValueKind::Bytes, 4096, 8 * kGiB, false, "4K to 8G", "64M", "1G on GPUs; on CPUs 4M / tasks per node, 256K at least",
     "the all-reduce's size, with a K, M or G suffix", kBoth},
    {"iters", nullptr, "N", ValueKind::Count, 1, 10000, false, "a whole number from 1 to 10000", "20",
     "20 on GPUs, 5 on CPUs", "timed iterations", kBoth},
    {"no-pairs", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "", "skip the pair tests", kBoth},
    {"mode", nullptr, "MODE", ValueKind::Mode, 0, 0, false, "auto, ib, roce or socket", "ib", "auto",
     "the fabric class the check expects", kBoth},
    {"json", nullptr, "", ValueKind::Flag, 0, 0, false, "", "", "", "one JSON object instead of the table", kBoth},
    {"exclude-file", nullptr, "PATH", ValueKind::Path, 0, 0, false, "a file the batch script can read",
     "bad-nodes", "none",
     "on FAIL, rank 0 writes the nodes to exclude there, in Slurm's hostlist form", kOnFail},
    {"history", nullptr, "DIR", ValueKind::Path, 0, 0, false, "a directory (shared, to see every node)", "/var/lib/mn-preflight/history",
     "none", "append one JSON line per node (job, verdict, findings, busbw) to DIR/NODE.jsonl; "
     "'mn-preflight history DIR' sums them up", kBoth},
    {"metrics-dir", nullptr, "DIR", ValueKind::Path, 0, 0, false, "a directory, e.g. node_exporter's textfile directory",
     "/var/lib/prometheus/node-exporter", "none",
     "write each node's mn_preflight_* gauges to DIR/mn_preflight_NODE.prom (atomically)", kBoth},
    {"comment", "job-comment", "", ValueKind::Flag, 0, 0, false, "", "", "",
     "on FAIL, also put the nodes to exclude into the job's comment (scontrol update)", kOnFail},
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
}

void set_number(const CheckOption& o, double x, CheckSettings& into) {
    const std::string n = o.name;
    if (n == "timeout") into.check.timeout = x;
    else if (n == "min-busbw") into.check.min_busbw = x;
    else if (n == "iters") into.check.iters = static_cast<int>(x);
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
        const bool argv_name = (places & (kCheckArgv | kExecArgv)) && (o.places & (kCheckArgv | kExecArgv)) &&
                               "--" + name == o.argv();
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
        case ValueKind::Path:
            if (value.empty()) return false;
            if (std::string(o.name) == "history") into.check.history_dir = value;
            else if (std::string(o.name) == "metrics-dir") into.check.metrics_dir = value;
            else into.exclude_file = value;
            return true;
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

std::string check_options_synopsis(unsigned places, std::size_t column) {
    std::string out;
    for (const CheckOption& o : kTable) {
        if (!(o.places & places)) continue;
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
        const std::string head = "  " + pad(o.argv() + (m.empty() ? "" : " " + m), 18);
        std::string text = o.help;
        if (o.kind != ValueKind::Flag) text += std::string(" (") + o.want + "; default " + o.fallback + ")";
        out += head + wrap(text, head.size(), 21) + "\n";
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

}  // namespace mn
