// SPDX-License-Identifier: Apache-2.0
// Filesystems a read can wait on without end (lib/util/mounts.h): the
// mount table as /proc says it, and walks that a link, a "..", a mount
// inside a tree or a tree on such a filesystem lead there. The walks are
// over real directories of this test; the mounts are a table it writes.
#include "lib/util/mounts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "lib/util/bounded_file.h"
#include "tests/unit/unit.h"

using namespace mn;

namespace {

std::string dir;  // this test's, under /tmp

std::string line(int id, const std::string& point, const std::string& type) {
    return std::to_string(id) + " 1 0:" + std::to_string(id) + " / " + point + " rw,relatime shared:1 - " + type +
           " src rw\n";
}

// "/" on ext4, /proc on proc, and `more` (mountinfo lines).
MountTable table(const std::string& more = "") {
    return MountTable::parse(line(20, "/", "ext4") + line(21, "/proc", "proc") + more);
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

int setup(void**) {
    char tmpl[] = "/tmp/mn-mounts.XXXXXX";
    if (!mkdtemp(tmpl)) return -1;
    dir = tmpl;
    mkdir((dir + "/tree").c_str(), 0755);
    mkdir((dir + "/tree/class").c_str(), 0755);
    mkdir((dir + "/tree/mnt").c_str(), 0755);
    mkdir((dir + "/remote").c_str(), 0755);
    write(dir + "/tree/class/rate", "400 Gb/sec\n");
    write(dir + "/tree/mnt/rate", "400 Gb/sec\n");
    write(dir + "/remote/rate", "400 Gb/sec\n");
    if (symlink((dir + "/remote/rate").c_str(), (dir + "/tree/class/escape").c_str()) != 0) return -1;
    if (symlink("../../remote", (dir + "/tree/class/up").c_str()) != 0) return -1;
    return 0;
}

int teardown(void**) {
    return std::system(("rm -rf '" + dir + "'").c_str()) == 0 ? 0 : -1;
}

}  // namespace

static void the_types_that_wait_on_someone_else(void**) {
    for (const char* t : {"nfs", "nfs4", "fuse", "fuse.sshfs", "fuseblk", "cifs", "lustre", "autofs", "gpfs", "9p"})
        assert_true(may_hang(t));
    for (const char* t : {"ext4", "xfs", "tmpfs", "sysfs", "proc", "overlay", "btrfs", "fusectl"})
        assert_false(may_hang(t));
}

static void mountinfo_is_read_as_the_kernel_writes_it(void**) {
    // Optional fields before the "-", a point with a space (\040), and
    // lines that are not mounts.
    const MountTable t = MountTable::parse(line(20, "/", "ext4") +
                                           "30 20 0:40 / /mnt/my\\040share rw shared:4 master:2 - nfs4 srv:/x rw\n"
                                           "garbage\n"
                                           "31 20 0:41 / relative rw - nfs4 srv:/y rw\n"
                                           "32 20 0:42 / /broken rw shared:9\n");
    assert_str(*t.hanging_at("/mnt/my share/file"), "/mnt/my share (nfs4)");
    assert_false(t.hanging_at("/mnt/my").has_value());
    assert_false(t.hanging_at("/mnt/my sharex").has_value());  // a prefix of a name is no mount
    assert_false(t.hanging_at("/relative/x").has_value());
    // A local filesystem mounted over the remote one hides it.
    const MountTable over = MountTable::parse(line(20, "/", "ext4") + line(30, "/data", "nfs4") +
                                              line(31, "/data", "xfs"));
    assert_false(over.hanging_at("/data/x").has_value());
    // This process's own table: its root is in it, and /proc is no remote.
    const MountTable here = MountTable::of_this_process();
    assert_false(here.hanging_at("/proc/self").has_value());
}

static void a_local_tree_is_read(void**) {
    const MountTable t = table();
    assert_false(hanging_mount(dir + "/tree/class/rate", t).has_value());
    assert_false(hanging_mount(dir + "/tree/class/escape", t).has_value());
    assert_false(hanging_mount(dir + "/tree/class/missing", t).has_value());  // fails on its own when read
    HangProofReads guard(t);
    assert_str(read_bounded_text(dir + "/tree/class/rate", 64).value(), "400 Gb/sec\n");
}

static void a_tree_on_a_remote_filesystem_is_not_touched(void**) {
    const MountTable t = table(line(30, dir, "nfs4"));
    assert_str(*hanging_mount(dir + "/tree", t), dir + "/tree is on " + dir + " (nfs4)");
    // and a relative path from a working directory there
    char back[4096];
    assert_non_null(getcwd(back, sizeof back));
    assert_int_equal(chdir((dir + "/tree").c_str()), 0);
    assert_str(*hanging_mount("class/rate", t), "class/rate is on " + dir + " (nfs4)");
    assert_int_equal(chdir(back), 0);
}

static void a_link_or_a_dotdot_out_of_the_tree_is_walked(void**) {
    const MountTable t = table(line(30, dir + "/remote", "fuse.sshfs"));
    assert_false(hanging_mount(dir + "/tree/class/rate", t).has_value());
    assert_str(*hanging_mount(dir + "/tree/class/escape", t),
               dir + "/tree/class/escape is on " + dir + "/remote (fuse.sshfs)");
    assert_str(*hanging_mount(dir + "/tree/class/up/rate", t),
               dir + "/tree/class/up/rate is on " + dir + "/remote (fuse.sshfs)");
    assert_str(*hanging_mount(dir + "/tree/../remote/rate", t),
               dir + "/tree/../remote/rate is on " + dir + "/remote (fuse.sshfs)");
}

static void a_mount_inside_the_tree_is_not_entered(void**) {
    const MountTable t = table(line(30, dir + "/tree/mnt", "autofs"));
    assert_false(hanging_mount(dir + "/tree/class/rate", t).has_value());
    assert_str(*hanging_mount(dir + "/tree/mnt", t), dir + "/tree/mnt is on " + dir + "/tree/mnt (autofs)");
    assert_true(hanging_mount(dir + "/tree/mnt/rate", t).has_value());
}

static void reads_are_refused_only_under_the_guard(void**) {
    const std::string escape = dir + "/tree/class/escape";
    assert_true(read_bounded_text(escape, 64).has_value());
    {
        HangProofReads guard(table(line(30, dir + "/remote", "fuse.sshfs")));
        auto r = read_bounded_file(escape, 64);
        assert_false(r.ok());
        assert_str(r.problem().what,
                   escape + " is on " + dir + "/remote (fuse.sshfs), whose reads can wait without end: not read");
        assert_str(r.problem().fix, "put it on a local filesystem");
        assert_true(reads_may_hang(escape).has_value());
        {
            HangProofReads inner(table());  // an inner guard's table, then the outer's again
            assert_false(reads_may_hang(escape).has_value());
        }
        assert_true(reads_may_hang(escape).has_value());
    }
    assert_false(reads_may_hang(escape).has_value());
    assert_true(read_bounded_text(escape, 64).has_value());
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_types_that_wait_on_someone_else),
        cmocka_unit_test(mountinfo_is_read_as_the_kernel_writes_it),
        cmocka_unit_test(a_local_tree_is_read),
        cmocka_unit_test(a_tree_on_a_remote_filesystem_is_not_touched),
        cmocka_unit_test(a_link_or_a_dotdot_out_of_the_tree_is_walked),
        cmocka_unit_test(a_mount_inside_the_tree_is_not_entered),
        cmocka_unit_test(reads_are_refused_only_under_the_guard),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
