#include "lib/check/preflight_request.h"

#include <cctype>
#include <cstdlib>

#include "lib/util/text.h"

namespace mn {
namespace {

bool whole_number(const std::string& v, unsigned long lo, unsigned long hi) {
    if (v.empty() || v.size() > 9) return false;
    for (char c : v)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    const unsigned long n = std::strtoul(v.c_str(), nullptr, 10);
    return n >= lo && n <= hi;
}

bool positive_number(const std::string& v, double lo, double hi) {
    if (v.empty()) return false;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    return *end == '\0' && d >= lo && d <= hi && d > 0;
}

// 4K to 8G with an optional K/M/G, as mn-preflight --size takes it.
bool size_value(const std::string& v) {
    if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0]))) return false;
    std::size_t i = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    if (i > 12) return false;
    unsigned long long n = std::strtoull(v.substr(0, i).c_str(), nullptr, 10);
    const std::string unit = lower(v.substr(i));
    if (unit == "k") n <<= 10;
    else if (unit == "m") n <<= 20;
    else if (unit == "g") n <<= 30;
    else if (!unit.empty()) return false;
    return n >= 4096 && n <= (8ull << 30);
}

}  // namespace

Outcome<PreflightRequest> parse_preflight_request(const std::string& options, const std::string& source) {
    PreflightRequest r;
    const std::string all = lower(options);
    if (all == "off" || all == "0" || all == "no") return r;
    r.enabled = true;
    const std::string known =
        "known: timeout=S, min-busbw=GBPS, size=BYTES, iters=N, no-pairs, cpu, gpu, mode=MODE, json, "
        "exclude-file=PATH, comment; e.g. " + source + "=timeout=30,exclude-file=bad-nodes";
    for (const std::string& item : split_list(options)) {
        const std::size_t eq = item.find('=');
        const std::string key = lower(item.substr(0, eq));
        const std::string val = eq == std::string::npos ? "" : item.substr(eq + 1);
        const bool has_value = eq != std::string::npos;
        auto bad = [&](const std::string& want) {
            return Problem{source + ": '" + item + "' is not valid", want};
        };
        if (key == "timeout") {
            if (!whole_number(val, 1, 600) && !positive_number(val, 1, 600))
                return bad("give timeout=S with S from 1 to 600 seconds");
            r.check_args.insert(r.check_args.end(), {"--timeout", val});
        } else if (key == "min-busbw") {
            if (!positive_number(val, 0, 1e6)) return bad("give min-busbw=GBPS above 0, e.g. min-busbw=300");
            r.check_args.insert(r.check_args.end(), {"--min-busbw", val});
        } else if (key == "size") {
            if (!size_value(val)) return bad("give size=BYTES from 4K to 8G, e.g. size=64M");
            r.check_args.insert(r.check_args.end(), {"--size", val});
        } else if (key == "iters") {
            if (!whole_number(val, 1, 10000)) return bad("give iters=N from 1 to 10000");
            r.check_args.insert(r.check_args.end(), {"--iters", val});
        } else if (key == "mode") {
            const std::string m = lower(val);
            if (m != "auto" && m != "ib" && m != "roce" && m != "socket")
                return bad("give mode=auto, ib, roce or socket (the fabric class the check expects)");
            r.check_args.insert(r.check_args.end(), {"--mode", m});
        } else if (key == "exclude-file") {
            if (val.empty()) return bad("give exclude-file=PATH, a file the batch script can read");
            r.exclude_file = val;
        } else if ((key == "no-pairs" || key == "cpu" || key == "gpu" || key == "json" || key == "comment") &&
                   !has_value) {
            if (key == "comment") r.job_comment = true;
            else r.check_args.push_back("--" + key);
        } else {
            return Problem{source + ": unknown option '" + item + "'", known};
        }
    }
    return r;
}

std::vector<std::string> preflight_argv(const PreflightRequest& r, const std::string& bin, unsigned port) {
    std::vector<std::string> argv{bin, "check", "--exec", "--port", std::to_string(port)};
    argv.insert(argv.end(), r.check_args.begin(), r.check_args.end());
    if (!r.exclude_file.empty()) argv.insert(argv.end(), {"--exclude-file", r.exclude_file});
    if (r.job_comment) argv.push_back("--job-comment");
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
