// SPDX-License-Identifier: Apache-2.0
// Every node alike: version codes, the plugin from NCCL's log, the line a
// rank sends, and the majority rules (what fails, what warns).
#include "lib/check/fingerprint.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <cstdlib>

#include "tests/unit/unit.h"

using namespace mn;

static void nccl_version_codes_old_and_new(void**) {
    assert_str(nccl_version_text(22809), "2.28.9");
    assert_str(nccl_version_text(21805), "2.18.5");
    assert_str(nccl_version_text(20906), "2.9.6");  // 2.9 is the first of the new scheme
    assert_str(nccl_version_text(2708), "2.7.8");
    assert_str(nccl_version_text(2402), "2.4.2");
    assert_str(nccl_version_text(0), "");
    assert_str(nccl_version_text(-3), "");
    assert_str(cuda_version_text(12040), "12.4");
    assert_str(cuda_version_text(11080), "11.8");
    assert_str(cuda_version_text(12090), "12.9");
    assert_str(cuda_version_text(0), "");
}

static void versions_parse_in_every_spelling(void**) {
    auto v = parse_version("2.28.9");
    assert_true(v && v->major == 2 && v->minor == 28 && v->patch == 9);
    v = parse_version("2.20.3+cuda12.4");
    assert_true(v && v->minor == 20 && v->patch == 3);
    v = parse_version("(2, 21, 5)");  // print(torch.cuda.nccl.version())
    assert_true(v && v->major == 2 && v->minor == 21 && v->patch == 5);
    v = parse_version("12.4");
    assert_true(v && v->major == 12 && v->minor == 4 && v->patch == -1);
    v = parse_version("2.15.5-1");  // a package's version
    assert_true(v && v->patch == 5);
    for (const char* bad : {"", "2", "x.y", "2.28.9x", "(2, 21", "2..8", "2.28.9.1", "1234567.1", "(2.21.5)"})
        if (parse_version(bad)) fail_msg("'%s' parsed", bad);
}

// NCCL's release: a rank of another one starts no early init with rank
// 0's (readiness), as the fingerprints fail it.
static void a_release_is_major_and_minor(void**) {
    assert_true(same_release("2.28.9", "2.28.3"));
    assert_true(same_release("2.20.3+cuda12.4", "2.20.5"));
    assert_false(same_release("2.28.9", "2.27.9"));
    assert_false(same_release("2.28.9", ""));
    assert_true(same_release("", ""));
}

static void verbs_providers_from_files_and_drivers(void**) {
    assert_str(verbs_provider_of_file("libmlx5-rdmav34.so"), "mlx5");
    assert_str(verbs_provider_of_file("libvmw_pvrdma-rdmav34.so"), "vmw_pvrdma");
    assert_str(verbs_provider_of_file("mlx5.driver"), "mlx5");
    assert_str(verbs_provider_of_file("hfi1verbs.driver"), "hfi1verbs");
    for (const char* other : {"libibverbs.so.1", "libmlx5.so", "libmlx5-rdmav.so", "README", ".driver", "libX-rdmav34.so"})
        assert_str(verbs_provider_of_file(other), "");
    assert_str(verbs_provider_for_driver("mlx5_core"), "mlx5");
    assert_str(verbs_provider_for_driver("bnxt_en"), "bnxt_re");
    assert_str(verbs_provider_for_driver("efa"), "efa");
    assert_str(verbs_provider_for_driver("rdma_rxe"), "rxe");
    assert_str(verbs_provider_for_driver("e1000e"), "");
}

