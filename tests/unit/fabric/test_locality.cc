// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <set>

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
    assert_true(nearness(gpu, at("a", {"host:0000:16", "pci:0000:16:00.0"}, 0, 0)) == Nearness::Pix);
    assert_true(nearness(gpu, at("b", {"host:0000:16", "pci:0000:16:01.0"}, 0, 0)) == Nearness::Phb);
    assert_true(nearness(gpu, at("c", {"host:0000:40"}, 0, 0)) == Nearness::Node);
    // Another NUMA node of the same socket is SYS to nvidia-smi as well.
    assert_true(nearness(gpu, at("d", {"host:0000:40"}, 1, 0)) == Nearness::Sys);
    assert_true(nearness(gpu, at("e", {"host:0000:c0"}, 1, 1)) == Nearness::Sys);
    // Unknown NUMA and socket never claim nearness.
    assert_true(nearness(at("f", {}, -1, -1), at("g", {}, -1, -1)) == Nearness::Sys);
    assert_str(to_string(Nearness::Pix), "PIX: same PCIe switch");
    assert_str(level_name(Nearness::Pxb), "PXB");
    for (auto n : {Nearness::Pix, Nearness::Pxb, Nearness::Phb, Nearness::Node, Nearness::Sys}) {
        // gpu_place reads the locality line back by its ", " separators.
        assert_true(to_string(n).find(',') == std::string::npos);
        assert_int_equal(to_string(n).rfind(level_name(n), 0), 0);
    }
    // SYS within one socket is warned as what it is.
    PciTopology t;
    t.gpus = {at("GPU0", {"host:0000:16"}, 0, 0)};
    t.gpus[0].busid = "0000:17:00.0";
    t.hcas = {at("mlx5_0", {"host:0000:40"}, 1, 0)};
    const auto w = locality_warnings(nearest_hcas(t, {}));
    assert_int_equal(w.size(), 1);
    assert_contains(w[0], "GPU0 (0000:17:00.0) reaches its nearest HCA mlx5_0 only across NUMA nodes (SYS)");
}

// Bridge ids as hwloc gives them: the host bridge, then every PCIe port on
// the way down (root port, a switch's upstream port, its downstream port,
// the next switch's ...). Bus numbers are illustrative.
static std::vector<std::string> below(std::vector<std::string> above, std::initializer_list<const char*> more) {
    for (const char* b : more) above.push_back(std::string("pci:") + b);
    return above;
}

static const std::vector<std::string> kRootPort = {"host:0000:00", "pci:0000:00:01.1"};

static void nearness_counts_switches_not_shared_bridges(void**) {
    // Root port, top switch (up 01:00.0, downs 02:xx), two lower switches.
    const auto top = below(kRootPort, {"0000:01:00.0"});
    const auto lower_a = below(top, {"0000:02:00.0", "0000:03:00.0"});
    const auto lower_b = below(top, {"0000:02:08.0", "0000:0a:00.0"});
    const auto gpu = at("GPU0", below(lower_a, {"0000:04:00.0"}), 0, 0);
    // Same lower switch, another downstream port: PIX.
    assert_true(nearness(gpu, at("a", below(lower_a, {"0000:04:10.0"}), 0, 0)) == Nearness::Pix);
    // The other lower switch shares the top switch only: PXB, although
    // the two share three bridges (host bridge, root port, the top
    // switch's upstream port), which the old rule called "same PCIe switch".
    assert_true(nearness(gpu, at("b", below(lower_b, {"0000:0b:10.0"}), 0, 0)) == Nearness::Pxb);
    // A NIC on the top switch's own downstream port: still two switches.
    assert_true(nearness(gpu, at("c", below(top, {"0000:02:10.0"}), 0, 0)) == Nearness::Pxb);
    // Another root port of the same host bridge: PHB.
    assert_true(nearness(gpu, at("d", {"host:0000:00", "pci:0000:00:03.1", "pci:0000:20:00.0"}, 0, 0)) ==
                Nearness::Phb);
    // Symmetric.
    assert_true(nearness(at("c", below(top, {"0000:02:10.0"}), 0, 0), gpu) == Nearness::Pxb);
}

static std::vector<std::string> hca_names(const std::vector<GpuLocality>& l) {
    std::vector<std::string> out;
    for (const auto& g : l) out.push_back(g.hca);
    return out;
}

