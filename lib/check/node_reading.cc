// SPDX-License-Identifier: Apache-2.0
#include "lib/check/node_reading.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "lib/plan/containers.h"
#include "lib/util/bounded_file.h"
#include "lib/util/text.h"

namespace mn {
namespace {

// A sysfs attribute's first line, trimmed; "" when it cannot be read.
std::string attribute(const std::string& path) {
    std::string s = read_bounded_text(path, 4096).value_or("");
    s = s.substr(0, s.find('\n'));
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
}

unsigned lanes(const std::string& text) {
    if (text.empty() || text.size() > 3 || !std::all_of(text.begin(), text.end(), ::isdigit)) return 0;
    return static_cast<unsigned>(std::stoul(text));
}

// "0000:19:00.0": a PCI address, as sysfs names a device's directory.
bool pci_address(const std::string& s) {
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
    for (std::size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u, 11u})
        if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    return true;
}

std::string resolved(const std::string& path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) ? std::string(buf) : "";
}

}  // namespace

double link_speed_gts(const std::string& text) {
    // "32.0 GT/s PCIe" (kernels since 5.x), "8 GT/s", "2.5 GT/s";
    // "Unknown" or "Unknown speed" for a port with no link.
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || v <= 0 || v > 1000) return 0;
    std::string rest = end;
    rest.erase(0, rest.find_first_not_of(' '));
    return rest.rfind("GT/s", 0) == 0 ? v : 0;
}

std::vector<PcieLink> read_pcie_links(const std::string& root, const std::vector<std::string>& gpus) {
    std::vector<PcieLink> out;
    for (const auto& gpu : gpus) {
        const std::string dir = root + "/bus/pci/devices/" + gpu;
        PcieLink l;
        l.gpu = gpu;
        l.width = lanes(attribute(dir + "/current_link_width"));
        l.max_width = lanes(attribute(dir + "/max_link_width"));
        l.gts = link_speed_gts(attribute(dir + "/current_link_speed"));
        l.max_gts = link_speed_gts(attribute(dir + "/max_link_speed"));
        if (!l.max_width || l.max_gts <= 0) continue;  // not a PCIe device sysfs shows
        // The port above it: the link reaches what both ends take.
        const std::string real = resolved(dir);
        const std::string up = real.substr(0, real.rfind('/'));
        if (!real.empty() && pci_address(up.substr(up.rfind('/') + 1))) {
            if (const unsigned w = lanes(attribute(up + "/max_link_width"))) l.max_width = std::min(l.max_width, w);
            if (const double g = link_speed_gts(attribute(up + "/max_link_speed")); g > 0)
                l.max_gts = std::min(l.max_gts, g);
        }
        out.push_back(l);
    }
    return out;
}

std::vector<std::string> read_hca_firmware(const std::string& root) {
    std::vector<std::string> out;
    const std::string dir = root + "/class/infiniband";
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    // A node has a few HCAs; a garbled tree is not read past this many.
    while (const dirent* e = readdir(d)) {
        const std::string hca = e->d_name;
        if (hca == "." || hca == ".." || out.size() >= 256) continue;
        const std::string fw = attribute(dir + "/" + hca + "/fw_ver");
        if (!fw.empty() && fw.size() <= 64) out.push_back(hca + " " + fw);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

std::string library_file_version(const std::string& path) {
    const std::string name = path.substr(path.rfind('/') + 1);
    const std::size_t so = name.find(".so.");
    if (so == std::string::npos) return "";
    const std::string v = name.substr(so + 4);  // "1.14.50.0"
    // A soname alone ("1") says no release.
    return v.find('.') == std::string::npos ? "" : v;
}

std::vector<std::string> nccl_environment(const std::vector<std::string>& environ) {
    std::vector<std::string> out;
    for (const auto& kv : environ) {
        const std::size_t eq = kv.find('=');
        if (eq == std::string::npos || kv.compare(0, 5, "NCCL_") != 0) continue;
        if (is_plugin_variable(kv.substr(0, eq))) continue;
        out.push_back(kv.substr(0, 256));
    }
    std::sort(out.begin(), out.end());
    return out;
}

ImageIdentity image_identity(const std::string& root) {
    // FNV-1a, 64 bits: a stable name for the bytes, not a secret.
    uint64_t h = 1469598103934665603ULL;
    auto mix = [&h](const std::string& s) {
        for (unsigned char c : s) {
            h ^= c;
            h *= 1099511628211ULL;
        }
    };
    bool any = false;
    ImageIdentity id;
    for (const char* f : {"/etc/os-release", "/usr/lib/os-release", "/etc/environment", "/.singularity.d/labels.json"}) {
        const auto text = read_bounded_text(root + f, 1 << 16);
        mix(std::string(f) + (text ? "=" + *text : "-") + "\n");
        if (!text) continue;
        any = true;
        if (id.name.empty() && std::string(f).find("os-release") != std::string::npos)
            for (const auto& line : split_list(*text, '\n'))
                if (line.rfind("PRETTY_NAME=", 0) == 0) {
                    std::string v = line.substr(12);
                    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
                        v = v.substr(1, v.size() - 2);
                    id.name = v.substr(0, 80);
                }
    }
    if (!any) return {};
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    id.id = std::string(hex, 12);
    return id;
}

}  // namespace mn
