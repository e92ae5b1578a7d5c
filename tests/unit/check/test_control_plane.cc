// mn-preflight's control plane against what 8,192 ranks on one host run
// out of (issue 29): a rank that gets no thread or no open file says so,
// naming itself and the fix, and exits 1, never an abort; and mn-rank-sim
// (tests/bench/mn_rank_sim.cc) plays 63 ranks against a real rank 0 over
// the real protocol, healthy and with one rank that stops answering, which
// the verdict must name and no healthy rank beside it, through a beating
// rendezvous and a quiet one. No timing is asserted (scripts/bench and
// doc/scale.md measure).
#include "tests/unit/unit.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <string>

namespace {

struct Ran {
    int code = -1;
    std::string out;
};

Ran run(const std::string& cmd) {
    Ran r;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) fail_msg("popen %s", cmd.c_str());
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

std::string bin(const char* var) {
    const char* v = std::getenv(var);
    if (!v) fail_msg("%s is not set (make check sets it)", var);
    return v;
}

// A rank of a two-rank step without Slurm, as the plugin's variables set it.
std::string rank_env(int rank, int port) {
    return "env -i PATH=/usr/bin:/bin SLURM_PROCID=" + std::to_string(rank) +
           " SLURM_NTASKS=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
           " MN_NCCL_STEP_SECRET=0123456789abcdef NCCL_HOSTID=node3 ";
}

bool hooks_built(const std::string& preflight) {
    return run("'" + preflight + "' --version").out.find("test hooks built in") != std::string::npos;
}

// RLIMIT_NPROC binds only a user without CAP_SYS_RESOURCE: the rank runs
// as nobody, allowed one process (itself), so no thread can be made.
void a_rank_without_a_thread_says_so(void**) {
    if (geteuid() != 0 || run("command -v setpriv prlimit").code != 0) skip();
    // A copy nobody can run: the build may sit under /root (0700), as in
    // the release roots.
    char dir[] = "/tmp/mn-control-plane-XXXXXX";
    if (!mkdtemp(dir) || chmod(dir, 0755) != 0) fail_msg("mkdtemp: %s", std::strerror(errno));
    const std::string copy = std::string(dir) + "/mn-preflight";
    if (run("cp '" + bin("MN_PREFLIGHT") + "' '" + copy + "' && chmod 755 '" + copy + "'").code != 0)
        fail_msg("cannot copy mn-preflight to %s", dir);
    const Ran r = run(rank_env(1, 9) + "setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --nproc=1 '" +
                      copy + "' --cpu --timeout 5");
    run("rm -rf '" + std::string(dir) + "'");
    assert_int_equal(r.code, 1);
    assert_contains(r.out, "mn-preflight: rank 1 on node3: cannot start the control thread");
    assert_contains(r.out, "Resource temporarily unavailable");
    assert_contains(r.out, "raise ulimit -u");
    if (r.out.find("internal error") != std::string::npos || r.out.find("terminate") != std::string::npos)
        fail_msg("not a plain message: %s", r.out.c_str());
}

// Six open files: the three standard ones and not enough for the first
// socket or epoll instance beside the ports it opens.
void a_rank_without_open_files_says_so(void**) {
#if defined(__SANITIZE_ADDRESS__)
    // ASan's runtime keeps descriptors of its own: with six, the rank fails
    // elsewhere first, inside the runtime's thread start.
    skip();
#endif
    const Ran r = run(rank_env(0, 39911) + "prlimit --nofile=6 '" + bin("MN_PREFLIGHT") + "' --cpu --timeout 3");
    assert_int_equal(r.code, 1);
    assert_contains(r.out, "mn-preflight: rank 0 on node3: ");
    assert_contains(r.out, "Too many open files");
    assert_contains(r.out, "raise ulimit -n");
}

void simulated_ranks_pass(void**) {
    const std::string preflight = bin("MN_PREFLIGHT");
    if (!hooks_built(preflight)) skip();
    const Ran r = run("'" + bin("MN_RANK_SIM") + "' --preflight '" + preflight + "' --ranks 64 --timeout 20");
    assert_contains(r.out, "PASS");
    assert_int_equal(r.code, 0);
}

void a_silent_simulated_rank_is_named(void**) {
    const std::string preflight = bin("MN_PREFLIGHT");
    if (!hooks_built(preflight)) skip();
    // The sim makes rank 63 (the last) the silent one.
    const Ran r = run("'" + bin("MN_RANK_SIM") + "' --preflight '" + preflight + "' --ranks 64 --silent 1 --timeout 20");
    assert_contains(r.out, "silent named 1 of 1");
    assert_contains(r.out, "healthy named 0");
    assert_contains(r.out, "rank 63: stopped answering");
    assert_int_equal(r.code, 0);
}

// Above 4,096 ranks the rendezvous is quiet (no beats either way: step.h,
// quiet_rendezvous): a rank that stops after its hello is named once the
// check goes on, by its silence in readiness, and no healthy rank with it.
// Played with 64 ranks and the bound at 16 (the test hook), where one
// process keeps up with its ranks' beats on a loaded 2-core machine.
void a_rank_silent_through_a_quiet_rendezvous_is_named(void**) {
    const std::string preflight = bin("MN_PREFLIGHT");
    if (!hooks_built(preflight)) skip();
    const Ran r = run("'" + bin("MN_RANK_SIM") + "' --preflight '" + preflight +
                      "' --ranks 64 --quiet-above 16 --silent 1 --timeout 20");
    assert_contains(r.out, "silent named 1 of 1");
    assert_contains(r.out, "healthy named 0");
    assert_contains(r.out, "rank 63: stopped answering in readiness");
    assert_int_equal(r.code, 0);
}

// The same at the real bound, 4,100 ranks. Not under ASan: the runtime
// slows the one process playing 4,099 ranks past its beats' 3 s of grace on
// a loaded 2-core machine, and then healthy ranks fall silent too (the CI
// run of 2d3b7c0 named rank 4044, its beats 0.9 s late).
void four_thousand_ranks_rendezvous_quietly(void**) {
#if defined(__SANITIZE_ADDRESS__)
    skip();
#endif
    const std::string preflight = bin("MN_PREFLIGHT");
    if (!hooks_built(preflight)) skip();
    const Ran r =
        run("'" + bin("MN_RANK_SIM") + "' --preflight '" + preflight + "' --ranks 4100 --silent 1 --timeout 20");
    assert_contains(r.out, "silent named 1 of 1");
    assert_contains(r.out, "healthy named 0");
    assert_contains(r.out, "rank 4099: stopped answering in readiness");
    assert_int_equal(r.code, 0);
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_rank_without_a_thread_says_so),
        cmocka_unit_test(a_rank_without_open_files_says_so),
        cmocka_unit_test(simulated_ranks_pass),
        cmocka_unit_test(a_silent_simulated_rank_is_named),
        cmocka_unit_test(a_rank_silent_through_a_quiet_rendezvous_is_named),
        cmocka_unit_test(four_thousand_ranks_rendezvous_quietly),
    };
    return cmocka_run_group_tests_name("control_plane", tests, nullptr, nullptr);
}
