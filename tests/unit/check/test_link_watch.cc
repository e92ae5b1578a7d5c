// SPDX-License-Identifier: Apache-2.0
// The hang watch's link rule (lib/check/link_watch), on /proc/net/tcp as
// Linux 6.1 wrote it in the local cluster: a gloo loop on 3 nodes, node1's
// eth0 taken down mid-run.
#include "lib/check/link_watch.h"
#include "tests/unit/unit.h"

using namespace mn;

namespace {

const char* kHeader =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

// node0, 1 s after node1's link went down: its connection to node1 holds
// 96 bytes, retransmitted twice; the others are idle.
const char* kNode0 =
    "   2: 0A00FA0A:9F69 0B00FA0A:DBE4 01 00000060:00000000 01:00000034 00000002     0        0 25339762 2 "
    "000000007fd2e7b3 81 4 1 1 -1\n"
    "   3: 0A00FA0A:C4EC 0100FA0A:A495 01 00000000:00000000 00:00000000 00000000     0        0 25338539 1 "
    "00000000bcd40378 20 4 30 12 -1\n"
    "   4: 0A00FA0A:83B1 0C00FA0A:8DAE 01 00000000:00000000 00:00000000 00000000     0        0 25338770 1 "
    "0000000045618541 20 4 1 331 -1\n";

// node1 itself, its eth0 down: its data waits, probed (timer 4), never
// counted as retransmitted.
const char* kNode1 =
    "   1: 0B00FA0A:A46B 0C00FA0A:C9D4 01 00000060:00000000 04:0000002D 00000000     0        2 25339764 2 "
    "000000002b760a02 20 4 1 106 -1\n"
    "   2: 0B00FA0A:DBE4 0A00FA0A:9F69 01 00000060:00000000 04:0000002D 00000000     0        2 25338771 2 "
    "00000000cd74faa2 20 4 1 386 148\n";

std::vector<TcpSocket> sockets(const std::string& body) {
    auto s = parse_proc_net_tcp(std::string(kHeader) + body);
    if (!s) fail_msg("%s", s.problem().text().c_str());
    return s.value();
}

LocalInterface iface(const std::string& name, const std::string& addr, bool up) {
    LocalInterface i;
    i.name = name;
    i.addr = addr;
    i.up = up;
    return i;
}

}  // namespace

void lines_as_the_kernel_writes_them(void**) {
    const auto s = sockets(kNode0);
    assert_int_equal(s.size(), 3);
    assert_str(s[0].local, "10.250.0.10");
    assert_str(s[0].remote, "10.250.0.11");
    assert_int_equal(s[0].local_port, 0x9F69);
    assert_int_equal(s[0].remote_port, 0xDBE4);
    assert_int_equal(s[0].state, 1);
    assert_int_equal(s[0].unacked, 96);
    assert_int_equal(s[0].timer, 1);
    assert_int_equal(s[0].retransmits, 2);
    assert_int_equal(s[0].inode, 25339762);
    assert_str(s[1].remote, "10.250.0.1");
    assert_int_equal(s[1].unacked, 0);
    // An empty table (the header alone) and no text at all read as none.
    assert_int_equal(parse_proc_net_tcp(kHeader).value().size(), 0);
    assert_int_equal(parse_proc_net_tcp("").value().size(), 0);
}

void garbled_lines_are_refused(void**) {
    for (const char* bad : {
             "   2: 0A00FA0A:9F69 0B00FA0A:DBE4 01\n",                                                      // short
             "   2: 0A00FA0:9F69 0B00FA0A:DBE4 01 00000060:00000000 01:00000034 00000002 0 0 25339762\n",   // 7 digits
             "   2: 0A00FA0A:9F69 0B00FA0A:DBE4 01 00000060-00000000 01:00000034 00000002 0 0 25339762\n",  // no colon
             "   x: 0A00FA0A:9F69 0B00FA0A:DBE4 01 00000060:00000000 01:00000034 00000002 0 0 25339762\n",  // slot
             "   2: 0A00FA0A:9F69 0B00FA0A:DBE4 01 00000060:00000000 01:00000034 0000000g 0 0 25339762\n",  // hex
             "   2: 0A00FA0A:9F69 0B00FA0A:DBE4 01 00000060:00000000 01:00000034 00000002 0 0 -25339762\n",
         }) {
        const auto r = parse_proc_net_tcp(std::string(kHeader) + bad);
        assert_false(r.ok());
        assert_contains(r.problem().text(), "/proc/net/tcp line 2: ");
    }
}