// A DGX A100 quadrant's devices (GPUs 07:00.0 and 0f:00.0, HCAs mlx5_0 at
// 0c:00.0 and mlx5_1 at 12:00.0) in a hypothetical two-level switch tree
// where each GPU shares a lower switch with the HCA a public binding script
// pairs it with (0f:00.0 with mlx5_0, 07:00.0 with mlx5_1). Bus order and
// name order both point the other way, so only the switch level can get
// it right (the old rule gave 07:00.0 mlx5_0 and 0f:00.0 mlx5_1). The real
// machine's levels (both HCAs PXB) are the dgx-a100 fixture's, below.
static void dgx_a100_quadrant_takes_nvidias_pairs(void**) {
    const auto top = below(kRootPort, {"0000:01:00.0"});
    const auto sw_07 = below(top, {"0000:02:00.0", "0000:03:00.0"});
    const auto sw_0f = below(top, {"0000:02:08.0", "0000:0a:00.0"});
    PciTopology t;
    t.gpus = {at("GPU0", below(sw_07, {"0000:04:00.0"}), 3, 0), at("GPU1", below(sw_0f, {"0000:0b:00.0"}), 3, 0)};
    t.gpus[0].busid = "0000:07:00.0";
    t.gpus[1].busid = "0000:0f:00.0";
    t.hcas = {at("mlx5_0", below(sw_0f, {"0000:0b:10.0"}), 3, 0), at("mlx5_1", below(sw_07, {"0000:04:10.0"}), 3, 0)};
    const auto l = nearest_hcas(t, {});
    assert_int_equal(l.size(), 2);
    assert_str(l[0].gpu.busid, "0000:07:00.0");
    assert_str(l[0].hca, "mlx5_1");
    assert_true(l[0].how == Nearness::Pix);
    assert_str(l[1].gpu.busid, "0000:0f:00.0");
    assert_str(l[1].hca, "mlx5_0");
    assert_true(l[1].how == Nearness::Pix);
    assert_str(locality_summary(l), "GPU0>mlx5_1 (PIX: same PCIe switch), GPU1>mlx5_0 (PIX: same PCIe switch)");
    // With mlx5_1 not chosen, 07:00.0 takes mlx5_0 at the level it really has.
    const auto only0 = nearest_hcas(t, {"mlx5_0"});
    assert_str(only0[0].hca, "mlx5_0");
    assert_true(only0[0].how == Nearness::Pxb);
    assert_int_equal(locality_warnings(only0).size(), 0);
}

// A DGX-2 quadrant: a top switch over two lower switches, each with two
// GPUs and one HCA. The old rule tied all four GPUs over both HCAs and the
// load tie-break sent GPU1 and GPU2 to the other switch's HCA.
static void dgx2_quadrant_keeps_gpus_on_their_switch(void**) {
    const auto top = below(kRootPort, {"0000:01:00.0"});
    const auto lo = below(top, {"0000:02:00.0", "0000:03:00.0"});
    const auto hi = below(top, {"0000:02:04.0", "0000:08:00.0"});
    PciTopology t;
    t.gpus = {at("GPU0", below(lo, {"0000:04:00.0"}), 0, 0), at("GPU1", below(lo, {"0000:04:04.0"}), 0, 0),
              at("GPU2", below(hi, {"0000:09:00.0"}), 0, 0), at("GPU3", below(hi, {"0000:09:04.0"}), 0, 0)};
    t.hcas = {at("mlx5_0", below(lo, {"0000:04:08.0"}), 0, 0), at("mlx5_1", below(hi, {"0000:09:08.0"}), 0, 0)};
    const auto l = nearest_hcas(t, {});
    assert_true(hca_names(l) == (std::vector<std::string>{"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_1"}));
    for (const auto& g : l) assert_true(g.how == Nearness::Pix);
}

