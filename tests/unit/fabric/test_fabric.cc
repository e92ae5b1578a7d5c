// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include "lib/fabric/fabric.h"
#include "tests/unit/unit.h"

using namespace mn;

static std::string tree(const char* name) {
    const char* root = std::getenv("MN_FIXTURES");
    if (!root) fail_msg("MN_FIXTURES is not set: run through make check");
    return std::string(root) + "/" + name;
}

static FabricChoice choose(const char* fixture, Mode mode) {
    auto c = choose_fabric(read_sysfs_ports(tree(fixture)), mode);
    if (!c) fail_msg("%s: %s", fixture, c.problem().text().c_str());
    return *c;
}

static std::string env_of(const FabricChoice& c, const std::string& name) {
    for (const auto& [k, v] : c.env)
        if (k == name) return v;
    return "<unset>";
}

static const PortVerdict& verdict(const FabricChoice& c, const std::string& port) {
    for (const auto& v : c.ports)
        if (v.port.name() == port) return v;
    fail_msg("no port %s", port.c_str());
    return c.ports.front();
}

static void kernel_formats(void**) {
    assert_str(parse_state("4: ACTIVE"), "ACTIVE");
    assert_str(parse_state("1: DOWN"), "DOWN");
    assert_str(parse_state("ACTIVE"), "");
    assert_str(parse_state("x: ACTIVE"), "");
    assert_true(*parse_rate("400 Gb/sec (4X NDR)") == 400);
    assert_true(*parse_rate("2.5 Gb/sec (1X SDR)") == 2.5);
    assert_false(parse_rate("fast").has_value());
    assert_false(parse_rate("-5 Gb/sec").has_value());
    assert_true(ipv4_mapped_gid("0000:0000:0000:0000:0000:ffff:0a00:0105"));
    assert_false(ipv4_mapped_gid("fe80:0000:0000:0000:0a6e:d2ff:fe3b:4c5a"));
    assert_false(ipv4_mapped_gid("0000:0000:0000:0000:0000:ffff:0000:0000"));
}

static void dgx_h100_takes_the_eight_ndr_hcas(void**) {
    auto c = choose("dgx-h100", Mode::Auto);
    assert_str(c.fabric, "ib");
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
    assert_str(env_of(c, "NCCL_IB_GID_INDEX"), "<unset>");
    assert_str(env_of(c, "NCCL_IB_DISABLE"), "<unset>");
    assert_false(verdict(c, "mlx5_8:1").chosen);
    assert_contains(verdict(c, "mlx5_8:1").reason, "RoCE, while InfiniBand ports are ACTIVE");
    assert_int_equal(c.ports.size(), 10);
    assert_true(verdict(c, "mlx5_9:1").port.rate_gbps == 200);
    assert_str(verdict(c, "mlx5_9:1").port.netdev, "enp9s0f0");
    assert_int_equal(verdict(c, "mlx5_9:1").port.mtu, 9000);
    assert_str(verdict(c, "mlx5_3:1").port.netdev, "ibp3s0");  // IPoIB
}

// DGX A100 80 GB: 8 HDR HCAs for compute, two dual-port storage cards on
// Ethernet. NCCL gets exactly the list NVIDIA's DeepOps binds its GPUs to
// (mlx5_0..3, mlx5_6..9); the storage ports are left out.
static void dgx_a100_takes_the_eight_hdr_hcas(void**) {
    auto c = choose("dgx-a100", Mode::Auto);
    assert_str(c.fabric, "ib");
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1");
    assert_int_equal(c.ports.size(), 12);
    for (const char* s : {"mlx5_4:1", "mlx5_5:1", "mlx5_10:1", "mlx5_11:1"}) {
        assert_false(verdict(c, s).chosen);
        assert_contains(verdict(c, s).reason, "RoCE, while InfiniBand ports are ACTIVE");
    }
    assert_str(verdict(c, "mlx5_9:1").port.netdev, "ibp204s0");
    assert_str(verdict(c, "mlx5_10:1").port.netdev, "enp225s0f0");
}

static void roce_only_uses_the_v2_ipv4_gid(void**) {
    auto c = choose("roce-only", Mode::Auto);
    assert_str(c.fabric, "roce");
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");
    assert_str(env_of(c, "NCCL_IB_GID_INDEX"), "3");
    assert_int_equal(c.warnings.size(), 0);
}