// node0's interface is up and node1 does not acknowledge: named after the
// window, not before, with the bytes and retransmissions.
void a_peer_that_does_not_acknowledge(void**) {
    const std::vector<LocalInterface> up{iface("lo", "127.0.0.1", true), iface("eth0", "10.250.0.10", true)};
    LinkWatch w(5);
    auto s = sockets(kNode0);  // 2 retransmissions 1 s after the loss
    assert_false(w.look(100, s, up).has_value());
    s[0].retransmits = 3;
    assert_false(w.look(103, s, up).has_value());
    s[0].retransmits = 4;  // 5 s after: 0.2 + 0.4 + 0.8 + 1.6 s of timeouts
    const auto named = w.look(105, s, up);
    assert_true(named.has_value());
    assert_false(named->own);
    assert_str(named->peer, "10.250.0.11");
    assert_str(named->ifname, "eth0");
    assert_int_equal(named->unacked, 96);
    assert_int_equal(named->retransmits, 4);
    assert_int_equal(named->connections, 1);
    assert_true(named->seconds >= 5);
    assert_str(link_stall_words(*named, "node1", "node0"),
               "node1 (10.250.0.11) does not acknowledge the program's data from node0: 96 bytes unacknowledged on 1 "
               "connection, 4 retransmissions, for 5 s; node0's eth0 is up: the link of node1, or the path to it, is "
               "down");
    // A program in a network namespace of its own: its address is on none
    // of the watch's interfaces, so this side is not ruled out.
    LinkWatch other(5);
    s[0].retransmits = 2;
    assert_false(other.look(100, s, {iface("eth0", "192.168.9.9", true)}).has_value());
    s[0].retransmits = 4;
    const auto unread = other.look(105, s, {iface("eth0", "192.168.9.9", true)});
    assert_true(unread.has_value());
    assert_false(unread->own);
    assert_str(unread->ifname, "");
    assert_contains(link_stall_words(*unread, "node1", "node0"),
                    "for 5 s; the interface that holds it is not one of node0's (the program's network namespace is its "
                    "own) and was not read: the link of node1, or the path to it, or this side's, is down");
}

// A slow or lossy link that still carries data: a retransmission now and
// then, acknowledged before the kernel's timeouts add up, is never a link
// down, however long the data waits.
void a_lossy_link_is_not_down(void**) {
    const std::vector<LocalInterface> up{iface("eth0", "10.250.0.10", true)};
    auto s = sockets(kNode0);
    LinkWatch w(5);
    for (double t = 0; t <= 60; t += 1) {
        s[0].retransmits = 1 + static_cast<unsigned>(t) % 2;
        assert_false(w.look(t, s, up).has_value());
    }
    // Heavy loss: up to 3 timeouts in a row now and then, but an
    // acknowledgement between (the count falls): never named either.
    LinkWatch heavy(5);
    const unsigned counts[] = {1, 2, 3, 1, 2, 3, 4, 1, 3, 2, 3, 4, 2};
    for (unsigned i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
        s[0].retransmits = counts[i];
        assert_false(heavy.look(i, s, up).has_value());
    }
}

// One look in the window where the data went through starts it again.
void an_acknowledgement_starts_again(void**) {
    const std::vector<LocalInterface> up{iface("eth0", "10.250.0.10", true)};
    auto stuck = sockets(kNode0);
    stuck[0].retransmits = 4;
    auto moving = stuck;
    moving[0].unacked = 0;
    moving[0].retransmits = 0;
    LinkWatch w(5);
    assert_false(w.look(0, stuck, up).has_value());
    assert_false(w.look(3, moving, up).has_value());
    assert_false(w.look(6, stuck, up).has_value());
    assert_false(w.look(10, stuck, up).has_value());
    assert_true(w.look(11, stuck, up).has_value());
}

// A stopped or slow peer still acknowledges: data that waits on its full
// window (probed, timer 4, no retransmission) names nothing; nor do idle
// connections (every rank paused), nor sockets not established.
void a_full_window_is_not_a_link(void**) {
    const std::vector<LocalInterface> up{iface("eth0", "10.250.0.11", true)};
    const auto probed = sockets(kNode1);
    auto closing = sockets(kNode0);
    for (auto& c : closing) c.state = 8;  // CLOSE_WAIT
    LinkWatch w(5);
    for (double t = 0; t <= 30; t += 1) {
        assert_false(w.look(t, probed, up).has_value());
        assert_false(w.look(t, closing, up).has_value());
    }
}

// node1's own eth0 down: its waiting data names its own link, whatever the
// timer says, ahead of any peer.
void this_nodes_link_down(void**) {
    const std::vector<LocalInterface> down{iface("eth0", "10.250.0.11", false)};
    LinkWatch w(5);
    const auto s = sockets(kNode1);
    assert_false(w.look(0, s, down).has_value());
    const auto named = w.look(5.2, s, down);
    assert_true(named.has_value());
    assert_true(named->own);
    assert_str(named->ifname, "eth0");
    assert_int_equal(named->connections, 2);
    assert_int_equal(named->unacked, 192);
    assert_str(link_stall_words(*named, "node2", "node1"),
               "node1's eth0 is down: the program's data waits behind it (192 bytes on 2 connections) for 5 s");
}