// Lines as NCCL 2.19-2.27 and HPC-X's plugin write them.
static void net_plugin_read_from_nccl_log(void**) {
    NetPlugin p = net_plugin_from_log(
        "h:1:1 [0] NCCL INFO NET/Plugin: Plugin name set by env to libnccl-net.so\n"
        "h:1:2 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v10)\n"
        "h:1:2 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v10 symbol.\n"
        "h:1:2 [0] NCCL INFO Using network Libfabric\n");
    assert_true(p.known && !p.none());
    assert_str(p.name, "Libfabric");
    assert_str(p.api, "v10");
    p = net_plugin_from_log(
        "w:19491:21059 [7] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\n"
        "w:19491:21059 [7] NCCL INFO P2P plugin IBext\n"
        "w:19491:21059 [7] NCCL INFO Using network IBext\n");
    assert_str(p.name, "IBext");
    assert_str(p.path, "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so");
    p = net_plugin_from_log(
        "n:1:1 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
        "n:1:1 [5] NCCL INFO Using network IB\n");
    assert_true(p.none());
    p = net_plugin_from_log(
        "g:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\n");
    assert_true(p.none());
    p = net_plugin_from_log("g:1:1 [0] NCCL INFO Using network Socket\n");
    assert_true(p.none());
    p = net_plugin_from_log("NCCL INFO Successfully loaded external network plugin /opt/x/\n");
    assert_true(p.known);  // a library said, whatever its name (fuzz_fingerprint found this)
    assert_str(p.name, "/opt/x/");
    assert_false(net_plugin_from_log("").known);  // no NCCL log: not known, never compared
    assert_false(net_plugin_from_log("NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n").known);
}

