// SPDX-License-Identifier: Apache-2.0
// The RDMA ports as libibverbs sees them: what NCCL itself will open. Used
// with sysfs on real nodes (never under a fixture root): a port that sysfs
// lists but verbs cannot open has no working provider, and NCCL would fail
// on it at run time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lib/fabric/fabric.h"

namespace mn {

struct VerbsListing {
    bool available = false;  // false: no libibverbs (or built without it)
    std::string problem;     // why not available
    std::vector<RdmaPort> ports;  // hca, port, state, link_layer, rate_gbps
};

VerbsListing list_verbs_ports();

// Rate from ibv_port_attr's active_speed and active_width codes, rounded as
// the kernel's sysfs rate file does (4X NDR = 400, 4X EDR = 100).
std::optional<double> verbs_rate_gbps(unsigned active_speed, unsigned active_width);
// ibv_port_state numbers as sysfs spells them (4 -> ACTIVE).
std::string verbs_state(unsigned state);

// sysfs ports checked against verbs: verbs' state, link layer and rate win
// (they are what NCCL reads); a sysfs port verbs cannot open is skipped with
// the reason; ports only verbs lists are added.
std::vector<RdmaPort> merge_verbs(std::vector<RdmaPort> sysfs, const VerbsListing& verbs);

// The node's ports: sysfs under the root, plus verbs when the root is /sys.
std::vector<RdmaPort> discover_ports(const std::string& sysfs_root);

}  // namespace mn
