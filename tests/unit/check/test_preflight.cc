// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <set>

#include "lib/check/preflight.h"
#include "tests/unit/unit.h"

using namespace mn;

static void notes_are_tied_to_a_node_by_its_place(void**) {
    assert_true(note_about("node1: retested at speed", "node1"));
    assert_true(note_about("node1 rank 3: stopped answering", "node1"));
    assert_true(note_about("warning: node1: its software was not read", "node1"));
    assert_true(note_about("pair node0-node1: timed out", "node0"));
    assert_true(note_about("pair node0-node1: timed out", "node1"));
    assert_false(note_about("node10: retested at speed", "node1"));
    assert_false(note_about("gpu-node1: slow", "node1"));
    assert_false(note_about("strangers: 3 connections from 10.0.0.1 (node1: fault)", "node1"));
    assert_false(note_about("pair node0-node10: timed out", "node1"));
    assert_false(note_about("refused rank 3 for control from 10.0.0.9", "node1"));
}

static void busbw_as_nccl_tests(void**) {
    assert_true(allreduce_busbw(100, 2) == 100);
    assert_true(allreduce_busbw(100, 4) == 150);
    assert_true(allreduce_busbw(100, 1) == 0);
    assert_true(allreduce_busbw(100, 0) == 0);
}

static void pair_rounds_cover_every_pair_once(void**) {
    for (uint32_t n = 2; n <= kAllPairsMax; ++n) {
        std::set<std::pair<uint32_t, uint32_t>> seen;
        for (const auto& round : pair_rounds(n)) {
            std::set<uint32_t> busy;
            for (const auto& [a, b] : round) {
                assert_true(a < b && b < n);
                assert_true(busy.insert(a).second);  // disjoint within a round
                assert_true(busy.insert(b).second);
                assert_true(seen.insert({a, b}).second);  // never twice
            }
        }
        assert_int_equal(seen.size(), n * (n - 1) / 2);
    }
    assert_int_equal(pair_rounds(1).size(), 0);
    assert_int_equal(pair_rounds(4).size(), 3);
    assert_int_equal(pair_rounds(5).size(), 5);
}

static void big_jobs_test_ring_neighbours(void**) {
    for (uint32_t n : {17u, 18u, 64u, 1001u}) {
        auto rounds = pair_rounds(n);
        assert_int_equal(rounds.size(), n % 2 ? 3 : 2);
        std::set<std::pair<uint32_t, uint32_t>> seen;
        std::vector<int> degree(n, 0);
        for (const auto& round : rounds) {
            std::set<uint32_t> busy;
            for (const auto& [a, b] : round) {
                assert_true(busy.insert(a).second);
                assert_true(busy.insert(b).second);
                seen.insert({a, b});
                ++degree[a];
                ++degree[b];
            }
        }
        assert_int_equal(seen.size(), n);
        for (uint32_t i = 0; i < n; ++i) assert_int_equal(degree[i], 2);  // each node in two pairs
    }
}

static NodeReport node(uint32_t id, const char* host, const char* fabric, const char* hcas, double rate, unsigned mtu) {
    NodeReport n;
    n.node = id;
    n.host = host;
    n.ranks = {id};
    n.sig.fabric = fabric;
    n.sig.hcas = hcas;
    n.sig.rate_gbps = rate;
    n.sig.mtu = mtu;
    return n;
}