// NCCL_IB_HCA as NCCL reads it: what the plugin writes ("=mlx5_0:1,..."),
// a prefix, an exclusion, a port, nothing at all.
static void the_steps_ports(void**) {
    assert_true(hca_selected("", "mlx5_3", 1));
    assert_true(hca_selected("=mlx5_0:1,mlx5_3:1", "mlx5_3", 1));
    assert_false(hca_selected("=mlx5_0:1,mlx5_3:1", "mlx5_3", 2));
    assert_false(hca_selected("=mlx5_1", "mlx5_10", 1));
    assert_true(hca_selected("mlx5_1", "mlx5_10", 1));
    assert_false(hca_selected("^mlx5_2", "mlx5_2", 1));
    assert_true(hca_selected("^mlx5_2", "mlx5_3", 1));
    assert_false(hca_selected("^=mlx5_2:1", "mlx5_2", 1));
    assert_true(hca_selected("^=mlx5_2:1", "mlx5_2", 2));
}

// A port's reading; a counter below 0 is one that could not be read.
static PortReading port(const char* name, const char* state, int64_t rcv = -1, int64_t timeouts = -1,
                        int64_t errors = -1) {
    PortReading r;
    r.name = name;
    r.state = state;
    r.phys_state = std::string(state) == "ACTIVE" ? "LinkUp" : *state ? "Disabled" : "";
    if (rcv >= 0) r.rcv_packets = static_cast<uint64_t>(rcv);
    if (timeouts >= 0) r.ack_timeouts = static_cast<uint64_t>(timeouts);
    if (errors >= 0) r.link_errors = static_cast<uint64_t>(errors);
    return r;
}

// The ports ACTIVE at the first look are the step's; one of them out of
// ACTIVE for the window is named, once back it starts again; a port
// unreadable (its file gone) or not ACTIVE at the start is not named.
static void an_rdma_port_down(void**) {
    PortWatch w(5);
    std::vector<PortReading> p = {port("mlx5_0:1", "ACTIVE"), port("mlx5_1:1", "DOWN"), port("mlx5_2:1", "ACTIVE")};
    assert_false(w.look(0, p).has_value());
    p[0] = port("mlx5_0:1", "DOWN");
    p[2] = port("mlx5_2:1", "");
    assert_false(w.look(1, p).has_value());
    assert_false(w.look(4, p).has_value());
    p[0] = port("mlx5_0:1", "ACTIVE");
    assert_false(w.look(5, p).has_value());
    p[0] = port("mlx5_0:1", "INIT");
    p[0].phys_state = "LinkUp";
    assert_false(w.look(6, p).has_value());
    const auto named = w.look(11.2, p);
    assert_true(named.has_value());
    assert_str(named->port.name, "mlx5_0:1");
    assert_true(named->fault == PortFault::NotActive);
    assert_str(port_stall_words(*named, "node1"),
               "mlx5_0:1, an RDMA port of the step's on node1, is INIT (phys_state LinkUp) for 5 s: NCCL's traffic over it has stopped");
}

// An ACTIVE port that takes in nothing while the ranks wait in a
// collective and its senders time out, look after look, is named silent
// once the window has passed and the time-outs are kSilentTimeouts or more.
static void an_active_port_that_carries_nothing(void**) {
    PortWatch w(5);
    assert_false(w.look(0, {port("mlx5_0:1", "ACTIVE", 1000, 7, 2)}, true).has_value());
    for (int i = 1; i < 5; ++i) assert_false(w.look(i, {port("mlx5_0:1", "ACTIVE", 1000, 7 + i, 2)}, true).has_value());
    const auto named = w.look(5.5, {port("mlx5_0:1", "ACTIVE", 1000, 12, 2)}, true);
    assert_true(named.has_value());
    assert_true(named->fault == PortFault::Silent);
    assert_int_equal(named->ack_timeouts, 5);
    assert_int_equal(named->link_errors, 0);
    assert_str(port_stall_words(*named, "node1"),
               "mlx5_0:1, an RDMA port of the step's on node1, is ACTIVE and took in no packet for 6 s while its "
               "senders timed out 5 times waiting for acknowledgements: it carries nothing, from this port or its "
               "far side (cable, switch port)");
    // Quiet since before the ranks were seen to hold (their positions
    // take a window to hold): named at the first look at which they do.
    PortWatch held(5);
    for (int i = 0; i <= 8; ++i)
        assert_false(held.look(i, {port("mlx5_0:1", "ACTIVE", 1000, 7 + i, 2)}, false).has_value());
    const auto at_once = held.look(9, {port("mlx5_0:1", "ACTIVE", 1000, 16, 2)}, true);
    assert_true(at_once.has_value());
    assert_int_equal(at_once->ack_timeouts, 9);
    // Its own link's errors climbing too: the link's, this node's.
    PortWatch g(5);
    assert_false(g.look(0, {port("mlx5_0:1", "ACTIVE", 1000, 7, 2)}, true).has_value());
    const auto garbled = g.look(6, {port("mlx5_0:1", "ACTIVE", 1000, 20, 40)}, true);
    assert_true(garbled.has_value());
    assert_true(garbled->fault == PortFault::Garbled);
    assert_int_equal(garbled->link_errors, 38);
    assert_str(port_stall_words(*garbled, "node2"),
               "mlx5_0:1, an RDMA port of the step's on node2, is ACTIVE and took in no packet for 6 s while its "
               "link counted 38 errors: the link carries nothing");
}

