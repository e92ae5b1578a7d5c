// SPDX-License-Identifier: Apache-2.0
#include "lib/check/history.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <tuple>

#include "lib/check/fingerprint.h"
#include "lib/util/bounded_file.h"
#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn {

// ---- Kinds ------------------------------------------------------------------

const char* kind_word(VerdictKind k) {
    switch (k) {
        case VerdictKind::Ok: return "ok";
        case VerdictKind::Slow: return "slow";
        case VerdictKind::Fault: return "fault";
        case VerdictKind::Fabric: return "fabric";
        case VerdictKind::Fingerprint: return "fingerprint";
        case VerdictKind::Timeout: return "timeout";
        case VerdictKind::Waited: return "waited";
        case VerdictKind::Disturbed: return "disturbed";
    }
    return "fault";
}

const std::vector<std::string>& verdict_kinds() {
    static const std::vector<std::string> k = [] {
        std::vector<std::string> v;
        for (VerdictKind x : {VerdictKind::Ok, VerdictKind::Slow, VerdictKind::Fault, VerdictKind::Fabric, VerdictKind::Fingerprint, VerdictKind::Timeout, VerdictKind::Waited,
                       VerdictKind::Disturbed})
            v.push_back(kind_word(x));
        return v;
    }();
    return k;
}

// "disturbed": strangers made the check run out of time; no node's failure.
bool is_failure(const std::string& kind) {
    return kind != "ok" && kind != "waited" && kind != "warning" && kind != "disturbed";
}

bool HistoryRecord::operator==(const HistoryRecord& o) const {
    return v == o.v && job == o.job && step == o.step && time == o.time && node == o.node && verdict == o.verdict &&
           kind == o.kind && findings == o.findings && busbw_gbps == o.busbw_gbps &&
           pair_busbw_gbps == o.pair_busbw_gbps && findings_dropped == o.findings_dropped && truncated == o.truncated;
}

// ---- Writing a line ---------------------------------------------------------

namespace {

std::string build_line(const HistoryRecord& r) {
    Json j;
    j["v"] = r.v;
    j["job"] = json_text(r.job);
    j["step"] = json_text(r.step);
    j["time"] = r.time;
    j["node"] = json_text(r.node);
    j["verdict"] = json_text(r.verdict);
    j["kind"] = json_text(r.kind);
    j["findings"] = json_texts(r.findings);
    if (r.busbw_gbps && std::isfinite(*r.busbw_gbps)) j["busbw_gbps"] = json_number(*r.busbw_gbps);
    if (r.pair_busbw_gbps && std::isfinite(*r.pair_busbw_gbps)) j["pair_busbw_gbps"] = json_number(*r.pair_busbw_gbps);
    if (r.findings_dropped) j["findings_dropped"] = r.findings_dropped;
    if (r.truncated) j["truncated"] = true;
    return json_line(j);
}

// s cut to at most `max` bytes, never inside a UTF-8 sequence, "..." added.
bool shorten(std::string& s, std::size_t max) {
    if (s.size() <= max) return false;
    std::size_t cut = max > 3 ? max - 3 : 0;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
    return true;
}

}  // namespace

std::string format_history_line(HistoryRecord r) {
    std::string line = build_line(r);
    if (line.size() <= kHistoryLineMax) return line;
    // Long findings first, then the last findings, then every text.
    for (auto& f : r.findings) r.truncated |= shorten(f, 512);
    line = build_line(r);
    while (line.size() > kHistoryLineMax && !r.findings.empty()) {
        r.findings.pop_back();
        ++r.findings_dropped;
        r.truncated = true;
        line = build_line(r);
    }
    for (std::size_t max = 1024; line.size() > kHistoryLineMax && max >= 8; max /= 2) {
        for (std::string* s : {&r.verdict, &r.node, &r.job, &r.step, &r.kind}) r.truncated |= shorten(*s, max);
        line = build_line(r);
    }
    return line;
}

// ---- Reading a line ---------------------------------------------------------

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] parse
// error at line 1, column 5: " head, and the byte it stopped at.
std::string parse_failure(const Json::exception& e) {
    std::string what = e.what();
    const std::size_t id = what.find("] ");
    if (id != std::string::npos) what.erase(0, id + 2);
    const std::size_t at = what.find(": ");
    if (what.compare(0, 12, "parse error ") == 0 && at != std::string::npos) what.erase(0, at + 2);
    if (const auto* p = dynamic_cast<const Json::parse_error*>(&e)) what += " at byte " + std::to_string(p->byte);
    return what;
}

