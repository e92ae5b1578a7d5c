// The check's option table: its limits hold in both spellings (mn-preflight's
// argv and --mn-preflight=OPTIONS) alike, a value read in one gives the same
// settings as in the other, errors name the option, the value and the fix,
// and every option is in the man pages and in mn-preflight --help.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lib/check/check_options.h"
#include "lib/check/preflight_request.h"
#include "lib/util/text.h"
#include "tests/unit/unit.h"

using namespace mn;

static const CheckOption& opt(const char* name) {
    const CheckOption* o = find_check_option(name, kInline);
    if (!o) fail_msg("no option '%s' in the table", name);
    return *o;
}

// Accepted by mn-preflight's argv?
static bool argv_takes(const CheckOption& o, const std::string& value, CheckSettings& into) {
    std::vector<std::string> args{o.argv()};
    if (o.kind != ValueKind::Flag) args.push_back(value);
    std::size_t i = 0;
    auto taken = take_check_arg(args, i, kCheckArgv | kExecArgv, into);
    if (taken && !*taken) fail_msg("%s not taken as an option", o.argv().c_str());
    if (taken && i != args.size() - 1) fail_msg("%s: the value was not consumed", o.argv().c_str());
    return taken.ok();
}

static bool inline_takes(const CheckOption& o, const std::string& value) {
    const std::string item = o.kind == ValueKind::Flag ? o.name : std::string(o.name) + "=" + value;
    return parse_preflight_request(item, kPreflightOption).ok();
}

static void every_option_is_complete(void**) {
    assert_true(check_option_table().size() >= 11);
    for (const CheckOption& o : check_option_table()) {
        assert_non_null(o.name);
        assert_true(std::string(o.help).size() > 10);
        assert_true(o.places != 0);
        if (o.kind == ValueKind::Flag) continue;
        assert_true(*o.meta && *o.want && *o.example && *o.fallback);
        CheckSettings s;
        if (!set_check_option(o, o.example, s)) fail_msg("%s's own example '%s' is refused", o.name, o.example);
    }
}

static void limits_are_the_same_in_both_spellings(void**) {
    const std::vector<std::string> values = {"", "0", "1", "0.5", "1.5", "2.5", "30", "600", "601", "1e2", "inf",
                                             "nan", "-1", " 5", "0x10", "abc", "10000", "10001", "4K", "4k", "1K",
                                             "4095", "4096", "8G", "9G", "8193M", "64M", "1000000", "1000001", "auto",
                                             "IB", "roce", "socket", "off", "path/x", "99999999999999"};
    for (const CheckOption& o : check_option_table()) {
        if (!(o.places & kInline) || !(o.places & (kCheckArgv | kExecArgv)) || o.kind == ValueKind::Flag) continue;
        for (const auto& v : values) {
            CheckSettings s;
            const bool a = argv_takes(o, v, s), b = inline_takes(o, v);
            if (a != b) fail_msg("%s '%s': argv %s, inline %s", o.name, v.c_str(), a ? "takes" : "refuses",
                                 b ? "takes" : "refuses");
        }
    }
}

static void limits_are_the_documented_ones(void**) {
    CheckSettings s;
    assert_true(set_check_option(opt("timeout"), "1", s) && set_check_option(opt("timeout"), "600", s));
    assert_false(set_check_option(opt("timeout"), "0.9", s) || set_check_option(opt("timeout"), "600.5", s));
    assert_false(set_check_option(opt("min-busbw"), "0", s) || set_check_option(opt("min-busbw"), "inf", s));
    assert_true(set_check_option(opt("min-busbw"), "0.001", s));
    assert_true(set_check_option(opt("size"), "4K", s) && set_check_option(opt("size"), "8g", s));
    assert_false(set_check_option(opt("size"), "4095", s) || set_check_option(opt("size"), "8193M", s));
    assert_true(set_check_option(opt("iters"), "10000", s));
    assert_false(set_check_option(opt("iters"), "0", s) || set_check_option(opt("iters"), "1.5", s));
    assert_false(set_check_option(opt("mode"), "off", s) || set_check_option(opt("mode"), "", s));
    assert_false(set_check_option(opt("exclude-file"), "", s));
}

