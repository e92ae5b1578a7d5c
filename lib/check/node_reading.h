// SPDX-License-Identifier: Apache-2.0
// The parts of a node's fingerprint (lib/check/fingerprint.h) that sysfs,
// the libraries' files and the environment tell: the GPUs' PCIe links, the
// HCAs' firmware, the libibverbs release, the NCCL_* variables the step
// set, and the identity of the image the step runs in. Plain reads of a
// tree given by its root, so fixture trees stand in for nodes.
#pragma once

#include <string>
#include <vector>

#include "lib/check/fingerprint.h"

namespace mn {

// Each GPU of `gpus` (PCI addresses, "0000:19:00.0") under `root` ("/sys"):
// bus/pci/devices/ADDR/{current,max}_link_{width,speed}, and the port above
// it (the parent directory of the device's own, when it is a PCI device),
// whose maximum bounds the link's. A GPU sysfs does not show is left out.
std::vector<PcieLink> read_pcie_links(const std::string& root, const std::vector<std::string>& gpus);
// "25.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s; 0 for anything else.
double link_speed_gts(const std::string& sysfs_text);

// "mlx5_0 28.39.1002" for each HCA of class/infiniband with a fw_ver,
// sorted.
std::vector<std::string> read_hca_firmware(const std::string& root);

// A shared library's release from its file's name, links followed:
// ".../libibverbs.so.1.14.50.0" -> "1.14.50.0"; "" when the name carries
// none past the soname's.
std::string library_file_version(const std::string& resolved_path);

// The NCCL_* variables of `environ` (NAME=VALUE entries) that the plugin
// does not choose per node (lib/plan/containers: is_plugin_variable),
// sorted, each at most 256 bytes.
std::vector<std::string> nccl_environment(const std::vector<std::string>& environ);

// What the system or container image is: a digest of the files an image
// brings and a node's boot does not change (etc/os-release, usr/lib/
// os-release, etc/environment, Apptainer's .singularity.d/labels.json),
// under `root` ("/"): 12 hex digits, and os-release's PRETTY_NAME. Empty
// when none of them can be read.
struct ImageIdentity {
    std::string id, name;
};
ImageIdentity image_identity(const std::string& root);

}  // namespace mn