std::optional<int64_t> as_integer(const Json& v) {
    if (v.is_number_unsigned()) {
        const auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    return std::nullopt;
}

std::optional<double> as_double(const Json& v) {
    if (!v.is_number()) return std::nullopt;
    const double d = v.get<double>();
    if (!std::isfinite(d)) return std::nullopt;
    return d;
}

}  // namespace

Outcome<HistoryRecord> parse_history_line(const std::string& line, bool* newer_version) {
    if (newer_version) *newer_version = false;
    // Beyond JSON, the format's shape: one object, each key once, its
    // values plain or arrays of plain values. What breaks it is kept out of
    // the document (the callback's false) and refused below.
    std::string shape;
    std::vector<std::string> keys;
    auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
        using E = Json::parse_event_t;
        if (event == E::key && depth == 1) {
            const std::string& key = parsed.get_ref<const std::string&>();
            if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
                if (shape.empty()) shape = "\"" + json_text_bytes(key) + "\" twice";
                return false;
            }
            keys.push_back(key);
        } else if (event == E::object_start && depth > 0) {
            if (shape.empty()) shape = "an object inside the line's object";
            return false;
        } else if (event == E::array_start && depth > 1) {
            if (shape.empty()) shape = "an array in an array";
            return false;
        }
        return true;
    };
    Json j;
    try {
        j = Json::parse(line, check);
    } catch (const Json::exception& e) {
        return Problem{"not a history line: " + parse_failure(e), ""};
    }
    if (!j.is_object()) return Problem{"not a history line: not a JSON object", ""};
    if (!shape.empty()) return Problem{"not a history line: " + shape, ""};
    HistoryRecord r;
    bool has_v = false, has_time = false, has_node = false, has_verdict = false, has_kind = false;
    auto bad = [](const std::string& key, const std::string& want) {
        return Problem{"\"" + json_text_bytes(key) + "\" is not " + want, ""};
    };
    for (const auto& [key, v] : j.items()) {
        if (key == "v") {
            const auto n = as_integer(v);
            if (!n || *n < 1) return bad(key, "a format version");
            if (*n > 1) {
                if (newer_version) *newer_version = true;
                return Problem{"written by a newer mn-preflight (format " + std::to_string(*n) + ")",
                               "read it with that mn-preflight"};
            }
            has_v = true;
        } else if (key == "job" || key == "step") {
            const auto n = as_integer(v);
            if (!v.is_string() && !n) return bad(key, "a string or an integer");
            (key == "job" ? r.job : r.step) = n ? std::to_string(*n) : json_text_bytes(v.get<std::string>());
        } else if (key == "time") {
            const auto n = as_integer(v);
            if (!n || *n < 0) return bad(key, "unix seconds");
            r.time = *n;
            has_time = true;
        } else if (key == "node" || key == "verdict" || key == "kind") {
            if (!v.is_string() || (key != "verdict" && v.get_ref<const std::string&>().empty())) return bad(key, "a name");
            (key == "node" ? r.node : key == "kind" ? r.kind : r.verdict) = json_text_bytes(v.get<std::string>());
            (key == "node" ? has_node : key == "kind" ? has_kind : has_verdict) = true;
        } else if (key == "findings") {
            if (!v.is_array()) return bad(key, "an array of strings");
            for (const auto& item : v) {
                if (!item.is_string()) return bad(key, "an array of strings");
                r.findings.push_back(json_text_bytes(item.get<std::string>()));
            }
        } else if (key == "busbw_gbps" || key == "pair_busbw_gbps") {
            auto& field = key == "busbw_gbps" ? r.busbw_gbps : r.pair_busbw_gbps;
            if (v.is_null()) continue;
            field = as_double(v);
            if (!field || *field < 0) return bad(key, "a bandwidth");
        } else if (key == "findings_dropped") {
            const auto n = as_integer(v);
            if (!n || *n < 0 || *n > 1000000) return bad(key, "a count");
            r.findings_dropped = static_cast<unsigned>(*n);
        } else if (key == "truncated") {
            if (!v.is_boolean()) return bad(key, "true or false");
            r.truncated = v.get<bool>();
        }
        // Other keys: added later within format 1, skipped.
    }
    if (!has_v || !has_time || !has_node || !has_verdict || !has_kind)
        return Problem{"not a history line: \"v\", \"time\", \"node\", \"verdict\" and \"kind\" are needed", ""};
    return r;
}