// Three levels: top switch T, middle switch M under it, lower switches L1
// and L2 under M. mlx5_0 shares L1 with GPU0 and GPU1; mlx5_1 hangs on M,
// mlx5_2 on T; GPU2 sits on L2, which has no HCA.
static void three_levels_pair_by_level_then_load(void**) {
    const auto t_sw = below(kRootPort, {"0000:01:00.0"});
    const auto m_sw = below(t_sw, {"0000:02:00.0", "0000:03:00.0"});
    const auto l1 = below(m_sw, {"0000:04:00.0", "0000:05:00.0"});
    const auto l2 = below(m_sw, {"0000:04:04.0", "0000:0a:00.0"});
    PciTopology t;
    t.gpus = {at("GPU0", below(l1, {"0000:06:00.0"}), 0, 0), at("GPU1", below(l1, {"0000:06:04.0"}), 0, 0),
              at("GPU2", below(l2, {"0000:0b:00.0"}), 0, 0)};
    t.hcas = {at("mlx5_0", below(l1, {"0000:06:08.0"}), 0, 0), at("mlx5_1", below(m_sw, {"0000:04:08.0"}), 0, 0),
              at("mlx5_2", below(t_sw, {"0000:02:08.0"}), 0, 0)};
    assert_true(nearness(t.gpus[0], t.hcas[1]) == Nearness::Pxb);
    assert_true(nearness(t.gpus[0], t.hcas[2]) == Nearness::Pxb);
    const auto l = nearest_hcas(t, {});
    // GPU1 stays on its own switch's mlx5_0, busy or not: load never beats a level.
    assert_str(l[0].hca, "mlx5_0");
    assert_str(l[1].hca, "mlx5_0");
    assert_true(l[1].how == Nearness::Pix);
    // GPU2 has only PXB HCAs: mlx5_0 and mlx5_1 share M with it, mlx5_2
    // only T; of the two the least loaded wins (mlx5_1 over the busy mlx5_0).
    assert_str(l[2].hca, "mlx5_1");
    assert_true(l[2].how == Nearness::Pxb);
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
        assert_true(l[i].how == Nearness::Pix);
    }
    assert_int_equal(locality_warnings(l).size(), 0);
    assert_contains(locality_summary(l), "GPU7>mlx5_7 (PIX: same PCIe switch)");
}

// Standard_ND96isr_H100_v5, its PCI tree as Azure's ndv5-topo.xml gives it
// to NCCL: one GPU and one HCA per switch. Each GPU takes its switch's HCA.
static void azure_nd_h100_v5_pairs_as_its_topology_file(void**) {
    auto choice = choose_fabric(read_sysfs_ports(tree("azure-nd-h100-v5")), Mode::Auto);
    assert_true(choice.ok());
    const auto r = gpu_locality(tree("azure-nd-h100-v5"), *choice);
    assert_true(r.known);
    assert_int_equal(r.gpus.size(), 8);
    const char* bus[] = {"0001", "0002", "0003", "0008", "0009", "000a", "000b", "000c"};
    for (int i = 0; i < 8; ++i) {
        assert_str(r.gpus[i].gpu.busid, std::string(bus[i]) + ":00:00.0");
        assert_str(r.gpus[i].hca, "mlx5_ib" + std::to_string(i));
        assert_true(r.gpus[i].how == Nearness::Pix);
    }
    assert_int_equal(r.warnings.size(), 0);
}

// p5.48xlarge, its PCI tree as AWS's p5.48xl-topo.xml gives it: each GPU
// with 4 EFAs on its own switch. Each GPU takes one of those (PIX), never
// another switch's, and no EFA serves two GPUs.
static void p5_pairs_each_gpu_with_an_efa_of_its_switch(void**) {
    auto choice = choose_fabric(read_sysfs_ports(tree("p5")), Mode::Auto);
    assert_true(choice.ok());
    const auto r = gpu_locality(tree("p5"), *choice);
    assert_true(r.known);
    assert_int_equal(r.gpus.size(), 8);
    const int first[] = {79, 96, 113, 130, 147, 164, 181, 198};
    std::set<std::string> used;
    for (int i = 0; i < 8; ++i) {
        bool own = false;
        for (int k = 0; k < 4; ++k) own |= r.gpus[i].hca == "rdmap" + std::to_string(first[i] + k) + "s0";
        if (!own) fail_msg("GPU%d took %s, not an EFA of its switch", i, r.gpus[i].hca.c_str());
        assert_true(r.gpus[i].how == Nearness::Pix);
        used.insert(r.gpus[i].hca);
    }
    assert_int_equal(used.size(), 8);
    assert_int_equal(r.warnings.size(), 0);
}

