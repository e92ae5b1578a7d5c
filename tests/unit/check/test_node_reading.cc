// SPDX-License-Identifier: Apache-2.0
// What a node's sysfs, files and environment tell its fingerprint
// (lib/check/node_reading.h), read from trees this test writes in the
// kernel's formats: a GPU behind its port, trained narrow or in a slot of a
// lower generation, HCAs' firmware, a library's release, the NCCL_*
// variables a step set, and the image's identity.
#include "lib/check/node_reading.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/unit/unit.h"

using namespace mn;

namespace {

std::string dir;

void put(const std::string& path, const std::string& text) {
    std::string parent = path.substr(0, path.rfind('/'));
    std::system(("mkdir -p '" + parent + "'").c_str());
    std::ofstream(path) << text;
}

// A GPU at ADDR behind the port PORT of the root complex, as sysfs lays
// them out: devices/pci0000:00/PORT/ADDR, and bus/pci/devices/ADDR a link.
void gpu(const std::string& root, const std::string& port, const std::string& addr, const std::string& width,
         const std::string& max_width, const std::string& speed, const std::string& max_speed,
         const std::string& port_max_speed) {
    const std::string p = root + "/devices/pci0000:00/" + port;
    put(p + "/max_link_speed", port_max_speed + "\n");
    put(p + "/max_link_width", "16\n");
    const std::string d = p + "/" + addr;
    put(d + "/current_link_width", width + "\n");
    put(d + "/max_link_width", max_width + "\n");
    put(d + "/current_link_speed", speed + "\n");
    put(d + "/max_link_speed", max_speed + "\n");
    std::system(("mkdir -p '" + root + "/bus/pci/devices'").c_str());
    const std::string link = root + "/bus/pci/devices/" + addr;
    if (symlink(("../../../devices/pci0000:00/" + port + "/" + addr).c_str(), link.c_str()) != 0) std::abort();
}

int setup(void**) {
    char tmpl[] = "/tmp/mn-node-reading.XXXXXX";
    if (!mkdtemp(tmpl)) return -1;
    dir = tmpl;
    return 0;
}

int teardown(void**) { return std::system(("rm -rf '" + dir + "'").c_str()) == 0 ? 0 : -1; }

}  // namespace

static void sysfs_link_speeds_in_every_spelling(void**) {
    assert_true(link_speed_gts("32.0 GT/s PCIe") == 32);
    assert_true(link_speed_gts("8 GT/s") == 8);
    assert_true(link_speed_gts("2.5 GT/s") == 2.5);
    assert_true(link_speed_gts("Unknown") == 0);
    assert_true(link_speed_gts("Unknown speed") == 0);
    assert_true(link_speed_gts("16 MB/s") == 0);
    assert_true(link_speed_gts("") == 0);
}

static void gpu_links_are_read_with_the_port_above_them(void**) {
    const std::string root = dir + "/sys";
    // Healthy and idle: x16, Gen1 now, Gen5 at most behind a Gen5 port.
    gpu(root, "0000:00:01.0", "0000:18:00.0", "16", "16", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "32.0 GT/s PCIe");
    // Trained at x8.
    gpu(root, "0000:00:02.0", "0000:2a:00.0", "8", "16", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "32.0 GT/s PCIe");
    // A Gen5 GPU behind a Gen4 port.
    gpu(root, "0000:00:03.0", "0000:3a:00.0", "16", "16", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "16.0 GT/s PCIe");
    const auto links = read_pcie_links(root, {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:99:00.0"});
    assert_int_equal(links.size(), 3);  // 0000:99:00.0 is not there: left out
    assert_str(links[0].gpu, "0000:18:00.0");
    assert_true(links[0].width == 16 && links[0].max_width == 16 && links[0].gts == 2.5 && links[0].max_gts == 32);
    assert_true(links[1].width == 8 && links[1].max_width == 16);
    assert_true(links[2].max_gts == 16);
    // What the fingerprint then says of them: x8 fails the node alone.
    Fingerprint f;
    f.host = "node1";
    f.pcie = links;
    const auto findings = node_fingerprint_findings(f, 1);
    assert_int_equal(findings.size(), 1);
    assert_contains(findings[0].text, "GPU 0000:2a:00.0's PCIe link trained at x8");
}

static void hca_firmware_per_device(void**) {
    const std::string root = dir + "/sys2";
    put(root + "/class/infiniband/mlx5_1/fw_ver", "28.39.1002\n");
    put(root + "/class/infiniband/mlx5_0/fw_ver", "28.36.1010\n");
    put(root + "/class/infiniband/rxe0/node_type", "1: CA\n");  // soft RoCE: no firmware
    const auto fw = read_hca_firmware(root);
    assert_int_equal(fw.size(), 2);
    assert_str(fw[0], "mlx5_0 28.36.1010");
    assert_str(fw[1], "mlx5_1 28.39.1002");
    assert_true(read_hca_firmware(dir + "/none").empty());
}

static void library_release_from_its_file(void**) {
    assert_str(library_file_version("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0"), "1.14.50.0");
    assert_str(library_file_version("/usr/lib64/libibverbs.so.1.14.2307.0"), "1.14.2307.0");
    assert_str(library_file_version("/usr/lib64/libibverbs.so.1"), "");
    assert_str(library_file_version("libibverbs.so"), "");
}

static void nccl_variables_the_step_set(void**) {
    const auto env = nccl_environment({"NCCL_SOCKET_IFNAME=eth0", "NCCL_HOSTID=node3", "NCCL_IB_TIMEOUT=22",
                                       "PATH=/usr/bin", "NCCL_ALGO=Ring", "MY_NCCL_X=1", "NCCL_DEBUG=INFO",
                                       "NCCL_LONG=" + std::string(400, 'x')});
    // The plugin's per-node choices are the fabric's to compare, not these.
    assert_int_equal(env.size(), 4);
    assert_str(env[0], "NCCL_ALGO=Ring");
    assert_str(env[1], "NCCL_DEBUG=INFO");
    assert_str(env[2], "NCCL_IB_TIMEOUT=22");
    assert_int_equal(env[3].size(), 256);
}

static void the_image_is_named_by_its_files(void**) {
    const std::string a = dir + "/img-a", b = dir + "/img-b";
    for (const auto& r : {a, b}) {
        put(r + "/etc/os-release", "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nVERSION_ID=\"22.04\"\n");
        put(r + "/etc/environment", "PATH=/usr/local/nvidia/bin:/usr/bin\nNVIDIA_PYTORCH_VERSION=24.05\n");
    }
    const auto ia = image_identity(a), ib = image_identity(b);
    assert_int_equal(ia.id.size(), 12);
    assert_str(ia.id, ib.id);
    assert_str(ia.name, "Ubuntu 22.04.4 LTS");
    // Another image build: its environment differs.
    put(b + "/etc/environment", "PATH=/usr/local/nvidia/bin:/usr/bin\nNVIDIA_PYTORCH_VERSION=24.07\n");
    assert_true(image_identity(b).id != ia.id);
    // An Apptainer image's labels count too.
    put(b + "/.singularity.d/labels.json", "{\"org.label-schema.build-date\": \"2026-11-01\"}\n");
    assert_true(image_identity(b).id != ia.id);
    assert_str(image_identity(dir + "/nothing").id, "");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sysfs_link_speeds_in_every_spelling),
        cmocka_unit_test(gpu_links_are_read_with_the_port_above_them),
        cmocka_unit_test(hca_firmware_per_device),
        cmocka_unit_test(library_release_from_its_file),
        cmocka_unit_test(nccl_variables_the_step_set),
        cmocka_unit_test(the_image_is_named_by_its_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
