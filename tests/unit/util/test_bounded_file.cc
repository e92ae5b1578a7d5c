// SPDX-License-Identifier: Apache-2.0
// Files of outside input: a FIFO, a link to /dev/zero, a file over the
// limit, a directory, a link where links are refused, each a clear problem
// naming the path, never a hang or a crash; /proc's size-0 files still read.
#include "lib/util/bounded_file.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "tests/unit/unit.h"

using namespace mn;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

static void regular_file_read_with_owner_and_mode(void**) {
    const std::string dir = scratch_dir("bounded");
    write(dir + "/state", "4: ACTIVE\n");
    chmod((dir + "/state").c_str(), 0640);
    const auto f = read_bounded_file(dir + "/state", 64);
    if (!f) fail_msg("%s", f.problem().text().c_str());
    assert_str(f->text, "4: ACTIVE\n");
    assert_int_equal(f->owner, geteuid());
    assert_int_equal(f->mode, 0640);
    // Exactly the limit is fine; an empty file is an empty text.
    assert_str(*read_bounded_text(dir + "/state", 10), "4: ACTIVE\n");
    write(dir + "/empty", "");
    assert_str(*read_bounded_text(dir + "/empty", 0), "");
    remove_tree(dir);
}

static void fifo_is_refused_without_waiting(void**) {
    const std::string dir = scratch_dir("bounded");
    const std::string fifo = dir + "/rate";
    assert_int_equal(mkfifo(fifo.c_str(), 0644), 0);
    fail_if_blocked(10);
    const auto f = read_bounded_file(fifo, 4096);
    alarm(0);
    assert_false(f.ok());
    assert_contains(f.problem().what, fifo + " is a FIFO, not a regular file");
    assert_contains(f.problem().fix, "regular file");
    remove_tree(dir);
}

static void link_to_dev_zero_is_refused_not_read(void**) {
    const std::string dir = scratch_dir("bounded");
    const std::string link = dir + "/class";
    assert_int_equal(symlink("/dev/zero", link.c_str()), 0);
    fail_if_blocked(10);
    const auto f = read_bounded_file(link, 1 << 16);
    alarm(0);
    assert_false(f.ok());
    assert_contains(f.problem().what, link + " is a character device, not a regular file");
    // The device itself, named directly.
    assert_contains(read_bounded_file("/dev/zero", 16).problem().what, "character device");
    remove_tree(dir);
}

static void file_over_the_limit_is_too_large(void**) {
    const std::string dir = scratch_dir("bounded");
    const std::string big = dir + "/topology.xml";
    write(big, std::string(100000, 'x'));
    const auto f = read_bounded_file(big, 65536);
    assert_false(f.ok());
    assert_contains(f.problem().what, big + " is larger than 65536 bytes");
    assert_false(read_bounded_text(big, 99999).has_value());  // one byte over
    assert_int_equal(read_bounded_text(big, 100000)->size(), 100000);
    remove_tree(dir);
}

static void directory_is_refused(void**) {
    const std::string dir = scratch_dir("bounded");
    const auto f = read_bounded_file(dir, 4096);
    assert_false(f.ok());
    assert_contains(f.problem().what, dir + " is a directory, not a regular file");
    remove_tree(dir);
}

static void link_is_followed_only_where_allowed(void**) {
    const std::string dir = scratch_dir("bounded");
    write(dir + "/real.jsonl", "line\n");
    const std::string link = dir + "/node1.jsonl";
    assert_int_equal(symlink((dir + "/real.jsonl").c_str(), link.c_str()), 0);
    // sysfs-style reading follows it ...
    assert_str(*read_bounded_text(link, 64, LastLink::follow), "line\n");
    // ... a privileged reader of a directory others write does not.
    const auto f = read_bounded_file(link, 64, LastLink::refuse);
    assert_false(f.ok());
    assert_contains(f.problem().what, link + " is a symbolic link, which is not followed here");
    // Links above the last component are followed either way (sysfs).
    const std::string via = dir + "/via";
    assert_int_equal(symlink(dir.c_str(), via.c_str()), 0);
    assert_str(*read_bounded_text(via + "/real.jsonl", 64, LastLink::refuse), "line\n");
    remove_tree(dir);
}

static void missing_file_names_path_and_reason(void**) {
    const auto f = read_bounded_file("/nonexistent/mn/state", 64);
    assert_false(f.ok());
    assert_contains(f.problem().what, "cannot read /nonexistent/mn/state: No such file or directory");
}

// /proc says size 0: the text comes by reading to the end, up to the limit.
static void proc_files_read_despite_size_zero(void**) {
    struct stat st {};
    assert_int_equal(stat("/proc/net/route", &st), 0);
    assert_int_equal(st.st_size, 0);
    const auto route = read_bounded_text("/proc/net/route", 1 << 20);
    assert_true(route.has_value());
    assert_contains(*route, "Iface\tDestination\tGateway");
    assert_false(read_bounded_text("/proc/self/status", 8).has_value());  // longer than 8 bytes
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(regular_file_read_with_owner_and_mode),
        cmocka_unit_test(fifo_is_refused_without_waiting),
        cmocka_unit_test(link_to_dev_zero_is_refused_not_read),
        cmocka_unit_test(file_over_the_limit_is_too_large),
        cmocka_unit_test(directory_is_refused),
        cmocka_unit_test(link_is_followed_only_where_allowed),
        cmocka_unit_test(missing_file_names_path_and_reason),
        cmocka_unit_test(proc_files_read_despite_size_zero),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
