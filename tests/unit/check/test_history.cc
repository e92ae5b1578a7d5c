// SPDX-License-Identifier: Apache-2.0
// Verdicts remembered: the line and its strict reader, the summary and
// its drain candidates, --since, and 20 processes appending at once.
#include "lib/check/history.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>

#include "tests/unit/unit.h"

using namespace mn;

namespace {

HistoryRecord record(const std::string& node, int64_t time, const std::string& kind, const std::string& verdict) {
    HistoryRecord r;
    r.job = "4242";
    r.step = "0";
    r.time = time;
    r.node = node;
    r.kind = kind;
    r.verdict = verdict;
    return r;
}

}  // namespace

static void verdict_kinds_from_judges_words(void**) {
    // Every kind has its own word, in the enum's order, and history knows it.
    const VerdictKind all[] = {VerdictKind::Ok,          VerdictKind::Slow,    VerdictKind::Fault,  VerdictKind::Fabric,
                        VerdictKind::Fingerprint, VerdictKind::Timeout, VerdictKind::Waited, VerdictKind::Disturbed};
    assert_int_equal(verdict_kinds().size(), sizeof all / sizeof all[0]);
    for (std::size_t i = 0; i < verdict_kinds().size(); ++i) assert_str(kind_word(all[i]), verdict_kinds()[i]);
    assert_str(kind_word(VerdictKind::Fingerprint), "fingerprint");
    assert_true(is_failure(kind_word(VerdictKind::Timeout)));
    assert_false(is_failure(kind_word(VerdictKind::Disturbed)));
    assert_false(is_failure("ok"));
    assert_false(is_failure("waited"));
    assert_false(is_failure("warning"));
    assert_true(is_failure("slow") && is_failure("timeout") && is_failure("fingerprint"));
}

static void line_is_the_documented_json(void**) {
    HistoryRecord r = record("node1", 1764000000, "slow", "slow: its pairs run at 0.0052 GB/s at best");
    r.findings = {"slow: its pairs run at 0.0052 GB/s at best", "warning: node1 GPU0: \"PCIe\"\tgen 4"};
    r.busbw_gbps = 1.25;
    r.pair_busbw_gbps = 0.0052;
    assert_str(format_history_line(r),
               "{\"v\":1,\"job\":\"4242\",\"step\":\"0\",\"time\":1764000000,\"node\":\"node1\","
               "\"verdict\":\"slow: its pairs run at 0.0052 GB/s at best\",\"kind\":\"slow\",\"findings\":["
               "\"slow: its pairs run at 0.0052 GB/s at best\",\"warning: node1 GPU0: \\\"PCIe\\\"\\tgen 4\"],"
               "\"busbw_gbps\":1.25,\"pair_busbw_gbps\":0.0052}\n");
    r = record("node0", 1, "ok", "ok");
    assert_str(format_history_line(r), "{\"v\":1,\"job\":\"4242\",\"step\":\"0\",\"time\":1,\"node\":\"node0\","
                                       "\"verdict\":\"ok\",\"kind\":\"ok\",\"findings\":[]}\n");
}

static void lines_read_back_exactly(void**) {
    HistoryRecord r = record("gpu-a[1]", 1764000123, "fault", "rank 3: caf\xc3\xa9 \x01 \\ / \"x\"\n");
    r.findings = {"", "\xff\xfe raw bytes", "\xf0\x9f\x98\x80 emoji"};
    r.busbw_gbps = 123.456789012345;
    r.pair_busbw_gbps = 0;
    const std::string line = format_history_line(r);
    const auto back = parse_history_line(line.substr(0, line.size() - 1));
    if (!back) fail_msg("%s", back.problem().text().c_str());
    assert_true(*back == r);
}

