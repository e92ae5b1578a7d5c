// SPDX-License-Identifier: Apache-2.0
#include "lib/util/replace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mn {
namespace {

bool write_all(int fd, const std::string& text) {
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace

Outcome<std::string> replace_file(const std::string& path, const std::string& text, mode_t mode) {
    const std::size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    if (base.empty() || base == "." || base == "..")
        return Problem{"cannot write " + path + ": it names a directory, not a file", "name a file"};
    const std::string fix = "name a file in a directory this process may write";
    // Made 0600 by mkstemp, so nobody opens it before it holds the whole
    // text; the mode it is meant to have comes from fchmod, whatever the umask.
    std::string tmp = (dir == "/" ? "" : dir) + "/." + base + ".XXXXXX";
    const int fd = mkostemp(&tmp[0], O_CLOEXEC);
    if (fd < 0) return Problem{"cannot write " + path + ": cannot make a file in " + dir + ": " + std::strerror(errno), fix};
    bool ok = write_all(fd, text) && fchmod(fd, mode) == 0 && fsync(fd) == 0;
    int err = ok ? 0 : errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    // rename() replaces whatever is at path, a link or a FIFO included, as
    // an entry: nothing it pointed at is opened or changed.
    if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        unlink(tmp.c_str());
        return Problem{"cannot write " + path + ": " + std::strerror(err), fix};
    }
    // The rename itself survives a crash only once the directory is synced.
    const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return path;
}

}  // namespace mn
