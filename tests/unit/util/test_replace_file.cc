// SPDX-License-Identifier: Apache-2.0
// Writing where others may write: a link at the target is replaced, its
// victim untouched; a FIFO at the target is replaced without a hang; the
// mode is the one asked for whatever the umask; no temporary file stays.
#include "lib/util/replace_file.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tests/unit/unit.h"

using namespace mn;

namespace {

unsigned entries(const std::string& dir) {
    unsigned n = 0;
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d)) n += e->d_name[0] != '.' || (e->d_name[1] && e->d_name[1] != '.');
        closedir(d);
    }
    return n;
}

}  // namespace

static void writes_text_with_the_mode_asked(void**) {
    const std::string dir = scratch_dir("replace");
    const std::string path = dir + "/exclude";
    const mode_t old = umask(077);
    const auto w = replace_file(path, "node[1-3]\n", 0644);
    umask(old);
    if (!w) fail_msg("%s", w.problem().text().c_str());
    assert_str(*w, path);
    assert_str(file_text(path), "node[1-3]\n");
    struct stat st {};
    assert_int_equal(lstat(path.c_str(), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0644);
    // Again over the old file: replaced whole, and only the file is there.
    assert_true(replace_file(path, "node7\n", 0600).ok());
    assert_str(file_text(path), "node7\n");
    assert_int_equal(entries(dir), 1);
    remove_tree(dir);
}

// The prolog's --reason-file, run as root, where a user left a link to a
// file of root's: the link is replaced, the victim keeps its text.
static void link_at_target_leaves_victim_untouched(void**) {
    const std::string dir = scratch_dir("replace");
    const std::string victim = dir + "/shadow", path = dir + "/reason";
    std::ofstream(victim) << "root:secret\n";
    assert_int_equal(symlink(victim.c_str(), path.c_str()), 0);
    const auto w = replace_file(path, "node1: GPU1 gone\n", 0644);
    if (!w) fail_msg("%s", w.problem().text().c_str());
    assert_str(file_text(victim), "root:secret\n");
    struct stat st {};
    assert_int_equal(lstat(path.c_str(), &st), 0);
    assert_true(S_ISREG(st.st_mode));  // the link itself is gone
    assert_str(file_text(path), "node1: GPU1 gone\n");
    remove_tree(dir);
}

static void fifo_at_target_does_not_hang(void**) {
    const std::string dir = scratch_dir("replace");
    const std::string path = dir + "/exclude";
    assert_int_equal(mkfifo(path.c_str(), 0666), 0);
    fail_if_blocked(10);
    const auto w = replace_file(path, "node2\n", 0644);
    alarm(0);
    if (!w) fail_msg("%s", w.problem().text().c_str());
    struct stat st {};
    assert_int_equal(lstat(path.c_str(), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_str(file_text(path), "node2\n");
    remove_tree(dir);
}

static void failures_name_the_path_and_leave_nothing(void**) {
    const std::string dir = scratch_dir("replace");
    // A directory at the target: rename() refuses, no temporary file stays.
    const std::string sub = dir + "/reason";
    assert_int_equal(mkdir(sub.c_str(), 0755), 0);
    const auto w = replace_file(sub, "x\n", 0644);
    assert_false(w.ok());
    assert_contains(w.problem().what, "cannot write " + sub);
    assert_int_equal(entries(dir), 1);
    // A directory that does not exist.
    const auto none = replace_file(dir + "/nowhere/reason", "x\n", 0644);
    assert_false(none.ok());
    assert_contains(none.problem().what, dir + "/nowhere/reason");
    assert_contains(none.problem().fix, "directory this process may write");
    assert_false(replace_file(dir + "/", "x\n", 0644).ok());
    remove_tree(dir);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_text_with_the_mode_asked),
        cmocka_unit_test(link_at_target_leaves_victim_untouched),
        cmocka_unit_test(fifo_at_target_does_not_hang),
        cmocka_unit_test(failures_name_the_path_and_leave_nothing),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