static void long_findings_are_dropped_and_said_so(void**) {
    HistoryRecord r = record("node7", 1764000000, "fault", "rank 9: " + std::string(3000, 'v'));
    for (int i = 0; i < 40; ++i) r.findings.push_back("finding " + std::to_string(i) + ": " + std::string(300, 'f'));
    r.findings.push_back(std::string(9000, '\x01'));  // escapes to six times its size
    const std::string line = format_history_line(r);
    assert_true(line.size() <= kHistoryLineMax);
    assert_true(line.back() == '\n');
    const auto back = parse_history_line(line.substr(0, line.size() - 1));
    assert_true(back.ok());
    assert_true(back->truncated);
    assert_int_equal(back->findings_dropped + back->findings.size(), 41);
    assert_true(back->findings_dropped > 0);
    assert_str(back->findings[0].substr(0, 11), "finding 0: ");
    assert_str(back->node, "node7");
    assert_contains(line, "\"findings_dropped\":");
    // Even a giant node name and verdict fit.
    r = record(std::string(5000, 'n'), 1, "fault", std::string(20000, '"'));
    const std::string giant = format_history_line(r);
    assert_true(giant.size() <= kHistoryLineMax);
    const auto g = parse_history_line(giant.substr(0, giant.size() - 1));
    assert_true(g.ok() && g->truncated);
}

static void reader_takes_json_as_written_by_others(void**) {
    const auto r = parse_history_line(
        "  { \"v\" : 1 , \"job\":4242, \"step\":0, \"time\":5, \"node\":\"n\\u00e9\\ud83d\\ude00\", "
        "\"verdict\":\"ok\", \"kind\":\"ok\", \"busbw_gbps\":null, \"pair_busbw_gbps\":1.5e-3, "
        "\"future\":[1,true,null,\"x\"], \"later\":{} }  ");
    // An object value of an unknown key is still refused: the format has none.
    assert_false(r.ok());
    const auto ok = parse_history_line(
        "  { \"v\" : 1 , \"job\":4242, \"step\":0, \"time\":5, \"node\":\"n\\u00e9\\ud83d\\ude00\", "
        "\"verdict\":\"ok\", \"kind\":\"ok\", \"busbw_gbps\":null, \"pair_busbw_gbps\":1.5e-3, "
        "\"future\":[1,true,null,\"x\"] }  ");
    if (!ok) fail_msg("%s", ok.problem().text().c_str());
    assert_str(ok->job, "4242");
    assert_str(ok->step, "0");
    assert_str(ok->node, "n\xe9\xf0\x9f\x98\x80");  // \u00XX is that byte, as json_text writes it
    assert_false(ok->busbw_gbps.has_value());
    assert_true(ok->pair_busbw_gbps && *ok->pair_busbw_gbps == 1.5e-3);
}

static void reader_refuses_what_is_not_our_line(void**) {
    const std::string head = "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",";
    const char* bad[] = {
        "",
        "[]",
        "{\"v\":1}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\"}",  // no verdict
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"} x",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"v\":1}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"o\x01k\"}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"\\x\"}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"\\ud800\"}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"\\u12\"}",
        "{\"v\":1,\"time\":05,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":1,\"time\":5.5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":1,\"time\":-5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":1,\"time\":99999999999999999999,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":0,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":\"1\",\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":1,\"time\":5,\"node\":\"\",\"kind\":\"ok\",\"verdict\":\"ok\"}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"findings\":[1]}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"findings\":[[\"a\"]]}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"busbw_gbps\":1e999}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"busbw_gbps\":-1}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"busbw_gbps\":NaN}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"busbw_gbps\":1.}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"busbw_gbps\":.5}",
        "{\"v\":1,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\",\"truncated\":1}",
        "{'v':1}",
    };
    for (const char* line : bad)
        if (parse_history_line(line).ok()) fail_msg("took: %s", line);
    assert_true(parse_history_line(head + "\"verdict\":\"ok\"}").ok());
    bool newer = false;
    const auto v2 = parse_history_line("{\"v\":2,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}", &newer);
    assert_false(v2.ok());
    assert_true(newer);
    assert_contains(v2.problem().what, "newer mn-preflight");
}