// ---- Appending --------------------------------------------------------------

namespace {

std::string sys_error() { return std::strerror(errno); }

// Text from the files as a terminal may safely show it: a forged verdict
// with a newline must not print a line of its own ("drain candidates:
// ..."), nor an escape sequence reach root's terminal. Control bytes, DEL
// and UTF-8's C1 controls (U+0080-U+009F: CSI among them) become '?'.
std::string printable(std::string t) {
    std::string out;
    for (std::size_t i = 0; i < t.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(t[i]);
        if (c == 0xC2 && i + 1 < t.size() && (static_cast<unsigned char>(t[i + 1]) & 0xE0) == 0x80) {
            out += '?';
            ++i;
        } else {
            out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
        }
    }
    return out;
}

// mkdir -p, each directory it makes 0755 whatever the umask.
std::optional<Problem> make_dirs(const std::string& dir) {
    const std::string fix = "make it (mode 0755) or name another history directory";
    for (std::size_t at = 1; at <= dir.size(); ++at) {
        if (at < dir.size() && dir[at] != '/') continue;
        const std::string d = dir.substr(0, at);
        if (mkdir(d.c_str(), 0755) == 0) {
            chmod(d.c_str(), 0755);
        } else if (errno != EEXIST) {
            return Problem{"mn-preflight: cannot make the history directory " + d + ": " + sys_error(), fix};
        }
    }
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Problem{"mn-preflight: the history directory " + dir + " is not a directory", fix};
    return std::nullopt;
}

}  // namespace

std::string history_file(const std::string& dir, const std::string& node) {
    std::string name = node.empty() ? "unknown" : node;
    for (char& c : name)
        if (c == '/' || c == '\0') c = '_';
    if (name[0] == '.') name[0] = '_';  // never ".", "..", or a hidden file
    return dir + (!dir.empty() && dir.back() == '/' ? "" : "/") + name + ".jsonl";
}

Outcome<std::string> append_history(const std::string& dir, const HistoryRecord& r) {
    if (auto p = make_dirs(dir)) return *p;
    const std::string path = history_file(dir, r.node);
    const std::string line = format_history_line(r);
    const std::string fix = "let the job's user write " + dir + " (or name another history directory)";
    // O_EXCL tells who made the file: only that process sets its mode.
    // O_NOFOLLOW: never through a link someone left; O_NONBLOCK: a FIFO
    // there fails at once (no reader) or is refused below, never waited on.
    const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    int fd = open(path.c_str(), flags | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) fchmod(fd, 0644);
    else if (errno == EEXIST) fd = open(path.c_str(), flags);
    if (fd < 0 && (errno == ELOOP || errno == ENXIO))  // a link, or a FIFO nobody reads
        return Problem{"mn-preflight: the history file " + path + " is " +
                           (errno == ELOOP ? "a symbolic link" : "a FIFO") + ", not a regular file",
                       "remove it; only mn-preflight makes files in " + dir};
    if (fd < 0) return Problem{"mn-preflight: cannot open the history file " + path + ": " + sys_error(), fix};
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return Problem{"mn-preflight: the history file " + path + " is not a regular file",
                       "remove it; only mn-preflight makes files in " + dir};
    // Another's file would make these lines untrusted (history_distrust),
    // and a user's file is no place for root to write.
    if (st.st_uid != geteuid())
        return Problem{"mn-preflight: the history file " + path + " belongs to uid " + std::to_string(st.st_uid) +
                           ", not to this process's uid " + std::to_string(geteuid()) +
                           ", so its lines would not be trusted",
                       "remove it, and let only the writer of " + dir + " (root for prologs) write there"};
    ssize_t n;
    do n = write(fd, line.data(), line.size());  // the whole line in one write
    while (n < 0 && errno == EINTR);
    if (n < 0) return Problem{"mn-preflight: cannot append to the history file " + path + ": " + sys_error(), fix};
    if (static_cast<std::size_t>(n) != line.size())
        return Problem{"mn-preflight: the history file " + path + " took " + std::to_string(n) + " of " +
                           std::to_string(line.size()) + " bytes (disk full?)",
                       "free space in " + dir};
    return path;
}

// ---- Reading and summarising ------------------------------------------------

