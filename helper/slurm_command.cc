// SPDX-License-Identifier: Apache-2.0
#include "helper/slurm_command.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>

#include "lib/check/stall.h"

extern char** environ;

namespace mn {

bool run_slurm_command(const std::vector<std::string>& argv, std::string& why, int* status) {
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    pid_t pid = 0;
    if (argv.empty() || posix_spawnp(&pid, a[0], nullptr, nullptr, a.data(), environ) != 0) {
        why = (argv.empty() ? std::string("a command") : argv[0]) + " is not here (a container without Slurm's commands?)";
        return false;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (status) *status = st;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::string cmd;
        for (const auto& s : argv) cmd += (cmd.empty() ? "" : " ") + s;
        why = cmd + " " + ended_words(st);
        return false;
    }
    return true;
}

}  // namespace mn
