// SPDX-License-Identifier: Apache-2.0
// The option table: its limits hold in both spellings (mn-preflight's argv
// and --mn-preflight=OPTIONS) alike, a value read in one gives the same
// settings as in the other, errors name the option, the value and the fix,
// and every option is in the man pages and in its subcommand's --help.
// mn-preflight's command line: what the plugin puts in front of a task
// reads back as asked, every usage error is one line and a try line with
// exit 2, and a misspelt option or subcommand is guessed.
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
    const std::string help = check_options_help(kAnyArgv);
    const std::string synopsis = check_options_synopsis(kAnyArgv, 10);
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
    const std::string page = source_file("man/mn-preflight.1");
    const std::string preflight = section(page, ".SH OPTIONS");
    const std::string plugin = section(source_file("man/mn_nccl.8"), ".SH PRE-FLIGHT IN THE STEP (\\-\\-mn\\-preflight)");
    for (const CheckOption& o : check_option_table()) {
        // check's and check --exec's in OPTIONS (--exec itself has a section);
        // the other subcommands' at least in their sections.
        if ((o.places & (kCheckArgv | kExecArgv)) && std::string(o.name) != "exec" &&
            !bold_word(preflight, roff(o.argv())))
            fail_msg("mn-preflight(1) OPTIONS lacks %s", o.argv().c_str());
        if ((o.places & kAnyArgv) && page.find(roff(o.argv())) == std::string::npos)
            fail_msg("mn-preflight(1) never names %s", o.argv().c_str());
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

// ---- mn-preflight itself -----------------------------------------------------

struct Ran {
    int code;
    std::string out, err;
};

static std::string slurp_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// mn-preflight ARGS, each word quoted for the shell, with a time limit: a
// usage error that went on to run the check would not hang the test.
static Ran run_preflight(const std::vector<std::string>& args) {
    const char* bin = std::getenv("MN_PREFLIGHT");
    if (!bin) fail_msg("MN_PREFLIGHT is not set (make check sets it)");
    char tmpl[] = "/tmp/mn-cli-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::string cmd = "env -u SLURM_JOB_ID -u SLURM_STEP_ID timeout 20 " + std::string(bin);
    for (const std::string& a : args) {
        std::string q;
        for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        cmd += " '" + q + "'";
    }
    cmd += " >" + dir + "/out 2>" + dir + "/err";
    const int status = system(cmd.c_str());
    Ran r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp_file(dir + "/out"), slurp_file(dir + "/err")};
    if (system(("rm -rf " + dir).c_str()) != 0) fail_msg("cannot remove %s", dir.c_str());
    return r;
}

static std::string words(const std::vector<std::string>& args) {
    std::string out;
    for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
    return out;
}

static void help_of_every_subcommand_prints_its_options(void**) {
    for (const SubcommandInfo& sub : subcommand_table()) {
        for (const char* h : {"--help", "-h"}) {
            const Ran r = run_preflight({sub.name, h});
            if (r.code != 0) fail_msg("%s %s: exit %d: %s", sub.name, h, r.code, r.err.c_str());
            assert_str(r.err, "");
            assert_contains(r.out, (std::string("mn-preflight ") + sub.name).c_str());
            for (const CheckOption& o : check_option_table()) {
                if (!(o.places & sub.places)) continue;
                const std::string line = "  " + o.argv() + (o.kind == ValueKind::Flag ? "" : std::string(" ") + o.meta);
                assert_contains(r.out, line.c_str());
                // The help text, wrapped: its first words.
                assert_contains(r.out, std::string(o.help).substr(0, 20).c_str());
            }
            for (const std::string& line : split_list(r.out, '\n'))
                if (line.size() > 100) fail_msg("%s --help: longer than 100 columns: '%s'", sub.name, line.c_str());
        }
        // An option of another subcommand is not in this one's help.
        const Ran r = run_preflight({sub.name, "--help"});
        if (sub.sub != Subcommand::Discover) assert_true(r.out.find("--sysfs-root") == std::string::npos);
        if (sub.sub != Subcommand::History) assert_true(r.out.find("--drain") == std::string::npos);
    }
    // --prolog is prolog; "--help SUB" is "SUB --help".
    assert_str(run_preflight({"--prolog", "--help"}).out, run_preflight({"prolog", "--help"}).out);
    assert_str(run_preflight({"--help", "history"}).out, run_preflight({"history", "--help"}).out);
    // mn-preflight --help: the subcommands, briefly, and where their options are.
    const Ran top = run_preflight({"--help"});
    assert_int_equal(top.code, 0);
    for (const SubcommandInfo& sub : subcommand_table()) assert_contains(top.out, (std::string("  ") + sub.name + " ").c_str());
    assert_contains(top.out, "'mn-preflight SUBCOMMAND --help'");
    assert_true(split_list(top.out, '\n').size() < 16);
    assert_true(top.out.find("--min-busbw") == std::string::npos);
}

