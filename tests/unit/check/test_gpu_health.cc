// SPDX-License-Identifier: Apache-2.0
// NVML readings -> findings, on readings as an H200 node gives them.
#include "lib/check/gpu_health.h"
#include "tests/unit/unit.h"

using namespace mn;

namespace {

// A healthy H200 as NVML reads it during the check (link busy after the
// buffer copy): gen 5 x16, 18 NVLink links up, no events.
GpuReadings h200(int index, unsigned our_pid) {
    GpuReadings g;
    g.gpu = "GPU" + std::to_string(index) + " (00000000:" + std::to_string(18 + index) + ":00.0)";
    g.nvml = true;
    g.processes = {{our_pid, "mn-preflight", 1536}};
    g.ecc_uncorrected = 0;
    g.remap_pending = false;
    g.remap_failed = false;
    g.pcie_gen = 5;
    g.pcie_gen_max = 5;
    g.pcie_width = 16;
    g.pcie_width_max = 16;
    g.nvlinks = 18;
    g.nvlinks_up = 18;
    return g;
}

std::vector<GpuReadings> node4() { return {h200(0, 100), h200(1, 101), h200(2, 102), h200(3, 103)}; }
const std::set<unsigned> kOurs = {100, 101, 102, 103};

}  // namespace

static void healthy_node_has_no_findings(void**) {
    assert_true(gpu_health("gpu-a1", node4(), kOurs).empty());
}

// The first case: another process held almost all of GPU 1.
static void foreign_process_fails_naming_pid_and_memory(void**) {
    auto g = node4();
    g[1].processes.push_back({4242, "python3", 139000});
    const auto f = gpu_health("gpu-a1", g, kOurs);
    assert_int_equal(f.size(), 1);
    assert_true(f[0].fail);
    assert_str(f[0].text,
               "gpu-a1 GPU1 (00000000:19:00.0): another process is on this GPU: pid 4242 (python3), 139000 MiB; "
               "fix: end it or drain the node (a job's GPU must be its own)");
}

// Our own ranks (two emulated nodes on one GPU) are never foreign.
static void own_ranks_are_not_foreign(void**) {
    auto g = node4();
    g[0].processes.push_back({101, "mn-preflight", 1536});
    assert_true(gpu_health("gpu-a1", g, kOurs).empty());
}

static void memory_faults_fail(void**) {
    auto g = node4();
    g[0].ecc_uncorrected = 2;
    g[1].remap_pending = true;
    g[2].remap_failed = true;
    g[2].remap_pending = true;  // a failed remap says replace, not reset
    g[3].retirement_pending = true;
    const auto f = gpu_health("n7", g, kOurs);
    assert_int_equal(f.size(), 4);
    for (const auto& x : f) assert_true(x.fail);
    assert_contains(f[0].text, "n7 GPU0 (00000000:18:00.0): 2 uncorrectable ECC errors");
    assert_contains(f[1].text, "GPU1 (00000000:19:00.0): a row remap is pending; fix: drain and reset");
    assert_contains(f[2].text, "a row remap failed (no spare rows left); fix: drain and replace");
    assert_contains(f[3].text, "page retirement is pending");
}

// A generation below the maximum warns; a width below it is the
// fingerprint's to fail (test_fingerprint a_gpu_link_trained_narrow_fails_its_node),
// not said twice.
static void pcie_below_max_warns(void**) {
    auto g = node4();
    g[2].pcie_width = 8;
    g[3].pcie_gen = 3;
    const auto f = gpu_health("n1", g, kOurs);
    assert_int_equal(f.size(), 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "GPU3 (00000000:21:00.0): PCIe link at gen 3, the slot and GPU can do gen 5");
}

// ECC and MIG mode against the other nodes: the odd node named, ECC a
// warning, MIG a failure; alike nodes, nodes that do not say, or no
// majority: nothing.
static void ecc_and_mig_mode_against_the_others(void**) {
    auto with = [](std::optional<bool> ecc, std::optional<bool> mig) {
        auto g = node4();
        for (auto& x : g) {
            x.ecc_enabled = ecc;
            x.mig_enabled = mig;
        }
        return g;
    };
    const std::vector<std::string> hosts = {"n0", "n1", "n2"};
    auto f = gpu_modes_across(hosts, {with(true, false), with(false, false), with(true, false)});
    assert_int_equal(f.size(), 3);
    assert_true(f[0].empty() && f[2].empty());
    assert_int_equal(f[1].size(), 1);
    assert_false(f[1][0].fail);
    assert_str(f[1][0].text, "n1 GPUs: ECC off, most nodes on; fix: set ECC alike on every node (nvidia-smi -e 1, then "
                             "a GPU reset) at the next maintenance");
    f = gpu_modes_across(hosts, {with(true, false), with(true, false), with(true, true)});
    assert_int_equal(f[2].size(), 1);
    assert_true(f[2][0].fail);
    assert_contains(f[2][0].text, "n2 GPUs: MIG mode on, most nodes off; fix: turn MIG mode off");
    // One GPU of a node otherwise than its others: "mixed".
    auto mixed = with(true, false);
    mixed[3].ecc_enabled = false;
    f = gpu_modes_across(hosts, {with(true, false), mixed, with(true, false)});
    assert_contains(f[1][0].text, "n1 GPUs: ECC mixed, most nodes on");
    // With each node's own findings, in one list per node: its own first.
    auto busy = with(true, true);
    busy[0].processes.push_back({4242, "other", 1024});
    const auto all = gpu_findings(hosts, {with(true, false), with(true, false), busy}, {&kOurs, &kOurs, &kOurs});
    assert_int_equal(all.size(), 3);
    assert_true(all[0].empty() && all[1].empty());
    assert_int_equal(all[2].size(), 2);
    assert_contains(all[2][0].text, "another process is on this GPU: pid 4242");
    assert_contains(all[2][1].text, "n2 GPUs: MIG mode on, most nodes off");
    // Alike, unknown, or two nodes apart: nothing.
    for (const auto& nodes : {std::vector<std::vector<GpuReadings>>{with(true, false), with(true, false)},
                              std::vector<std::vector<GpuReadings>>{with(std::nullopt, std::nullopt), with(true, true)},
                              std::vector<std::vector<GpuReadings>>{with(true, false), with(false, true)}})
        for (const auto& per_node : gpu_modes_across(hosts, nodes)) assert_true(per_node.empty());
}