static void roce_gid_index_mismatch_warns(void**) {
    auto c = choose("roce-mixed-gid", Mode::Auto);
    assert_str(env_of(c, "NCCL_IB_GID_INDEX"), "3");  // two ports of three agree
    assert_int_equal(verdict(c, "mlx5_1:1").port.gid_index.value_or(99), 5);
    assert_int_equal(c.warnings.size(), 1);
    assert_contains(c.warnings[0], "different indexes");
}

static void no_rdma_means_sockets(void**) {
    auto c = choose("no-rdma", Mode::Auto);
    assert_str(c.fabric, "socket");
    assert_str(env_of(c, "NCCL_IB_DISABLE"), "1");
    assert_str(env_of(c, "NCCL_IB_HCA"), "<unset>");
    assert_contains(c.why, "no RDMA ports at all");
}

static void down_and_disabled_ports_are_never_listed(void**) {
    auto c = choose("down-port", Mode::Auto);
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1");
    assert_contains(verdict(c, "mlx5_1:1").reason, "state DOWN (Polling)");
    assert_contains(verdict(c, "mlx5_2:1").reason, "state DOWN (Disabled)");
}

static void dual_port_lists_only_active_port(void**) {
    auto c = choose("dual-port", Mode::Auto);
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1");
}

static void only_the_fastest_rate_class(void**) {
    auto c = choose("mixed-rates", Mode::Auto);
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_10:1");  // natural order; missing link_layer = IB
    assert_contains(verdict(c, "mlx5_1:1").reason, "200 Gb/s, slower than the fastest 400 Gb/s");
}

static void junk_skips_ports_with_a_reason(void**) {
    auto c = choose("junk", Mode::Auto);
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_4:1");
    assert_contains(verdict(c, "mlx5_0:1").reason, "state 'ACTIVE' is not like '4: ACTIVE'");
    assert_contains(verdict(c, "mlx5_1:1").reason, "rate 'fast'");
    assert_contains(verdict(c, "mlx5_2:1").reason, "link_layer 'Token Ring'");
    assert_contains(verdict(c, "mlx5_3:1").reason, "cannot read");
    assert_contains(verdict(c, "mlx5_5:0").reason, "no ports directory");
}

static void missing_root_is_no_rdma(void**) {
    auto c = choose_fabric(read_sysfs_ports("/nonexistent/mn-nccl"), Mode::Auto);
    assert_str(c->fabric, "socket");
}

static void forced_classes(void**) {
    auto ib = choose_fabric(read_sysfs_ports(tree("roce-only")), Mode::Ib);
    assert_false(ib.ok());
    assert_contains(ib.problem().what, "no ACTIVE InfiniBand port (it has: RoCE ACTIVE mlx5_0:1,mlx5_1:1)");
    auto roce = choose_fabric(read_sysfs_ports(tree("down-port")), Mode::Roce);
    assert_false(roce.ok());
    assert_contains(roce.problem().what, "InfiniBand ACTIVE mlx5_0:1; InfiniBand DOWN mlx5_1:1,mlx5_2:1");
    auto dgx_roce = choose("dgx-h100", Mode::Roce);
    assert_str(env_of(dgx_roce, "NCCL_IB_HCA"), "=mlx5_8:1,mlx5_9:1");
    assert_str(env_of(dgx_roce, "NCCL_IB_GID_INDEX"), "3");
    auto sock = choose("dgx-h100", Mode::Socket);
    assert_str(env_of(sock, "NCCL_IB_DISABLE"), "1");
    assert_str(env_of(sock, "NCCL_IB_HCA"), "<unset>");
}

