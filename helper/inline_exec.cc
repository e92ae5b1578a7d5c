// SPDX-License-Identifier: Apache-2.0
#include "helper/inline_exec.h"

#include "helper/slurm_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/check/exclude_list.h"
#include "lib/plan/hostlist.h"
#include "lib/check/preflight.h"
#include "lib/plan/containers.h"
#include "lib/util/replace_file.h"
#include "lib/util/text.h"

extern char** environ;

namespace mn {
namespace {

volatile sig_atomic_t g_child = 0;

// srun's cancel (Ctrl-C, scancel) reaches the task: pass it on to the check.
void forward(int sig) {
    if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
}

void say(const std::string& line) {
    const std::string text = line + "\n";
    ssize_t rc = write(STDERR_FILENO, text.data(), text.size());
    (void)rc;
}

// scontrol update JobId=J Comment=...; the user owns the job.
bool set_job_comment(const std::string& comment, std::string& err) {
    return run_slurm_command({"scontrol", "update", "JobId=" + env_or("SLURM_JOB_ID"), "Comment=" + comment}, err);
}

bool writable_dir(const std::string& dir) {
    struct stat st {};
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && access(dir.c_str(), W_OK) == 0;
}

std::string dir_of(const std::string& file) {
    const auto slash = file.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
}

// As posix_spawnp looks a program up.
bool on_path(const std::string& prog) {
    const std::string path = env_or("PATH", "/usr/bin:/bin");
    for (std::size_t b = 0;;) {
        const std::size_t e = path.find(':', b);
        std::string dir = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
        if (access(((dir.empty() ? "." : dir) + "/" + prog).c_str(), X_OK) == 0) return true;
        if (e == std::string::npos) return false;
        b = e + 1;
    }
}

// In a container (pyxis), before the check. What rank 0 leaves for the
// batch script (exclude file, job comment) must have somewhere to go there,
// or the step stops now rather than after the check: every rank decides
// alike, so none waits for a rank 0 that left. A history or metrics
// directory the image lacks is the site's mounts, not the user's mistake:
// left out, said once. Returns the refusal, "" when all can go ahead.
std::string outputs_in_container(CheckOptions& o, const InlineOptions& io, bool rank0) {
    const std::string head = "mn-preflight: " + env_or("SLURMD_NODENAME", "?") + ": ";
    const std::string where = "the task runs in a container (" + io.container + ")";
    const std::string stopped = ", so neither the check nor " + io.program[0] + " was started";
    if (!io.exclude_file.empty() && !writable_dir(dir_of(io.exclude_file)))
        return head + "exclude file " + io.exclude_file + ": " + where + ", where " + dir_of(io.exclude_file) +
               " is not a directory it can write" + stopped + "; fix: mount it (srun --container-mounts=" +
               dir_of(io.exclude_file) + " ...) or name a file in a directory the container has";
    if (io.job_comment && !on_path("scontrol"))
        return head + "job comment: " + where + ", which has no scontrol" + stopped +
               "; fix: use exclude-file=PATH in a mounted directory instead (the batch script reads it), or run "
               "the check as a step of its own before the container's";
    const struct {
        std::string& dir;
        const char* what;
    } fleet[] = {{o.history_dir, "history"}, {o.metrics_dir, "metrics"}};
    for (const auto& f : fleet) {
        if (f.dir.empty() || writable_dir(f.dir)) continue;
        if (rank0)
            say(head + "note: " + where + ", where the " + f.what + " directory " + f.dir +
                " is not (or is not writable), so this check is not recorded there; the site mounts it into "
                "every container (a line '" + f.dir + " " + f.dir + " none x-create=dir,bind,rw' in enroot's mounts.d)");
        f.dir.clear();
    }
    return "";
}

// Rank 0, after a FAIL: the machine-readable outcome and one line saying
// what happened to the program.
void report_failure(int code, const std::string& output, const InlineOptions& io) {
    const std::string prog = io.program[0];
    auto hosts = Hostlist::parse(env_or("SLURM_STEP_NODELIST", env_or("SLURM_JOB_NODELIST")));
    const ExcludeList ex = hosts ? nodes_to_exclude(output, hosts->hosts()) : ExcludeList{};
    const std::string list = Hostlist::compress(ex.nodes);
    std::string where;
    if (!io.exclude_file.empty() && !list.empty()) {
        // Often a shared directory: a new file renamed over the path, never
        // through a link or a FIFO someone left there.
        if (auto w = replace_file(io.exclude_file, list + "\n", 0644); w)
            where += " (written to " + io.exclude_file + ")";
        else
            where += " (" + w.problem().what + ")";
    }
    if (io.job_comment && !list.empty()) {
        std::string err;
        if (set_job_comment("mn-preflight exclude=" + list, err)) where += " (in the job's comment)";
        else where += " (could not set the job's comment: " + err + ")";
    }
    std::string nodes = list.empty() ? (ex.known ? "none named" : "unknown (the check stopped before its verdict)")
                                     : list + where;
    say("mn_nccl: --mn-preflight: the check failed (exit " + std::to_string(code) + "); " + prog +
        " was not started on any node; nodes to exclude: " + nodes);
}

// The check in a child process, its stdout into `out_fd` when >= 0.
pid_t start_check(const CheckOptions& o, const InlineOptions& io, int out_fd) {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t child = fork();
    if (child != 0) return child;
    if (out_fd >= 0) dup2(out_fd, STDOUT_FILENO);
    // The check's rendezvous, away from the program's MASTER_PORT.
    if (io.port) setenv("MASTER_PORT", std::to_string(io.port).c_str(), 1);
    const int code = run_check(o);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
}

// Passes what the check writes on to our stdout as it comes, and keeps it
// (rank 0 reads the nodes to exclude from it).
std::string relay(int fd) {
    std::string output;
    char buf[4096];
    while (true) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        output.append(buf, static_cast<std::size_t>(n));
        for (ssize_t done = 0; done < n;) {
            const ssize_t w = write(STDOUT_FILENO, buf + done, static_cast<std::size_t>(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            done += w;
        }
    }
    return output;
}

// srun's signals go to the check while it runs (on), then back to their
// defaults (off).
void forward_signals(bool on) {
    struct sigaction sa {};
    sa.sa_handler = on ? forward : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

// The check's exit code (128 + the signal that ended it).
int wait_check(pid_t child) {
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// On PASS: the program in this process; returns only when it cannot run.
int exec_program(const InlineOptions& io) {
    std::vector<char*> argv;
    for (const auto& a : io.program) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "mn-preflight: %s: the check passed, but %s cannot run: %s\n", env_or("SLURMD_NODENAME", "?").c_str(),
                 io.program[0].c_str(), std::strerror(err));
    return err == ENOENT ? 127 : 126;
}

}  // namespace

int check_then_exec(const CheckOptions& asked, const InlineOptions& io) {
    if (io.program.empty()) {
        std::fprintf(stderr, "mn-preflight: check --exec needs a program after --\n");
        return kUsage;
    }
    const bool rank0 = env_or("SLURM_PROCID") == "0";
    CheckOptions o = asked;
    if (!io.container.empty())
        if (const std::string refusal = outputs_in_container(o, io, rank0); !refusal.empty()) {
            if (rank0) say(refusal);
            return kUsage;
        }
    // apptainer exec IMAGE ...: this check runs here, before the container,
    // so its NCCL and libraries are the node's, not the image's: said once.
    if (auto c = apptainer_command(io.program); c && rank0)
        say("mn-preflight: note: the program runs in " + c->runtime + " (" + c->image +
            "); this check runs before it, on the node: it tests the node's NCCL and libraries, not the image's; "
            "to test the image's, run the check in it as a step of its own: srun --mn-nccl=auto " + c->runtime +
            " exec --nv " + c->image + " mn-preflight (mn-preflight needs only glibc there)");
    // Every rank's output is read: when rank 0 is lost, another rank
    // prints the verdict (and this process then reports it).
    const bool capture = true;
    // A file from an earlier run must not speak for this one.
    if (rank0 && !io.exclude_file.empty() && std::remove(io.exclude_file.c_str()) != 0 && errno != ENOENT)
        say("mn-preflight: cannot remove the old " + io.exclude_file + ": " + std::strerror(errno));

    int pfd[2] = {-1, -1};
    if (capture && pipe2(pfd, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "mn-preflight: pipe: %s\n", std::strerror(errno));
        return kCheckFailed;
    }
    const pid_t child = start_check(o, io, capture ? pfd[1] : -1);
    if (child < 0) {
        std::fprintf(stderr, "mn-preflight: fork: %s\n", std::strerror(errno));
        return kCheckFailed;
    }
    g_child = child;
    forward_signals(true);
    std::string output;
    if (capture) {
        close(pfd[1]);
        output = relay(pfd[0]);
        close(pfd[0]);
    }
    const int code = wait_check(child);
    g_child = 0;
    forward_signals(false);
    if (code != kPass) {
        // The rank that printed the verdict reports it: rank 0, unless the
        // others ended the check without it (it says "superseded:").
        const bool superseded =
            output.rfind("superseded: ", 0) == 0 || output.find("\nsuperseded: ") != std::string::npos;
        if (rank0 ? !superseded : !output.empty()) report_failure(code, output, io);
        return code;
    }
    return exec_program(io);
}

}  // namespace mn
