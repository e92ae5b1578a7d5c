// SPDX-License-Identifier: Apache-2.0
#include "lib/util/privileges.h"

#include <grp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mn {

std::optional<Problem> drop_privileges_for_good() {
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    auto failed = [](const char* what) {
        return Problem{std::string("cannot give up privileges (") + what + "): " + std::strerror(errno),
                       "report this: the file is not read without it"};
    };
    // The supplementary groups stay as they are: slurmstepd set the user's
    // when it dropped privileges, and changing them needs CAP_SETGID, which
    // a process whose effective uid is not 0 does not have. A process that
    // is root through and through (mn-preflight run by root) has nothing to
    // give up, and sheds only root's extra groups.
    if (uid == 0 && setgroups(1, &gid) != 0) return failed("setgroups");
    // Groups first: once the uids are the user's, the gids could not change.
    if (setresgid(gid, gid, gid) != 0) return failed("setresgid");
    if (setresuid(uid, uid, uid) != 0) return failed("setresuid");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return failed("PR_SET_NO_NEW_PRIVS");
    // Proof rather than hope: a user that can become root again has not
    // dropped anything.
    uid_t r, e, s;
    gid_t rg, eg, sg;
    if (getresuid(&r, &e, &s) != 0 || getresgid(&rg, &eg, &sg) != 0 || r != uid || e != uid || s != uid ||
        rg != gid || eg != gid || sg != gid || (uid != 0 && setuid(0) == 0))
        return Problem{"privileges were not given up: a uid or gid of 0 remains", "report this: the file is not read"};
    return std::nullopt;
}

}  // namespace mn