// A tree the user names (MN_NCCL_SYSFS_ROOT), read in slurmstepd: a FIFO
// at a port's state and a link to /dev/zero at its rate skip the port with
// a reason naming the file, at once; the good port is still chosen.
static void fifo_and_dev_zero_in_the_tree_skip_the_port(void**) {
    char root[] = "/tmp/mn-sysfs-XXXXXX";
    assert_non_null(mkdtemp(root));
    const std::string ib = std::string(root) + "/class/infiniband";
    for (const char* hca : {"mlx5_0", "mlx5_1", "mlx5_2"})
        assert_int_equal(system(("mkdir -p " + ib + "/" + hca + "/ports/1").c_str()), 0);
    for (const char* hca : {"mlx5_0", "mlx5_1", "mlx5_2"}) {
        const std::string port = ib + "/" + hca + "/ports/1";
        std::ofstream(port + "/link_layer") << "InfiniBand\n";
        if (std::string(hca) != "mlx5_0") std::ofstream(port + "/state") << "4: ACTIVE\n";
        if (std::string(hca) != "mlx5_1") std::ofstream(port + "/rate") << "400 Gb/sec (4X NDR)\n";
    }
    assert_int_equal(mkfifo((ib + "/mlx5_0/ports/1/state").c_str(), 0644), 0);
    assert_int_equal(symlink("/dev/zero", (ib + "/mlx5_1/ports/1/rate").c_str()), 0);
    alarm(10);  // a blocked read ends the test instead of make check
    auto c = choose_fabric(read_sysfs_ports(root), Mode::Auto);
    alarm(0);
    if (!c) fail_msg("%s", c.problem().text().c_str());
    assert_str(env_of(*c, "NCCL_IB_HCA"), "=mlx5_2:1");
    assert_contains(verdict(*c, "mlx5_0:1").reason, ib + "/mlx5_0/ports/1/state is a FIFO, not a regular file");
    assert_contains(verdict(*c, "mlx5_1:1").reason, ib + "/mlx5_1/ports/1/rate is a character device");
    assert_int_equal(system(("rm -rf " + std::string(root)).c_str()), 0);
}

// A tree with thousands of port directories (issue 38: 100,000 took 2.15 s
// and 120 MB of user_init): the HCA is skipped with a reason after 65
// names, the good HCA beside it still chosen.
static void thousands_of_ports_are_not_read(void**) {
    char root[] = "/tmp/mn-sysfs-XXXXXX";
    assert_non_null(mkdtemp(root));
    const std::string ib = std::string(root) + "/class/infiniband";
    const std::string good = ib + "/mlx5_0/ports/1";
    assert_int_equal(system(("mkdir -p " + good + " " + ib + "/mlx5_1/ports && cd " + ib +
                             "/mlx5_1/ports && seq 1 3000 | xargs mkdir").c_str()),
                     0);
    std::ofstream(good + "/link_layer") << "InfiniBand\n";
    std::ofstream(good + "/state") << "4: ACTIVE\n";
    std::ofstream(good + "/rate") << "400 Gb/sec (4X NDR)\n";
    const auto ports = read_sysfs_ports(root);
    assert_true(ports.size() <= 2);
    auto c = choose_fabric(ports, Mode::Auto);
    if (!c) fail_msg("%s", c.problem().text().c_str());
    assert_str(env_of(*c, "NCCL_IB_HCA"), "=mlx5_0:1");
    assert_contains(verdict(*c, "mlx5_1:0").reason, "more than 64 ports in " + ib + "/mlx5_1/ports: not read");
    assert_int_equal(system(("rm -rf " + std::string(root)).c_str()), 0);
}

// p4d.24xlarge: four EFA devices whose link layer the kernel calls
// "Unknown". They are a fabric of their own, reached through aws-ofi-nccl:
// no NCCL_IB_* and no NCCL_IB_DISABLE, libfabric's efa provider, and
// GPUDirect RDMA since p4 instances have it.
static void p4d_takes_its_efa_devices(void**) {
    const auto ports = read_sysfs_ports(tree("p4d"));
    assert_int_equal(ports.size(), 4);
    for (const auto& p : ports) {
        assert_str(p.problem, "");  // not "neither InfiniBand nor Ethernet"
        assert_true(p.efa);
        assert_false(p.roce());
        assert_str(p.link_layer, "Unknown");
        assert_true(p.rate_gbps == 100);
        assert_str(p.instance_type, "p4d.24xlarge");
    }
    auto c = choose("p4d", Mode::Auto);
    assert_str(c.fabric, "efa");
    assert_str(env_of(c, "FI_PROVIDER"), "efa");
    assert_str(env_of(c, "FI_EFA_USE_DEVICE_RDMA"), "1");
    assert_str(env_of(c, "NCCL_IB_DISABLE"), "<unset>");
    assert_str(env_of(c, "NCCL_IB_HCA"), "<unset>");
    assert_str(env_of(c, "NCCL_PROTO"), "<unset>");  // only aws-ofi-nccl <= 1.5 wanted it; it slows later ones
    assert_int_equal(c.env.size(), 2);
    assert_str(c.why, "4 ACTIVE AWS EFA devices on p4d.24xlarge, which NCCL reaches through the aws-ofi-nccl plugin "
                      "with GPUDirect RDMA");
    for (const char* name : {"rdmap16s27:1", "rdmap32s27:1", "rdmap144s27:1", "rdmap160s27:1"}) {
        assert_true(verdict(c, name).chosen);
        assert_str(verdict(c, name).reason, "ACTIVE AWS EFA, 100 Gb/s");
    }
}

