// SPDX-License-Identifier: Apache-2.0
#include "lib/util/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lib/util/mounts.h"

namespace mn {
namespace {

std::string kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a plain file";
}

Problem not_regular(const std::string& path, mode_t m) {
    return Problem{path + " is " + kind_of(m) + ", not a regular file",
                   "replace it with a regular file (it is never read otherwise)"};
}

Problem cannot_open(const std::string& path, int err) {
    return Problem{"cannot read " + path + ": " + std::strerror(err), ""};
}

}  // namespace

Outcome<FileContents> read_bounded_file(const std::string& path, std::size_t limit, LastLink link) {
    // Under HangProofReads (slurmstepd reading a tree other than /sys):
    // nothing on a filesystem whose reads can wait without end is touched.
    if (auto h = reads_may_hang(path))
        return Problem{*h + ", whose reads can wait without end: not read", "put it on a local filesystem"};
    // Looked at before opening: opening a device can have effects of its
    // own (a tape rewinds, a watchdog arms), so what is not a regular file
    // is refused unopened. The descriptor is checked again below, since
    // the name may point elsewhere by then.
    struct stat before {};
    const int looked = link == LastLink::refuse ? lstat(path.c_str(), &before) : stat(path.c_str(), &before);
    if (looked != 0) return cannot_open(path, errno);
    if (S_ISLNK(before.st_mode))
        return Problem{path + " is a symbolic link, which is not followed here",
                       "put the file itself there"};
    if (!S_ISREG(before.st_mode)) return not_regular(path, before.st_mode);

    const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (link == LastLink::refuse ? O_NOFOLLOW : 0);
    int fd;
    do fd = open(path.c_str(), flags);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == ELOOP && link == LastLink::refuse)
            return Problem{path + " is a symbolic link, which is not followed here", "put the file itself there"};
        return cannot_open(path, errno);
    }
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    struct stat st {};
    if (fstat(fd, &st) != 0) return cannot_open(path, errno);
    if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
    if (st.st_dev != before.st_dev || st.st_ino != before.st_ino)
        return Problem{path + " was replaced while it was being read", "read it again"};

    FileContents out;
    out.owner = st.st_uid;
    out.mode = st.st_mode & 07777;
    // st_size is a hint only (/proc and some sysfs files say 0 or 4096).
    if (st.st_size > 0) out.text.reserve(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), limit));
    char buf[8192];
    while (true) {
        // One byte past the limit tells "too large" from "exactly the limit".
        const std::size_t want = std::min(sizeof buf, limit + 1 - out.text.size());
        const ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return cannot_open(path, errno);
        if (n == 0) break;
        out.text.append(buf, static_cast<std::size_t>(n));
        if (out.text.size() > limit)
            return Problem{path + " is larger than " + std::to_string(limit) + " bytes, more than it can hold",
                           "check what wrote it (it is never read in part)"};
    }
    return out;
}

std::optional<std::string> read_bounded_text(const std::string& path, std::size_t limit, LastLink link) {
    auto r = read_bounded_file(path, limit, link);
    if (!r) return std::nullopt;
    return std::move(r.value().text);
}

}  // namespace mn