// DGX A100 (80 GB), its quadrants as make-sysfs.sh's dgx-a100 models them
// from public sources: per quadrant a top switch over two lower switches,
// and every GPU PXB from both compute HCAs of its quadrant, as nvidia-smi
// topo -m reads there. NVIDIA's DeepOps burn-in config binds GPU0..GPU7 to
// mlx5_0,1,2,3,6,7,8,9: each GPU gets a HCA of its own quadrant, none
// twice, never the storage ports mlx5_4/5 (bus 61) or mlx5_10/11 (e1).
static const char* const kDgxA100Gpu[] = {"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0",
                                          "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"};
static const char* const kDgxA100Hca[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3",
                                          "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"};

static const PciPlace& hca_named(const PciTopology& t, const std::string& name) {
    for (const auto& h : t.hcas)
        if (h.name == name) return h;
    fail_msg("no HCA %s in the topology", name.c_str());
    return t.hcas.front();
}

static void dgx_a100_pairs_each_gpu_within_its_quadrant(void**) {
    auto choice = choose_fabric(read_sysfs_ports(tree("dgx-a100")), Mode::Auto);
    assert_true(choice.ok());
    const auto r = gpu_locality(tree("dgx-a100"), *choice);
    assert_true(r.known);
    assert_int_equal(r.gpus.size(), 8);
    std::set<std::string> used;
    for (int i = 0; i < 8; ++i) {
        assert_str(r.gpus[i].gpu.name, "GPU" + std::to_string(i));
        assert_str(r.gpus[i].gpu.busid, kDgxA100Gpu[i]);
        // Its quadrant's two HCAs are kDgxA100Hca[2q] and [2q+1].
        const int q = i / 2;
        if (r.gpus[i].hca != kDgxA100Hca[2 * q] && r.gpus[i].hca != kDgxA100Hca[2 * q + 1])
            fail_msg("GPU%d (%s) took %s, not a HCA of its quadrant", i, kDgxA100Gpu[i], r.gpus[i].hca.c_str());
        assert_str(r.gpus[i].hca, kDgxA100Hca[i]);  // DeepOps' binding
        assert_true(r.gpus[i].how == Nearness::Pxb);
        used.insert(r.gpus[i].hca);
    }
    assert_int_equal(used.size(), 8);
    assert_int_equal(r.warnings.size(), 0);
    assert_contains(locality_summary(r.gpus), "GPU1>mlx5_1 (PXB: through several PCIe switches)");
}

// The levels of the tree itself, as nvidia-smi topo -m reads them: both
// HCAs of a quadrant PXB from each of its GPUs and from each other, the
// other quadrant of the socket NODE (one NUMA node per socket here), the
// other socket SYS, the two ports of a storage card PIX.
static void dgx_a100_levels_are_nvidia_smis(void**) {
    const auto t = load("dgx-a100");
    assert_int_equal(t.gpus.size(), 8);
    assert_int_equal(t.hcas.size(), 12);
    for (int i = 0; i < 8; ++i) {
        for (int k = 0; k < 8; ++k) {
            const Nearness n = nearness(t.gpus[i], hca_named(t, kDgxA100Hca[k]));
            const Nearness want = i / 2 == k / 2 ? Nearness::Pxb : i / 4 == k / 4 ? Nearness::Node : Nearness::Sys;
            if (n != want)
                fail_msg("GPU%d-%s is %s, nvidia-smi says %s", i, kDgxA100Hca[k], to_string(n).c_str(),
                         to_string(want).c_str());
        }
    }
    assert_true(nearness(hca_named(t, "mlx5_0"), hca_named(t, "mlx5_1")) == Nearness::Pxb);
    assert_true(nearness(hca_named(t, "mlx5_10"), hca_named(t, "mlx5_11")) == Nearness::Pix);
    assert_true(nearness(t.gpus[0], hca_named(t, "mlx5_4")) == Nearness::Node);
    assert_true(nearness(t.gpus[7], hca_named(t, "mlx5_4")) == Nearness::Sys);
}