namespace {

Fingerprint h100(const std::string& host) {
    Fingerprint f;
    f.host = host;
    f.nccl = "2.28.9";
    f.nccl_path = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    f.net.known = true;  // no plugin
    f.cuda_driver = "12.8";
    f.gpu_model = "NVIDIA H100 80GB HBM3";
    f.gpus = 8;
    f.gpus_requested = 8;
    f.verbs_known = true;
    f.verbs = {"efa", "mlx5", "rxe"};
    f.verbs_needed = {"mlx5"};
    for (const char* gpu : {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"})
        f.pcie.push_back({gpu, 16, 16, 2.5, 32});  // idle: Gen1 now, Gen5 at most
    f.hca_firmware = {"mlx5_0 28.39.1002", "mlx5_1 28.39.1002"};
    f.verbs_library = "1.14.50.0";
    f.nccl_env_known = true;
    f.nccl_env = {"NCCL_IB_TIMEOUT=20"};
    f.image = "3f2a9c1b7e40";
    f.image_name = "Ubuntu 22.04.4 LTS";
    return f;
}

std::vector<Fingerprint> four() { return {h100("node0"), h100("node1"), h100("node2"), h100("node3")}; }

}  // namespace

static void encode_decode_round_trip(void**) {
    Fingerprint f = h100("gpu-a1");
    f.nccl_path = "/opt/my nccl/lib=x/libnccl.so.2";  // space and '=' in a path
    f.net = {true, "AWS Libfabric", "v9", "/opt/aws-ofi-nccl/lib/libnccl-net.so"};
    f.torch_nccl = "2.21.5";
    f.verbs = {"a,b", "mlx5"};
    const std::string line = encode_fingerprint(f);
    assert_true(line.find('\n') == std::string::npos);  // one field of a wire message
    assert_contains(line, "nccl_path=/opt/my%20nccl/lib%3Dx/libnccl.so.2");
    const auto back = decode_fingerprint(line);
    assert_true(back.ok());
    assert_str(back->host, "gpu-a1");
    assert_str(back->nccl_path, f.nccl_path);
    assert_str(back->net.name, "AWS Libfabric");
    assert_str(back->net.path, f.net.path);
    assert_str(back->torch_nccl, "2.21.5");
    assert_int_equal(back->gpus, 8);
    assert_int_equal(back->gpus_requested, 8);
    assert_true(back->verbs == f.verbs);
    assert_true(back->verbs_needed == f.verbs_needed);
    assert_str(encode_fingerprint(*back), line);
    // "known: none" and "not known" stay apart.
    Fingerprint none;
    none.net.known = true;
    none.verbs_known = true;
    const auto n = decode_fingerprint(encode_fingerprint(none));
    assert_true(n.ok() && n->net.none() && n->verbs_known && n->verbs.empty());
    const auto unknown = decode_fingerprint(encode_fingerprint(Fingerprint{}));
    assert_true(unknown.ok() && !unknown->net.known && !unknown->verbs_known);
}

static void node_readings_round_trip(void**) {
    Fingerprint f = h100("gpu-a1");
    f.pcie[1] = {"0000:2a:00.0", 8, 16, 16, 16};
    f.nccl_env = {"NCCL_ALGO=Ring,Tree", "NCCL_IB_TIMEOUT=20"};  // a comma in a value
    f.image_name = "Ubuntu 22.04.4 LTS (Jammy Jellyfish)";
    const std::string line = encode_fingerprint(f);
    assert_contains(line, "pcie=0000:18:00.0;16;16;2.5;32,0000:2a:00.0;8;16;16;16,");
    const auto back = decode_fingerprint(line);
    assert_true(back.ok());
    assert_int_equal(back->pcie.size(), 4);
    assert_int_equal(back->pcie[1].width, 8);
    assert_true(back->pcie[0].gts == 2.5 && back->pcie[0].max_gts == 32);
    assert_true(back->hca_firmware == f.hca_firmware);
    assert_str(back->verbs_library, "1.14.50.0");
    assert_true(back->nccl_env_known);
    assert_true(back->nccl_env == f.nccl_env);
    assert_str(back->image, "3f2a9c1b7e40");
    assert_str(back->image_name, f.image_name);
    assert_str(encode_fingerprint(*back), line);
    // No NCCL_* set is known and empty; a build before these keys, unknown.
    Fingerprint none;
    none.nccl_env_known = true;
    assert_true(decode_fingerprint(encode_fingerprint(none))->nccl_env_known);
    assert_false(decode_fingerprint("nccl=2.28.9")->nccl_env_known);
    for (const char* bad : {"pcie=0000:18:00.0;16;16;2.5", "pcie=0000:18:00.0;x;16;2.5;32", "pcie=a;1;1;1e9;1"})
        assert_false(decode_fingerprint(bad).ok());
}

static void decode_refuses_garbage_and_skips_new_keys(void**) {
    assert_true(decode_fingerprint("nccl=2.28.9 shiny_new_key=1").ok());
    for (const char* bad : {"gpus=eight", "nccl_path=%zz", "novalue", "=x", "gpus=99999999", "verbs=a%2"}) {
        const auto r = decode_fingerprint(bad);
        if (r.ok()) fail_msg("'%s' decoded", bad);
        assert_contains(r.problem().text(), "fingerprint");
    }
}

static void alike_nodes_have_no_findings(void**) { assert_true(compare_fingerprints(four()).empty()); }

// The example: one node loads another NCCL release.
static void nccl_release_differs_fails_the_odd_node(void**) {
    auto n = four();
    n[3].nccl = "2.21.5";
    n[3].nccl_path = "/opt/nccl/lib/libnccl.so.2";
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_int_equal(f[0].node, 3);
    assert_true(f[0].fail);
    assert_false(f[0].tie);
    assert_contains(f[0].text, "fingerprint: NCCL 2.21.5 (/opt/nccl/lib/libnccl.so.2), the others 2.28.9; fix: ");
    assert_contains(f[0].text, "NVIDIA/nccl#286");
}

static void nccl_patch_differs_warns_once(void**) {
    auto n = four();
    n[1].nccl = "2.28.3";
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_int_equal(f[0].node, 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "NCCL 2.28.3");
    assert_contains(f[0].text, "the others 2.28.9");
}

static void three_versions_fail_and_warn_apart(void**) {
    auto n = four();
    n.push_back(h100("node4"));
    n[1].nccl = "2.28.3";
    n[4].nccl = "2.21.5";
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 2);
    assert_int_equal(f[0].node, 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "NCCL 2.28.3 (/usr/lib/x86_64-linux-gnu/libnccl.so.2), the others 2.28.9;");
    // Against the release the others share, whatever their patch levels.
    assert_int_equal(f[1].node, 4);
    assert_true(f[1].fail);
    assert_contains(f[1].text, "the others 2.28.9 or 2.28.3;");
}

// No majority: both named, each against the other.
static void two_nodes_that_differ_are_both_named(void**) {
    auto n = std::vector<Fingerprint>{h100("node0"), h100("node1")};
    n[1].nccl = "2.27.3";
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 2);
    assert_true(f[0].fail && f[1].fail);
    // No majority: a tie, which blames neither (the step still fails).
    assert_true(f[0].tie && f[1].tie);
    assert_contains(f[0].text, "NCCL 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2), node1 has 2.27.3");
    assert_contains(f[1].text, "NCCL 2.27.3 (/usr/lib/x86_64-linux-gnu/libnccl.so.2), node0 has 2.28.9");
}

