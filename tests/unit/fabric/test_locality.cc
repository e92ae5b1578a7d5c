#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>

#include "lib/fabric/locality.h"
#include "lib/fabric/topology.h"
#include "lib/fabric/verbs.h"
#include "tests/unit/unit.h"

using namespace mn;

static std::string tree(const char* name) {
    const char* root = std::getenv("MN_FIXTURES");
    if (!root) fail_msg("MN_FIXTURES is not set: run through make check");
    return std::string(root) + "/" + name;
}

static PciTopology load(const char* fixture) {
    auto xml = topology_xml_for(tree(fixture));
    if (!xml) fail_msg("%s has no topology.xml", fixture);
    auto t = load_pci_topology(*xml);
    if (!t) fail_msg("%s: %s", fixture, t.problem().text().c_str());
    return *t;
}

static PciPlace at(const char* name, std::vector<std::string> bridges, int numa, int pkg) {
    PciPlace p;
    p.name = name;
    p.bridges = std::move(bridges);
    p.numa = numa;
    p.package = pkg;
    return p;
}

static void nearness_levels(void**) {
    const auto gpu = at("GPU0", {"host:0000:16", "pci:0000:16:00.0"}, 0, 0);
    assert_true(nearness(gpu, at("a", {"host:0000:16", "pci:0000:16:00.0"}, 0, 0)) == Nearness::PcieSwitch);
    assert_true(nearness(gpu, at("b", {"host:0000:16", "pci:0000:16:01.0"}, 0, 0)) == Nearness::HostBridge);
    assert_true(nearness(gpu, at("c", {"host:0000:40"}, 0, 0)) == Nearness::Numa);
    assert_true(nearness(gpu, at("d", {"host:0000:40"}, 1, 0)) == Nearness::Socket);
    assert_true(nearness(gpu, at("e", {"host:0000:c0"}, 1, 1)) == Nearness::AcrossSockets);
    // Unknown NUMA and socket never claim nearness.
    assert_true(nearness(at("f", {}, -1, -1), at("g", {}, -1, -1)) == Nearness::AcrossSockets);
    assert_str(to_string(Nearness::PcieSwitch), "same PCIe switch");
}

static void dgx_h100_pairs_each_gpu_with_its_switch_hca(void**) {
    const auto t = load("dgx-h100");
    assert_int_equal(t.gpus.size(), 8);
    assert_int_equal(t.hcas.size(), 10);
    assert_str(t.gpus[0].busid, "0000:18:00.0");
    assert_str(t.gpus[7].busid, "0000:db:00.0");
    assert_int_equal(t.gpus[0].package, 0);
    assert_int_equal(t.gpus[7].package, 1);
    assert_int_equal(t.gpus[7].numa, 1);
    const std::vector<std::string> compute = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3",
                                              "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"};
    const auto l = nearest_hcas(t, compute);
    assert_int_equal(l.size(), 8);
    for (int i = 0; i < 8; ++i) {
        assert_str(l[i].hca, "mlx5_" + std::to_string(i));
        assert_true(l[i].how == Nearness::PcieSwitch);
    }
    assert_int_equal(locality_warnings(l).size(), 0);
    assert_contains(locality_summary(l), "GPU7>mlx5_7 (same PCIe switch)");
}

static void storage_nics_are_only_numa_near(void**) {
    const auto l = nearest_hcas(load("dgx-h100"), {"mlx5_8", "mlx5_9"});
    assert_str(l[0].hca, "mlx5_8");
    assert_true(l[0].how == Nearness::Numa);
    assert_str(l[5].hca, "mlx5_9");
    assert_true(l[5].how == Nearness::Numa);
}

static void gpus_across_sockets_are_warned_and_spread(void**) {
    const auto l = nearest_hcas(load("roce-only"), {});
    assert_int_equal(l.size(), 2);
    // Equally far HCAs: one GPU each, not both on mlx5_0.
    assert_str(l[0].hca, "mlx5_0");
    assert_str(l[1].hca, "mlx5_1");
    assert_true(l[1].how == Nearness::AcrossSockets);
    const auto w = locality_warnings(l);
    assert_int_equal(w.size(), 2);
    assert_contains(w[0], "GPU0 (0000:81:00.0) reaches its nearest HCA mlx5_0 only across sockets");
}

static void no_candidates_means_no_hca(void**) {
    const auto l = nearest_hcas(load("dgx-h100"), {"mlx5_99"});
    assert_int_equal(l.size(), 8);
    assert_str(l[0].hca, "");
    assert_contains(locality_summary(l), "GPU0>none");
}

static void garbled_or_missing_topology_is_a_problem_not_a_crash(void**) {
    auto bad = load_pci_topology(tree("junk") + "/topology.xml");
    assert_false(bad.ok());
    // The file is named whichever hwloc call noticed the damage.
    assert_contains(bad.problem().text(), ("hwloc cannot read the topology file " + tree("junk") + "/topology.xml").c_str());
    auto missing = load_pci_topology("/nonexistent/topology.xml");
    assert_false(missing.ok());
    assert_contains(missing.problem().text(), "/nonexistent/topology.xml");
    // A fixture tree without topology.xml never falls back to the live system.
    assert_false(topology_xml_for(tree("no-rdma")).has_value());
    assert_str(*topology_xml_for("/sys"), "");
}