// What carries, or does not wait, or cannot be read, is never named: a
// packet taken in starts the count again (a lossy link whose senders time
// out and still get through); a pause (the ranks in no collective) with
// timeouts from someone else's traffic; timeouts below the bar; a counter
// unreadable, saturated, or gone back.
static void ports_that_carry_or_do_not_wait(void**) {
    PortWatch lossy(5);
    for (int i = 0; i <= 20; ++i)
        assert_false(lossy.look(i, {port("mlx5_0:1", "ACTIVE", 1000 + i / 4, 7 + 3 * i, 2)}, true)
                         .has_value());
    PortWatch pause(5);
    for (int i = 0; i <= 20; ++i)
        assert_false(pause.look(i, {port("mlx5_0:1", "ACTIVE", 1000, 7 + 3 * i, 2 + 3 * i)}, false).has_value());
    PortWatch few(5);
    for (int i = 0; i <= 20; ++i)
        assert_false(few.look(i, {port("mlx5_0:1", "ACTIVE", 1000, 7 + (i > 10 ? 2 : 0), 2)}, true).has_value());
    PortWatch unread(5);
    for (int i = 0; i <= 20; ++i)
        assert_false(unread.look(i, {port("mlx5_0:1", "ACTIVE", i % 2 ? -1 : 1000, 7 + 3 * i, 2)}, true).has_value());
    // The counters appear part-way: the count starts where they do.
    PortWatch late(5);
    assert_false(late.look(0, {port("mlx5_0:1", "ACTIVE", 1000)}, true).has_value());
    assert_false(late.look(3, {port("mlx5_0:1", "ACTIVE", 1000, 100)}, true).has_value());
    assert_false(late.look(7, {port("mlx5_0:1", "ACTIVE", 1000, 102)}, true).has_value());
    assert_true(late.look(8.5, {port("mlx5_0:1", "ACTIVE", 1000, 104)}, true).has_value());
    // A counter gone back (the driver reloaded) starts the count again.
    PortWatch back(5);
    assert_false(back.look(0, {port("mlx5_0:1", "ACTIVE", 1000, 700, 2)}, true).has_value());
    assert_false(back.look(6, {port("mlx5_0:1", "ACTIVE", 1000, 3, 2)}, true).has_value());
    assert_false(back.look(10, {port("mlx5_0:1", "ACTIVE", 1000, 9, 2)}, true).has_value());
    assert_true(back.look(11, {port("mlx5_0:1", "ACTIVE", 1000, 9, 2)}, true).has_value());
    // A port not ACTIVE at the first look is not the step's.
    PortWatch other(5);
    assert_false(other.look(0, {port("mlx5_0:1", "DOWN")}, true).has_value());
    assert_false(other.look(9, {port("mlx5_0:1", "ACTIVE", 1000, 7, 2)}, true).has_value());
    assert_false(other.look(19, {port("mlx5_0:1", "ACTIVE", 1000, 70, 20)}, true).has_value());
    assert_false(port_counter("4294967295\n").has_value());
    assert_false(port_counter("").has_value());
    assert_false(port_counter("12 packets").has_value());
    assert_int_equal(*port_counter("4294967296\n"), 4294967296ULL);
    assert_int_equal(*port_counter("0\n"), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lines_as_the_kernel_writes_them), cmocka_unit_test(garbled_lines_are_refused),
        cmocka_unit_test(a_peer_that_does_not_acknowledge), cmocka_unit_test(an_acknowledgement_starts_again),
        cmocka_unit_test(a_full_window_is_not_a_link),      cmocka_unit_test(this_nodes_link_down),
        cmocka_unit_test(a_lossy_link_is_not_down),         cmocka_unit_test(the_steps_ports),
        cmocka_unit_test(an_rdma_port_down),                cmocka_unit_test(an_active_port_that_carries_nothing),
        cmocka_unit_test(ports_that_carry_or_do_not_wait),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