static void consistency_names_the_odd_node(void**) {
    std::vector<NodeReport> nodes = {
        node(0, "a", "ib", "mlx5_0:1,mlx5_1:1", 400, 0), node(1, "b", "ib", "mlx5_0:1,mlx5_1:1", 400, 0),
        node(2, "c", "ib", "mlx5_0:1", 200, 0), node(3, "d", "ib", "mlx5_0:1,mlx5_1:1", 400, 0)};
    auto bad = inconsistent_nodes(nodes);
    assert_int_equal(bad.size(), 1);
    assert_int_equal(bad[0].first, 2);
    assert_contains(bad[0].second, "HCAs mlx5_0:1 (others mlx5_0:1,mlx5_1:1)");
    assert_contains(bad[0].second, "rate 200 Gb/s (others 400)");
    // MTU alone, on the socket path.
    std::vector<NodeReport> sock = {node(0, "a", "socket", "", 0, 1500), node(1, "b", "socket", "", 0, 1400),
                                    node(2, "c", "socket", "", 0, 1500)};
    bad = inconsistent_nodes(sock);
    assert_int_equal(bad.size(), 1);
    assert_contains(bad[0].second, "MTU 1400 (others 1500)");
    // All alike: nobody.
    sock[1].sig.mtu = 1500;
    assert_int_equal(inconsistent_nodes(sock).size(), 0);
    // Two that differ: both named, no majority claimed.
    std::vector<NodeReport> two = {node(0, "a", "ib", "x", 400, 0), node(1, "b", "socket", "", 0, 1500)};
    bad = inconsistent_nodes(two);
    assert_int_equal(bad.size(), 2);
    assert_contains(bad[0].second, "a has ib 1x400G, b has socket mtu 1500");
}

static PairResult pr(uint32_t a, uint32_t b, double bw, const char* err = "") {
    PairResult p;
    p.a = a;
    p.b = b;
    p.busbw_gbps = bw;
    p.error = err;
    return p;
}

static void slow_node_is_named_healthy_ones_are_not(void**) {
    // Three nodes, node 1 behind a slow link: its two pairs are slow.
    std::vector<PairResult> pairs = {pr(0, 1, 0.01), pr(1, 2, 0.012), pr(0, 2, 0.7)};
    auto slow = slow_nodes(pairs, 3, std::nullopt);
    assert_int_equal(slow.size(), 1);
    assert_int_equal(slow[0].first, 1);
    assert_contains(slow[0].second, "the others' median is 0.7");
    // A failed pair counts as zero bandwidth.
    pairs[1] = pr(1, 2, 0, "time ran out");
    assert_int_equal(slow_nodes(pairs, 3, std::nullopt).size(), 1);
    // All healthy: nobody.
    assert_int_equal(slow_nodes({pr(0, 1, 1.0), pr(1, 2, 0.9), pr(0, 2, 1.1)}, 3, std::nullopt).size(), 0);
    // Two nodes without a floor: cannot be told apart, nobody is blamed.
    assert_int_equal(slow_nodes({pr(0, 1, 0.001)}, 2, std::nullopt).size(), 0);
    // With a floor, both of a slow pair are named.
    auto floor = slow_nodes({pr(0, 1, 0.5)}, 2, 1.0);
    assert_int_equal(floor.size(), 2);
    assert_contains(floor[0].second, "below --min-busbw 1.00 GB/s");
}

static void judge_sets_code_and_verdicts(void**) {
    PreflightReport r;
    r.nodes = {node(0, "n0", "socket", "", 0, 1500), node(1, "n1", "socket", "", 0, 1500),
               node(2, "n2", "socket", "", 0, 1500)};
    r.coll.ran = true;
    r.coll.correct = true;
    r.coll.busbw_gbps = 1.0;
    r.pairs = {pr(0, 1, 1.0), pr(1, 2, 1.1), pr(0, 2, 0.9)};
    judge(r);
    assert_int_equal(r.code, kPass);
    assert_str(r.nodes[1].verdict, "ok");
    assert_contains(report_table(r), "PASS");
    // A floor above the figure fails the check.
    r.min_busbw = 2.0;
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_contains(report_table(r), "all-reduce busbw 1.00 GB/s is below --min-busbw 2.00 GB/s");
    // A wrong result fails it.
    r.min_busbw.reset();
    r.coll.correct = false;
    r.coll.error = "element 3 is 7, expected 6";
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    // A time-out wins.
    r.timed_out = "rendezvous: rank 2 did not arrive";
    judge(r);
    assert_int_equal(r.code, kTimeout);
    assert_contains(report_table(r), "FAIL (");
    assert_contains(report_json(r), "\"exit_code\":3");
}