// EFA known by its name and link layer alone, without a rate or an
// instance type: still EFA, the rate honestly unknown, no RDMA asked for.
static void efa_without_driver_link_or_rate(void**) {
    auto c = choose("efa-bare", Mode::Auto);
    assert_str(c.fabric, "efa");
    assert_true(verdict(c, "rdmap0s6:1").chosen);
    assert_true(verdict(c, "rdmap0s6:1").port.efa);
    assert_true(verdict(c, "rdmap0s6:1").port.rate_gbps == 0);
    assert_str(verdict(c, "rdmap0s6:1").reason, "ACTIVE AWS EFA, ? Gb/s");
    assert_str(env_of(c, "FI_PROVIDER"), "efa");
    assert_str(env_of(c, "FI_EFA_USE_DEVICE_RDMA"), "<unset>");
    assert_str(c.why, "1 ACTIVE AWS EFA device, which NCCL reaches through the aws-ofi-nccl plugin");
    // The name alone does not make an InfiniBand HCA an EFA.
    assert_false(verdict(c, "rdmap1s6:1").port.efa);
    assert_false(verdict(c, "rdmap1s6:1").chosen);
    assert_str(verdict(c, "rdmap1s6:1").reason, "not EFA, while AWS EFA devices are ACTIVE");
}

static void ib_or_roce_asked_on_an_efa_node(void**) {
    for (Mode m : {Mode::Ib, Mode::Roce}) {
        auto c = choose_fabric(read_sysfs_ports(tree("p4d")), m);
        assert_false(c.ok());
        assert_contains(c.problem().what, "this node's RDMA is AWS EFA (rdmap16s27:1,rdmap32s27:1,rdmap144s27:1,"
                                          "rdmap160s27:1), which NCCL reaches through the aws-ofi-nccl plugin");
        assert_contains(c.problem().what, m == Mode::Ib ? "--mn-nccl=ib:" : "--mn-nccl=roce:");
        assert_str(c.problem().fix, "use --mn-nccl=auto");
    }
    // Sockets asked for: NCCL_IB_DISABLE does not stop the net plugin, NCCL_NET does.
    auto s = choose("p4d", Mode::Socket);
    assert_str(s.fabric, "socket");
    assert_str(env_of(s, "NCCL_NET"), "Socket");
    assert_str(env_of(s, "NCCL_IB_DISABLE"), "1");
    assert_str(verdict(s, "rdmap16s27:1").reason, "--mn-nccl=socket");
    // ... and only there.
    assert_str(env_of(choose("dgx-h100", Mode::Socket), "NCCL_NET"), "<unset>");
    // EFA beside an InfiniBand HCA: --mn-nccl=roce still hears about the EFA.
    auto mixed = read_sysfs_ports(tree("efa-bare"));
    auto roce = choose_fabric(mixed, Mode::Roce);
    assert_false(roce.ok());
    assert_contains(roce.problem().what, "this node's RDMA is AWS EFA (rdmap0s6:1)");
}


static std::string chosen_list(const FabricChoice& c) {
    std::string s;
    for (const auto& v : c.ports)
        if (v.chosen) s += (s.empty() ? "" : ",") + v.port.name();
    return s;
}