// Every HCA a candidate, the storage cards' included: no GPU takes one,
// each has two PXB compute HCAs nearer. Left only the storage ports, GPUs
// fall back to those of their socket, at NODE.
static void dgx_a100_storage_ports_are_never_a_gpus_hca(void**) {
    const auto t = load("dgx-a100");
    const auto all = nearest_hcas(t, {});
    assert_int_equal(all.size(), 8);
    for (int i = 0; i < 8; ++i) {
        assert_str(all[i].hca, kDgxA100Hca[i]);
        assert_true(all[i].how == Nearness::Pxb);
    }
    const auto storage = nearest_hcas(t, {"mlx5_4", "mlx5_5", "mlx5_10", "mlx5_11"});
    assert_str(storage[0].hca, "mlx5_4");
    assert_str(storage[1].hca, "mlx5_5");
    assert_str(storage[7].hca, "mlx5_11");
    for (const auto& g : storage) assert_true(g.how == Nearness::Node);
}

static void storage_nics_are_only_numa_near(void**) {
    const auto l = nearest_hcas(load("dgx-h100"), {"mlx5_8", "mlx5_9"});
    assert_str(l[0].hca, "mlx5_8");
    assert_true(l[0].how == Nearness::Node);
    assert_str(l[5].hca, "mlx5_9");
    assert_true(l[5].how == Nearness::Node);
}

static void gpus_across_sockets_are_warned_and_spread(void**) {
    const auto l = nearest_hcas(load("roce-only"), {});
    assert_int_equal(l.size(), 2);
    // Equally far HCAs: one GPU each, not both on mlx5_0.
    assert_str(l[0].hca, "mlx5_0");
    assert_str(l[1].hca, "mlx5_1");
    assert_true(l[1].how == Nearness::Sys);
    assert_true(l[1].across_sockets);
    const auto w = locality_warnings(l);
    assert_int_equal(w.size(), 2);
    assert_contains(w[0], "GPU0 (0000:81:00.0) reaches its nearest HCA mlx5_0 only across sockets (SYS)");
}

// p4d.24xlarge: each GPU pairs with the EFA on its own PCIe bridge, two
// GPUs per EFA, read through hwloc from the fixture's topology.xml.
static void p4d_pairs_each_gpu_with_its_efa(void**) {
    auto choice = choose_fabric(read_sysfs_ports(tree("p4d")), Mode::Auto);
    assert_true(choice.ok());
    const auto r = gpu_locality(tree("p4d"), *choice);
    assert_true(r.known);
    assert_str(r.note, "nearest chosen HCA");
    assert_int_equal(r.gpus.size(), 8);
    const char* efa[] = {"rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"};
    for (int i = 0; i < 8; ++i) {
        assert_str(r.gpus[i].hca, efa[i / 2]);
        assert_true(r.gpus[i].how == Nearness::Pix);
    }
    assert_str(r.gpus[2].gpu.busid, "0000:20:1c.0");
    assert_int_equal(r.warnings.size(), 0);
}

