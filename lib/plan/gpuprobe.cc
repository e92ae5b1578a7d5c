// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/gpuprobe.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "lib/util/bounded_file.h"

namespace mn {

namespace {

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (const dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

bool gpu_device_name(const std::string& n) {
    if (n.size() <= 6 || n.compare(0, 6, "nvidia") != 0) return false;
    return std::all_of(n.begin() + 6, n.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// 0000:18:00.0 as sysfs and NVIDIA's /proc name a PCI function.
bool bus_id(const std::string& n) {
    return n.size() == 12 && n[4] == ':' && n[7] == ':' && n[10] == '.';
}

}  // namespace

std::optional<uint32_t> openable_gpus(const std::string& dev_dir) {
    uint32_t files = 0, openable = 0;
    for (const auto& n : entries(dev_dir)) {
        if (!gpu_device_name(n)) continue;
        const std::string path = dev_dir + "/" + n;
        struct stat st;
        if (stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
        ++files;
        // EACCES (file mode) is not the cgroup's doing: the task may still
        // see the GPU once the admin fixes the mode.
        if (access(path.c_str(), R_OK | W_OK) == 0 || errno != EPERM) ++openable;
    }
    if (files == 0) return std::nullopt;
    return openable;
}

std::vector<std::string> nvidia_bus_ids(const std::string& sysfs_root) {
    std::vector<std::string> out;
    const std::string driver = sysfs_root + "/bus/pci/drivers/nvidia";
    for (const auto& n : entries(driver)) {
        if (!bus_id(n)) continue;
        auto cls = read_text_file(driver + "/" + n + "/class", 64);
        if (cls && cls->rfind("0x03", 0) == 0) out.push_back(n);  // display or 3D controller
    }
    if (out.empty() && sysfs_root == "/sys")
        for (const auto& n : entries("/proc/driver/nvidia/gpus"))
            if (bus_id(n)) out.push_back(n);
    return out;
}

std::optional<std::string> read_text_file(const std::string& path, std::size_t limit) {
    // A launcher's config and sysfs files come from places the user names:
    // regular files only, never more than the limit in memory.
    return read_bounded_text(path, limit);
}

}  // namespace mn