static void plugin_on_some_nodes_only_fails(void**) {
    auto n = four();
    n[2].net = {true, "IBext", "", "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"};
    auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_true(f[0].fail);
    assert_contains(f[0].text,
                    "fingerprint: network plugin IBext (/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so), the "
                    "others none");
    assert_contains(f[0].text, "NVIDIA/nccl#1634");
    // The same plugin everywhere but one API version: a warning.
    for (auto& x : n) x.net = {true, "Libfabric", "v10", ""};
    n[0].net.api = "v9";
    f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "network plugin Libfabric (v9), the others Libfabric (v10)");
    // A node whose log said nothing of plugins is not compared.
    n[0].net = NetPlugin{};
    assert_true(compare_fingerprints(n).empty());
}

// The cloud fabrics NCCL reaches only through a net plugin (AWS EFA:
// aws-ofi-nccl; Google's A3: GPUDirect-TCPX, -TCPXO): the plugin, read from
// the log each writes, is compared, and the node without it is the one
// named, with the others' plugin and the fix.
static void cloud_net_plugin_missing_on_one_node_names_it(void**) {
    // The lines as each plugin's NCCL writes them (aws-ofi-nccl 1.x: "AWS
    // Libfabric"; Google's TCPX: "GPUDirectTCPX_v7"; TCPXO: "FasTrak").
    NetPlugin aws = net_plugin_from_log("p4d:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v9)\n");
    assert_str(aws.name, "AWS Libfabric");
    assert_str(aws.api, "v9");
    NetPlugin tcpx = net_plugin_from_log(
        "a3:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin GPUDirectTCPX_v7 (v7)\n"
        "a3:1:1 [0] NCCL INFO NET/GPUDirectTCPX : GPUDirectTCPX enable: 1\n");
    assert_str(tcpx.name, "GPUDirectTCPX_v7");
    assert_str(tcpx.api, "v7");
    NetPlugin fastrak = net_plugin_from_log("a3m:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin FasTrak\n");
    assert_str(fastrak.name, "FasTrak");
    for (const NetPlugin& plugin : {aws, tcpx, fastrak}) {
        auto n = four();
        for (auto& x : n) x.net = plugin;
        assert_true(compare_fingerprints(n).empty());
        // node1 loaded none (its image lacks the plugin, or LD_LIBRARY_PATH
        // misses it): NCCL fell back to its own transports there.
        n[1].net = net_plugin_from_log(
            "n:1:1 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n");
        assert_true(n[1].net.none());
        auto f = compare_fingerprints(n);
        assert_int_equal(f.size(), 1);
        assert_int_equal(f[0].node, 1);
        assert_true(f[0].fail);
        assert_contains(f[0].text, "fingerprint: no network plugin, the others " + plugin.name);
        assert_contains(f[0].text, "install the same NCCL network plugin on every node");
    }
}

static void driver_warns_model_fails(void**) {
    auto n = four();
    n[0].cuda_driver = "12.4";
    n[1].gpu_model = "NVIDIA A100-SXM4-80GB";
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 2);
    assert_int_equal(f[0].node, 0);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "CUDA driver 12.4, the others 12.8");
    assert_int_equal(f[1].node, 1);
    assert_true(f[1].fail);
    assert_contains(f[1].text, "GPU model NVIDIA A100-SXM4-80GB, the others NVIDIA H100 80GB HBM3");
}

static void gpus_below_the_request_fail(void**) {
    auto n = four();
    n[2].gpus = 7;
    auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_true(f[0].fail);
    assert_int_equal(f[0].node, 2);
    assert_contains(f[0].text, "fingerprint: 7 GPUs usable, the step asked for 8 here");
    // More than asked for is fine; without a request the odd count warns.
    n[2].gpus = 9;
    assert_true(compare_fingerprints(n).empty());
    for (auto& x : n) x.gpus_requested = 0;
    n[2].gpus = 7;
    f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "7 GPUs, the others 8");
    // GPUs asked for on nodes without a CUDA driver (a test cluster's
    // GPUs, a node never set up): a warning each, not a dead GPU.
    n = four();
    for (auto& x : n) {
        x.cuda_driver.clear();
        x.gpus = 0;
        x.gpu_model.clear();
    }
    f = compare_fingerprints(n);
    assert_int_equal(f.size(), 4);
    for (const auto& x : f) {
        assert_false(x.fail);
        assert_contains(x.text, "the step asked for 8 GPUs here, but the node has no CUDA driver");
    }
}