// Each usage error: exit 2, nothing on stdout, and exactly the two lines.
static void usage_errors_are_one_line_and_a_try_line(void**) {
    const struct {
        std::vector<std::string> args;
        const char* line;  // the first line, whole
    } cases[] = {
        {{"--timout", "3"}, "mn-preflight: check: unknown option '--timout'; did you mean --timeout?"},
        {{"check", "--min-bussbw", "3"}, "mn-preflight: check: unknown option '--min-bussbw'; did you mean --min-busbw?"},
        {{"check", "--time", "5"}, "mn-preflight: check: unknown option '--time'; did you mean --timeout?"},
        {{"check", "-timeout", "5"}, "mn-preflight: check: unknown option '-timeout'; did you mean --timeout?"},
        {{"check", "--bogus"}, "mn-preflight: check: unknown option '--bogus'"},
        {{"check", "-x"}, "mn-preflight: check: unknown option '-x'"},
        {{"check", "--timeout", "0"}, "mn-preflight: check: --timeout needs seconds, from 1 to 600, e.g. --timeout 30 (got '0')"},
        {{"check", "--timeout=abc"}, "mn-preflight: check: --timeout needs seconds, from 1 to 600, e.g. --timeout 30 (got 'abc')"},
        {{"check", "--iters"}, "mn-preflight: check: --iters needs a value: a whole number from 1 to 10000, e.g. --iters 20"},
        {{"check", "--json=yes"}, "mn-preflight: check: --json takes no value (got '--json=yes')"},
        {{"check", "--mode", "fast"}, "mn-preflight: check: --mode='fast' is not a valid mode; use one of auto, ib, roce or socket, e.g. --mode ib"},
        {{"check", "stray"}, "mn-preflight: check: unexpected argument 'stray'; a program to run goes after --exec [OPTIONS] --"},
        {{"check", "--port", "5"}, "mn-preflight: check: --port goes with --exec: mn-preflight check --exec [OPTIONS] -- PROGRAM"},
        {{"check", "--", "true"}, "mn-preflight: check: -- PROGRAM goes with --exec: mn-preflight check --exec [OPTIONS] -- PROGRAM"},
        {{"check", "--exec", "--port", "0", "--", "true"}, "mn-preflight: check: --port needs a port from 1 to 65535, e.g. --port 29501 (got '0')"},
        {{"check", "--exec", "--timeout", "30"}, "mn-preflight: check: --exec needs a program after --"},
        {{"check", "--reason-file", "x"}, "mn-preflight: check: --reason-file is an option of prolog, not of check"},
        {{"--json", "--prolog"}, "mn-preflight: check: '--prolog' is a subcommand and goes first: mn-preflight prolog [OPTIONS]"},
        {{"prolog", "--jsn"}, "mn-preflight: prolog: unknown option '--jsn'; did you mean --json?"},
        {{"--prolog", "--reason-fil", "x"}, "mn-preflight: prolog: unknown option '--reason-fil'; did you mean --reason-file?"},
        {{"prolog", "--reason-file", ""}, "mn-preflight: prolog: --reason-file needs a file, e.g. --reason-file /run/mn-preflight.reason (got '')"},
        {{"prolog", "--min-busbw", "3"}, "mn-preflight: prolog: --min-busbw is an option of check, not of prolog"},
        {{"prolog", "node1"}, "mn-preflight: prolog: takes no arguments (got 'node1')"},
        {{"discover", "--timeout", "3"}, "mn-preflight: discover: --timeout is an option of check and prolog, not of discover"},
        {{"discover", "--sysfs-rot", "/x"}, "mn-preflight: discover: unknown option '--sysfs-rot'; did you mean --sysfs-root?"},
        {{"discover", "--mode", "off"}, "mn-preflight: discover: --mode='off' is not a valid mode; use one of auto, ib, roce or socket, e.g. --mode ib"},
        {{"history"}, "mn-preflight: history: needs the directory that --history wrote to: mn-preflight history DIR"},
        {{"history", "a", "b"}, "mn-preflight: history: takes one DIR (got 'a' and 'b')"},
        {{"history", "/tmp", "--drain", "4/3"}, "mn-preflight: history: --drain needs K/N with 1 <= K <= N <= 1000, e.g. --drain 2/3 (got '4/3')"},
        {{"history", "/tmp", "--since", "yesterday"}, "mn-preflight: history: --since 'yesterday' is neither unix seconds nor a duration; give unix seconds (1764000000) or a time back from now: 7d, 24h, 30m, 90s, 2w, 1d12h"},
        {{"history", "/tmp", "--sinse", "7d"}, "mn-preflight: history: unknown option '--sinse'; did you mean --since?"},
        {{"histroy", "/tmp"}, "mn-preflight: unknown subcommand 'histroy'; did you mean history?"},
        {{"discovr"}, "mn-preflight: unknown subcommand 'discovr'; did you mean discover?"},
        {{"train.py"}, "mn-preflight: unknown subcommand 'train.py'"},
        {{"--version", "x"}, "mn-preflight: unexpected argument 'x' after --version"},
    };
    for (const auto& c : cases) {
        const Ran r = run_preflight(c.args);
        // "mn-preflight: SUB: ..." sends to SUB's help, "mn-preflight: ..." to the subcommands'.
        const std::string line = c.line, after = line.substr(line.find(": ") + 2);
        const std::string sub = after.find(": ") < after.find(' ') ? after.substr(0, after.find(": ")) : "";
        const std::string want = std::string(c.line) + "\ntry 'mn-preflight " + (sub.empty() ? "" : sub + " ") + "--help'\n";
        if (r.code != 2 || r.err != want || !r.out.empty())
            fail_msg("mn-preflight %s: exit %d, stderr:\n%s\nwanted exit 2 and:\n%s", words(c.args).c_str(), r.code,
                     r.err.c_str(), want.c_str());
    }
}

