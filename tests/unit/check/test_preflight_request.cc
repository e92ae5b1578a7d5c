// SPDX-License-Identifier: Apache-2.0
// --mn-preflight's options, the argv it puts in front of a task, its port,
// the nodes to exclude read back from mn-preflight's own verdict (rendered
// by lib/preflight, so a change of its format shows here) and the hostlist
// form they are written in.
#include <map>
#include <set>

#include "lib/plan/config.h"
#include "lib/check/exclude_list.h"
#include "lib/plan/hostlist.h"
#include "lib/check/preflight.h"
#include "lib/check/preflight_request.h"
#include "tests/unit/unit.h"

using namespace mn;

static std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
}

static PreflightRequest parsed(const char* text) {
    auto r = parse_preflight_request(text, "--mn-preflight");
    if (!r) fail_msg("'%s' was refused: %s", text, r.problem().text().c_str());
    return *r;
}

static void bare_option_means_the_defaults(void**) {
    PreflightRequest r = parsed("");
    assert_true(r.enabled);
    assert_int_equal(r.check_args.size(), 0);
    assert_str(r.exclude_file, "");
    assert_false(r.job_comment);
    assert_false(parsed("off").enabled);
    assert_false(parsed("0").enabled);
    assert_false(parsed("OFF").enabled);
}

// MN_NCCL_PREFLIGHT=1 is what most people write for "on".
static void switch_words_in_any_case(void**) {
    for (const char* on : {"1", "on", "ON", "yes", "Yes", "true", "TRUE", ""}) {
        PreflightRequest r = parsed(on);
        if (!r.enabled || !r.check_args.empty()) fail_msg("'%s' is not on with the defaults", on);
    }
    for (const char* off : {"0", "off", "Off", "no", "NO", "false", "False"})
        if (parsed(off).enabled) fail_msg("'%s' is not off", off);
    // Only as the whole value: in a list they are no options.
    for (const char* bad : {"on,timeout=5", "1,no-pairs", "off,json", "2", "enable"}) {
        auto r = parse_preflight_request(bad, "MN_NCCL_PREFLIGHT");
        if (r.ok()) fail_msg("'%s' should be refused", bad);
        assert_contains(r.problem().fix, "the whole value 1 (on, yes, true)");
    }
}

static EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars](const std::string& n) -> std::optional<std::string> {
        auto it = vars.find(n);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

// One rule in srun and slurmstepd: the option, else the variable, else none.
static void option_wins_over_environment(void**) {
    auto r = requested_preflight(std::nullopt, env_of({}));
    assert_true(r.ok() && !r->enabled);
    r = requested_preflight(std::nullopt, env_of({{"MN_NCCL_PREFLIGHT", "1"}}));
    assert_true(r.ok() && r->enabled);
    assert_str(r->source, "MN_NCCL_PREFLIGHT");
    r = requested_preflight(std::string("off"), env_of({{"MN_NCCL_PREFLIGHT", "timeout=5"}}));
    assert_true(r.ok() && !r->enabled);
    assert_str(r->source, "--mn-nccl-preflight");
    r = requested_preflight(std::string(""), env_of({{"MN_NCCL_PREFLIGHT", "garbage"}}));
    assert_true(r.ok() && r->enabled);  // the command line wins, a bad variable is not read
    r = requested_preflight(std::nullopt, env_of({{"MN_NCCL_PREFLIGHT", "timout=5"}}));
    assert_false(r.ok());
    assert_contains(r.problem().what, "MN_NCCL_PREFLIGHT: unknown option 'timout=5'");
    r = requested_preflight(std::string("iters=0"), env_of({}));
    assert_false(r.ok());
    assert_contains(r.problem().what, "--mn-nccl-preflight: 'iters=0' is not valid");
}

static void options_become_the_checks_own(void**) {
    PreflightRequest r = parsed("timeout=30,min-busbw=2.5,size=4M,iters=3,no-pairs,cpu,mode=SOCKET,json,"
                                "exclude-file=/shared/bad,comment");
    assert_str(joined(r.check_args),
               "--timeout 30 --min-busbw 2.5 --size 4M --iters 3 --no-pairs --cpu --mode socket --json");
    assert_str(r.exclude_file, "/shared/bad");
    assert_true(r.job_comment);
    assert_str(joined(preflight_argv(r, "/usr/bin/mn-preflight", 25000)),
               "/usr/bin/mn-preflight check --exec --port 25000 --timeout 30 --min-busbw 2.5 --size 4M --iters 3 "
               "--no-pairs --cpu --mode socket --json --exclude-file /shared/bad --job-comment --");
    assert_str(joined(preflight_argv(parsed(""), "mp", 1)), "mp check --exec --port 1 --");
    // The site's directories (plugstack history=, metrics_dir=) come along,
    // unless the user named their own.
    SiteConfig site;
    site.history_dir = "/shared/mn-history";
    site.metrics_dir = "/var/lib/prometheus/node-exporter";
    assert_str(joined(preflight_argv(parsed(""), "mp", 1, site)),
               "mp check --exec --port 1 --history /shared/mn-history --metrics-dir /var/lib/prometheus/node-exporter --");
    assert_str(joined(preflight_argv(parsed("history=/mine"), "mp", 1, site)),
               "mp check --exec --port 1 --history /mine --metrics-dir /var/lib/prometheus/node-exporter --");
    // In a container (pyxis): the check is told where it runs, last, so
    // that its words about the outputs above can name it.
    assert_str(joined(preflight_argv(r, "mp", 1, SiteConfig{}, "pyxis --container-image=img.sqsh")),
               "mp check --exec --port 1 --timeout 30 --min-busbw 2.5 --size 4M --iters 3 --no-pairs --cpu --mode socket "
               "--json --exclude-file /shared/bad --job-comment --container pyxis --container-image=img.sqsh --");
}

static void bad_values_name_the_option_and_the_fix(void**) {
    struct Case {
        const char* text;
        const char* what;
        const char* fix;
    } cases[] = {
        {"timeout=0", "'timeout=0' is not valid", "1 to 600"},
        {"timeout=601", "'timeout=601'", "1 to 600"},
        {"timeout=abc", "'timeout=abc'", "1 to 600"},
        {"min-busbw=0", "'min-busbw=0'", "above 0"},
        {"size=1K", "'size=1K'", "4K to 8G"},
        {"size=9G", "'size=9G'", "4K to 8G"},
        {"iters=0", "'iters=0'", "1 to 10000"},
        {"mode=off", "'mode=off'", "auto, ib, roce or socket"},
        {"exclude-file=", "'exclude-file='", "exclude-file=PATH"},
        {"cpu=1", "unknown option 'cpu=1'", "known: cpu, gpu, timeout=S"},
        {"timout=5", "unknown option 'timout=5'", "exclude-file=PATH"},
    };
    for (const auto& c : cases) {
        auto r = parse_preflight_request(c.text, "MN_NCCL_PREFLIGHT");
        if (r.ok()) fail_msg("'%s' should be refused", c.text);
        assert_contains(r.problem().what, "MN_NCCL_PREFLIGHT");
        assert_contains(r.problem().what, c.what);
        assert_contains(r.problem().fix, c.fix);
    }
}

static void port_is_never_master_port(void**) {
    for (unsigned p = 20000; p <= 29999; ++p) {
        const unsigned q = preflight_port(p, 20000, 29999);
        if (q == p || q < 20000 || q > 29999) fail_msg("MASTER_PORT %u gave check port %u", p, q);
    }
    assert_int_equal(preflight_port(20000, 20000, 29999), 25000);
    // A user's MASTER_PORT outside the site's range.
    assert_int_equal(preflight_port(29500, 20000, 29000), 29501);
    assert_int_equal(preflight_port(65535, 20000, 29999), 65534);
}

static void alternative_is_the_two_line_script(void**) {
    assert_contains(preflight_alternative(), "srun --mn-nccl=auto mn-preflight || exit 1");
    assert_contains(preflight_alternative(), "srun --mn-nccl=auto python train.py");
    assert_str(kPreflightNeedsSlurm, "23.11");
}

static void plugstack_names_the_helper(void**) {
    auto c = parse_site_config({"preflight=/opt/mn/bin/mn-preflight"});
    assert_str(c.config.preflight, "/opt/mn/bin/mn-preflight");
    assert_int_equal(c.warnings.size(), 0);
    c = parse_site_config({"preflight=bin/mn-preflight"});
    assert_str(c.config.preflight, "");
    assert_int_equal(c.warnings.size(), 1);
    assert_contains(c.warnings[0], "preflight='bin/mn-preflight' is not an absolute path; using the installed");
}

// ---- hostlist compression ---------------------------------------------------

static void compress_makes_slurms_form(void**) {
    assert_str(Hostlist::compress({"node1", "node2", "node3"}), "node[1-3]");
    assert_str(Hostlist::compress({"node1"}), "node1");
    assert_str(Hostlist::compress({}), "");
    assert_str(Hostlist::compress({"node3", "node1", "node2", "node7", "node3"}), "node[1-3,7]");
    assert_str(Hostlist::compress({"gpu07", "gpu08", "gpu10"}), "gpu[07-08,10]");
    assert_str(Hostlist::compress({"n9", "n10", "n11"}), "n[9-11]");
    assert_str(Hostlist::compress({"login", "a1", "b2", "a2"}), "login,a[1-2],b2");
    assert_str(Hostlist::compress({"rack1-n1", "rack1-n2"}), "rack1-n[1-2]");
    assert_str(Hostlist::compress({"n1-ib", "n2-ib"}), "n1-ib,n2-ib");
}

static void compress_round_trips_through_parse(void**) {
    const std::vector<std::vector<std::string>> sets = {
        {"node01", "node02", "node03", "node10", "node11"},
        {"a1", "a01", "a001", "a2"},
        {"x", "y1", "y3", "y5", "y6", "z-ib"},
        {"gpu099", "gpu100", "gpu101"},
    };
    for (const auto& hosts : sets) {
        const std::string expr = Hostlist::compress(hosts);
        auto back = Hostlist::parse(expr);
        if (!back) fail_msg("'%s' does not parse: %s", expr.c_str(), back.problem().text().c_str());
        const std::set<std::string> want(hosts.begin(), hosts.end()), got(back->hosts().begin(), back->hosts().end());
        if (want != got) fail_msg("'%s' expands to %s", expr.c_str(), joined(back->hosts()).c_str());
    }
}

// ---- the nodes to exclude, from the check's own verdict ----------------------

static NodeReport node(uint32_t id, const char* host, std::vector<uint32_t> ranks) {
    NodeReport n;
    n.node = id;
    n.host = host;
    n.ranks = std::move(ranks);
    n.sig.fabric = "socket";
    n.sig.mtu = 1500;
    n.ifname = "eth0";
    return n;
}

static PairResult pair(uint32_t a, uint32_t b, double bw) {
    PairResult p;
    p.a = a;
    p.b = b;
    p.busbw_gbps = bw;
    return p;
}

static PreflightReport slow_node1() {
    PreflightReport r;
    r.nodes = {node(0, "node0", {0, 1}), node(1, "node1", {2, 3}), node(2, "node2", {4, 5})};
    r.coll.ran = r.coll.correct = true;
    r.coll.busbw_gbps = 0.5;
    r.pairs = {pair(0, 1, 0.01), pair(1, 2, 0.012), pair(0, 2, 0.7)};
    judge(r);
    return r;
}

static void slow_node_is_excluded_from_table_and_json(void**) {
    const PreflightReport r = slow_node1();
    assert_int_equal(r.code, kCheckFailed);
    const std::vector<std::string> hosts = {"node0", "node1", "node2"};
    for (const std::string& out : {report_table(r), report_json(r)}) {
        ExcludeList ex = nodes_to_exclude("mn-preflight: some progress line\n" + out, hosts);
        assert_true(ex.known);
        assert_str(joined(ex.nodes), "node1");
    }
}

static void healthy_nodes_are_never_excluded(void**) {
    PreflightReport r = slow_node1();
    r.pairs = {pair(0, 1, 0.7), pair(1, 2, 0.7), pair(0, 2, 0.7)};
    r.coll.correct = false;  // FAIL on the result, no node to blame
    r.coll.error = "element 3 is 7, expected 6";
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    const std::vector<std::string> hosts = {"node0", "node1", "node2"};
    for (const std::string& out : {report_table(r), report_json(r)}) {
        ExcludeList ex = nodes_to_exclude(out, hosts);
        assert_true(ex.known);
        assert_int_equal(ex.nodes.size(), 0);
    }
    // "waited on NODE" is not a fault of the node that waited.
    const std::string waited = "host  ranks GPUs fabric pair busbw verdict\n"
                               "node0 0     0    socket -          waited on node1\n"
                               "node1 1     0    socket -          GPU0: CUDA error 2 (out of memory)\n"
                               "FAIL (1.2 s)\n";
    assert_str(joined(nodes_to_exclude(waited, hosts).nodes), "node1 node2");
}

static void nodes_whose_ranks_never_came_are_excluded(void**) {
    PreflightReport r;
    r.nodes = {node(0, "node0", {0})};
    r.timed_out = "rendezvous: rank 1 did not arrive (none from node1)";
    judge(r);
    ExcludeList ex = nodes_to_exclude(report_table(r), {"node0", "node1"});
    assert_str(joined(ex.nodes), "node1");
    // The watchdog's one line (no table): nobody can be named.
    ex = nodes_to_exclude("problem: time-out: phase rendezvous did not finish\nFAIL (time-out)\n", {"node0", "node1"});
    assert_false(ex.known);
    assert_int_equal(ex.nodes.size(), 0);
    ex = nodes_to_exclude("{\"verdict\":\"FAIL\",\"exit_code\":3,\"timed_out\":\"x\"}\n", {"node0", "node1"});
    assert_false(ex.known);
}

// A time-out that no node caused (strangers jammed MASTER_PORT, or a rank
// of another mn-preflight release was refused): the nodes whose ranks did
// not come are not excluded, a node with a fault row of its own still is.
static void a_verdict_that_blames_no_node_excludes_only_own_faults(void**) {
    const std::vector<std::string> hosts = {"node0", "node1", "node2"};
    for (int kind = 0; kind < 2; ++kind) {
        PreflightReport r;
        r.nodes = {node(0, "node0", {0}), node(2, "node2", {2})};
        r.timed_out = "rendezvous: rank 1 did not arrive (none from node1)";
        judge(r);
        r.code = kTimeout;
        if (kind == 0) r.disturbed = "3000 connections from 127.0.0.1 (3000 sent nothing in time)";
        else r.skew = "rank 1 speaks mn-preflight protocol 5 (mn-nccl 0.1.0) (from 10.250.0.11)";
        for (const std::string& out : {report_table(r), report_json(r)}) {
            ExcludeList ex = nodes_to_exclude(out, hosts);
            assert_true(ex.known);
            assert_str(joined(ex.nodes), "");
        }
        assert_contains(report_table(r), kind == 0 ? "disturbed by strangers: no node is to blame)"
                                                   : "mn-preflight releases differ: no node is to blame)");
        r.nodes[1].problems.push_back({VerdictKind::Fault, "GPU0: CUDA error 2 (out of memory)"});
        judge(r);
        r.code = kTimeout;
        for (const std::string& out : {report_table(r), report_json(r)})
            assert_str(joined(nodes_to_exclude(out, hosts).nodes), "node2");
    }
}

static void emulated_nodes_map_to_their_slurm_node(void**) {
    PreflightReport r;
    r.nodes = {node(0, "node0-emu0", {0}), node(1, "node0-emu1", {1}), node(2, "node1-emu0", {2}),
               node(3, "node1-emu1", {3})};
    r.nodes[3].problems.push_back({VerdictKind::Fault, "rank 3: GPU1: CUDA error"});
    r.coll.ran = r.coll.correct = true;
    judge(r);
    assert_str(joined(nodes_to_exclude(report_table(r), {"node0", "node1"}).nodes), "node1");
    assert_str(joined(nodes_to_exclude(report_json(r), {"node0", "node1"}).nodes), "node1");
}

// The hang watch adds a node named for its link to an exclude file the
// check may have written: one host list, the nodes there kept.
static void a_node_added_to_an_exclude_file(void**) {
    assert_str(add_to_exclude("", "node1").value(), "node1\n");
    assert_str(add_to_exclude("node[1-3]\n", "node7").value(), "node[1-3,7]\n");
    assert_str(add_to_exclude("node[1-3]\n", "node2").value(), "node[1-3]\n");
    assert_str(add_to_exclude("node7\n", "node1").value(), "node[1,7]\n");
    assert_str(add_to_exclude("  \n", "gpu07").value(), "gpu07\n");
    for (const char* bad : {"node1\nnode2\n", "node[1-", "stale junk [x"}) {
        const auto r = add_to_exclude(bad, "node1");
        assert_false(r.ok());
        assert_contains(r.problem().text(), "not a Slurm host list");
    }
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_node_added_to_an_exclude_file),
        cmocka_unit_test(bare_option_means_the_defaults),
        cmocka_unit_test(switch_words_in_any_case),
        cmocka_unit_test(option_wins_over_environment),
        cmocka_unit_test(options_become_the_checks_own),
        cmocka_unit_test(bad_values_name_the_option_and_the_fix),
        cmocka_unit_test(port_is_never_master_port),
        cmocka_unit_test(alternative_is_the_two_line_script),
        cmocka_unit_test(plugstack_names_the_helper),
        cmocka_unit_test(compress_makes_slurms_form),
        cmocka_unit_test(compress_round_trips_through_parse),
        cmocka_unit_test(slow_node_is_excluded_from_table_and_json),
        cmocka_unit_test(healthy_nodes_are_never_excluded),
        cmocka_unit_test(nodes_whose_ranks_never_came_are_excluded),
        cmocka_unit_test(a_verdict_that_blames_no_node_excludes_only_own_faults),
        cmocka_unit_test(emulated_nodes_map_to_their_slurm_node),
    };
    return cmocka_run_group_tests_name("preflight_request", tests, nullptr, nullptr);
}