static void both_spellings_give_the_same_settings(void**) {
    auto r = parse_preflight_request("timeout=30,min-busbw=2.5,size=4097,iters=3,no-pairs,gpu,mode=RoCE,json,"
                                     "exclude-file=/shared/bad,comment",
                                     kPreflightEnv);
    if (!r) fail_msg("%s", r.problem().text().c_str());
    // What the plugin puts in front of the task, read back by mn-preflight's parser.
    std::vector<std::string> args = r->check_args;
    args.insert(args.end(), {"--exclude-file", r->exclude_file, "--job-comment"});
    CheckSettings s;
    for (std::size_t i = 0; i < args.size(); ++i) {
        auto taken = take_check_arg(args, i, kCheckArgv | kExecArgv, s);
        if (!taken || !*taken) fail_msg("'%s' not taken", args[i].c_str());
    }
    assert_true(s.check.timeout == 30);
    assert_true(s.check.min_busbw && *s.check.min_busbw == 2.5);
    assert_int_equal(s.check.bytes, 4096);  // whole floats
    assert_int_equal(s.check.iters, 3);
    assert_false(s.check.pairs);
    assert_str(s.check.path, "gpu");
    assert_true(s.check.mode == Mode::Roce);
    assert_true(s.check.json);
    assert_str(s.exclude_file, "/shared/bad");
    assert_true(s.job_comment);
}

static void errors_name_the_option_value_and_fix(void**) {
    Problem p = bad_check_value(opt("timeout"), Spelling::Argv, "0");
    assert_str(p.text(), "--timeout needs seconds, from 1 to 600, e.g. --timeout 30 (got '0')");
    p = bad_check_value(opt("mode"), Spelling::Argv, "off");
    assert_str(p.text(), "--mode='off' is not a valid mode; use one of auto, ib, roce or socket, e.g. --mode ib");
    p = bad_check_value(opt("size"), Spelling::Inline, "12", "MN_NCCL_PREFLIGHT");
    assert_str(p.text(), "MN_NCCL_PREFLIGHT: 'size=12' is not valid; give size=BYTES: 4K to 8G, e.g. size=64M");
    CheckSettings s;
    std::vector<std::string> args{"--iters"};
    std::size_t i = 0;
    auto taken = take_check_arg(args, i, kCheckArgv, s);
    assert_false(taken.ok());
    assert_contains(taken.problem().text(), "--iters needs a value: a whole number from 1 to 10000");
    // An exec-only option is not one of check's own without --exec's places.
    args = {"--job-comment"};
    i = 0;
    taken = take_check_arg(args, i, kCheckArgv, s);
    assert_true(taken.ok() && !*taken);
}

static void help_lists_every_option(void**) {
    const std::string help = check_options_help(kCheckArgv | kExecArgv);
    const std::string synopsis = check_options_synopsis(kCheckArgv | kExecArgv, 10);
    const std::string list = inline_options_list();
    for (const CheckOption& o : check_option_table()) {
        assert_contains(help, ("  " + o.argv() + " ").c_str());
        assert_contains(synopsis, ("[" + o.argv()).c_str());
        if (o.places & kInline) assert_contains(list, o.name);
    }
    for (const std::string& text : {help, synopsis})
        for (const std::string& line : split_list(text, '\n'))
            if (line.size() > 100) fail_msg("longer than 100 columns: '%s'", line.c_str());
}

// ---- the man pages and mn-preflight --help, against the table ---------------

static std::string roff(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '-' ? std::string("\\-") : std::string(1, c);
    return out;
}

