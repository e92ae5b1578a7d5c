// SPDX-License-Identifier: Apache-2.0
// Verdicts remembered: one JSON line per node per check, appended to
// DIR/NODE.jsonl, and read back as a summary per node (checks, failures by
// kind, the last failure, the nodes to drain). The line's format and its
// reader are pure; append_history() and summarise() are the only I/O.
// Who may write DIR is not who is trusted: a line names a drain candidate
// only when it is in its own node's file and that file belongs to root or
// to the user reading it, writable by nobody else (history_distrust);
// other lines are shown as untrusted, with the reason, and never counted.
//   {"v":1,"job":"4242","step":"0","time":1764000000,"node":"node1",
//    "verdict":"ok","kind":"ok","findings":[],"busbw_gbps":1.25,"pair_busbw_gbps":0.38}
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

// What a verdict was, for counting: ok, slow, fault, fabric, fingerprint,
// timeout, waited, disturbed ("waited" is no failure: the node only waited
// on another; nor is "disturbed": strangers made the check run out of time).
// Recorded where the blame is made (judge(), the check's phases, the
// prolog), never read back from a verdict's words.
enum class VerdictKind { Ok, Slow, Fault, Fabric, Fingerprint, Timeout, Waited, Disturbed };
// History's and metrics' word for a kind: "ok", "slow", ...
const char* kind_word(VerdictKind k);
// Every kind's word, in the enum's order.
const std::vector<std::string>& verdict_kinds();
bool is_failure(const std::string& kind);

struct HistoryRecord {
    int v = 1;
    std::string job, step;
    int64_t time = 0;  // unix seconds
    std::string node;
    std::string verdict;  // "ok" or what is wrong
    std::string kind;     // one of verdict_kinds()
    std::vector<std::string> findings;
    std::optional<double> busbw_gbps, pair_busbw_gbps;
    unsigned findings_dropped = 0;  // left out to keep the line short
    bool truncated = false;         // findings dropped or a text shortened
    // Set by the reader, never written: why the line may not count
    // (history_distrust); empty when it may.
    std::string distrust;
    bool operator==(const HistoryRecord& o) const;  // the line's fields, not distrust
};

// Lines are at most this long, newline included: a write() of up to
// PIPE_BUF bytes to an O_APPEND file is never interleaved with another's.
constexpr std::size_t kHistoryLineMax = 4096;

// The line, newline included, within kHistoryLineMax: findings dropped
// from the end, then texts shortened, and the line says so
// ("findings_dropped":N, "truncated":true).
std::string format_history_line(HistoryRecord r);
// A line (without its newline) back; a problem for anything but a JSON
// object of our format. Unknown keys are skipped; "v" above 1 is a problem
// that says so (newer_version is then set).
Outcome<HistoryRecord> parse_history_line(const std::string& line, bool* newer_version = nullptr);

// DIR/NODE.jsonl gets the line in one write() (O_APPEND, so concurrent
// jobs never interleave); DIR (mode 0755) and the file (0644) are made if
// missing. Returns the file's path. Only a regular file is appended to,
// never through a link, and never blocking on a FIFO; root appends only to
// a file of its own (one a user made would make root's lines untrusted).
Outcome<std::string> append_history(const std::string& dir, const HistoryRecord& r);
// The file a node's lines go to: NODE with '/' and leading dots replaced.
std::string history_file(const std::string& dir, const std::string& node);

struct NodeHistory {
    std::string node;
    unsigned checks = 0, failures = 0;
    std::map<std::string, unsigned> failures_by_kind;
    int64_t last_time = 0;
    std::string last_kind;
    std::optional<int64_t> last_failure_time;
    std::string last_failure;  // its verdict
    unsigned recent = 0, recent_failures = 0;  // of the last N checks
    bool drain = false;  // failed in at least K of its last N checks
};

// Lines that may not count, per node and reason: shown, never a drain
// candidate.
struct UntrustedLines {
    std::string node;  // as the lines name it
    std::string why;   // history_distrust's reason
    unsigned lines = 0, failures = 0;
    int64_t last_time = 0;
};

struct HistorySummary {
    std::string dir;
    int64_t since = 0;
    unsigned k = 2, n = 3;
    std::vector<NodeHistory> nodes;     // by name, trusted lines only
    std::vector<UntrustedLines> untrusted;  // by node, then reason
    std::vector<std::string> warnings;  // "DIR/node2.jsonl line 7: ...; skipped"
    std::vector<std::string> drain_candidates() const;
};

// The facts a line's trust rests on: the file it was read from (as
// history_file() names files), that file's owner and permission bits as
// the descriptor read showed them, and who reads it.
struct HistorySource {
    std::string dir, file;
    uid_t owner = 0;
    mode_t mode = 0;
    uid_t reader = 0;
};

// Why a line for `node` read from `src` may not count; empty when it may.
// It may when (1) the file is the one history_file(dir, node) names: the
// writer puts each node's lines in its own file, so a line in another
// node's file is someone's forgery; (2) the file belongs to root (the
// prolog's lines, or a root-run check's) or to the reader (a user reading
// the history of their own checks); and (3) neither group nor others may
// write it, or anyone could have appended.
std::string history_distrust(const HistorySource& src, const std::string& node);

// A file is read whole, up to this size ("too large: rotate it").
constexpr std::size_t kHistoryFileMax = 64 << 20;
// ... and all files together up to this; the rest are skipped with a warning.
constexpr std::size_t kHistoryReadMax = std::size_t(512) << 20;

// The records of one file's text; each unreadable, cut or newer line is a
// warning naming `file` and the line number, never an error.
std::vector<HistoryRecord> parse_history_text(const std::string& file, const std::string& text,
                                              std::vector<std::string>& warnings);
// The summary of records (any order) from `since` on; records with a
// distrust go to `untrusted` only.
HistorySummary summarise_records(std::vector<HistoryRecord> records, int64_t since, unsigned k, unsigned n);
// Reads every DIR/*.jsonl that is a regular file (a FIFO, a device, a
// directory or a symbolic link is skipped with a warning, never opened or
// followed), each line judged by history_distrust with this process's
// effective uid as the reader. Files whose owner and mode could make their
// lines count are read first, so that others' files, however large or
// however named, never use up `read_max` before them. A problem only when
// DIR cannot be read.
Outcome<HistorySummary> summarise(const std::string& dir, int64_t since, unsigned k = 2, unsigned n = 3,
                                  std::size_t read_max = kHistoryReadMax);

std::string history_table(const HistorySummary& s);
std::string history_json(const HistorySummary& s);

// --since: unix seconds ("1764000000") or a duration back from `now`
// ("7d", "24h", "30m", "90s", "2w", "1d12h").
Outcome<int64_t> parse_since(const std::string& text, int64_t now);

}  // namespace mn