std::vector<HistoryRecord> parse_history_text(const std::string& file, const std::string& text,
                                              std::vector<std::string>& warnings) {
    constexpr unsigned kWarningsPerFile = 20;
    std::vector<HistoryRecord> out;
    unsigned skipped = 0, lineno = 0;
    auto skip = [&](const std::string& why) {
        if (++skipped <= kWarningsPerFile)
            warnings.push_back(file + " line " + std::to_string(lineno) + ": " + why + "; skipped");
    };
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t nl = text.find('\n', at);
        const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        at = nl == std::string::npos ? text.size() : nl + 1;
        ++lineno;
        if (line.empty()) continue;
        if (nl == std::string::npos) {
            skip("cut short (no newline at its end)");
            continue;
        }
        if (line.size() > 16 * kHistoryLineMax) {
            skip("longer than any history line");
            continue;
        }
        const auto r = parse_history_line(line);
        if (r) out.push_back(*r);
        else skip(r.problem().what);
    }
    if (skipped > kWarningsPerFile)
        warnings.push_back(file + ": " + std::to_string(skipped - kWarningsPerFile) + " more lines skipped");
    return out;
}

std::vector<std::string> HistorySummary::drain_candidates() const {
    std::vector<std::string> out;
    for (const auto& h : nodes)
        if (h.drain) out.push_back(h.node);
    return out;
}

std::string history_distrust(const HistorySource& src, const std::string& node) {
    const std::string whose = history_file(src.dir, node);
    if (whose != src.file)
        return "a line for " + node + " in " + src.file + " (" + node + "'s lines go to " + whose + ")";
    if (src.owner != 0 && src.owner != src.reader)
        return src.file + " belongs to uid " + std::to_string(src.owner) + ", neither root nor the reader (uid " +
               std::to_string(src.reader) + ")";
    if (src.mode & (S_IWGRP | S_IWOTH))
        return src.file + " may be written by " + (src.mode & S_IWOTH ? "anyone" : "its group") + " (mode " +
               [&] {
                   char m[8];
                   std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(src.mode & 07777));
                   return std::string(m);
               }() +
               ")";
    return "";
}

HistorySummary summarise_records(std::vector<HistoryRecord> records, int64_t since, unsigned k, unsigned n) {
    HistorySummary s;
    s.since = since;
    s.k = std::max(1u, k);
    s.n = std::max(s.k, n);
    std::stable_sort(records.begin(), records.end(),
                     [](const HistoryRecord& a, const HistoryRecord& b) { return a.time < b.time; });
    std::map<std::string, std::vector<const HistoryRecord*>> by_node;
    std::map<std::pair<std::string, std::string>, UntrustedLines> untrusted;
    for (const auto& r : records) {
        if (r.time < since) continue;
        if (r.distrust.empty()) {
            by_node[r.node].push_back(&r);
            continue;
        }
        // Shown, never counted: no check, no failure, no drain.
        UntrustedLines& u = untrusted[{r.node, r.distrust}];
        u.node = r.node;
        u.why = r.distrust;
        ++u.lines;
        u.failures += is_failure(r.kind);
        u.last_time = r.time;
    }
    for (auto& [key, u] : untrusted) s.untrusted.push_back(std::move(u));
    for (const auto& [node, recs] : by_node) {
        NodeHistory h;
        h.node = node;
        h.checks = static_cast<unsigned>(recs.size());
        for (std::size_t i = 0; i < recs.size(); ++i) {
            const HistoryRecord& r = *recs[i];
            const bool failed = is_failure(r.kind);
            if (failed) {
                ++h.failures;
                ++h.failures_by_kind[r.kind];
                h.last_failure_time = r.time;
                h.last_failure = r.verdict;
            }
            if (i + s.n >= recs.size()) {
                ++h.recent;
                h.recent_failures += failed;
            }
        }
        h.last_time = recs.back()->time;
        h.last_kind = recs.back()->kind;
        h.drain = h.recent_failures >= s.k;
        s.nodes.push_back(std::move(h));
    }
    return s;
}