// ---- the parser, as the plugin and the subcommands use it --------------------

static CommandLine parsed(const std::vector<std::string>& args) {
    CommandLine c = parse_command_line(args);
    if (!c.error.empty()) fail_msg("'%s': %s", words(args).c_str(), c.error.c_str());
    return c;
}

// What srun --mn-preflight=... puts in front of each task reads back as
// asked, the program's own arguments untouched.
static void the_plugins_argv_reads_back(void**) {
    auto r = parse_preflight_request("timeout=30,min-busbw=2.5,size=4097,iters=3,no-pairs,gpu,mode=RoCE,json,"
                                     "exclude-file=/shared/bad,comment",
                                     kPreflightEnv);
    if (!r) fail_msg("%s", r.problem().text().c_str());
    SiteConfig site;
    site.history_dir = "/var/lib/h";
    std::vector<std::string> argv = preflight_argv(*r, "mn-preflight", 29600, site, "pyxis --container-image=x");
    argv.insert(argv.end(), {"python", "train.py", "--help", "--timeout", "--", "-h"});
    const CommandLine c = parsed({argv.begin() + 1, argv.end()});
    assert_true(c.sub == Subcommand::Check);
    assert_false(c.help);
    const CheckSettings& s = c.settings;
    assert_true(s.exec);
    assert_int_equal(s.port, 29600);
    assert_true(s.check.timeout == 30);
    assert_true(s.check.min_busbw && *s.check.min_busbw == 2.5);
    assert_int_equal(s.check.bytes, 4096);
    assert_int_equal(s.check.iters, 3);
    assert_false(s.check.pairs);
    assert_str(s.check.path, "gpu");
    assert_true(s.check.mode == Mode::Roce);
    assert_true(s.check.json);
    assert_str(s.check.history_dir, "/var/lib/h");
    assert_str(s.exclude_file, "/shared/bad");
    assert_true(s.job_comment);
    assert_str(s.container, "pyxis --container-image=x");
    assert_str(words(c.program), "python train.py --help --timeout -- -h");
}