static void file_text_warns_with_file_and_line(void**) {
    const std::string good = format_history_line(record("node1", 10, "ok", "ok"));
    const std::string text = good + "garbage\n" + "\n" +
                             "{\"v\":2,\"time\":5,\"node\":\"n\",\"kind\":\"ok\",\"verdict\":\"ok\"}\n" + good +
                             good.substr(0, 30);
    std::vector<std::string> warnings;
    const auto recs = parse_history_text("/h/node1.jsonl", text, warnings);
    assert_int_equal(recs.size(), 2);
    assert_int_equal(warnings.size(), 3);
    assert_contains(warnings[0], "/h/node1.jsonl line 2: not a history line");
    assert_contains(warnings[1], "/h/node1.jsonl line 4: written by a newer mn-preflight (format 2)");
    assert_contains(warnings[2], "/h/node1.jsonl line 6: cut short");
    // A file of garbage: a few warnings and a count, never thousands.
    warnings.clear();
    std::string junk;
    for (int i = 0; i < 500; ++i) junk += "x\n";
    assert_true(parse_history_text("j.jsonl", junk, warnings).empty());
    assert_int_equal(warnings.size(), 21);
    assert_contains(warnings.back(), "j.jsonl: 480 more lines skipped");
}

static void summary_counts_and_names_drain_candidates(void**) {
    std::vector<HistoryRecord> recs = {
        // node1: failed 2 of its last 3 -> drain.
        record("node1", 100, "ok", "ok"), record("node1", 200, "slow", "slow: a"),
        record("node1", 300, "ok", "ok"), record("node1", 400, "fault", "rank 3: GPU1 gone"),
        // node2: two old failures, then fine: 1 of its last 3.
        record("node2", 100, "fault", "x"), record("node2", 200, "fault", "y"), record("node2", 300, "ok", "ok"),
        record("node2", 400, "ok", "ok"),
        // node3: only waited on others: never a failure.
        record("node3", 200, "waited", "waited on node1"), record("node3", 400, "waited", "waited on node1"),
        // node4: too old for --since.
        record("node4", 10, "fault", "old"), record("node4", 20, "fault", "old"),
    };
    std::swap(recs[0], recs[3]);  // order in the files does not matter: time does
    const HistorySummary s = summarise_records(recs, 50, 2, 3);
    assert_int_equal(s.nodes.size(), 3);
    const NodeHistory& n1 = s.nodes[0];
    assert_str(n1.node, "node1");
    assert_int_equal(n1.checks, 4);
    assert_int_equal(n1.failures, 2);
    assert_int_equal(n1.failures_by_kind.at("slow"), 1);
    assert_int_equal(n1.failures_by_kind.at("fault"), 1);
    assert_true(n1.last_failure_time && *n1.last_failure_time == 400);
    assert_str(n1.last_failure, "rank 3: GPU1 gone");
    assert_int_equal(n1.recent, 3);
    assert_int_equal(n1.recent_failures, 2);
    assert_true(n1.drain);
    assert_int_equal(s.nodes[1].failures, 2);
    assert_int_equal(s.nodes[1].recent_failures, 1);
    assert_false(s.nodes[1].drain);
    assert_int_equal(s.nodes[2].failures, 0);
    assert_false(s.nodes[2].drain);
    assert_true(s.drain_candidates().size() == 1 && s.drain_candidates()[0] == "node1");
    // K=1 of N=1: the last check alone decides.
    const std::vector<std::string> last_one = {"node1", "node4"};
    assert_true(summarise_records(recs, 0, 1, 1).drain_candidates() == last_one);
}