static void verbs_providers_warn_unless_needed(void**) {
    auto n = four();
    n[1].verbs = {"efa", "mlx5"};
    auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "verbs providers efa,mlx5, the others efa,mlx5,rxe");
    n[1].verbs = {"efa", "rxe"};  // its own ports need mlx5
    f = compare_fingerprints(n);
    assert_int_equal(f.size(), 2);
    assert_true(f[0].fail);
    assert_contains(f[0].text, "libibverbs has no mlx5 provider, which its ACTIVE RDMA ports need");
    assert_false(f[1].fail);
    assert_true(node_fingerprint_findings(n[1]).size() == 1);  // --prolog sees it alone
}

static void torch_nccl_warns_on_the_node_and_fails_across(void**) {
    auto n = four();
    for (auto& x : n) x.torch_nccl = "2.28.9";
    assert_true(compare_fingerprints(n).empty());
    n[0].torch_nccl = "(2, 21, 5)";
    n[0].nccl = "2.21.5";  // the check loaded torch's release here: no warning of its own
    auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 2);
    assert_true(f[0].fail && f[1].fail);
    assert_contains(f[0].text, "NCCL 2.21.5");
    assert_contains(f[1].text, "torch's NCCL (2, 21, 5), the others 2.28.9");
    // Torch bundles another release than the one the check loaded.
    n = four();
    n[3].torch_nccl = "2.27.3";
    f = node_fingerprint_findings(n[3], 3);
    assert_int_equal(f.size(), 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "torch's NCCL 2.27.3 is not the NCCL this check loaded (NCCL 2.28.9");
    assert_contains(f[0].text, "verl-project/verl#6621");
}

// A GPU whose link trained narrower than it and its port take: the node
// alone fails, whatever the others show. Its speed now is never judged
// (GPUs lower it when idle).
static void a_gpu_link_trained_narrow_fails_its_node(void**) {
    auto n = four();
    n[2].pcie[3].width = 8;
    n[3].pcie[0].gts = 32;  // busy there: no finding
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_int_equal(f[0].node, 2);
    assert_true(f[0].fail);
    assert_contains(f[0].text, "fingerprint: GPU 0000:5d:00.0's PCIe link trained at x8, while the GPU and its port take "
                               "x16: a slow node; fix: reseat the GPU");
    assert_contains(f[0].text, "lspci -vv -s 0000:5d:00.0");
    assert_int_equal(node_fingerprint_findings(n[2]).size(), 1);
}

// A Gen5 GPU in a Gen4 slot (or a BIOS set to Gen4): the link's ceiling
// against the others'.
static void a_gpu_link_below_the_others_fails(void**) {
    auto n = four();
    for (auto& l : n[1].pcie) l.max_gts = 16;
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_int_equal(f[0].node, 1);
    assert_true(f[0].fail);
    assert_contains(f[0].text, "fingerprint: GPU PCIe links that reach x16 Gen4 (16 GT/s) at most, the others x16 Gen5 "
                               "(32 GT/s); fix: check the slot, riser or retimer and the BIOS's PCIe speed setting");
    assert_str(pcie_generation(2.5), "Gen1");
    assert_str(pcie_generation(64), "Gen6");
    assert_str(pcie_generation(20), "");
}

// Firmware, the rdma-core release and the image warn: it runs, not alike.
static void firmware_rdma_core_and_image_warn(void**) {
    auto n = four();
    n.push_back(h100("node4"));
    n[0].hca_firmware[1] = "mlx5_1 28.36.1010";
    n[3].verbs_library = "1.14.2307.0";
    n[4].image = "9c8d00e1aa51";
    n[4].image_name = "Ubuntu 22.04.5 LTS";
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 3);
    for (const auto& x : f) assert_false(x.fail);
    assert_int_equal(f[0].node, 0);
    assert_contains(f[0].text, "fingerprint: HCA firmware 28.36.1010,28.39.1002 (mlx5_0,mlx5_1), the others "
                               "28.39.1002; fix: flash one firmware");
    assert_int_equal(f[1].node, 3);
    assert_contains(f[1].text, "fingerprint: libibverbs 1.14.2307.0, the others 1.14.50.0; fix: install one rdma-core");
    assert_int_equal(f[2].node, 4);
    assert_contains(f[2].text, "fingerprint: image 9c8d00e1aa51 (Ubuntu 22.04.5 LTS), the others 3f2a9c1b7e40 (Ubuntu "
                               "22.04.4 LTS); fix: run one container image");
}