// hwloc 2.9.0 dies on these files (found by tests/fuzz/fuzz_hwloc_xml): a
// user can put one in the tree MN_NCCL_SYSFS_ROOT names, so the file is read
// in a child and the caller (slurmstepd) only sees a problem.
static void xml_that_crashes_hwloc_is_a_problem(void**) {
    char dir[] = "/tmp/mn-topology.XXXXXX";
    if (!mkdtemp(dir)) fail_msg("mkdtemp");
    const std::string xml = std::string(dir) + "/topology.xml";
    std::ofstream(xml) << "<topologyversion=\"2.0";
    auto bad = load_pci_topology(xml);
    assert_false(bad.ok());
    assert_contains(bad.problem().text(), ("hwloc cannot read the topology file " + xml).c_str());
    // ... and the same process still reads a good file afterwards.
    assert_int_equal(load("dgx-h100").gpus.size(), 8);
    unlink(xml.c_str());
    rmdir(dir);
}

static void verbs_codes(void**) {
    assert_true(*verbs_rate_gbps(128, 2) == 400);  // 4X NDR
    assert_true(*verbs_rate_gbps(64, 2) == 200);   // 4X HDR
    assert_true(*verbs_rate_gbps(32, 2) == 100);   // 4X EDR
    assert_true(*verbs_rate_gbps(16, 2) == 56);    // 4X FDR
    assert_true(*verbs_rate_gbps(1, 1) == 2.5);
    assert_false(verbs_rate_gbps(3, 2).has_value());
    assert_false(verbs_rate_gbps(128, 3).has_value());
    assert_str(verbs_state(4), "ACTIVE");
    assert_str(verbs_state(1), "DOWN");
    assert_str(verbs_state(99), "");
}

static RdmaPort port(const char* hca, unsigned p, const char* state, double rate) {
    RdmaPort r;
    r.hca = hca;
    r.port = p;
    r.state = state;
    r.link_layer = "InfiniBand";
    r.rate_gbps = rate;
    return r;
}

static void verbs_cross_checks_sysfs(void**) {
    VerbsListing v;
    v.available = true;
    v.ports = {port("mlx5_0", 1, "DOWN", 400), port("mlx5_7", 1, "ACTIVE", 200)};
    auto merged = merge_verbs({port("mlx5_0", 1, "ACTIVE", 400), port("mlx5_1", 1, "ACTIVE", 400)}, v);
    assert_int_equal(merged.size(), 3);
    assert_str(merged[0].state, "DOWN");  // verbs is what NCCL reads
    assert_contains(merged[1].problem, "libibverbs cannot open mlx5_1:1");
    assert_contains(merged[1].problem, "ibverbs-providers");
    assert_str(merged[2].name(), "mlx5_7:1");
    // The choice skips the port verbs cannot open.
    auto c = choose_fabric(merged, Mode::Auto);
    assert_true(c.ok());
    assert_str(c->env.at(0).second, "=mlx5_7:1");
    // No verbs at all: sysfs as it is.
    auto plain = merge_verbs({port("mlx5_1", 1, "ACTIVE", 400)}, VerbsListing{});
    assert_int_equal(plain.size(), 1);
    assert_str(plain[0].problem, "");
}

static void fixture_roots_never_consult_verbs(void**) {
    const auto ports = discover_ports(tree("dgx-h100"));
    assert_int_equal(ports.size(), 10);
    for (const auto& p : ports) assert_str(p.problem, "");
}

// topology.xml in a tree the user names: a FIFO, a link to /dev/zero and
// a file past hwloc's 16 MiB are problems naming the file, at once, and
// hwloc never opens them (the child reads a bounded regular file first).
static void topology_file_that_is_no_file_is_a_problem(void**) {
    char dir[] = "/tmp/mn-topology.XXXXXX";
    assert_non_null(mkdtemp(dir));
    const std::string fifo = std::string(dir) + "/fifo.xml", zero = std::string(dir) + "/zero.xml",
                      big = std::string(dir) + "/big.xml";
    assert_int_equal(mkfifo(fifo.c_str(), 0644), 0);
    assert_int_equal(symlink("/dev/zero", zero.c_str()), 0);
    {
        std::ofstream out(big);
        const std::string chunk(1 << 20, ' ');
        for (int i = 0; i < 17; ++i) out << chunk;
    }
    const auto start = time(nullptr);
    auto f = load_pci_topology(fifo);
    auto z = load_pci_topology(zero);
    auto b = load_pci_topology(big);
    assert_true(time(nullptr) - start < 5);  // not the child's 10 s alarm
    assert_false(f.ok());
    assert_contains(f.problem().text(), fifo + " is a FIFO, not a regular file");
    assert_false(z.ok());
    assert_contains(z.problem().text(), zero + " is a character device, not a regular file");
    assert_false(b.ok());
    assert_contains(b.problem().text(), big + " is larger than");
    assert_int_equal(system(("rm -rf " + std::string(dir)).c_str()), 0);
}

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(topology_file_that_is_no_file_is_a_problem),
        cmocka_unit_test(nearness_levels),
        cmocka_unit_test(dgx_h100_pairs_each_gpu_with_its_switch_hca),
        cmocka_unit_test(storage_nics_are_only_numa_near),
        cmocka_unit_test(gpus_across_sockets_are_warned_and_spread),
        cmocka_unit_test(no_candidates_means_no_hca),
        cmocka_unit_test(garbled_or_missing_topology_is_a_problem_not_a_crash),
        cmocka_unit_test(xml_that_crashes_hwloc_is_a_problem),
        cmocka_unit_test(verbs_codes),
        cmocka_unit_test(verbs_cross_checks_sysfs),
        cmocka_unit_test(fixture_roots_never_consult_verbs),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