static std::string source_file(const char* rel) {
    const char* dir = std::getenv("MN_SRCDIR");
    if (!dir) fail_msg("MN_SRCDIR is not set (make check sets it)");
    std::ifstream f(std::string(dir) + "/" + rel);
    if (!f) fail_msg("cannot read %s/%s", dir, rel);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The lines of one .SH or .SS section.
static std::string section(const std::string& page, const std::string& heading) {
    const std::size_t at = page.find("\n" + heading + "\n");
    if (at == std::string::npos) fail_msg("no section '%s'", heading.c_str());
    const std::size_t end = page.find("\n.S", at + heading.size() + 2);
    return page.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// A roff word in bold at the start of a line: ".B NAME", ".BI NAME", ".BR NAME=".
static bool bold_word(const std::string& text, const std::string& word) {
    for (const char* macro : {"\n.B ", "\n.BI ", "\n.BR "}) {
        for (std::size_t at = text.find(macro + word); at != std::string::npos; at = text.find(macro + word, at + 1)) {
            const char next = text[at + std::string(macro).size() + word.size()];
            if (word.back() == '=' || (!std::isalnum(static_cast<unsigned char>(next)) && next != '\\')) return true;
        }
    }
    return false;
}

static void man_pages_describe_every_option(void**) {
    const std::string preflight = section(source_file("man/mn-preflight.1"), ".SH OPTIONS");
    const std::string plugin = section(source_file("man/mn_nccl.8"), ".SH PRE-FLIGHT IN THE STEP (\\-\\-mn\\-preflight)");
    for (const CheckOption& o : check_option_table()) {
        if ((o.places & (kCheckArgv | kExecArgv)) && !bold_word(preflight, roff(o.argv())))
            fail_msg("mn-preflight(1) OPTIONS lacks %s", o.argv().c_str());
        const std::string word = roff(o.name) + (o.kind == ValueKind::Flag ? "" : "=");
        if ((o.places & kInline) && !bold_word(plugin, word))
            fail_msg("mn_nccl(8) --mn-preflight lacks %s", word.c_str());
    }
    // The switch words of MN_NCCL_PREFLIGHT, each as preflight_switch reads it.
    for (const char* w : {"1", "0", "on", "off", "yes", "no", "true", "false"}) {
        if (!bold_word(plugin, w)) fail_msg("mn_nccl(8) --mn-preflight lacks the switch word %s", w);
        assert_true(preflight_switch(w).has_value());
    }
}

static void help_of_the_program_prints_every_option(void**) {
    const char* bin = std::getenv("MN_PREFLIGHT");
    if (!bin) fail_msg("MN_PREFLIGHT is not set (make check sets it)");
    FILE* p = popen((std::string(bin) + " --help").c_str(), "r");
    assert_non_null(p);
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    assert_int_equal(pclose(p), 0);
    for (const CheckOption& o : check_option_table()) {
        const std::string line = "  " + o.argv() + (o.kind == ValueKind::Flag ? "" : std::string(" ") + o.meta);
        assert_contains(out, line.c_str());
        // The help text, wrapped: its first words.
        assert_contains(out, std::string(o.help).substr(0, 20).c_str());
    }
}

// --prolog --reason-file runs as root in a directory others may write: a
// link left at PATH is replaced by the reason, its target keeps its text,
// and a FIFO there neither hangs the prolog nor stays. The prolog fails on
// purpose: --mode ib on a fixture node without RDMA.
static void reason_file_never_follows_a_link(void**) {
    const char* bin = std::getenv("MN_PREFLIGHT");
    const char* fixtures = std::getenv("MN_FIXTURES");
    if (!bin || !fixtures) fail_msg("MN_PREFLIGHT or MN_FIXTURES is not set (make check sets them)");
    char tmpl[] = "/tmp/mn-reason-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const std::string victim = dir + "/victim", reason = dir + "/reason", fifo = dir + "/fifo";
    std::ofstream(victim) << "root:secret\n";
    assert_int_equal(symlink(victim.c_str(), reason.c_str()), 0);
    assert_int_equal(mkfifo(fifo.c_str(), 0666), 0);
    const std::string run = "MN_NCCL_SYSFS_ROOT=" + std::string(fixtures) + "/no-rdma timeout 20 " + bin +
                            " --prolog --mode ib --timeout 10 --reason-file ";
    assert_int_equal(WEXITSTATUS(system((run + reason + " >/dev/null").c_str())), 1);
    assert_int_equal(WEXITSTATUS(system((run + fifo + " >/dev/null").c_str())), 1);  // 124 if it hung
    auto slurp = [](const std::string& path) {
        std::ifstream in(path);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    };
    assert_str(slurp(victim), "root:secret\n");
    struct stat st {};
    assert_int_equal(lstat(reason.c_str(), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0644);
    const std::string text = slurp(reason);
    assert_contains(text, "--mode ib: this node has no ACTIVE InfiniBand port");
    assert_int_equal(text.find('\n'), text.size() - 1);  // one line
    assert_int_equal(lstat(fifo.c_str(), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_str(slurp(fifo), text);
    assert_int_equal(system(("rm -rf " + dir).c_str()), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reason_file_never_follows_a_link),
        cmocka_unit_test(every_option_is_complete),
        cmocka_unit_test(limits_are_the_same_in_both_spellings),
        cmocka_unit_test(limits_are_the_documented_ones),
        cmocka_unit_test(both_spellings_give_the_same_settings),
        cmocka_unit_test(errors_name_the_option_value_and_fix),
        cmocka_unit_test(help_lists_every_option),
        cmocka_unit_test(man_pages_describe_every_option),
        cmocka_unit_test(help_of_the_program_prints_every_option),
    };
    return cmocka_run_group_tests_name("check_options", tests, nullptr, nullptr);
}