static void subcommands_read_their_own(void**) {
    // Both value spellings; the default subcommand is check.
    CommandLine c = parsed({"--timeout=45", "--cpu", "--mode", "ib"});
    assert_true(c.sub == Subcommand::Check && c.settings.check.timeout == 45 && c.settings.check.path == "cpu");
    assert_true(c.settings.check.mode == Mode::Ib);
    assert_true(parsed({}).sub == Subcommand::Check);
    // prolog, or --prolog: its options, and what was given (its own defaults hold otherwise).
    for (const char* name : {"prolog", "--prolog"}) {
        c = parsed({name, "--reason-file", "/run/r", "--timeout", "20", "--json", "--history", "/h"});
        assert_true(c.sub == Subcommand::Prolog);
        assert_str(c.settings.reason_file, "/run/r");
        assert_true(c.gave("timeout") && c.settings.check.timeout == 20);
        assert_true(c.gave("json") && !c.gave("mode"));
        assert_str(c.settings.check.history_dir, "/h");
    }
    assert_false(parsed({"prolog"}).gave("timeout"));
    c = parsed({"discover", "--sysfs-root=/fixture", "--mode", "roce", "--json"});
    assert_true(c.sub == Subcommand::Discover && c.settings.sysfs_root == "/fixture" && c.settings.check.json);
    assert_true(c.settings.check.mode == Mode::Roce);
    // history's DIR anywhere, or after --.
    for (const std::vector<std::string>& args : {std::vector<std::string>{"history", "/d", "--drain", "3/5", "--json"},
                                                 {"history", "--drain", "3/5", "/d", "--json"},
                                                 {"history", "--json", "--drain=3/5", "--", "/d"}}) {
        c = parsed(args);
        assert_true(c.sub == Subcommand::History && c.operands.size() == 1 && c.operands[0] == "/d");
        assert_int_equal(c.settings.drain_k, 3);
        assert_int_equal(c.settings.drain_n, 5);
        assert_true(c.settings.check.json);
    }
    c = parsed({"history", "/d", "--since", "1d12h"});
    assert_str(c.settings.since, "1d12h");
    assert_int_equal(parsed({"history", "/d"}).settings.drain_k, 2);
    // --help anywhere among a subcommand's options; nothing runs.
    c = parse_command_line({"discover", "--json", "--help"});
    assert_true(c.help && c.sub == Subcommand::Discover && c.error.empty());
    assert_true(parse_command_line({"--version"}).version);
}

static void the_nearest_name_is_guessed(void**) {
    const std::vector<std::string> names{"timeout", "min-busbw", "mode", "metrics-dir", "json", "cpu", "gpu"};
    assert_str(nearest_name("timout", names), "timeout");
    assert_str(nearest_name("TIMEOUT", names), "timeout");
    assert_str(nearest_name("tiemout", names), "timeout");
    assert_str(nearest_name("time", names), "timeout");  // the start of one name
    assert_str(nearest_name("mod", names), "mode");
    assert_str(nearest_name("jsno", names), "json");
    assert_str(nearest_name("m", names), "");   // the start of three
    assert_str(nearest_name("x", names), "");
    assert_str(nearest_name("verbose", names), "");
    assert_str(nearest_name("", names), "");
}

// The usage error's text, as main prints it.
static void a_usage_error_names_its_subcommand_once(void**) {
    CommandLine c = parse_command_line({"history", "--jsn"});
    assert_str(usage_error_text(c), "mn-preflight: history: unknown option '--jsn'; did you mean --json?\n"
                                    "try 'mn-preflight history --help'\n");
    c = parse_command_line({"prologue"});
    assert_str(usage_error_text(c), "mn-preflight: unknown subcommand 'prologue'; did you mean prolog?\n"
                                    "try 'mn-preflight --help'\n");
    // An error stops the parse where it is; the next parse starts afresh.
    c = parse_command_line({"--bogus", "--timeout", "30"});
    assert_false(c.error.empty());
    c = parsed({"--timeout", "30"});
    assert_true(c.settings.check.timeout == 30);
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
                            " prolog --mode ib --timeout 10 --reason-file ";
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
        cmocka_unit_test(help_of_every_subcommand_prints_its_options),
        cmocka_unit_test(usage_errors_are_one_line_and_a_try_line),
        cmocka_unit_test(the_plugins_argv_reads_back),
        cmocka_unit_test(subcommands_read_their_own),
        cmocka_unit_test(the_nearest_name_is_guessed),
        cmocka_unit_test(a_usage_error_names_its_subcommand_once),
    };
    return cmocka_run_group_tests_name("check_options", tests, nullptr, nullptr);
}
