// SPDX-License-Identifier: Apache-2.0
// What the node itself says about its GPUs and files, for lib/plan's rules:
// which GPU device files a task may open, the GPUs' PCI bus ids, and small
// text files (a launcher's config). Read only; nothing is opened for real.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mn {

// How many of DIR/nvidiaN (N a number) this process may open: access(2)
// answers EPERM for a device its device cgroup denies, without opening
// (opening an NVIDIA device can initialise the GPU). nullopt when DIR has
// no such device.
std::optional<uint32_t> openable_gpus(const std::string& dev_dir);

// The PCI bus ids of the NVIDIA GPUs under a sysfs root
// (ROOT/bus/pci/drivers/nvidia, display controllers only: NVSwitches bind
// to the same driver), in bus order, which is CUDA's order under
// CUDA_DEVICE_ORDER=PCI_BUS_ID and Slurm's with AutoDetect=nvml. Under /sys,
// /proc/driver/nvidia/gpus when sysfs lists none.
std::vector<std::string> nvidia_bus_ids(const std::string& sysfs_root);

// The file's text, nullopt when it cannot be read, is not a regular file
// (a FIFO, a device) or is larger than limit (lib/util/bounded_file.h).
std::optional<std::string> read_text_file(const std::string& path, std::size_t limit = 1 << 16);

}  // namespace mn
