// SPDX-License-Identifier: Apache-2.0
// Reading a file that someone else may have put there (a sysfs tree the
// user names, a history directory others can write, /proc): a FIFO must not
// hang the reader, a link to /dev/zero must not exhaust its memory, and a
// privileged reader must not be walked through a symbolic link. Regular
// files only, at most `limit` bytes, never trusting st_size (/proc reports 0).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "lib/util/outcome.h"

namespace mn {

// Whether a symbolic link as the path's last component is followed.
// Directories above it are always followed: sysfs is built of links
// (/sys/class/infiniband/mlx5_0 is one), and a refused link there would
// refuse every real node.
enum class LastLink { follow, refuse };

struct FileContents {
    std::string text;
    uid_t owner = 0;   // of the file read, from the descriptor read
    mode_t mode = 0;   // its permission bits
};

// The file's bytes, or a problem that names the path and what it is
// instead ("a FIFO, not a regular file", "larger than 65536 bytes").
// Opening never blocks (O_NONBLOCK) and never gives a controlling terminal.
// Under a HangProofReads (lib/util/mounts.h) a path that reaches FUSE, NFS
// or an automount is refused untouched.
Outcome<FileContents> read_bounded_file(const std::string& path, std::size_t limit,
                                        LastLink link = LastLink::follow);

// The text alone, for readers that only need it (nullopt: see above).
std::optional<std::string> read_bounded_text(const std::string& path, std::size_t limit,
                                             LastLink link = LastLink::follow);

}  // namespace mn