static void table_and_json(void**) {
    std::vector<HistoryRecord> recs = {record("node1", 1764000000, "slow", "slow: a"),
                                       record("node1", 1764003600, "fault", "rank 3: \"GPU1\" gone"),
                                       record("node2", 1764003600, "ok", "ok")};
    HistorySummary s = summarise_records(recs, 0, 2, 3);
    s.dir = "/var/lib/mn-preflight/history";
    s.warnings = {"/var/lib/mn-preflight/history/node2.jsonl line 7: cut short; skipped"};
    const std::string t = history_table(s);
    assert_contains(t, "history of /var/lib/mn-preflight/history since 1970-01-01T00:00:00Z: 2 nodes\n");
    assert_contains(t, "node  checks failed by kind         last check                 last failure\n");
    assert_contains(t, "node1 2      2      slow 1, fault 1 2025-11-24T17:00:00Z fault 2025-11-24T17:00:00Z rank 3: \"GPU1\" gone\n");
    assert_contains(t, "node2 1      0      -               2025-11-24T17:00:00Z ok    -\n");
    assert_contains(t, "drain candidates (failed 2 or more of their last 3 checks): node1\n");
    assert_contains(t, "warning: /var/lib/mn-preflight/history/node2.jsonl line 7: cut short; skipped\n");
    const std::string j = history_json(s);
    assert_contains(j, "{\"dir\":\"/var/lib/mn-preflight/history\",\"since\":0,\"k\":2,\"n\":3,\"nodes\":[");
    assert_contains(j, "{\"node\":\"node1\",\"checks\":2,\"failures\":2,\"failures_by_kind\":{\"fault\":1,\"slow\":1},"
                       "\"last_time\":1764003600,\"last_kind\":\"fault\",\"last_failure\":{\"time\":1764003600,"
                       "\"verdict\":\"rank 3: \\\"GPU1\\\" gone\"},\"recent_checks\":2,\"recent_failures\":2,"
                       "\"drain\":true}");
    assert_contains(j, "\"last_failure\":null");
    assert_contains(j, "\"drain_candidates\":[\"node1\"],\"warnings\":[\"/var/lib/mn-preflight/history/node2.jsonl");
}

static void since_takes_seconds_and_durations(void**) {
    const int64_t now = 1764000000;
    auto at = [&](const char* t) {
        const auto r = parse_since(t, now);
        if (!r) fail_msg("'%s': %s", t, r.problem().text().c_str());
        return *r;
    };
    assert_int_equal(at("1763000000"), 1763000000);
    assert_int_equal(at("0"), 0);
    assert_int_equal(at("7d"), now - 7 * 86400);
    assert_int_equal(at("24h"), now - 86400);
    assert_int_equal(at("30m"), now - 1800);
    assert_int_equal(at("90s"), now - 90);
    assert_int_equal(at("2w"), now - 14 * 86400);
    assert_int_equal(at("1d12h"), now - 36 * 3600);
    assert_int_equal(at("36500d"), 0);  // before 1970: from the start
    for (const char* bad : {"", "7x", "d", "-5", "7d-", "1.5h", "99999999999999d", " 7d", "7 d", "7D", "1e9",
                            "9999999999999999999"}) {
        const auto r = parse_since(bad, now);
        if (r) fail_msg("'%s' parsed", bad);
        assert_contains(r.problem().text(), "7d, 24h, 30m");
    }
}