// a3-highgpu-8g: no RDMA device; 5 gVNICs, eth0 for the VM and eth1..eth4
// for GPU data, used only through Google's GPUDirect-TCPX plugin. Its NIC
// variables get what Google documents for the machine type (GKE's
// GPUDirect-TCPX page: NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4,
// NCCL_GPUDIRECTTCPX_CTRL_DEV=eth0), read from the node; nothing NCCL_IB_*
// (not even NCCL_IB_DISABLE: the plugin, not sockets, carries the data).
static void gcp_a3_high_is_gpudirect_tcpx(void**) {
    const auto ports = read_sysfs_ports(tree("a3-high"));
    assert_int_equal(ports.size(), 5);
    for (const auto& p : ports) {
        assert_true(p.gvnic);
        assert_false(p.roce());
        assert_str(p.problem, "");
        assert_str(p.state, "ACTIVE");
        assert_true(p.rate_gbps == 200);
        assert_int_equal(p.mtu, 8244);
    }
    assert_str(ports[0].name(), "eth0");
    auto c = choose("a3-high", Mode::Auto);
    assert_str(c.fabric, "tcpx");
    assert_int_equal(c.env.size(), 2);
    assert_str(env_of(c, "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"), "eth1,eth2,eth3,eth4");
    assert_str(env_of(c, "NCCL_GPUDIRECTTCPX_CTRL_DEV"), "eth0");
    assert_str(env_of(c, "NCCL_IB_DISABLE"), "<unset>");
    assert_str(unusable_fabric(c), "");
    assert_str(c.control_netdev, "eth0");
    assert_int_equal(c.data_netdevs.size(), 4);
    assert_str(chosen_list(c), "eth1,eth2,eth3,eth4");
    assert_false(verdict(c, "eth0").chosen);
    assert_contains(verdict(c, "eth0").reason, "control NIC: NCCL_SOCKET_IFNAME");
    assert_str(verdict(c, "eth2").reason, "GPUDirect-TCPX data NIC, 200 Gb/s");
    assert_contains(c.why, "Google Cloud's GPUDirect-TCPX (A3 High/Edge): control NIC eth0, 4 gVNIC data NICs "
                           "eth1,eth2,eth3,eth4");
    assert_contains(c.why, "NCCL_SOCKET_IFNAME and the plugin's control channel on eth0, its data on the NICs that "
                           "are up, as Google documents");
    assert_contains(c.why, "(NCCL_GPUDIRECTTCPX_TX_BINDINGS, _RX_BINDINGS, _UNIX_CLIENT_PREFIX) are the site's");
    assert_true(c.why.find("RDMA") == std::string::npos);
    assert_int_equal(c.warnings.size(), 0);
    // Forced classes name what the node has; sockets must also stop the plugin.
    auto ib = choose_fabric(ports, Mode::Ib);
    assert_false(ib.ok());
    assert_contains(ib.problem().what, "--mn-nccl=ib: this node's network is Google Cloud's GPUDirect-TCPX (gVNIC "
                                       "data NICs eth1,eth2,eth3,eth4), which NCCL reaches through Google's "
                                       "GPUDirect-TCPX plugin, not through its InfiniBand transport");
    assert_false(choose_fabric(ports, Mode::Roce).ok());
    auto s = choose("a3-high", Mode::Socket);
    assert_str(s.fabric, "socket");
    assert_str(env_of(s, "NCCL_NET"), "Socket");
    assert_str(env_of(s, "NCCL_IB_DISABLE"), "1");
    assert_str(chosen_list(s), "");
}

static void gcp_a3_high_with_a_data_nic_down_warns(void**) {
    auto c = choose("a3-high-nic-down", Mode::Auto);
    assert_str(c.fabric, "tcpx");
    assert_str(chosen_list(c), "eth1,eth2,eth4");
    assert_str(env_of(c, "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"), "eth1,eth2,eth4");
    assert_str(verdict(c, "eth3").reason, "operstate down");
    assert_int_equal(c.warnings.size(), 1);
    assert_str(c.warnings[0], "data NIC eth3 is down: the plugin expects all 4; have the admins check it");
}

