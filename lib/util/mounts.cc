// SPDX-License-Identifier: Apache-2.0
#include "lib/util/mounts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <deque>
#include <sstream>

#include "lib/util/bounded_file.h"

namespace mn {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
            s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
            out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Whether mount point `point` holds `path` (both absolute, clean).
bool holds(const std::string& point, const std::string& path) {
    if (point == "/") return true;
    return path.compare(0, point.size(), point) == 0 && (path.size() == point.size() || path[point.size()] == '/');
}

std::string shown(const std::pair<std::string, std::string>& m) { return m.first + " (" + m.second + ")"; }

std::deque<std::string> components(const std::string& path) {
    std::deque<std::string> out;
    std::string part;
    std::istringstream in(path);
    while (std::getline(in, part, '/'))
        if (!part.empty() && part != ".") out.push_back(part);
    return out;
}

std::string parent_of(const std::string& p) {
    const auto slash = p.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
}

// Links followed in one walk at most, as the kernel's ELOOP.
constexpr int kMaxLinks = 40;

thread_local const HangProofReads* current = nullptr;

}  // namespace

bool may_hang(const std::string& t) {
    static const char* const kWaiting[] = {"nfs",   "nfs4",   "cifs",      "smb3", "smbfs",    "9p",
                                           "ceph",  "lustre", "gpfs",      "beegfs", "glusterfs", "afs",
                                           "coda",  "ncpfs",  "davfs",     "autofs", "virtiofs", "orangefs",
                                           "pvfs2", "ocfs2",  "gfs2"};
    if (t == "fuse" || t == "fuseblk" || t.rfind("fuse.", 0) == 0) return true;
    for (const char* w : kWaiting)
        if (t == w) return true;
    return false;
}

MountTable MountTable::parse(const std::string& text) {
    MountTable t;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream f(line);
        std::vector<std::string> fields;
        std::string w;
        while (f >> w) fields.push_back(w);
        // id parent major:minor root point options [optional...] - type source super
        std::size_t dash = 6;
        while (dash < fields.size() && fields[dash] != "-") ++dash;
        if (fields.size() < 5 || dash + 1 >= fields.size()) continue;
        const std::string point = unescape(fields[4]);
        if (point.empty() || point[0] != '/') continue;
        t.mounts_.emplace_back(point, fields[dash + 1]);
    }
    return t;
}

MountTable MountTable::of_this_process() {
    return parse(read_bounded_text("/proc/self/mountinfo", 16 << 20).value_or(""));
}

std::optional<std::string> MountTable::hanging_at(const std::string& p) const {
    // The longest mount point that holds it; of equal ones the last
    // mounted (it hides those below).
    const std::pair<std::string, std::string>* best = nullptr;
    for (const auto& m : mounts_)
        if (holds(m.first, p) && (!best || m.first.size() >= best->first.size())) best = &m;
    if (best && may_hang(best->second)) return shown(*best);
    return std::nullopt;
}

std::optional<std::string> MountTable::hanging_point(const std::string& p) const {
    for (const auto& m : mounts_)
        if (m.first == p && may_hang(m.second)) return shown(m);
    return std::nullopt;
}

std::optional<std::string> hanging_mount(const std::string& path, const MountTable& mounts) {
    std::string start = "/";
    if (path.empty() || path[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return std::nullopt;
        start = cwd;
    }
    std::deque<std::string> rest = components(path);
    std::string cur = "/";
    for (auto& c : components(start)) cur = (cur == "/" ? "" : cur) + "/" + c;
    if (auto m = mounts.hanging_at(cur)) return path + " is on " + *m;
    int links = 0;
    while (!rest.empty()) {
        const std::string c = rest.front();
        rest.pop_front();
        if (c == "..") {
            cur = parent_of(cur);
            continue;
        }
        // Looking up c is a request to the filesystem that holds cur, and
        // entering a mount at it one to that mount's.
        if (auto m = mounts.hanging_at(cur)) return path + " is on " + *m;
        const std::string next = (cur == "/" ? "" : cur) + "/" + c;
        if (auto m = mounts.hanging_point(next)) return path + " is on " + *m;
        struct stat st {};
        if (lstat(next.c_str(), &st) != 0) return std::nullopt;
        if (!S_ISLNK(st.st_mode)) {
            cur = next;
            continue;
        }
        if (++links > kMaxLinks) return std::nullopt;
        char target[PATH_MAX];
        const ssize_t n = readlink(next.c_str(), target, sizeof target - 1);
        if (n <= 0) return std::nullopt;
        const std::string to(target, static_cast<std::size_t>(n));
        auto more = components(to);
        rest.insert(rest.begin(), more.begin(), more.end());
        if (to[0] == '/') cur = "/";
    }
    if (auto m = mounts.hanging_at(cur)) return path + " is on " + *m;
    return std::nullopt;
}

HangProofReads::HangProofReads(MountTable mounts) : mounts_(std::move(mounts)), outer_(current) { current = this; }
HangProofReads::~HangProofReads() { current = outer_; }

std::optional<std::string> reads_may_hang(const std::string& path) {
    if (!current) return std::nullopt;
    return hanging_mount(path, current->mounts());
}

}  // namespace mn
