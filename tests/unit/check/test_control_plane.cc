// SPDX-License-Identifier: Apache-2.0
// mn-preflight's control plane against what 8,192 ranks on one host run
// out of (issue 29): a rank that gets no thread or no open file says so,
// naming itself and the fix, and exits 1, never an abort; and mn-rank-sim
// (tests/bench/mn_rank_sim.cc) plays 63 ranks against a real rank 0 over
// the real protocol, healthy and with one rank that stops answering, which
// the verdict must name and no healthy rank beside it, through a beating
// rendezvous and a quiet one. No timing is asserted (scripts/bench and
// doc/scale.md measure).
#include "tests/unit/unit.h"

#include "helper/wire.h"
#include "lib/util/crypto.h"
#include "lib/util/text.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#define assert_lacks(haystack, needle)                                                           \
    do {                                                                                         \
        const std::string h_ = (haystack);                                                       \
        if (h_.find(needle) != std::string::npos) fail_msg("'%s' has '%s'", h_.c_str(), needle); \
    } while (0)

using namespace mn;

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

// Five open files: the three standard ones and not enough for the first
// socket or epoll instance beside the ports it opens (rank 0 opens no
// standby port: it can never stand by for itself).
void a_rank_without_open_files_says_so(void**) {
#if defined(__SANITIZE_ADDRESS__)
    // ASan's runtime keeps descriptors of its own: with five, the rank fails
    // elsewhere first, inside the runtime's thread start.
    skip();
#endif
    const Ran r = run(rank_env(0, 39911) + "prlimit --nofile=5 '" + bin("MN_PREFLIGHT") + "' --cpu --timeout 3");
    assert_int_equal(r.code, 1);
    // Whichever comes first: the control thread's epoll instance, or the
    // main thread's MASTER_PORT (the two run at once).
    if (r.out.find("mn-preflight: rank 0 on node3: ") == std::string::npos)
        assert_contains(r.out, "mn-preflight: node3 rank 0: rank 0 could not listen on MASTER_PORT: ");
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

// Above kGatherAbove ranks (here the test hook MN_PREFLIGHT_GATHER_ABOVE=0)
// a node's ranks speak to rank 0 through their node's leader
// (helper/check/node.cc): played by the simulator, rank 0 hears Relayed
// messages and passes; a rank silent behind its leader is named by it.
void simulated_ranks_gather_at_their_leaders(void**) {
    const std::string preflight = bin("MN_PREFLIGHT");
    if (!hooks_built(preflight)) skip();
    const std::string sim = "'" + bin("MN_RANK_SIM") + "' --preflight '" + preflight + "' --ranks 64 --gather-above 0 ";
    Ran r = run(sim + "--timeout 20");
    assert_contains(r.out, "PASS");
    assert_contains(r.out, "\"Relayed\":");
    assert_int_equal(r.code, 0);
    r = run(sim + "--silent 1 --timeout 20");
    assert_contains(r.out, "silent named 1 of 1");
    assert_contains(r.out, "healthy named 0");
    assert_contains(r.out, "rank 63: stopped answering");
    assert_int_equal(r.code, 0);
}

// NODES x PER real mn-preflight processes on loopback, with the variables
// the plugin sets (NODE_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NCCL_HOSTID per
// emulated node), gathering at their leaders: rank 0's stdout (--json), the
// others' stderr, each rank's exit code.
struct StepRun {
    std::string json, others;
    std::vector<int> codes;
};

// skip: a rank that never starts (-1: none).
StepRun run_step(int nodes, int per, int port, const std::string& env, int skip = -1) {
    const std::string dir = scratch_dir("gather");
    const int world = nodes * per;
    std::string script = "cd " + dir + "; for r in $(seq 0 " + std::to_string(world - 1) +
                         "); do [ $r = " + std::to_string(skip) + " ] && continue; env -i PATH=/usr/bin:/bin SLURM_PROCID=$r SLURM_NTASKS=" + std::to_string(world) +
                         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                         " MN_NCCL_STEP_SECRET=0123456789abcdef NODE_RANK=$((r / " + std::to_string(per) +
                         ")) LOCAL_RANK=$((r % " + std::to_string(per) + ")) LOCAL_WORLD_SIZE=" + std::to_string(per) +
                         " NCCL_HOSTID=node$((r / " + std::to_string(per) + ")) MN_PREFLIGHT_GATHER_ABOVE=0 " + env +
                         " '" + bin("MN_PREFLIGHT") + "' --cpu --json --timeout 20 >out.$r 2>err.$r & echo $! >pid.$r; "
                         "done; for r in $(seq 0 " + std::to_string(world - 1) + "); do [ $r = " +
                         std::to_string(skip) + " ] && { echo 0; continue; }; wait $(cat pid.$r); echo $?; done";
    std::ofstream(dir + "/run.sh") << script << "\n";
    const Ran r = run("bash '" + dir + "/run.sh'");
    StepRun out;
    std::istringstream codes(r.out);
    for (int c; codes >> c;) out.codes.push_back(c);
    out.json = file_text(dir + "/out.0");
    for (int k = 1; k < world; ++k) out.others += file_text(dir + "/err." + std::to_string(k));
    remove_tree(dir);
    if (out.codes.size() != static_cast<std::size_t>(world)) fail_msg("not every rank ran: %s", r.out.c_str());
    return out;
}

void real_ranks_gather_at_their_leaders(void**) {
    if (!hooks_built(bin("MN_PREFLIGHT"))) skip();
    // 3 nodes x 3: node 0's two others knock at rank 0, nodes 1 and 2 each
    // at their leader (ranks 3 and 6): rank 0 takes 4 connections.
    StepRun s = run_step(3, 3, 39921, "");
    assert_contains(s.json, "\"verdict\":\"PASS\"");
    assert_contains(s.json, "\"accepted\":4,");
    assert_contains(s.json, "\"Relayed\":");
    for (int c : s.codes) assert_int_equal(c, 0);
    // A rank behind its leader ends in the all-reduce: the leader says so,
    // the verdict names it and nobody else.
    s = run_step(3, 3, 39922, "MN_PREFLIGHT_EXIT_IN_COLLECTIVE=4");
    assert_contains(s.json, "\"verdict\":\"FAIL\"");
    assert_contains(s.json, "rank 4: its process ended during the all-reduce");
    assert_lacks(s.json, "rank 3:");
    assert_lacks(s.json, "rank 5:");
    assert_contains(s.others, "node1 rank 5: stopped by the verdict, through its node's leader");
    // The leader itself ends: the verdict names it, not the ranks it spoke
    // for, who end saying why.
    s = run_step(3, 3, 39923, "MN_PREFLIGHT_EXIT_IN_COLLECTIVE=3");
    assert_contains(s.json, "rank 3: its process ended during the all-reduce");
    assert_lacks(s.json, "rank 4:");
    assert_lacks(s.json, "rank 5:");
    assert_contains(s.others, "node1 rank 4: its node's leader (LOCAL_RANK 0), its way to rank 0: its process ended");
    assert_int_equal(s.codes[0], 1);
}

// A node's door taken before its leader could bind it (here by this
// test, which knows the secret: another user cannot, since the name is the
// secret's HMAC), bound and not listening: the leader says it cannot
// listen, its node's ranks find nobody there for kLeaderWait (5 s) and
// join rank 0 directly, and the check passes. (A holder that listened and
// never answered would keep them to the rendezvous' deadline, as a stopped
// leader does: a rank that reached a door waits for its handshake.)
void a_held_node_door_only_delays(void**) {
    if (!hooks_built(bin("MN_PREFLIGHT"))) skip();
    const int port = 39924;
    const Mac m = hmac_sha256("0123456789abcdef", "node door\n" + std::to_string(port) + "\n1");
    const std::string name = "mn-preflight-node-" + to_hex(m.data(), 16);
    wire::Fd held(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, name.data(), name.size());
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    assert_int_equal(::bind(held.get(), reinterpret_cast<sockaddr*>(&sa), len), 0);
    const StepRun s = run_step(3, 3, port, "");
    assert_contains(s.json, "\"verdict\":\"PASS\"");
    // Node 0's two, node 1's three (its door held), node 2's leader.
    assert_contains(s.json, "\"accepted\":6,");
    assert_contains(s.others, "node1 rank 3: cannot listen on the local socket @" + name);
    assert_contains(s.others, "node1 rank 4: its node's leader (LOCAL_RANK 0): ");
    assert_contains(s.others, "it joins rank 0 directly");
    for (int c : s.codes) assert_int_equal(c, 0);
}

// Another user holds connections at node 1's door (it read the name in
// /proc/net/unix) while rank 5, behind it, never comes: the rendezvous runs
// out of time, and the strangers its leader saw there make it disturbed,
// no node's time-out.
void strangers_at_a_node_door_disturb_its_time_out(void**) {
    if (!hooks_built(bin("MN_PREFLIGHT"))) skip();
    const int port = 39925;
    const Mac m = hmac_sha256("0123456789abcdef", "node door\n" + std::to_string(port) + "\n1");
    const std::string name = "mn-preflight-node-" + to_hex(m.data(), 16);
    std::atomic<bool> stop{false};
    std::atomic<int> held{0};
    std::thread stranger([&] {
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::memcpy(sa.sun_path + 1, name.data(), name.size());
        const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
        std::vector<wire::Fd> fds;
        while (!stop) {
            if (fds.size() < 30) {
                wire::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
                if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0) {
                    fds.push_back(std::move(fd));
                    held = static_cast<int>(fds.size());
                    continue;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    const StepRun s = run_step(3, 3, port, "", 5);
    stop = true;
    stranger.join();
    assert_true(held > 0);
    assert_contains(s.json, "\"verdict\":\"FAIL\"");
    assert_contains(s.json, "\"disturbed\":\"strangers at the nodes' doors: ");
    assert_contains(s.json, "connections from local uid ");
    assert_lacks(s.json, "\"kind\":\"timeout\"");
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
        cmocka_unit_test(simulated_ranks_gather_at_their_leaders),
        cmocka_unit_test(real_ranks_gather_at_their_leaders),
        cmocka_unit_test(a_held_node_door_only_delays),
        cmocka_unit_test(strangers_at_a_node_door_disturb_its_time_out),
    };
    return cmocka_run_group_tests_name("control_plane", tests, nullptr, nullptr);
}