Outcome<HistorySummary> summarise(const std::string& dir, int64_t since, unsigned k, unsigned n,
                                  std::size_t read_max) {
    DIR* d = opendir(dir.c_str());
    if (!d)
        return Problem{"mn-preflight: cannot read the history directory " + dir + ": " + sys_error(),
                       "name the directory the checks write (--history DIR)"};
    const uid_t reader = geteuid();
    // Whose files come first: those whose lines may count (root's or the
    // reader's, written by nobody else). Another user's files, eight of
    // 64 MiB named to sort first, once used up the budget and turned
    // "drain candidates: node1" into "none".
    struct Candidate {
        bool others;  // first false: these files come first
        std::string path;
        std::size_t size;
        bool operator<(const Candidate& o) const { return std::tie(others, path) < std::tie(o.others, o.path); }
    };
    std::vector<Candidate> files;
    while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.size() <= 6 || name[0] == '.' || name.compare(name.size() - 6, 6, ".jsonl") != 0) continue;
        const std::string path = dir + (dir.back() == '/' ? "" : "/") + name;
        struct stat st {};
        // The order only: what a line may count for is judged again from
        // the descriptor that reads it (history_distrust).
        const bool trusted = lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                             (st.st_uid == 0 || st.st_uid == reader) && !(st.st_mode & (S_IWGRP | S_IWOTH));
        files.push_back({!trusted, path, static_cast<std::size_t>(st.st_size)});
    }
    closedir(d);
    std::sort(files.begin(), files.end());
    std::vector<HistoryRecord> records;
    std::vector<std::string> warnings;
    std::size_t read_so_far = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string& f = files[i].path;
        // The budget ends at the first file that no longer fits whole (one
        // over the per-file limit is skipped on its own, below).
        if (read_so_far >= read_max ||
            (files[i].size <= kHistoryFileMax && files[i].size > read_max - read_so_far)) {
            const std::size_t others = static_cast<std::size_t>(
                std::count_if(files.begin() + static_cast<std::ptrdiff_t>(i), files.end(),
                              [](const Candidate& e) { return e.others; }));
            warnings.push_back(dir + ": more than " + (read_max >= (1u << 20) ? std::to_string(read_max >> 20) + " MiB" : std::to_string(read_max >> 10) + " KiB") + " of history; " +
                               std::to_string(files.size() - i) + " files from " + f + " on were not read (" +
                               (others == files.size() - i ? "all of them others' files, whose lines would not count"
                                                           : "rotate the files") +
                               ")");
            break;
        }
        // Often run by root on a directory users can write: a FIFO, a
        // device or a link there is skipped, never opened or followed.
        auto file = read_bounded_file(f, std::min(kHistoryFileMax, read_max - read_so_far), LastLink::refuse);
        if (!file) {
            warnings.push_back(file.problem().what + "; skipped");
            continue;
        }
        read_so_far += file->text.size();
        const HistorySource src{dir, f, file->owner, file->mode, reader};
        for (auto& r : parse_history_text(f, file->text, warnings)) {
            r.distrust = history_distrust(src, r.node);
            records.push_back(std::move(r));
        }
    }
    HistorySummary s = summarise_records(std::move(records), since, k, n);
    s.dir = dir;
    // They name files and quote lines others wrote, and go to a terminal.
    for (auto& w : warnings) w = printable(w);
    s.warnings = std::move(warnings);
    return s;
}

// ---- Rendering --------------------------------------------------------------

namespace {

std::string utc(int64_t t) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm {};
    char buf[32];
    if (!gmtime_r(&tt, &tm) || !std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm)) return std::to_string(t);
    return buf;
}

std::string by_kind(const NodeHistory& h) {
    std::string out;
    for (const auto& kind : verdict_kinds())
        if (h.failures_by_kind.count(kind))
            out += (out.empty() ? "" : ", ") + kind + " " + std::to_string(h.failures_by_kind.at(kind));
    for (const auto& [kind, count] : h.failures_by_kind)  // kinds of a newer writer
        if (std::find(verdict_kinds().begin(), verdict_kinds().end(), kind) == verdict_kinds().end())
            out += (out.empty() ? "" : ", ") + kind + " " + std::to_string(count);
    return out.empty() ? "-" : out;
}

HistorySummary printable(HistorySummary s) {
    s.dir = printable(s.dir);
    for (auto& n : s.nodes) {
        n.node = printable(n.node);
        n.last_kind = printable(n.last_kind);
        n.last_failure = printable(n.last_failure);
        std::map<std::string, unsigned> kinds;
        for (const auto& [kind, count] : n.failures_by_kind) kinds[printable(kind)] += count;
        n.failures_by_kind = std::move(kinds);
    }
    for (auto& u : s.untrusted) {
        u.node = printable(u.node);
        u.why = printable(u.why);
    }
    for (auto& w : s.warnings) w = printable(w);
    return s;
}

}  // namespace