// NVLink down is judged against the node's other GPUs: a PCIe-only node
// (no links at all) is fine; one GPU with fewer links than the rest fails.
static void nvlink_down_against_the_node(void**) {
    auto g = node4();
    g[1].nvlinks_up = 12;
    auto f = gpu_health("n1", g, kOurs);
    assert_int_equal(f.size(), 1);
    assert_true(f[0].fail);
    assert_contains(f[0].text, "GPU1 (00000000:19:00.0): 12 NVLink links up where the node's other GPUs have 18");
    for (auto& x : g) x.nvlinks = x.nvlinks_up = 0;
    assert_true(gpu_health("n1", g, kOurs).empty());
}

static void throttling(void**) {
    auto g = node4();
    g[0].hw_slowdown = true;
    g[0].power_brake = true;
    g[3].sw_thermal = true;
    const auto f = gpu_health("n2", g, kOurs);
    assert_int_equal(f.size(), 2);
    assert_true(f[0].fail);
    assert_contains(f[0].text, "GPU0 (00000000:18:00.0): clocks held down by hardware slowdown/power brake");
    assert_false(f[1].fail);
    assert_contains(f[1].text, "software thermal slowdown");
}

static void no_nvml_warns_once(void**) {
    GpuReadings g;
    g.gpu = "GPU0 (00000000:18:00.0)";
    g.nvml_error = "libnvidia-ml.so.1 not found";
    const auto f = gpu_health("n3", {g}, {});
    assert_int_equal(f.size(), 1);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "GPU health not read (libnvidia-ml.so.1 not found)");
}

// NVL systems: a GPU whose NVLink fabric is not registered yet warns, one
// whose registration failed fails, a GPU in another domain than the node's
// others warns; nodes in different domains (one per rack) are not compared.
static void nvlink_fabric(void**) {
    std::vector<GpuReadings> node = {h200(0, 100), h200(1, 101), h200(2, 102)};
    for (auto& g : node) g.fabric_domain = "3c1f0e2a-1b2c-4d5e-8f90-a1b2c3d4e5f6 clique 1";
    assert_int_equal(gpu_health("n1", node, {100, 101, 102}).size(), 0);
    node[1].fabric_domain.reset();
    node[1].fabric_unready = "registration in progress";
    node[2].fabric_domain = "77777777-1b2c-4d5e-8f90-a1b2c3d4e5f6 clique 1";
    auto f = gpu_health("n1", node, {100, 101, 102});
    assert_int_equal(f.size(), 2);
    assert_false(f[0].fail);
    assert_contains(f[0].text, "n1 GPU1 (00000000:19:00.0): its NVLink fabric registration in progress");
    assert_contains(f[0].text, "nvidia-fabricmanager");
    assert_false(f[1].fail);
    assert_contains(f[1].text, "in NVLink domain 77777777-");
    node[1].fabric_unready = "registration failed (Unknown Error)";
    f = gpu_health("n1", node, {100, 101, 102});
    assert_true(f[0].fail);
    // Another node, another rack's domain: nothing across nodes.
    std::vector<GpuReadings> other = {h200(0, 200)};
    other[0].fabric_domain = "99999999-0000-0000-0000-000000000000 clique 4";
    std::vector<GpuReadings> same = {h200(0, 300)};
    same[0].fabric_domain = "3c1f0e2a-1b2c-4d5e-8f90-a1b2c3d4e5f6 clique 1";
    const std::set<unsigned> a = {200}, b = {300};
    const auto all = gpu_findings({"n2", "n3"}, {other, same}, {&a, &b});
    assert_int_equal(all[0].size() + all[1].size(), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(healthy_node_has_no_findings), cmocka_unit_test(foreign_process_fails_naming_pid_and_memory),
        cmocka_unit_test(own_ranks_are_not_foreign),    cmocka_unit_test(memory_faults_fail),
        cmocka_unit_test(pcie_below_max_warns),
        cmocka_unit_test(ecc_and_mig_mode_against_the_others),         cmocka_unit_test(nvlink_down_against_the_node),
        cmocka_unit_test(throttling),                   cmocka_unit_test(no_nvml_warns_once),
        cmocka_unit_test(nvlink_fabric),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
