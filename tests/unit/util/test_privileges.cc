// SPDX-License-Identifier: Apache-2.0
// A child forked from slurmstepd (effective uid the user's, real and saved
// uid 0) gives up root for good: afterwards every id is the user's, root
// cannot be taken back, and no exec gains privileges.
#include "lib/util/privileges.h"

#include <pwd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/unit.h"

using namespace mn;

// Runs `body` in a child; its exit status (0: every check held).
template <typename F>
static int in_child(F body) {
    const pid_t pid = fork();
    if (pid < 0) fail_msg("fork");
    if (pid == 0) _exit(body());
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 99;
    return WEXITSTATUS(st);
}

static void slurmstepd_child_cannot_regain_root(void**) {
    if (geteuid() != 0) skip();  // the situation needs root to set up
    const passwd* nobody = getpwnam("nobody");
    if (!nobody) skip();
    const uid_t uid = nobody->pw_uid;
    const gid_t gid = nobody->pw_gid;
    const int rc = in_child([&] {
        // As slurmstepd leaves it: effective ids the user's, real and saved 0.
        if (setresgid(0, gid, 0) != 0 || setresuid(0, uid, 0) != 0) return 10;
        if (seteuid(0) != 0 || seteuid(uid) != 0) return 11;  // root could still come back here
        if (drop_privileges_for_good()) return 12;
        uid_t r, e, s;
        gid_t rg, eg, sg;
        if (getresuid(&r, &e, &s) != 0 || r != uid || e != uid || s != uid) return 13;
        if (getresgid(&rg, &eg, &sg) != 0 || rg != gid || eg != gid || sg != gid) return 14;
        if (setuid(0) == 0 || seteuid(0) == 0 || setresuid(0, 0, 0) == 0) return 15;  // root is gone
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) return 16;
        return 0;
    });
    assert_int_equal(rc, 0);
}

// Root through and through (mn-preflight run by root) and a plain user
// have nothing to give up: the call succeeds and the ids stay.
static void nothing_to_give_up_is_no_problem(void**) {
    const uid_t uid = geteuid();
    const int rc = in_child([&] {
        if (auto p = drop_privileges_for_good()) return 20;
        uid_t r, e, s;
        if (getresuid(&r, &e, &s) != 0 || r != uid || e != uid || s != uid) return 21;
        return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ? 0 : 22;
    });
    assert_int_equal(rc, 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slurmstepd_child_cannot_regain_root),
        cmocka_unit_test(nothing_to_give_up_is_no_problem),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