static void rdma_node_falling_back_to_sockets_fails(void**) {
    PreflightReport r;
    r.nodes = {node(0, "n0", "ib", "mlx5_0:1", 400, 0), node(1, "n1", "ib", "mlx5_0:1", 400, 0)};
    r.nodes[1].inter_transport = "NET/Socket";
    r.coll.ran = r.coll.correct = true;
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_str(r.nodes[0].verdict, "ok");
    assert_contains(r.nodes[1].verdict, "NCCL used NET/Socket between nodes");
    r.nodes[1].inter_transport = "NET/IB";
    judge(r);
    assert_int_equal(r.code, kPass);
    // AWS EFA: NCCL reaches it through its aws-ofi-nccl plugin; sockets mean the plugin did not load.
    r.nodes = {node(0, "n0", "efa", "rdmap16s27:1", 100, 0), node(1, "n1", "efa", "rdmap16s27:1", 100, 0)};
    r.nodes[0].inter_transport = "NET/AWS Libfabric";
    r.nodes[1].inter_transport = "NET/Socket";
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_str(r.nodes[0].verdict, "ok");
    assert_contains(r.nodes[1].verdict, "check that NCCL loads the aws-ofi-nccl plugin");
    // Google's A3: not RDMA, but a fabric NCCL reaches only through Google's
    // plugin ("NET/GPUDirectTCPX_v7", "NET/FasTrak"); NET/Socket there is
    // the same silent fall, and its fix is the plugin's, not verbs'.
    for (const char* fabric : {"tcpx", "tcpxo"}) {
        r.nodes = {node(0, "n0", fabric, "eth1,eth2,eth3,eth4", 200, 8244),
                   node(1, "n1", fabric, "eth1,eth2,eth3,eth4", 200, 8244)};
        r.nodes[0].inter_transport = std::string(fabric) == "tcpx" ? "NET/GPUDirectTCPX_v7" : "NET/FasTrak";
        r.nodes[1].inter_transport = "NET/Socket";
        judge(r);
        assert_int_equal(r.code, kCheckFailed);
        assert_str(r.nodes[0].verdict, "ok");
        assert_contains(r.nodes[1].verdict, "has " + std::string(fabric) + " 4x200G mtu 8244 but NCCL used NET/Socket");
        assert_contains(r.nodes[1].verdict, std::string(fabric) == "tcpx" ? "Google's GPUDirect-TCPX plugin"
                                                                          : "Google's GPUDirect-TCPXO plugin");
        assert_true(r.nodes[1].verdict.find("RDMA") == std::string::npos);
        assert_true(r.nodes[1].verdict.find("NCCL_IB_HCA") == std::string::npos);
    }
}

static void transports_from_nccl_log(void**) {
    // Lines as NCCL 2.28.9 wrote them on nvidia-h200-x4 under --mn-emulate-nodes=2.
    const std::string log =
        "vm:2841:2841 [0] NCCL INFO Bootstrap: Using eth0:192.0.2.2<0>\n"
        "vm:2841:2841 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
        "vm:1652:1652 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0\n"
        "vm:1652:1652 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n"
        "x:1:1 [0] NCCL INFO Channel 02/0 : 3[3] -> 0[0] [send] via NET/IB/0/GDRDMA\n"
        "x:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/direct pointer\n"
        "x:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n"
        "x:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n";
    auto t = nccl_transports(log);
    assert_int_equal(t.size(), 5);
    assert_str(t[0], "NET/IB");
    assert_str(t[1], "NET/Socket");
    assert_str(t[2], "P2P/CUMEM");
    assert_str(t[3], "P2P/direct");
    assert_str(t[4], "SHM/direct");
    assert_int_equal(nccl_transports("").size(), 0);
    assert_int_equal(nccl_transports("garbage via\nChannel without the word").size(), 0);
}

static void test_pattern_sums_and_names_a_bad_element(void**) {
    std::vector<float> sum(20, 0), one(20);
    for (uint32_t r = 0; r < 4; ++r) {
        fill_pattern(one, r);
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += one[i];
    }
    assert_str(check_pattern(sum, 4), "");
    assert_contains(check_pattern(sum, 3), "element 0 is 10, expected 6");
    sum[9] += 1;
    assert_contains(check_pattern(sum, 4), "element 9 is 31, expected 30");
    // A rank's own buffer read back: its pattern, not another rank's.
    fill_pattern(one, 3);
    assert_str(check_fill(one, 3), "");
    assert_contains(check_fill(one, 2), "element 0 is 4, expected 3");
    one[13] = 0;
    assert_contains(check_fill(one, 3), "element 13 is 0, expected 28");
    // The sum as fill_sum writes it is what check_pattern wants.
    std::vector<float> want(20);
    fill_sum(want, 4);
    sum[9] -= 1;
    assert_true(want == sum);
}

