// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/config.h"
#include "tests/unit/unit.h"

using namespace mn;

static void modes(void**) {
    assert_true(*parse_mode("", "--mn-nccl") == Mode::Auto);
    assert_true(*parse_mode("auto", "--mn-nccl") == Mode::Auto);
    assert_true(*parse_mode("IB", "--mn-nccl") == Mode::Ib);
    assert_true(*parse_mode("roce", "--mn-nccl") == Mode::Roce);
    assert_true(*parse_mode("socket", "--mn-nccl") == Mode::Socket);
    assert_true(*parse_mode("off", "--mn-nccl") == Mode::Off);
    auto bad = parse_mode("infiniband", "--mn-nccl");
    assert_false(bad.ok());
    assert_contains(bad.problem().what, "--mn-nccl='infiniband'");
    assert_contains(bad.problem().fix, "auto, ib, roce, socket, off");
}

static void launch_modes(void**) {
    assert_true(*parse_launch("task", "--mn-nccl-launch") == LaunchMode::Task);
    assert_true(*parse_launch("node", "--mn-nccl-launch") == LaunchMode::Node);
    auto bad = parse_launch("nodes", "--mn-nccl-launch");
    assert_false(bad.ok());
    assert_contains(bad.problem().text(), "--mn-nccl-launch='nodes'");
}

static void emulate_nodes(void**) {
    assert_int_equal(*parse_emulate_nodes("2", kEmulateOption), 2);
    for (const char* v : {"0", "-1", "x", "", "2.5", "99999999999"}) {
        auto k = parse_emulate_nodes(v, kEmulateEnv);
        if (k.ok()) fail_msg("'%s' should be refused", v);
        assert_contains(k.problem().what, std::string("MN_NCCL_EMULATE_NODES='") + v + "'");
    }
}

static void port_ranges(void**) {
    auto r = parse_port_range("20000-20015");
    assert_true(r.ok());
    assert_int_equal(r->lo, 20000);
    assert_int_equal(r->hi, 20015);
    assert_int_equal(r->span(), 16);
    for (const char* v : {"", "20000", "3000-2000", "80-90", "20000-70000", "a-b", "1024-", "-1-5"}) {
        auto p = parse_port_range(v);
        if (p.ok()) fail_msg("'%s' should be refused", v);
        assert_contains(p.problem().what, "port_range");
    }
}

static void user_ports(void**) {
    assert_int_equal(*parse_user_port("29500"), 29500);
    for (const char* v : {"", "0", "65536", "29a", "-1", " 80", "999999999999"}) {
        auto p = parse_user_port(v);
        if (p.ok()) fail_msg("'%s' should be refused", v);
        assert_contains(p.problem().what, "MASTER_PORT='");
    }
}

static void default_port_range_avoids_ephemeral_ports(void**) {
    PortRange r;
    assert_true(r.hi < 32768);  // Linux's default ip_local_port_range starts there
    assert_true(r.lo >= 1024);
}

static void site_config_defaults(void**) {
    auto p = parse_site_config({});
    assert_true(p.config.default_mode == Mode::Off);
    assert_false(p.config.force);
    assert_int_equal(p.warnings.size(), 0);
}

static void site_config_values(void**) {
    auto p = parse_site_config({"default=auto", "port_range=40000-40999", "force=1", "sysfs_root=/tmp/x"});
    assert_int_equal(p.warnings.size(), 0);
    assert_true(p.config.default_mode == Mode::Auto);
    assert_int_equal(p.config.ports.lo, 40000);
    assert_true(p.config.force);
    assert_str(p.config.sysfs_root, "/tmp/x");
    p = parse_site_config({"history=/shared/mn-history", "metrics_dir=/var/lib/prometheus/node-exporter"});
    assert_int_equal(p.warnings.size(), 0);
    assert_str(p.config.history_dir, "/shared/mn-history");
    assert_str(p.config.metrics_dir, "/var/lib/prometheus/node-exporter");
    p = parse_site_config({"history=rel", "metrics_dir="});
    assert_int_equal(p.warnings.size(), 2);
    assert_contains(p.warnings[0], "history='rel' is not an absolute path; using no history");
    assert_contains(p.warnings[1], "metrics_dir='' is not an absolute path; using no metrics files");
    assert_str(p.config.history_dir, "");
}

