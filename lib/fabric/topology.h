// SPDX-License-Identifier: Apache-2.0
// Reads the node's PCI topology (GPUs, HCAs, the bridges above them, NUMA
// and socket) through hwloc. Loading a topology costs milliseconds, so
// callers load it only when they need locality, once per node and step.
#pragma once

#include <optional>
#include <string>

#include "lib/fabric/fabric.h"
#include "lib/fabric/locality.h"
#include "lib/util/outcome.h"

namespace mn {

// xml_path empty: the running system; otherwise an hwloc XML export
// (lstopo --of xml), as the fixtures are.
Outcome<PciTopology> load_pci_topology(const std::string& xml_path);

// A topology file in an XML format this build's hwloc series cannot read
// (hwloc 3's "3.0" under hwloc 2; hwloc 1.x's under hwloc 3): a problem that
// says so, naming the file; nullopt when the format is this series' (or the
// text says nothing of it: hwloc's own reading judges it then).
std::optional<Problem> xml_format_problem(const std::string& xml, const std::string& xml_path);

// Where locality comes from for a sysfs root: "" (the live system) for
// /sys, ROOT/topology.xml for a fixture tree that has one, and nullopt for a
// fixture tree without one (never the live system under fixture ports).
std::optional<std::string> topology_xml_for(const std::string& sysfs_root);

// GPU to HCA locality for a node's fabric choice: each GPU's nearest chosen
// HCA (all HCAs when none is chosen), or a note why it is unknown.
struct LocalityReport {
    bool known = false;
    std::string note;  // why unknown, or what the candidates were
    std::vector<GpuLocality> gpus;
    std::vector<std::string> warnings;
};
LocalityReport gpu_locality(const std::string& sysfs_root, const FabricChoice& choice);

}  // namespace mn