// 1,024 nodes x 8: float32 sums of 8,192 ranks' patterns, added in the
// orders a ring gives each chunk (chunk c starts at rank c), are exact and
// pass; one rank left out or counted twice fails. Past float32's exact
// integers (100,000 ranks) a sum passes within its rounding.
static void test_pattern_sums_exact_at_8192_ranks(void**) {
    const uint32_t n = 8192;
    std::vector<float> one(14);
    std::vector<std::vector<float>> mine(n, std::vector<float>(one.size()));
    for (uint32_t r = 0; r < n; ++r) fill_pattern(mine[r], r);
    std::vector<float> sum(one.size(), 0);
    for (std::size_t i = 0; i < sum.size(); ++i)
        for (uint32_t k = 0; k < n; ++k) sum[i] += mine[(i * 613 + k) % n][i];
    assert_str(check_pattern(sum, n), "");
    std::vector<float> want(one.size());
    fill_sum(want, n);
    assert_true(want == sum);
    std::vector<float> short_one = sum, twice = sum;
    short_one[3] -= mine[5][3];
    assert_contains(check_pattern(short_one, n), "element 3 is ");
    twice[10] += mine[700][10];
    assert_contains(check_pattern(twice, n), "element 10 is ");
    const uint32_t big = 100000;
    std::vector<float> far(one.size(), 0);
    for (uint32_t r = 0; r < big; ++r) {
        fill_pattern(one, r);
        for (std::size_t i = 0; i < far.size(); ++i) far[i] += one[i];
    }
    assert_str(check_pattern(far, big), "");
    far[2] *= 0.99f;
    assert_contains(check_pattern(far, big), "element 2 is ");
}

// A buffer read back in tiles: the tile at any multiple of kPatternTile
// holds the buffer's first values, and a wrong element is numbered in the
// whole buffer.
static void test_pattern_tiles_repeat_and_number_in_the_buffer(void**) {
    assert_int_equal(kPatternTile % 7, 0);
    std::vector<float> whole(3 * kPatternTile + 5), tile(kPatternTile);
    fill_pattern(whole, 2);
    fill_pattern(tile, 2);
    for (std::size_t off = 0; off < whole.size(); off += kPatternTile) {
        const std::size_t n = std::min(kPatternTile, whole.size() - off);
        assert_true(std::equal(tile.begin(), tile.begin() + static_cast<long>(n), whole.begin() + static_cast<long>(off)));
    }
    // The last piece is shorter than a tile: compared with the tile's start.
    std::vector<float> piece(whole.begin() + static_cast<long>(3 * kPatternTile), whole.end());
    assert_str(first_difference(piece, tile, 3 * kPatternTile), "");
    piece[4] = -1;
    const std::string at = std::to_string(3 * kPatternTile + 4);
    // Worded as check_fill words a whole buffer's wrong element, numbered in the buffer.
    assert_str(first_difference(piece, tile, 3 * kPatternTile), ("element " + at + " is -1, expected 15").c_str());
    whole[3 * kPatternTile + 4] = -1;
    assert_str(check_fill(whole, 2), ("element " + at + " is -1, expected 15").c_str());
    // A piece longer than what it is compared with is wrong past its end.
    piece[4] = tile[4];
    assert_contains(first_difference(tile, piece, 0), "element 5 is 18, expected nothing");
    assert_contains(first_difference(std::vector<float>(3, 1.f), std::vector<float>(2, 1.f), 10),
                    "element 12 is 1, expected nothing");
}

// GPU pairs inside nodes, as 2 nodes of 4 H200s give them (16 MiB pairs,
// about 330 GB/s busbw over NVLink).
static std::vector<GpuPairResult> nvlink_pairs() {
    std::vector<GpuPairResult> out;
    for (uint32_t node = 0; node < 2; ++node)
        for (int a = 0; a < 4; ++a)
            for (int b = a + 1; b < 4; ++b)
                out.push_back({node, "GPU" + std::to_string(a), "GPU" + std::to_string(b), 330.0 + a + b, ""});
    return out;
}

