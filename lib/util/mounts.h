// SPDX-License-Identifier: Apache-2.0
// Filesystems a read can wait on without end. A read on FUSE waits for
// its daemon, one on NFS, CIFS or Lustre for a server, one under an
// automount point for the mount itself; none of them gives up on its
// own. In slurmstepd such a wait holds the step and, past Slurm's
// UnkillableStepTimeout, drains the node: for a user's tree
// (user_sysfs_root=yes) that would be a node drained for a user's doing.
// So a tree other than the kernel's /sys is walked against the mount
// table before anything in it is looked at, and every read of it too
// (a link may lead out of it, a mount may sit inside it).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mn {

// Whether reads of a filesystem of this type (mountinfo's, "nfs4",
// "fuse.sshfs") may wait on another process or machine.
bool may_hang(const std::string& fstype);

class MountTable {
public:
    // From /proc/self/mountinfo's text; lines it cannot read are skipped.
    static MountTable parse(const std::string& mountinfo);
    // This process's (an empty table when /proc cannot say).
    static MountTable of_this_process();

    // "/home (nfs4)" for the mount that holds `abs_path` (absolute, no
    // "." or ".." in it) when reads there may hang; none otherwise.
    std::optional<std::string> hanging_at(const std::string& abs_path) const;
    // The same for a mount right at `abs_path` (a lookup of it would enter
    // that filesystem).
    std::optional<std::string> hanging_point(const std::string& abs_path) const;

private:
    std::vector<std::pair<std::string, std::string>> mounts_;  // mount point, type; in mountinfo's order
};

// Walks `path` as the kernel would, one component at a time, following
// its links, and checks each directory it looks in and each mount it
// enters before looking: "/mnt/fixture is on /mnt (fuse.sshfs)" for the
// first that may hang, none when the walk reaches no such filesystem (or
// stops: the read then fails on its own). A relative path starts at the
// working directory.
std::optional<std::string> hanging_mount(const std::string& path, const MountTable& mounts);

// While one lives, this thread's reads through read_bounded_file and
// reads_may_hang() are walked against `mounts` first.
class HangProofReads {
public:
    explicit HangProofReads(MountTable mounts);
    ~HangProofReads();
    HangProofReads(const HangProofReads&) = delete;
    HangProofReads& operator=(const HangProofReads&) = delete;
    const MountTable& mounts() const { return mounts_; }

private:
    MountTable mounts_;
    const HangProofReads* outer_;
};

// hanging_mount(path) under this thread's HangProofReads; none without one.
std::optional<std::string> reads_may_hang(const std::string& path);

}  // namespace mn