// force= reads every boolean word, as the environment forms do.
static void site_config_force_is_a_boolean(void**) {
    for (const char* v : {"1", "yes", "TRUE", "on"})
        assert_true(parse_site_config({std::string("force=") + v}).config.force);
    for (const char* v : {"0", "no", "false", "Off"}) {
        auto p = parse_site_config({"force=1", std::string("force=") + v});
        assert_false(p.config.force);
        assert_int_equal(p.warnings.size(), 0);
    }
}

// One spelling per key, underscores as pyxis's; a dash is read the same.
static void site_config_dashes_read_as_underscores(void**) {
    auto p = parse_site_config({"metrics-dir=/var/lib/m", "port-range=40000-40009", "sysfs-root=/tmp/s"});
    assert_int_equal(p.warnings.size(), 0);
    assert_str(p.config.metrics_dir, "/var/lib/m");
    assert_int_equal(p.config.ports.hi, 40009);
    assert_str(p.config.sysfs_root, "/tmp/s");
}

// watch=: every step's hang watch, read once; a bad value is the
// admin's to fix and leaves the watch off.
static void site_config_watch_default(void**) {
    auto p = parse_site_config({"watch=abort,window=20"});
    assert_int_equal(p.warnings.size(), 0);
    assert_true(p.config.watch.enabled && p.config.watch.abort && p.config.watch.window && *p.config.watch.window == 20);
    assert_str(p.config.watch.source, kWatchSiteSource);
    p = parse_site_config({"watch=abrt"});
    assert_int_equal(p.warnings.size(), 1);
    assert_contains(p.warnings[0], "plugstack.conf: watch: 'abrt' is not report, abort, off, window=S, exclude-file=PATH or history=DIR; using watch=off");
    assert_false(p.config.watch.enabled);
    assert_false(parse_site_config({}).config.watch.enabled);
}

static void site_config_typos_warn_and_keep_defaults(void**) {
    auto p = parse_site_config({"defualt=auto", "port_range=9-1", "force=2", "default=bogus", "verbose",
                                "sysfs_root=relative", "default="});
    assert_int_equal(p.warnings.size(), 7);
    assert_contains(p.warnings[0], "unknown argument 'defualt=auto'");
    assert_contains(p.warnings[0], "known: default, port_range, force, sysfs_root, user_sysfs_root, preflight, history, metrics_dir");
    assert_contains(p.warnings[1], "port_range='9-1'");
    assert_contains(p.warnings[1], "using port_range=20000-29999");
    assert_contains(p.warnings[2], "force='2' is not a yes or no; use 1/0, yes/no, true/false or on/off; using force=no");
    assert_contains(p.warnings[3], "default='bogus'");
    assert_contains(p.warnings[4], "'verbose' is not key=value");
    assert_contains(p.warnings[5], "sysfs_root='relative'");
    assert_contains(p.warnings[6], "default= is empty");
    for (const auto& w : p.warnings) assert_contains(w, "plugstack.conf");
    assert_true(p.config.default_mode == Mode::Off);
    assert_int_equal(p.config.ports.lo, 20000);
    assert_false(p.config.force);
    assert_str(p.config.sysfs_root, "");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modes),
        cmocka_unit_test(launch_modes),
        cmocka_unit_test(emulate_nodes),
        cmocka_unit_test(port_ranges),
        cmocka_unit_test(user_ports),
        cmocka_unit_test(default_port_range_avoids_ephemeral_ports),
        cmocka_unit_test(site_config_defaults),
        cmocka_unit_test(site_config_values),
        cmocka_unit_test(site_config_force_is_a_boolean),
        cmocka_unit_test(site_config_dashes_read_as_underscores),
        cmocka_unit_test(site_config_typos_warn_and_keep_defaults), cmocka_unit_test(site_config_watch_default),
    };
    return cmocka_run_group_tests_name("config", tests, nullptr, nullptr);
}