// a3-megagpu-8g with the Slurm images' names, its gVNICs known by PCI ids:
// 8 data NICs, GPUDirect-TCPXO, the control NIC enp0s12 as Google's
// nccl-env-profile.sh has it.
static void gcp_a3_mega_is_gpudirect_tcpxo(void**) {
    auto c = choose("a3-mega", Mode::Auto);
    assert_str(c.fabric, "tcpxo");
    // As Google's Cluster Toolkit a3-megagpu-8g run-nccl-tests.sh sets them.
    assert_int_equal(c.env.size(), 2);
    assert_str(env_of(c, "NCCL_FASTRAK_IFNAME"), "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0");
    assert_str(env_of(c, "NCCL_FASTRAK_CTRL_DEV"), "enp0s12");
    assert_str(c.control_netdev, "enp0s12");
    assert_str(chosen_list(c), "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0");
    assert_contains(c.why, "Google Cloud's GPUDirect-TCPXO (A3 Mega): control NIC enp0s12, 8 gVNIC data NICs");
    assert_contains(c.why, "(nccl-env-profile.sh: NCCL_FASTRAK_*, the tuner) are the site's");
    assert_str(verdict(c, "enp141s0").reason, "GPUDirect-TCPXO data NIC, 200 Gb/s");
}

// a3-ultragpu-8g: RoCE over 8 CX-7, Google's NCCL_IB_GID_INDEX=3; its 2
// gVNICs are no fabric (not listed at all).
static void gcp_a3_ultra_is_roce_with_gid_3(void**) {
    const auto ports = read_sysfs_ports(tree("a3-ultra"));
    assert_int_equal(ports.size(), 8);
    auto c = choose("a3-ultra", Mode::Auto);
    assert_str(c.fabric, "roce");
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
    assert_str(env_of(c, "NCCL_IB_GID_INDEX"), "3");
    assert_str(env_of(c, "NCCL_NET"), "<unset>");  // gIB is the site's
    assert_int_equal(c.warnings.size(), 0);
}