// NVIDIA's GPUDirect Storage configuration guide (section 4.1; the
// gds-a100 fixture of make-sysfs.sh): "use mlx5_0 in conjunction with GPU
// 0f:00.0 and mlx5_1 with GPU 07:00.0". 0f:00.0 shares the switches down to
// 0a:00.0 with mlx5_0; 07:00.0 only the top switch 01:00.0 with either HCA,
// and every pair is PXB. The old rule went GPU by GPU: 07:00.0 took mlx5_0
// at its tie and 0f:00.0, its deeper HCA taken, mlx5_1.
static void gds_guide_tree_pairs_the_deepest_switch_first(void**) {
    auto choice = choose_fabric(read_sysfs_ports(tree("gds-a100")), Mode::Auto);
    assert_true(choice.ok());
    const auto r = gpu_locality(tree("gds-a100"), *choice);
    assert_true(r.known);
    assert_str(r.note, "nearest chosen HCA");
    assert_int_equal(r.gpus.size(), 2);
    assert_str(r.gpus[0].gpu.busid, "0000:07:00.0");
    assert_str(r.gpus[0].hca, "mlx5_1");
    assert_str(r.gpus[1].gpu.busid, "0000:0f:00.0");
    assert_str(r.gpus[1].hca, "mlx5_0");
    for (const auto& g : r.gpus) assert_true(g.how == Nearness::Pxb);
    assert_int_equal(r.warnings.size(), 0);
    assert_str(locality_summary(r.gpus),
               "GPU0>mlx5_1 (PXB: through several PCIe switches), GPU1>mlx5_0 (PXB: through several PCIe switches)");

    // The depths behind it: host bridge, 01:00.0, its port 02:04.0, 0a:00.0
    // for the guide's pair; host bridge and 01:00.0 for every other.
    const auto t = load("gds-a100");
    assert_int_equal(shared_bridges(t.gpus[1], hca_named(t, "mlx5_0")), 4);
    assert_str(t.gpus[1].bridges[3], "pci:0000:0a:00.0");
    assert_int_equal(shared_bridges(t.gpus[1], hca_named(t, "mlx5_1")), 2);
    assert_int_equal(shared_bridges(t.gpus[0], hca_named(t, "mlx5_0")), 2);
    assert_int_equal(shared_bridges(t.gpus[0], hca_named(t, "mlx5_1")), 2);
    assert_str(t.gpus[0].bridges[1], "pci:0000:01:00.0");

    // Not the GPUs' order: listed the other way round, the same pairs.
    PciTopology reversed = t;
    std::swap(reversed.gpus[0], reversed.gpus[1]);
    const auto l = nearest_hcas(reversed, {});
    assert_str(l[0].gpu.busid, "0000:0f:00.0");
    assert_str(l[0].hca, "mlx5_0");
    assert_str(l[1].hca, "mlx5_1");

    // A GPU never leaves its deeper HCA for load: with mlx5_1 alone
    // chosen both share it; with mlx5_0 alone, too.
    for (const char* only : {"mlx5_0", "mlx5_1"}) {
        const auto one = nearest_hcas(t, {only});
        assert_str(one[0].hca, only);
        assert_str(one[1].hca, only);
    }
}

