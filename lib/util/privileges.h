// SPDX-License-Identifier: Apache-2.0
// A child that reads what a user gave (hwloc parsing a topology.xml from
// the user's MN_NCCL_SYSFS_ROOT) may be forked from slurmstepd, which runs
// the plugin as root with its privileges dropped only for a while: the
// effective ids are the user's, the real and saved ones still 0, so a flaw
// in the parser could take root back with one setuid(0). Such a child
// gives them up for good before it reads anything.
#pragma once

#include <optional>

#include "lib/util/outcome.h"

namespace mn {

// Real, effective and saved uid and gid all become the effective ones this
// process runs as, and no exec can gain privileges again
// (PR_SET_NO_NEW_PRIVS). A problem when any of it fails or root could still
// be taken back; the caller must then read nothing.
std::optional<Problem> drop_privileges_for_good();

}  // namespace mn