// NCCL_* the step set, variable by variable against most nodes.
static void nccl_environment_differences_warn_by_variable(void**) {
    auto n = four();
    n[2].nccl_env = {"NCCL_ALGO=Ring", "NCCL_IB_TIMEOUT=22"};
    const auto f = compare_fingerprints(n);
    assert_int_equal(f.size(), 1);
    assert_int_equal(f[0].node, 2);
    assert_false(f[0].fail);
    assert_str(f[0].text, "fingerprint: NCCL environment NCCL_ALGO=Ring (most nodes unset), NCCL_IB_TIMEOUT=22 (most "
                          "nodes 20); fix: set NCCL_* alike on every node (the batch script, a module or the image), or "
                          "unset them where they differ");
    // Two nodes, each its own: both named, no majority.
    std::vector<Fingerprint> two = {h100("a"), h100("b")};
    two[1].nccl_env = {};
    const auto t = compare_fingerprints(two);
    assert_int_equal(t.size(), 2);
    assert_true(t[0].tie && t[1].tie);
    assert_contains(t[0].text, "NCCL_IB_TIMEOUT=20, and no value holds a majority");
    assert_contains(t[1].text, "NCCL_IB_TIMEOUT unset, and no value holds a majority");
}

static void unknown_values_are_never_compared(void**) {
    {
        // Readings a node could not make (no GPU path, no HCAs, an earlier
        // build): left out, never a difference.
        auto n = four();
        n[1].pcie.clear();
        n[1].hca_firmware.clear();
        n[1].verbs_library.clear();
        n[1].nccl_env_known = false;
        n[1].nccl_env.clear();
        n[1].image.clear();
        assert_true(compare_fingerprints(n).empty());
    }
    std::vector<Fingerprint> cpu(3);  // the CPU path: nothing of NCCL or GPUs
    cpu[0].host = "node0";
    assert_true(compare_fingerprints(cpu).empty());
    auto n = four();
    n[3].nccl.clear();
    n[3].cuda_driver.clear();
    n[3].gpu_model.clear();
    n[3].verbs_known = false;
    n[3].verbs.clear();
    assert_true(compare_fingerprints(n).empty());
}

// tests/fixtures/fake_nccl.c, built by make check as NCCL 2.18.5.
static void fake_nccl_tells_its_version(void**) {
    const char* path = std::getenv("MN_FAKE_NCCL");
    if (!path || !*path) {
        print_message("MN_FAKE_NCCL not set (make check sets it): skipped\n");
        skip();
    }
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) fail_msg("dlopen %s: %s", path, dlerror());
    using GetVersion = int (*)(int*);
    const auto get = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
    assert_non_null(get);
    int code = 0;
    assert_int_equal(get(&code), 0);
    assert_int_equal(code, 21805);
    assert_str(nccl_version_text(code), "2.18.5");
    assert_int_not_equal(get(nullptr), 0);
    dlclose(lib);
}

// A directory of this test's own, made fresh.
static std::string fresh_dir(mode_t mode) {
    char tmpl[] = "/tmp/mn-test-shared.XXXXXX";
    const char* d = mkdtemp(tmpl);
    assert_non_null(d);
    assert_int_equal(chmod(d, mode), 0);
    return d;
}

