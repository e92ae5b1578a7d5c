// SPDX-License-Identifier: Apache-2.0
#include "tests/unit/fake_network.h"
#include "lib/plan/netpath.h"
#include "lib/plan/netprobe.h"
#include "tests/unit/unit.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mn;

static std::vector<Interface> debian_ifs(const char* addr) { return debian_node("x", addr).ifs; }

static void ipv4_parse_and_print(void**) {
    assert_str(ip("10.250.0.10").str(), "10.250.0.10");
    assert_true(ip("127.0.1.1").loopback());
    assert_true(ip("169.254.3.4").link_local());
    assert_false(Ipv4::parse("10.0.0").has_value());
    assert_false(Ipv4::parse("node0").has_value());
}

static void node0_with_correct_name(void**) {
    AddressFacts f;
    f.is_node0 = true;
    f.node0 = "node0";
    f.node0_resolved = {ip("10.0.0.10")};
    f.interfaces = debian_ifs("10.0.0.10");
    auto m = choose_master_addr(f);
    assert_true(m.ok());
    assert_str(m->addr.str(), "10.0.0.10");
    assert_contains(m->why, "held by eth0");
}

static void node0_resolving_itself_to_loopback_uses_route_to_peer(void**) {
    AddressFacts f;
    f.is_node0 = true;
    f.node0 = "node0";
    f.node0_resolved = {ip("127.0.1.1")};
    f.interfaces = debian_ifs("10.0.0.10");
    f.route_to_peer = ip("10.0.0.10");
    f.peer = "node1";
    f.default_route_addr = ip("172.17.0.1");  // even a wrong default route loses to the peer route
    auto m = choose_master_addr(f);
    assert_true(m.ok());
    assert_str(m->addr.str(), "10.0.0.10");
    assert_contains(m->why, "towards node1");
}

static void single_node_falls_back_to_default_route(void**) {
    AddressFacts f;
    f.is_node0 = true;
    f.node0 = "node0";
    f.node0_resolved = {ip("127.0.1.1")};
    f.interfaces = debian_ifs("10.0.0.10");
    f.default_route_addr = ip("10.0.0.10");
    auto m = choose_master_addr(f);
    assert_str(m->addr.str(), "10.0.0.10");
    assert_contains(m->why, "default route");
}

static void node0_with_nothing_usable_fails_with_fix(void**) {
    AddressFacts f;
    f.is_node0 = true;
    f.node0 = "node0";
    f.node0_resolved = {ip("127.0.1.1")};
    f.interfaces = debian_ifs("10.0.0.10");
    auto m = choose_master_addr(f);
    assert_false(m.ok());
    assert_contains(m.problem().what, "127.0.1.1");
    assert_contains(m.problem().fix, "MASTER_ADDR");
}

static void other_nodes_take_resolution_skipping_loopback(void**) {
    AddressFacts f;
    f.node0 = "node0";
    f.node0_resolved = {ip("127.0.1.1"), ip("10.0.0.10")};
    f.interfaces = debian_ifs("10.0.0.11");
    auto m = choose_master_addr(f);
    assert_str(m->addr.str(), "10.0.0.10");
}

static void other_nodes_fail_on_loopback_only_or_unresolved(void**) {
    AddressFacts f;
    f.node0 = "node0";
    f.node0_resolved = {ip("127.0.1.1")};
    auto m = choose_master_addr(f);
    assert_false(m.ok());
    assert_contains(m.problem().what, "loopback");
    f.node0_resolved.clear();
    f.resolve_error = "Name or service not known";
    m = choose_master_addr(f);
    assert_contains(m.problem().what, "cannot resolve node 0's name 'node0' (Name or service not known)");
    assert_contains(m.problem().fix, "/etc/hosts");
}

static void interface_is_the_one_towards_master_not_docker0(void**) {
    auto ifs = debian_ifs("10.0.0.11");
    auto c = choose_interface(ip("10.0.0.10"), ifs, ip("10.0.0.11"));
    assert_true(c.ok());
    assert_str(c->name, "eth0");
    auto own = choose_interface(ip("10.0.0.11"), ifs, std::nullopt);
    assert_str(own->name, "eth0");
    auto none = choose_interface(ip("10.9.9.9"), ifs, std::nullopt);
    assert_false(none.ok());
    assert_contains(none.problem().fix, "NCCL_SOCKET_IFNAME");
}

static void default_route_from_proc_file(void**) {
    char path[] = "/tmp/mn-route-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        "eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    auto a = default_route_address(debian_ifs("10.0.0.11"), path);
    unlink(path);
    assert_true(a.has_value());
    assert_str(a->str(), "10.0.0.11");
}

// The route table is read as /proc gives it (size 0), and a path that is
// no regular file is no route, at once.
static void default_route_never_hangs(void**) {
    char dir[] = "/tmp/mn-route-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const std::string fifo = std::string(dir) + "/route";
    assert_int_equal(mkfifo(fifo.c_str(), 0644), 0);
    alarm(10);  // a blocked read ends the test instead of make check
    assert_false(default_route_address(debian_ifs("10.0.0.11"), fifo).has_value());
    assert_false(default_route_address(debian_ifs("10.0.0.11"), "/dev/zero").has_value());
    alarm(0);
    unlink(fifo.c_str());
    rmdir(dir);
    // The live table parses (whatever its routes): no crash, no hang.
    (void)default_route_address(debian_ifs("10.0.0.11"), "/proc/net/route");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_route_never_hangs),
        cmocka_unit_test(ipv4_parse_and_print),
        cmocka_unit_test(node0_with_correct_name),
        cmocka_unit_test(node0_resolving_itself_to_loopback_uses_route_to_peer),
        cmocka_unit_test(single_node_falls_back_to_default_route),
        cmocka_unit_test(node0_with_nothing_usable_fails_with_fix),
        cmocka_unit_test(other_nodes_take_resolution_skipping_loopback),
        cmocka_unit_test(other_nodes_fail_on_loopback_only_or_unresolved),
        cmocka_unit_test(interface_is_the_one_towards_master_not_docker0),
        cmocka_unit_test(default_route_from_proc_file),
    };
    return cmocka_run_group_tests_name("netpath", tests, nullptr, nullptr);
}
