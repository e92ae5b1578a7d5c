// SPDX-License-Identifier: Apache-2.0
// Writing a file where others may write too (a prolog's --reason-file in
// /run or /tmp, an exclude file in a shared directory, node_exporter's
// textfile directory): the text goes to a new file of our own and is then
// renamed over the target, so a symbolic link or FIFO someone left at the
// target is replaced, never followed, opened or truncated, and a reader
// sees the old file or the whole new one.
#pragma once

#include <sys/types.h>

#include <string>

#include "lib/util/outcome.h"

namespace mn {

// `path` gets `text` with permissions `mode` (whatever the umask): a
// temporary file made by mkstemp in path's directory (a hidden name that
// no reader of *.prom or *.jsonl takes), written, fsync()ed, rename()d
// over path, and the directory synced. Returns path; a problem names the
// path and the reason, and leaves no temporary file behind.
Outcome<std::string> replace_file(const std::string& path, const std::string& text, mode_t mode);

}  // namespace mn
