// SPDX-License-Identifier: Apache-2.0
// `mn-preflight discover`: this node's RDMA ports, the choice and the
// variables the plugin would set, as text or JSON.
#pragma once

#include <string>

#include "lib/fabric/fabric.h"
#include "lib/fabric/topology.h"

namespace mn {

struct DiscoverReport {
    std::string host;
    std::string sysfs_root;
    Mode mode = Mode::Auto;
    FabricChoice choice;
    std::vector<std::pair<std::string, std::string>> env;  // everything that would be set
    LocalityReport locality;
    std::string fingerprint;  // the node's software, as the check's hello carries it (lib/check/fingerprint)
};

std::string discover_text(const DiscoverReport& r);
std::string discover_json(const DiscoverReport& r);

}  // namespace mn