static void slow_gpu_is_named_not_its_partners(void**) {
    assert_true(slow_gpus(nvlink_pairs()).empty());
    auto p = nvlink_pairs();
    for (auto& x : p)
        if (x.node == 1 && (x.gpu_a == "GPU2" || x.gpu_b == "GPU2")) x.busbw_gbps = 40;  // GPU2 of node 1 on PCIe
    const auto s = slow_gpus(p);
    assert_int_equal(s.size(), 1);
    assert_int_equal(s[0].node, 1);
    assert_contains(s[0].text, "slow GPU GPU2: its pairs run at 40.0 GB/s at best");
}

static void slow_link_is_named_when_both_gpus_are_fine(void**) {
    auto p = nvlink_pairs();
    for (auto& x : p)
        if (x.node == 0 && x.gpu_a == "GPU0" && x.gpu_b == "GPU3") x.busbw_gbps = 60;
    const auto s = slow_gpus(p);
    assert_int_equal(s.size(), 1);
    assert_int_equal(s[0].node, 0);
    assert_contains(s[0].text, "slow link between GPU0 and GPU3: 60.0 GB/s");
}

static void gpu_pairs_too_few_to_compare_and_failures(void**) {
    // One node of 2 GPUs: one pair, nothing to compare with.
    assert_true(slow_gpus({{0, "GPU0", "GPU1", 5, ""}}).empty());
    // A failed pair is named whatever the count.
    const auto s = slow_gpus({{0, "GPU0", "GPU1", 0, "the pair's all-reduce failed"}});
    assert_int_equal(s.size(), 1);
    assert_contains(s[0].text, "GPU pair GPU0 - GPU1 failed: the pair's all-reduce failed");
    // In the verdict: the node is blamed, the table shows the pairs.
    PreflightReport r;
    r.nodes.resize(2);
    for (uint32_t i = 0; i < 2; ++i) {
        r.nodes[i].node = i;
        r.nodes[i].host = "g" + std::to_string(i);
        r.nodes[i].sig.fabric = "ib";
    }
    r.gpu_pairs = nvlink_pairs();
    r.gpu_pairs[8].busbw_gbps = 10;  // node 1, GPU0-GPU3
    judge(r);
    assert_int_equal(r.code, kCheckFailed);
    assert_str(r.nodes[0].verdict, "ok");
    assert_contains(r.nodes[1].verdict, "slow link between GPU0 and GPU3");
    assert_contains(report_table(r), "GPU pairs inside nodes: 12, median busbw");
    assert_contains(report_json(r), "\"gpu_pairs\":[{\"host\":\"g0\",\"a\":\"GPU0\"");
}

static void ranges(void**) {
    assert_str(rank_ranges({0, 1, 2, 3, 6}), "0-3,6");
    assert_str(rank_ranges({5}), "5");
    assert_str(rank_ranges({}), "-");
    assert_str(rank_ranges({3, 1, 2}), "1-3");
}

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(notes_are_tied_to_a_node_by_its_place),
        cmocka_unit_test(busbw_as_nccl_tests),
        cmocka_unit_test(pair_rounds_cover_every_pair_once),
        cmocka_unit_test(big_jobs_test_ring_neighbours),
        cmocka_unit_test(consistency_names_the_odd_node),
        cmocka_unit_test(slow_node_is_named_healthy_ones_are_not),
        cmocka_unit_test(judge_sets_code_and_verdicts),
        cmocka_unit_test(rdma_node_falling_back_to_sockets_fails),
        cmocka_unit_test(transports_from_nccl_log),
        cmocka_unit_test(test_pattern_sums_and_names_a_bad_element),
        cmocka_unit_test(test_pattern_sums_exact_at_8192_ranks),
        cmocka_unit_test(test_pattern_tiles_repeat_and_number_in_the_buffer),
        cmocka_unit_test(ranges),
        cmocka_unit_test(slow_gpu_is_named_not_its_partners),
        cmocka_unit_test(slow_link_is_named_when_both_gpus_are_fine),
        cmocka_unit_test(gpu_pairs_too_few_to_compare_and_failures),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
