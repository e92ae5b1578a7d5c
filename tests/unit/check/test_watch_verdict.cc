// SPDX-License-Identifier: Apache-2.0
// The step's one block (lib/check/watch_verdict): what every node's watch
// named, each subject once, as the local cluster's link fault gives it
// (node1's eth0 down: node1's own watch and node0's and node2's name it).
#include "lib/check/watch_verdict.h"

#include <algorithm>

#include "tests/unit/unit.h"

using namespace mn;

namespace {

WatchReport peer_link(const std::string& from, const std::string& rank, int pid) {
    WatchReport r;
    r.kind = "link down";
    r.host = "node1";
    r.seen_from = from + " rank " + rank + " (pid " + std::to_string(pid) + ")";
    r.detail = "node1 (10.250.0.11) does not acknowledge the program's data from " + from;
    r.evidence = {"the kernel on " + from + " retransmits to 10.250.0.11 and hears no acknowledgement"};
    r.host_evidence = true;
    r.excluded = "node1 added to /shared/bad";
    return r;
}

WatchReport own_link() {
    WatchReport r;
    r.kind = "link down";
    r.host = "node1";
    r.rank = "1";
    r.pid = 4711;
    r.comm = "python3";
    r.detail = "node1's eth0 is down: the program's data waits behind it";
    r.evidence = {"node1's eth0: not up, or no carrier"};
    r.excluded = "left to the other nodes' watchers (this node's link is down)";
    return r;
}

WatchReport stopped(const std::string& host, int pid) {
    WatchReport r;
    r.kind = "process stopped";
    r.host = host;
    r.rank = "2";
    r.pid = pid;
    r.detail = "state T for 6 s";
    r.evidence = {"wchan do_signal_stop"};
    return r;
}

}  // namespace

// Three watchers name node1's link: one subject, led by node1's own report
// (its rank and interface), seen from both others, evidence once each.
static void one_link_from_three_watchers(void**) {
    auto m = merge_reports({peer_link("node0", "0", 10), own_link(), peer_link("node2", "2", 30)});
    assert_int_equal(m.size(), 1);
    const WatchReport& r = m[0];
    assert_str(r.host, "node1");
    assert_int_equal(r.pid, 4711);
    assert_str(r.rank, "1");
    assert_str(r.detail, "node1's eth0 is down: the program's data waits behind it");
    assert_str(r.seen_from, "node0 rank 0 (pid 10), node2 rank 2 (pid 30)");
    assert_int_equal(r.evidence.size(), 3);
    assert_str(r.evidence[0], "node1's eth0: not up, or no carrier");
    // The others' kernels give host evidence: node1 goes into the exclude file.
    assert_true(r.host_evidence);
    assert_str(r.excluded, "node1 added to /shared/bad");
    const std::string t = watch_verdict_text(m);
    assert_int_equal(std::count(t.begin(), t.end(), '\n'), 3);  // the subject, its evidence, the exclude file
    assert_contains(t, "mn-nccl watch:   exclude file: node1 added to /shared/bad\n");
    assert_contains(t, "mn-nccl watch: link down: node1 rank 1, pid 4711 (python3): node1's eth0 is down");
    assert_contains(t, "seen from node0 rank 0 (pid 10), node2 rank 2 (pid 30)\n");
}

// Node1's own report alone: no host evidence from another node, so no
// exclusion; a peer's report that comes after still makes it one subject.
static void own_link_alone_then_seen(void**) {
    auto m = merge_reports({own_link()});
    assert_int_equal(m.size(), 1);
    assert_false(m[0].host_evidence);
    assert_str(m[0].excluded, "left to the other nodes' watchers (this node's link is down)");
    m = merge_reports({own_link(), peer_link("node0", "0", 10), peer_link("node0", "0", 10)});
    assert_int_equal(m.size(), 1);
    assert_true(m[0].host_evidence);
    assert_str(m[0].seen_from, "node0 rank 0 (pid 10)");  // the same watcher twice: once
    assert_int_equal(m[0].evidence.size(), 2);
}

// Different subjects stay apart, in the order they came: a stopped process
// and a link; two processes on two nodes; the same report twice is once.
static void subjects_apart(void**) {
    auto m = merge_reports({stopped("node2", 99), peer_link("node0", "0", 10), stopped("node3", 99),
                            stopped("node2", 99)});
    assert_int_equal(m.size(), 3);
    assert_str(m[0].kind, "process stopped");
    assert_str(m[1].kind, "link down");
    assert_str(m[2].host, "node3");
    assert_false(m[0].host_evidence);
    // A link to an address no node's name resolves to is its own subject.
    WatchReport unnamed = peer_link("node0", "0", 10);
    unnamed.host = "10.250.0.99";
    unnamed.host_evidence = false;
    m = merge_reports({peer_link("node2", "2", 30), unnamed});
    assert_int_equal(m.size(), 2);
    assert_true(merge_reports({}).empty());
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_link_from_three_watchers),
        cmocka_unit_test(own_link_alone_then_seen),
        cmocka_unit_test(subjects_apart),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