static void emulated_nodes_share_one_read(void**) {
    const std::string dir = fresh_dir(0700);
    Fingerprint f;
    f.host = "reader";
    f.nccl = "2.28.9";
    f.gpus = 2;
    int reads = 0;
    auto read = [&] {
        ++reads;
        return encode_fingerprint(f);
    };
    const std::string a = shared_node_read(dir, "machine.7.0", "emu0", read);
    const std::string b = shared_node_read(dir, "machine.7.0", "emu1", read);
    assert_int_equal(reads, 1);  // the second node took the first one's read
    auto fa = decode_fingerprint(a), fb = decode_fingerprint(b);
    assert_true(fa && fb);
    assert_str(fa->host, "reader");  // the reader's own line, as read
    assert_str(fb->host, "emu1");    // each node its own name
    assert_str(fb->nccl, "2.28.9");
    assert_int_equal(fb->gpus, 2);
    // Another step (another key) reads again.
    shared_node_read(dir, "machine.7.1", "emu0", read);
    assert_int_equal(reads, 2);
    // A line cut short (no newline) is no fingerprint: read again, rewritten.
    FILE* cut = std::fopen((dir + "/machine.7.2").c_str(), "w");
    assert_non_null(cut);
    std::fputs("host=x nccl=2.2", cut);
    std::fclose(cut);
    const std::string c = shared_node_read(dir, "machine.7.2", "emu3", read);
    assert_int_equal(reads, 3);
    assert_str(decode_fingerprint(c)->nccl, "2.28.9");
    assert_str(decode_fingerprint(shared_node_read(dir, "machine.7.2", "emu4", read))->host, "emu4");
    assert_int_equal(reads, 3);
    for (const char* k : {"machine.7.0", "machine.7.1", "machine.7.2"}) unlink((dir + "/" + k).c_str());
    rmdir(dir.c_str());
}

static void shared_read_refuses_others_places(void**) {
    int reads = 0;
    auto read = [&] {
        ++reads;
        return std::string("host=h nccl=2.28.9");
    };
    // Writable by others: every node reads for itself, nothing written.
    const std::string open_dir = fresh_dir(0777);
    shared_node_read(open_dir, "k", "a", read);
    shared_node_read(open_dir, "k", "b", read);
    assert_int_equal(reads, 2);
    assert_int_not_equal(access((open_dir + "/k").c_str(), F_OK), 0);
    rmdir(open_dir.c_str());
    // A link where the file goes is never followed.
    const std::string dir = fresh_dir(0700);
    assert_int_equal(symlink("/etc/passwd", (dir + "/k").c_str()), 0);
    shared_node_read(dir, "k", "a", read);
    assert_int_equal(reads, 3);
    // No directory, or a key that is a path: read here.
    shared_node_read(dir + "/none", "k", "a", read);
    shared_node_read(dir, "../k", "a", read);
    shared_node_read("", "k", "a", read);
    assert_int_equal(reads, 6);
    unlink((dir + "/k").c_str());
    rmdir(dir.c_str());
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nccl_version_codes_old_and_new),
        cmocka_unit_test(versions_parse_in_every_spelling),
        cmocka_unit_test(a_release_is_major_and_minor),
        cmocka_unit_test(verbs_providers_from_files_and_drivers),
        cmocka_unit_test(net_plugin_read_from_nccl_log),
        cmocka_unit_test(encode_decode_round_trip),
        cmocka_unit_test(node_readings_round_trip),
        cmocka_unit_test(a_gpu_link_trained_narrow_fails_its_node),
        cmocka_unit_test(a_gpu_link_below_the_others_fails),
        cmocka_unit_test(firmware_rdma_core_and_image_warn),
        cmocka_unit_test(nccl_environment_differences_warn_by_variable),
        cmocka_unit_test(decode_refuses_garbage_and_skips_new_keys),
        cmocka_unit_test(alike_nodes_have_no_findings),
        cmocka_unit_test(nccl_release_differs_fails_the_odd_node),
        cmocka_unit_test(nccl_patch_differs_warns_once),
        cmocka_unit_test(three_versions_fail_and_warn_apart),
        cmocka_unit_test(two_nodes_that_differ_are_both_named),
        cmocka_unit_test(plugin_on_some_nodes_only_fails),
        cmocka_unit_test(cloud_net_plugin_missing_on_one_node_names_it),
        cmocka_unit_test(driver_warns_model_fails),
        cmocka_unit_test(gpus_below_the_request_fail),
        cmocka_unit_test(verbs_providers_warn_unless_needed),
        cmocka_unit_test(torch_nccl_warns_on_the_node_and_fails_across),
        cmocka_unit_test(unknown_values_are_never_compared),
        cmocka_unit_test(fake_nccl_tells_its_version),
        cmocka_unit_test(emulated_nodes_share_one_read),
        cmocka_unit_test(shared_read_refuses_others_places),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
