// SPDX-License-Identifier: Apache-2.0
// The history file (DIR/NODE.jsonl, outside input: any process that can
// write the directory can put anything there) as `mn-preflight history`
// reads it (parse_history_text, parse_history_line, summarise_records),
// and --since (parse_since). Properties: every line is a record or a
// warning naming the file and line; a record formats to one line within
// PIPE_BUF, ASCII only, that reads back to the same record (format is
// idempotent when it had to shorten); the summary's counts agree with the
// records; a --since that parses is never after now.
#include "lib/check/history.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 65536) return 0;
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> warnings;
    const auto records = mn::parse_history_text("f.jsonl", text, warnings);
    for (const auto& w : warnings)
        FUZZ_CHECK(w.rfind("f.jsonl line ", 0) == 0 || w.rfind("f.jsonl: ", 0) == 0, "warning '%s'", w.c_str());
    for (const auto& r : records) {
        const std::string line = mn::format_history_line(r);
        FUZZ_CHECK(line.size() <= mn::kHistoryLineMax && line.back() == '\n', "line of %zu bytes", line.size());
        FUZZ_CHECK(line.find('\n') == line.size() - 1, "a newline inside the line");
        for (unsigned char c : line) FUZZ_CHECK(c < 0x7f, "a byte 0x%02x in the line (ASCII only)", c);
        const auto back = mn::parse_history_line(line.substr(0, line.size() - 1));
        FUZZ_CHECK(back.ok(), "own line refused: %s", back.problem().what.c_str());
        if (!r.truncated && !back->truncated) FUZZ_CHECK(*back == r, "read back differs: %s", line.c_str());
        FUZZ_CHECK(mn::format_history_line(*back) == line, "format is not idempotent: %s", line.c_str());
    }
    const auto s = mn::summarise_records(records, 0, 2, 3);
    unsigned checks = 0;
    for (const auto& n : s.nodes) {
        checks += n.checks;
        FUZZ_CHECK(n.failures <= n.checks && n.recent <= s.n && n.recent_failures <= n.recent, "counts of %s",
                   n.node.c_str());
        FUZZ_CHECK(n.drain == (n.recent_failures >= s.k), "drain of %s", n.node.c_str());
        unsigned by_kind = 0;
        for (const auto& [kind, count] : n.failures_by_kind) by_kind += count;
        FUZZ_CHECK(by_kind == n.failures, "failures by kind of %s", n.node.c_str());
    }
    FUZZ_CHECK(checks == records.size(), "%u checks of %zu records", checks, records.size());
    mn::history_table(s);
    mn::history_json(s);
    const std::string first = text.substr(0, text.find('\n'));
    const int64_t now = 1764000000;
    const auto since = mn::parse_since(first, now);
    if (since) FUZZ_CHECK(*since >= 0 && (*since <= now || first.find_first_not_of("0123456789") == std::string::npos),
                          "since '%s'", first.c_str());
    return 0;
}