// Ties spread: GPUs exactly as near to several HCAs share them evenly,
// after the nearer pairs have taken theirs, and the same input always
// gives the same pairs.
static void ties_spread_over_hcas_after_the_nearer_pairs(void**) {
    // Four GPUs and two HCAs on the ports of one switch: all PIX at one
    // depth, so one HCA per two GPUs, alternating in bus order.
    const auto sw = below(kRootPort, {"0000:01:00.0"});
    PciTopology flat;
    for (const char* port : {"0000:02:00.0", "0000:02:04.0", "0000:02:08.0", "0000:02:0c.0"})
        flat.gpus.push_back(at("GPU", below(sw, {port}), 0, 0));
    flat.hcas = {at("mlx5_0", below(sw, {"0000:02:10.0"}), 0, 0), at("mlx5_1", below(sw, {"0000:02:14.0"}), 0, 0)};
    assert_true(hca_names(nearest_hcas(flat, {})) ==
                (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1"}));

    // A top switch over lower switches L1 (mlx5_0) and L2 (mlx5_1 and
    // GPU2, one bridge further down: PXB), GPU0 and GPU1 on the top
    // switch's own ports: all six pairs PXB. GPU2 pairs on its lower switch
    // first; GPU0 and GPU1, tied over both HCAs, then spread (mlx5_0 is
    // the free one, then both serve one GPU and name order decides). By
    // GPU order GPU0 and GPU1 took mlx5_0 and mlx5_1, and GPU2, both
    // equally loaded, mlx5_0 of the other switch.
    const auto top = below(kRootPort, {"0000:01:00.0"});
    const auto l1 = below(top, {"0000:02:00.0", "0000:03:00.0"});
    const auto l2 = below(top, {"0000:02:04.0", "0000:08:00.0"});
    PciTopology t;
    t.gpus = {at("GPU0", below(top, {"0000:02:08.0"}), 0, 0), at("GPU1", below(top, {"0000:02:0c.0"}), 0, 0),
              at("GPU2", below(l2, {"0000:09:00.0", "0000:0a:00.0"}), 0, 0)};
    t.hcas = {at("mlx5_0", below(l1, {"0000:04:04.0"}), 0, 0), at("mlx5_1", below(l2, {"0000:09:04.0"}), 0, 0)};
    for (const auto& g : t.gpus)
        for (const auto& h : t.hcas) assert_true(nearness(g, h) == Nearness::Pxb);
    const auto l = nearest_hcas(t, {});
    assert_true(hca_names(l) == (std::vector<std::string>{"mlx5_0", "mlx5_0", "mlx5_1"}));
    // The HCAs listed the other way round: GPU2 still follows its switch's
    // HCA, and the tied GPUs spread over what is left.
    std::swap(t.hcas[0], t.hcas[1]);
    const auto swapped = nearest_hcas(t, {});
    assert_true(hca_names(swapped) == (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_1"}));
    // Deterministic: the same topology, the same pairs.
    assert_true(hca_names(nearest_hcas(t, {})) == hca_names(swapped));
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

// hwloc 3's lstopo writes <topology version="3.0">, which hwloc 2 refuses
// in words of its own on stderr only: the problem says what the file is
// and what to do. A 2.0 file, or one that says nothing, is hwloc's to judge.
static void newer_xml_format_says_so(void**) {
    const std::string v3 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc3.dtd\">\n"
                           "<topology version=\"3.0\">\n  <object type=\"Machine\"/>\n</topology>\n";
    auto p = xml_format_problem(v3, "/t/topology.xml");
    assert_true(p.has_value());
    assert_str(p->what, "the topology file /t/topology.xml is in hwloc 3.0's XML format, newer than the hwloc 2.x this "
                        "mn-nccl was built against, which cannot read it");
    assert_contains(p->fix, "write it with hwloc 2.x's lstopo (lstopo --of xml), or rebuild mn-nccl against hwloc 3");
    assert_false(xml_format_problem("<topology version=\"2.0\">", "/t/topology.xml").has_value());
    assert_false(xml_format_problem("<topology>", "/t/topology.xml").has_value());  // 1.x: hwloc 2 reads it
    assert_false(xml_format_problem("no topology here", "/t/topology.xml").has_value());
    assert_false(xml_format_problem("<topology version=\"x\">", "/t/topology.xml").has_value());
    // Through the reader: the fixture's own machine, written as hwloc 3 would.
    char dir[] = "/tmp/mn-topology.XXXXXX";
    if (!mkdtemp(dir)) fail_msg("mkdtemp");
    const std::string xml = std::string(dir) + "/topology.xml";
    std::ifstream in(tree("dgx-h100") + "/topology.xml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t at = text.find("<topology version=\"2.0\">");
    if (at == std::string::npos) fail_msg("the fixture is not hwloc 2.0's XML");
    text.replace(at, 25, "<topology version=\"3.0\">");
    std::ofstream(xml) << text;
    auto bad = load_pci_topology(xml);
    assert_false(bad.ok());
    assert_contains(bad.problem().text(), ("the topology file " + xml + " is in hwloc 3.0's XML format").c_str());
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
        cmocka_unit_test(nearness_counts_switches_not_shared_bridges),
        cmocka_unit_test(dgx_a100_quadrant_takes_nvidias_pairs),
        cmocka_unit_test(dgx2_quadrant_keeps_gpus_on_their_switch),
        cmocka_unit_test(three_levels_pair_by_level_then_load),
        cmocka_unit_test(dgx_h100_pairs_each_gpu_with_its_switch_hca),
        cmocka_unit_test(storage_nics_are_only_numa_near),
        cmocka_unit_test(gpus_across_sockets_are_warned_and_spread),
        cmocka_unit_test(p4d_pairs_each_gpu_with_its_efa),
        cmocka_unit_test(no_candidates_means_no_hca),
        cmocka_unit_test(garbled_or_missing_topology_is_a_problem_not_a_crash),
        cmocka_unit_test(xml_that_crashes_hwloc_is_a_problem),
        cmocka_unit_test(newer_xml_format_says_so),
        cmocka_unit_test(azure_nd_h100_v5_pairs_as_its_topology_file),
        cmocka_unit_test(p5_pairs_each_gpu_with_an_efa_of_its_switch),
        cmocka_unit_test(dgx_a100_pairs_each_gpu_within_its_quadrant),
        cmocka_unit_test(dgx_a100_levels_are_nvidia_smis),
        cmocka_unit_test(dgx_a100_storage_ports_are_never_a_gpus_hca),
        cmocka_unit_test(gds_guide_tree_pairs_the_deepest_switch_first),
        cmocka_unit_test(ties_spread_over_hcas_after_the_nearer_pairs),
        cmocka_unit_test(verbs_codes),
        cmocka_unit_test(verbs_cross_checks_sysfs),
        cmocka_unit_test(fixture_roots_never_consult_verbs),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