static void append_makes_dir_and_file_readable(void**) {
    const std::string root = scratch_dir("history");
    const std::string dir = root + "/var/history";
    const mode_t old = umask(077);  // a strict umask must not hide the history from admins
    const auto path = append_history(dir, record("node1", 10, "ok", "ok"));
    const auto again = append_history(dir, record("node1", 20, "slow", "slow: x"));
    umask(old);
    if (!path) fail_msg("%s", path.problem().text().c_str());
    assert_true(again.ok());
    assert_str(*path, dir + "/node1.jsonl");
    struct stat st {};
    assert_int_equal(stat(dir.c_str(), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    assert_int_equal(stat(path->c_str(), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    const auto s = summarise(dir, 0);
    assert_true(s.ok());
    assert_int_equal(s->nodes.size(), 1);
    assert_int_equal(s->nodes[0].checks, 2);
    assert_true(s->warnings.empty());
    assert_str(history_file(dir, "../x/y"), dir + "/_._x_y.jsonl");
    // Errors are values naming the path.
    const auto bad = append_history(*path + "/sub", record("n", 1, "ok", "ok"));
    assert_false(bad.ok());
    assert_contains(bad.problem().what, *path);
    const auto none = summarise(root + "/nowhere", 0);
    assert_false(none.ok());
    assert_contains(none.problem().what, "nowhere");
    assert_int_equal(system(("rm -rf " + root).c_str()), 0);
}

// 20 processes, 50 lines each, one file: every line whole, none lost.
static void concurrent_appends_never_tear(void**) {
    const std::string dir = scratch_dir("history");
    constexpr int kProcs = 20, kLines = 50;
    std::vector<pid_t> pids;
    for (int p = 0; p < kProcs; ++p) {
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (int i = 0; i < kLines; ++i) {
                HistoryRecord r = record("node1", 1000 + i, "fault", "rank " + std::to_string(p) + ": fault");
                r.job = std::to_string(p);
                r.step = std::to_string(i);
                // Lines near the limit, so that a torn write would show.
                for (int k = 0; k < 12; ++k) r.findings.push_back(std::string(250, char('a' + (p + k) % 26)));
                if (!append_history(dir, r)) _exit(1);
            }
            _exit(0);
        }
        pids.push_back(pid);
    }
    for (pid_t pid : pids) {
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    const std::string text = file_text(dir + "/node1.jsonl");
    std::vector<std::string> warnings;
    const auto recs = parse_history_text("node1.jsonl", text, warnings);
    for (const auto& w : warnings) print_message("%s\n", w.c_str());
    assert_int_equal(warnings.size(), 0);
    assert_int_equal(recs.size(), kProcs * kLines);
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& r : recs) {
        seen.insert({r.job, r.step});
        assert_int_equal(r.findings.size() + r.findings_dropped, 12);
        for (const auto& f : r.findings) assert_int_equal(f.size(), 250);
    }
    assert_int_equal(seen.size(), kProcs * kLines);
    assert_int_equal(system(("rm -rf " + dir).c_str()), 0);
}

// Peers' words reach the line through json_text: no byte of theirs, a
// newline or a control character included, can end the line or start another.
static void peer_text_cannot_break_a_line(void**) {
    std::string every;
    for (int c = 1; c < 256; ++c) every += static_cast<char>(c);
    HistoryRecord r = record("node1", 10, "fault", "rank 1: " + every);
    r.findings = {"x\n{\"v\":1,\"time\":1,\"node\":\"node9\",\"verdict\":\"forged\",\"kind\":\"fault\"}\n", every};
    const std::string line = format_history_line(r);
    assert_int_equal(line.find('\n'), line.size() - 1);
    for (unsigned char c : line.substr(0, line.size() - 1)) assert_true(c >= 0x20 && c < 0x7f);
    std::vector<std::string> warnings;
    const auto back = parse_history_text("node1.jsonl", line, warnings);
    assert_int_equal(back.size(), 1);
    assert_true(warnings.empty());
    assert_true(back[0] == r);
}

static void trust_needs_own_file_and_trusted_owner(void**) {
    HistorySource src{"/h", "/h/node1.jsonl", 0, 0644, 0};
    assert_str(history_distrust(src, "node1"), "");  // root's file, its own node
    // Another node's line in node1's file: someone's forgery.
    assert_str(history_distrust(src, "node2"), "a line for node2 in /h/node1.jsonl (node2's lines go to /h/node2.jsonl)");
    // A user's file, read by root: untrusted; read by that user: their own.
    src.owner = 1001;
    assert_str(history_distrust(src, "node1"), "/h/node1.jsonl belongs to uid 1001, neither root nor the reader (uid 0)");
    src.reader = 1001;
    assert_str(history_distrust(src, "node1"), "");
    // Root's file that others may write: anyone could have appended.
    src.owner = 0;
    src.mode = 0666;
    assert_str(history_distrust(src, "node1"), "/h/node1.jsonl may be written by anyone (mode 0666)");
    src.mode = 0664;
    assert_contains(history_distrust(src, "node1"), "may be written by its group (mode 0664)");
}

static void untrusted_lines_are_shown_never_counted(void**) {
    std::vector<HistoryRecord> recs = {record("node1", 100, "fault", "a"), record("node1", 200, "fault", "b"),
                                       record("node2", 100, "ok", "ok"), record("node2", 200, "ok", "ok")};
    for (int i = 0; i < 3; ++i) {  // node2 framed: three failures, none trusted
        HistoryRecord r = record("node2", 300 + i, "fault", "forged");
        r.distrust = "a line for node2 in /h/node1.jsonl (node2's lines go to /h/node2.jsonl)";
        recs.push_back(r);
    }
    HistorySummary s = summarise_records(recs, 0, 2, 3);
    s.dir = "/h";
    assert_true(s.drain_candidates() == std::vector<std::string>{"node1"});
    assert_int_equal(s.nodes.size(), 2);
    assert_int_equal(s.nodes[1].checks, 2);
    assert_int_equal(s.nodes[1].failures, 0);
    assert_int_equal(s.untrusted.size(), 1);
    assert_str(s.untrusted[0].node, "node2");
    assert_int_equal(s.untrusted[0].lines, 3);
    assert_int_equal(s.untrusted[0].failures, 3);
    assert_int_equal(s.untrusted[0].last_time, 302);
    assert_contains(history_table(s), "untrusted (shown, never counted): node2: 3 lines, 3 failed, last "
                                      "1970-01-01T00:05:02Z: a line for node2 in /h/node1.jsonl");
    assert_contains(history_json(s), "\"untrusted\":[{\"node\":\"node2\",\"lines\":3,\"failures\":3,"
                                     "\"last_time\":302,\"why\":\"a line for node2 in /h/node1.jsonl");
    assert_contains(history_json(s), "\"drain_candidates\":[\"node1\"]");
}

// As root on a directory users can write: forged lines and files of
// others are shown, never drain candidates; what is no regular file is
// skipped with a warning, never opened, followed or waited on.
static void summary_of_a_directory_others_write(void**) {
    if (geteuid() != 0) skip();  // chown to another user needs root
    const passwd* nobody = getpwnam("nobody");
    if (!nobody) skip();
    const std::string dir = scratch_dir("history");
    const std::string bad_a = format_history_line(record("node2", 100, "fault", "forged a"));
    const std::string bad_b = format_history_line(record("node2", 200, "fault", "forged b"));
    // node1's own file (root's, 0644) holds two forged lines for node2.
    assert_true(append_history(dir, record("node1", 50, "ok", "ok")).ok());
    {
        std::ofstream out(dir + "/node1.jsonl", std::ios::app);
        out << bad_a << bad_b;
    }
    // node3's file written by another user: right node, wrong owner.
    {
        std::ofstream out(dir + "/node3.jsonl");
        out << format_history_line(record("node3", 100, "fault", "x")) << format_history_line(record("node3", 200, "fault", "y"));
    }
    assert_int_equal(chown((dir + "/node3.jsonl").c_str(), nobody->pw_uid, nobody->pw_gid), 0);
    // node4's file is root's but anyone may write it.
    {
        std::ofstream out(dir + "/node4.jsonl");
        out << format_history_line(record("node4", 100, "fault", "x")) << format_history_line(record("node4", 200, "fault", "y"));
    }
    assert_int_equal(chmod((dir + "/node4.jsonl").c_str(), 0666), 0);
    // What is no regular file: a FIFO, a link to /dev/zero, a directory, a
    // link to a good file (root's, with failures for node5).
    assert_int_equal(mkfifo((dir + "/fifo.jsonl").c_str(), 0666), 0);
    assert_int_equal(symlink("/dev/zero", (dir + "/zero.jsonl").c_str()), 0);
    assert_int_equal(mkdir((dir + "/sub.jsonl").c_str(), 0755), 0);
    const std::string elsewhere = scratch_dir("history");
    {
        std::ofstream out(elsewhere + "/node5.jsonl");
        out << format_history_line(record("node5", 100, "fault", "x")) << format_history_line(record("node5", 200, "fault", "y"));
    }
    assert_int_equal(symlink((elsewhere + "/node5.jsonl").c_str(), (dir + "/node5.jsonl").c_str()), 0);

    fail_if_blocked(20);
    const auto s = summarise(dir, 0, 2, 3);
    alarm(0);
    if (!s) fail_msg("%s", s.problem().text().c_str());
    assert_true(s->drain_candidates().empty());
    assert_int_equal(s->nodes.size(), 1);  // node1, its one honest line
    assert_str(s->nodes[0].node, "node1");
    assert_int_equal(s->nodes[0].checks, 1);
    assert_int_equal(s->untrusted.size(), 3);
    const std::string t = history_table(*s);
    assert_contains(t, "drain candidates (failed 2 or more of their last 3 checks): none\n");
    assert_contains(t, "node2: 2 lines, 2 failed, last 1970-01-01T00:03:20Z: a line for node2 in " + dir + "/node1.jsonl");
    assert_contains(t, "node3: 2 lines, 2 failed, last 1970-01-01T00:03:20Z: " + dir + "/node3.jsonl belongs to uid " +
                           std::to_string(nobody->pw_uid) + ", neither root nor the reader (uid 0)");
    assert_contains(t, "node4: 2 lines, 2 failed, last 1970-01-01T00:03:20Z: " + dir + "/node4.jsonl may be written by anyone");
    assert_contains(t, dir + "/fifo.jsonl is a FIFO, not a regular file; skipped");
    assert_contains(t, dir + "/zero.jsonl is a symbolic link, which is not followed here; skipped");
    assert_contains(t, dir + "/sub.jsonl is a directory, not a regular file; skipped");
    assert_contains(t, dir + "/node5.jsonl is a symbolic link, which is not followed here; skipped");
    assert_int_equal(system(("rm -rf " + dir + " " + elsewhere).c_str()), 0);
}

// Another user's files, large and named to sort first, cannot use up the
// read budget before the files whose lines count (issue 38: eight 64 MiB
// files once turned "drain candidates: node1" into "none"). The budget is
// 4 KiB here, the same rule as 512 MiB.
static void others_files_never_hide_the_history(void**) {
    if (geteuid() != 0) skip();  // chown to another user needs root
    const passwd* nobody = getpwnam("nobody");
    if (!nobody) skip();
    const std::string dir = scratch_dir("history");
    for (int t = 1; t <= 3; ++t) assert_true(append_history(dir, record("node1", t * 100, "fault", "GPU0 lost")).ok());
    const std::string padding = format_history_line(record("aaa", 5, "ok", std::string(400, 'x')));
    for (const char* name : {"/aaa0.jsonl", "/aaa1.jsonl", "/aaa2.jsonl"}) {
        {
            std::ofstream out(dir + name);
            for (int i = 0; i < 12; ++i) out << padding;
        }
        assert_int_equal(chown((dir + name).c_str(), nobody->pw_uid, nobody->pw_gid), 0);
    }
    const auto s = summarise(dir, 0, 2, 3, 4096);
    if (!s) fail_msg("%s", s.problem().text().c_str());
    const auto drain = s->drain_candidates();
    assert_int_equal(drain.size(), 1);
    assert_str(drain[0], "node1");
    const std::string t = history_table(*s);
    assert_contains(t, "files from " + dir + "/aaa");
    assert_contains(t, "all of them others' files, whose lines would not count");
    assert_contains(t, "more than 4 KiB of history");
    // The same files, all root's: a history too large for the budget says to rotate.
    for (const char* name : {"/aaa0.jsonl", "/aaa1.jsonl", "/aaa2.jsonl"})
        assert_int_equal(chown((dir + name).c_str(), 0, 0), 0);
    const auto r = summarise(dir, 0, 2, 3, 4096);
    if (!r) fail_msg("%s", r.problem().text().c_str());
    assert_contains(history_table(*r), "(rotate the files)");
    assert_int_equal(system(("rm -rf " + dir).c_str()), 0);
}

// The prolog (root) appends where users may write: never through a link
// (the victim keeps its text), never blocked by a FIFO, never into a file
// a user made (its lines would not be trusted, and it is theirs).
static void append_never_follows_waits_or_writes_anothers_file(void**) {
    const std::string dir = scratch_dir("history");
    const std::string victim = dir + "/victim";
    std::ofstream(victim) << "root:secret\n";
    assert_int_equal(symlink(victim.c_str(), (dir + "/node1.jsonl").c_str()), 0);
    const auto linked = append_history(dir, record("node1", 10, "fault", "x"));
    assert_false(linked.ok());
    assert_contains(linked.problem().what, dir + "/node1.jsonl is a symbolic link, not a regular file");
    assert_str(file_text(victim), "root:secret\n");
    assert_int_equal(mkfifo((dir + "/node2.jsonl").c_str(), 0666), 0);
    fail_if_blocked(10);
    const auto fifo = append_history(dir, record("node2", 10, "fault", "x"));
    alarm(0);
    assert_false(fifo.ok());
    assert_contains(fifo.problem().what, dir + "/node2.jsonl is a FIFO, not a regular file");
    if (geteuid() == 0) {
        if (const passwd* nobody = getpwnam("nobody")) {
            const std::string theirs = dir + "/node3.jsonl";
            std::ofstream(theirs) << "";
            assert_int_equal(chown(theirs.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
            const auto w = append_history(dir, record("node3", 10, "fault", "x"));
            assert_false(w.ok());
            assert_contains(w.problem().what, theirs + " belongs to uid " + std::to_string(nobody->pw_uid));
            assert_contains(w.problem().fix, "remove it");
            assert_str(file_text(theirs), "");
        }
    }
    assert_int_equal(system(("rm -rf " + dir).c_str()), 0);
}

// Root reads the table in a terminal: a forged verdict cannot print a line
// of its own or send an escape sequence; the JSON keeps the text, escaped.
static void table_shows_forged_text_inert(void**) {
    HistoryRecord r = record("node3", 100, "fault", "forged");
    r.distrust = "a line for node3\x1b]0;pwned\x07 in /h/node2.jsonl";
    const HistoryRecord nl = record("node1", 100, "fault", "x\ndrain candidates (failed 2 or more of their last 3 checks): node7");
    const HistoryRecord c1 = record("node\xc2\x9b" "2J", 100, "ok", "\x1b[2Jgone");
    HistorySummary s = summarise_records({nl, r, c1}, 0, 2, 3);
    s.warnings = {"bad\x1b[31m"};
    const std::string t = history_table(s);
    for (char c : t) assert_true(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
    assert_true(t.find("\xc2\x9b") == std::string::npos);
    assert_contains(t, "x?drain candidates (failed 2 or more of their last 3 checks): node7");
    assert_contains(t, "drain candidates (failed 2 or more of their last 3 checks): none\n");
    assert_contains(t, "node?2J ");
    assert_contains(t, "a line for node3?]0;pwned? in /h/node2.jsonl");
    assert_contains(t, "warning: bad?[31m\n");
    assert_contains(history_json(s), "drain candidates (failed 2 or more of their last 3 checks): node7");
    assert_contains(history_json(s), "\"last_failure\":{\"time\":100,\"verdict\":\"x\\ndrain");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_shows_forged_text_inert),
        cmocka_unit_test(peer_text_cannot_break_a_line),
        cmocka_unit_test(trust_needs_own_file_and_trusted_owner),
        cmocka_unit_test(untrusted_lines_are_shown_never_counted),
        cmocka_unit_test(summary_of_a_directory_others_write),
        cmocka_unit_test(append_never_follows_waits_or_writes_anothers_file),
        cmocka_unit_test(verdict_kinds_from_judges_words),
        cmocka_unit_test(line_is_the_documented_json),
        cmocka_unit_test(lines_read_back_exactly),
        cmocka_unit_test(long_findings_are_dropped_and_said_so),
        cmocka_unit_test(reader_takes_json_as_written_by_others),
        cmocka_unit_test(reader_refuses_what_is_not_our_line),
        cmocka_unit_test(file_text_warns_with_file_and_line),
        cmocka_unit_test(summary_counts_and_names_drain_candidates),
        cmocka_unit_test(table_and_json),
        cmocka_unit_test(since_takes_seconds_and_durations),
        cmocka_unit_test(append_makes_dir_and_file_readable),
        cmocka_unit_test(concurrent_appends_never_tear),
        cmocka_unit_test(others_files_never_hide_the_history),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