std::string history_table(const HistorySummary& summary) {
    const HistorySummary s = printable(summary);
    std::string out = "history of " + s.dir + " since " + utc(s.since) + ": " + std::to_string(s.nodes.size()) +
                      (s.nodes.size() == 1 ? " node\n" : " nodes\n");
    std::size_t hw = 4, kw = 7, lw = 10;
    for (const auto& n : s.nodes) {
        hw = std::max(hw, n.node.size());
        kw = std::max(kw, by_kind(n).size());
        lw = std::max(lw, utc(n.last_time).size() + 1 + n.last_kind.size());
    }
    if (!s.nodes.empty()) out += pad("node", hw) + pad("checks", 6) + pad("failed", 6) + pad("by kind", kw) +
                                 pad("last check", lw) + "last failure\n";
    for (const auto& n : s.nodes)
        out += pad(n.node, hw) + pad(std::to_string(n.checks), 6) + pad(std::to_string(n.failures), 6) +
               pad(by_kind(n), kw) + pad(utc(n.last_time) + " " + n.last_kind, lw) +
               (n.last_failure_time ? utc(*n.last_failure_time) + " " + n.last_failure : "-") + "\n";
    const auto drain = s.drain_candidates();
    out += "drain candidates (failed " + std::to_string(s.k) + " or more of their last " + std::to_string(s.n) +
           " checks): " + (drain.empty() ? "none" : join_list(drain, ' ')) + "\n";
    for (const auto& u : s.untrusted)
        out += "untrusted (shown, never counted): " + u.node + ": " + std::to_string(u.lines) +
               (u.lines == 1 ? " line, " : " lines, ") + std::to_string(u.failures) + " failed, last " +
               utc(u.last_time) + ": " + u.why + "\n";
    for (const auto& w : s.warnings) out += "warning: " + w + "\n";
    return out;
}

std::string history_json(const HistorySummary& s) {
    Json j;
    j["dir"] = json_text(s.dir);
    j["since"] = s.since;
    j["k"] = s.k;
    j["n"] = s.n;
    j["nodes"] = Json::array();
    for (const NodeHistory& h : s.nodes) {
        Json kinds = Json::object();
        for (const auto& [kind, count] : h.failures_by_kind) kinds[json_text(kind)] = count;
        Json last_failure = nullptr;
        if (h.last_failure_time) last_failure = {{"time", *h.last_failure_time}, {"verdict", json_text(h.last_failure)}};
        j["nodes"].push_back({{"node", json_text(h.node)},
                              {"checks", h.checks},
                              {"failures", h.failures},
                              {"failures_by_kind", std::move(kinds)},
                              {"last_time", h.last_time},
                              {"last_kind", json_text(h.last_kind)},
                              {"last_failure", std::move(last_failure)},
                              {"recent_checks", h.recent},
                              {"recent_failures", h.recent_failures},
                              {"drain", h.drain}});
    }
    j["drain_candidates"] = json_texts(s.drain_candidates());
    j["warnings"] = json_texts(s.warnings);
    j["untrusted"] = Json::array();
    for (const UntrustedLines& u : s.untrusted)
        j["untrusted"].push_back({{"node", json_text(u.node)},
                                  {"lines", u.lines},
                                  {"failures", u.failures},
                                  {"last_time", u.last_time},
                                  {"why", json_text(u.why)}});
    return json_line(j);
}

// ---- --since ----------------------------------------------------------------

Outcome<int64_t> parse_since(const std::string& text, int64_t now) {
    const Problem bad{"mn-preflight: --since '" + text + "' is neither unix seconds nor a duration",
                      "give unix seconds (1764000000) or a time back from now: 7d, 24h, 30m, 90s, 2w, 1d12h"};
    if (text.empty() || text.size() > 32) return bad;
    constexpr int64_t kMax = int64_t(100) * 366 * 86400;  // a century: far beyond any history
    if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        if (text.size() > 12) return bad;
        return static_cast<int64_t>(std::stoll(text));
    }
    int64_t total = 0;
    for (std::size_t i = 0; i < text.size();) {
        std::size_t j = i;
        while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
        if (j == i || j == text.size() || j - i > 12) return bad;
        const int64_t count = std::stoll(text.substr(i, j - i));
        static const char kUnits[] = "smhdw";
        static const int64_t kSeconds[] = {1, 60, 3600, 86400, 7 * 86400};
        const char* unit = std::strchr(kUnits, text[j]);
        if (!unit || text[j] == '\0') return bad;
        const int64_t secs = kSeconds[unit - kUnits];
        if (count > kMax / secs) return bad;
        total += count * secs;
        if (total > kMax) return bad;
        i = j + 1;
    }
    return std::max<int64_t>(0, now - total);
}

}  // namespace mn