// BM.GPU.H100.8: OCI's documented NCCL_IB_HCA (16 of 18 ports: not mlx5_2
// and mlx5_11, the front-end eth0 and eth1) and NCCL_IB_GID_INDEX=3.
static void oci_h100_takes_the_cluster_network_ports(void**) {
    const auto ports = read_sysfs_ports(tree("oci-h100"));
    assert_int_equal(ports.size(), 18);
    for (const auto& p : ports) assert_true(p.oci);
    auto c = choose("oci-h100", Mode::Auto);
    assert_str(c.fabric, "roce");
    assert_str(env_of(c, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1,"
                                         "mlx5_9:1,mlx5_10:1,mlx5_12:1,mlx5_13:1,mlx5_14:1,mlx5_15:1,mlx5_16:1,mlx5_17:1");
    assert_str(env_of(c, "NCCL_IB_GID_INDEX"), "3");
    assert_int_equal(c.warnings.size(), 0);
    assert_contains(c.why, "Oracle Cloud: the cluster network's");
    assert_str(verdict(c, "mlx5_2:1").reason,
               "Oracle Cloud front-end NIC (netdev eth0), not the cluster network's rdmaN ports");
    assert_contains(verdict(c, "mlx5_11:1").reason, "netdev eth1");
    // --mn-nccl=roce chooses the same.
    assert_str(env_of(choose("oci-h100", Mode::Roce), "NCCL_IB_HCA"), env_of(c, "NCCL_IB_HCA"));
    // Off Oracle Cloud the rule is not applied: all 18.
    auto elsewhere = ports;
    for (auto& p : elsewhere) p.oci = false;
    auto e = choose_fabric(elsewhere, Mode::Auto);
    const std::string all = env_of(*e, "NCCL_IB_HCA");
    assert_int_equal(std::count(all.begin(), all.end(), ','), 17);
}

// An A3 VM whose data NICs are all down: sockets (and the plugin stopped),
// said as what it is, never "no usable RDMA": the VM has no RDMA at all.
static void gcp_a3_without_data_nics_is_not_called_rdma(void**) {
    auto ports = read_sysfs_ports(tree("a3-high"));
    for (std::size_t i = 1; i < ports.size(); ++i) {
        ports[i].state = "DOWN";
        ports[i].netdev_state = "down";
    }
    auto c = choose_fabric(ports, Mode::Auto);
    assert_true(c.ok());
    assert_str(c->fabric, "socket");
    assert_str(env_of(*c, "NCCL_NET"), "Socket");
    assert_contains(c->why, "Google Cloud's GPUDirect-TCPX without a data NIC up (gVNIC ACTIVE eth0; gVNIC DOWN "
                            "eth1,eth2,eth3,eth4): NCCL's own sockets");
    assert_true(c->why.find("RDMA") == std::string::npos);
    const std::string cut = unusable_fabric(*c);
    assert_contains(cut, "no GPUDirect-TCPX/TCPXO data NIC is up (eth0 gVNIC, while no data NIC is up, eth1 "
                         "operstate down");
    // A node with HCAs, every one down: the RDMA words stay.
    auto d = choose("all-down", Mode::Auto);
    assert_contains(unusable_fabric(d), "no usable RDMA port (");
    assert_str(unusable_fabric(choose("dgx-h100", Mode::Auto)), "");
    assert_str(unusable_fabric(choose("no-rdma", Mode::Auto)), "");  // nothing to lose
}

// What the site or user set for Google's plugins is kept; each value that
// names other NICs than the node's is named with the fix.
static void gcp_plugin_variables_set_by_the_site_are_checked(void**) {
    const auto high = choose("a3-high", Mode::Auto);
    std::map<std::string, std::string> set;
    auto env = [&](const std::string& n) -> std::optional<std::string> {
        auto it = set.find(n);
        return it == set.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    assert_int_equal(plugin_variable_findings(high, env).size(), 0);
    // Google's own values: nothing to say.
    set = {{"NCCL_SOCKET_IFNAME", "eth0"}, {"NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"},
           {"NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1,eth2,eth3,eth4"}};
    assert_int_equal(plugin_variable_findings(high, env).size(), 0);
    set["NCCL_SOCKET_IFNAME"] = "=eth0";
    assert_int_equal(plugin_variable_findings(high, env).size(), 0);
    // The bootstrap on a data NIC, a NIC the VM lacks.
    set = {{"NCCL_SOCKET_IFNAME", "eth1"}, {"NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1,eth2,eth3,eth5"}};
    auto f = plugin_variable_findings(high, env);
    assert_int_equal(f.size(), 2);
    assert_str(f[0], "NCCL_SOCKET_IFNAME=eth1 is set, but this node's control NIC is eth0 (Google: NCCL_SOCKET_IFNAME "
                     "and NCCL_GPUDIRECTTCPX_CTRL_DEV on the VM's first gVNIC); unset it or set it to eth0");
    assert_str(f[1], "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth5 is set, but eth5 is no data NIC of this "
                     "node (its data NICs: eth1,eth2,eth3,eth4); unset it or list those");
    // A3 Mega: the Slurm images' names; eth-style names are another VM's.
    const auto mega = choose("a3-mega", Mode::Auto);
    set = {{"NCCL_FASTRAK_CTRL_DEV", "enp0s12"}, {"NCCL_SOCKET_IFNAME", "enp0s12"},
           {"NCCL_FASTRAK_IFNAME", "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0"}};
    assert_int_equal(plugin_variable_findings(mega, env).size(), 0);
    set["NCCL_FASTRAK_CTRL_DEV"] = "eth0";
    f = plugin_variable_findings(mega, env);
    assert_int_equal(f.size(), 1);
    assert_contains(f[0], "NCCL_FASTRAK_CTRL_DEV=eth0 is set, but this node's control NIC is enp0s12");
    // Elsewhere nothing is Google's to check.
    set = {{"NCCL_SOCKET_IFNAME", "bond0"}};
    assert_int_equal(plugin_variable_findings(choose("dgx-h100", Mode::Auto), env).size(), 0);
}

// p5.48xlarge, from AWS's topology file: 32 EFA devices, all chosen,
// GPUDirect RDMA asked for (a p5), nothing NCCL_IB_*.
static void p5_takes_its_32_efa_devices(void**) {
    const auto ports = read_sysfs_ports(tree("p5"));
    assert_int_equal(ports.size(), 32);
    assert_str(ports[0].name(), "rdmap79s0:1");
    assert_str(ports[31].name(), "rdmap201s0:1");
    auto c = choose("p5", Mode::Auto);
    assert_str(c.fabric, "efa");
    const std::string chosen = chosen_list(c);
    assert_int_equal(std::count(chosen.begin(), chosen.end(), ','), 31);
    for (const auto& v : c.ports) {
        assert_true(v.port.efa);
        assert_str(v.port.instance_type, "p5.48xlarge");
        assert_str(v.reason, "ACTIVE AWS EFA, 100 Gb/s");
    }
    assert_str(env_of(c, "FI_PROVIDER"), "efa");
    assert_str(env_of(c, "FI_EFA_USE_DEVICE_RDMA"), "1");
    assert_str(env_of(c, "NCCL_IB_HCA"), "<unset>");
    assert_str(env_of(c, "NCCL_IB_DISABLE"), "<unset>");
    assert_str(c.why, "32 ACTIVE AWS EFA devices on p5.48xlarge, which NCCL reaches through the aws-ofi-nccl plugin "
                      "with GPUDirect RDMA");
}

// Standard_ND96isr_H100_v5: Microsoft's health checks name mlx5_ib0..7 at
// 400 Gb/s; the accelerated-networking VF mlx5_an0 (Ethernet, 40 Gb/s) is
// the VM's own network, never NCCL's.
static void azure_nd_h100_v5_takes_the_eight_mlx5_ib(void**) {
    const auto ports = read_sysfs_ports(tree("azure-nd-h100-v5"));
    assert_int_equal(ports.size(), 9);
    assert_str(ports[0].name(), "mlx5_an0:1");
    assert_true(ports[0].roce());
    auto c = choose("azure-nd-h100-v5", Mode::Auto);
    assert_str(c.fabric, "ib");
    assert_str(env_of(c, "NCCL_IB_HCA"),
               "=mlx5_ib0:1,mlx5_ib1:1,mlx5_ib2:1,mlx5_ib3:1,mlx5_ib4:1,mlx5_ib5:1,mlx5_ib6:1,mlx5_ib7:1");
    assert_str(verdict(c, "mlx5_an0:1").reason, "RoCE, while InfiniBand ports are ACTIVE");
    assert_str(verdict(c, "mlx5_ib7:1").reason, "ACTIVE InfiniBand, 400 Gb/s");
    assert_str(c.why, "ACTIVE InfiniBand ports at 400 Gb/s");
    assert_int_equal(c.warnings.size(), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_and_dev_zero_in_the_tree_skip_the_port),
        cmocka_unit_test(thousands_of_ports_are_not_read),
        cmocka_unit_test(kernel_formats),
        cmocka_unit_test(dgx_h100_takes_the_eight_ndr_hcas),
        cmocka_unit_test(dgx_a100_takes_the_eight_hdr_hcas),
        cmocka_unit_test(roce_only_uses_the_v2_ipv4_gid),
        cmocka_unit_test(roce_gid_index_mismatch_warns),
        cmocka_unit_test(no_rdma_means_sockets),
        cmocka_unit_test(down_and_disabled_ports_are_never_listed),
        cmocka_unit_test(dual_port_lists_only_active_port),
        cmocka_unit_test(only_the_fastest_rate_class),
        cmocka_unit_test(junk_skips_ports_with_a_reason),
        cmocka_unit_test(missing_root_is_no_rdma),
        cmocka_unit_test(forced_classes),
        cmocka_unit_test(p4d_takes_its_efa_devices),
        cmocka_unit_test(efa_without_driver_link_or_rate),
        cmocka_unit_test(ib_or_roce_asked_on_an_efa_node),
        cmocka_unit_test(gcp_a3_high_is_gpudirect_tcpx),
        cmocka_unit_test(gcp_a3_high_with_a_data_nic_down_warns),
        cmocka_unit_test(gcp_a3_mega_is_gpudirect_tcpxo),
        cmocka_unit_test(gcp_a3_ultra_is_roce_with_gid_3),
        cmocka_unit_test(oci_h100_takes_the_cluster_network_ports),
        cmocka_unit_test(gcp_a3_without_data_nics_is_not_called_rdma),
        cmocka_unit_test(gcp_plugin_variables_set_by_the_site_are_checked),
        cmocka_unit_test(azure_nd_h100_v5_takes_the_eight_mlx5_ib),
        cmocka_unit_test(p5_takes_its_32_efa_devices),
    };
    return cmocka_run_group_tests_name("fabric", tests, nullptr, nullptr);
}
