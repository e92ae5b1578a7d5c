// SPDX-License-Identifier: Apache-2.0
// The test hooks (hooks.h), and the bounds they move.
#include "helper/check/hooks.h"

#include "build_config.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "helper/check/control/line.h"
#include "lib/util/text.h"

namespace mn::check {

namespace {
// Only a build configured with --enable-test-hooks reads these variables.
bool hook_names_rank(const char* var, uint32_t rank) {
#ifdef MN_TEST_HOOKS
    for (const std::string& r : split_list(env_or(var)))
        if (r == std::to_string(rank)) return true;
#else
    (void)var, (void)rank;
#endif
    return false;
}
}  // namespace

namespace {
// MN_PREFLIGHT_START_LOG's line "RANK UNIX-SECONDS[ WHAT]" for a moment
// `ago` seconds back (test hook).
void log_moment(const Self& self, double ago, const char* what) {
#ifdef MN_TEST_HOOKS
    const std::string file = env_or("MN_PREFLIGHT_START_LOG");
    if (file.empty()) return;
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    if (FILE* f = std::fopen(file.c_str(), "a")) {
        std::fprintf(f, "%u %.6f%s%s\n", self.rank, ts.tv_sec + ts.tv_nsec / 1e9 - ago, *what ? " " : "", what);
        std::fclose(f);
    }
#else
    (void)self, (void)ago, (void)what;
#endif
}
}  // namespace

#ifdef MN_TEST_HOOKS
namespace {
// The samples, written by the signal handler alone: a fixed block, no
// allocation there.
constexpr int kDepth = 24;
constexpr std::size_t kSamples = 60000;
struct Sample {
    int depth;
    void* pc[kDepth];
};
Sample* g_samples = nullptr;
std::atomic<std::size_t> g_taken{0};
std::string* g_profile_file = nullptr;

void on_sigprof(int, siginfo_t*, void* ctx) {
    const std::size_t i = g_taken.fetch_add(1, std::memory_order_relaxed);
    if (i >= kSamples) return;
    Sample& s = g_samples[i];
    void* frames[kDepth + 2];
    const int n = backtrace(frames, kDepth + 2);
    // The interrupted instruction first, then its callers (the handler's
    // and the signal trampoline's frames skipped).
    s.pc[0] = reinterpret_cast<void*>(static_cast<ucontext_t*>(ctx)->uc_mcontext.gregs[REG_RIP]);
    s.depth = 1;
    for (int k = 3; k < n && s.depth < kDepth; ++k) s.pc[s.depth++] = frames[k];
}

void write_profile() {
    struct itimerval off{};
    setitimer(ITIMER_PROF, &off, nullptr);
    FILE* f = std::fopen(g_profile_file->c_str(), "w");
    if (!f) return;
    // The program's load address: the first mapping of /proc/self/exe.
    if (FILE* m = std::fopen("/proc/self/maps", "r")) {
        char line[512];
        char exe[256] = "";
        const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) exe[n] = 0;
        while (std::fgets(line, sizeof line, m))
            if (n > 0 && std::strstr(line, exe)) {
                std::fprintf(f, "base 0x%lx\n", std::strtoul(line, nullptr, 16));
                break;
            }
        std::fclose(m);
    }
    const std::size_t taken = std::min(g_taken.load(), kSamples);
    for (std::size_t i = 0; i < taken; ++i) {
        for (int k = 0; k < g_samples[i].depth; ++k) std::fprintf(f, "%s%p", k ? " " : "", g_samples[i].pc[k]);
        std::fputc('\n', f);
    }
    std::fclose(f);
}
}  // namespace
#endif

void start_profile(const Self& self) {
#ifdef MN_TEST_HOOKS
    const std::string file = env_or("MN_PREFLIGHT_PROFILE");
    if (file.empty() || self.rank != 0 || g_samples) return;
    g_samples = new Sample[kSamples];
    g_profile_file = new std::string(file);
    void* warm[4];
    backtrace(warm, 4);  // loads the unwinder now, not in the handler
    struct sigaction sa{};
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, nullptr);
    struct itimerval every{};
    every.it_interval.tv_usec = 1000;
    every.it_value.tv_usec = 1000;
    setitimer(ITIMER_PROF, &every, nullptr);
    std::atexit(write_profile);
#else
    (void)self;
#endif
}

void log_start(const Self& self, double start) { log_moment(self, now_s() - start, ""); }

void log_end(const Self& self, const char* what) { log_moment(self, 0, what); }

uint32_t hook_bound(const char* var, uint32_t dflt) {
#ifdef MN_TEST_HOOKS
    const std::string v = env_or(var);
    return v.empty() ? dflt : static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
#else
    (void)var;
    return dflt;
#endif
}

bool quiet_rendezvous(uint32_t world) {
    static const uint32_t above = hook_bound("MN_PREFLIGHT_QUIET_ABOVE", kBeatsHalved);
    return world > above;
}

bool setup_fails_on_purpose(uint32_t rank) { return hook_names_rank("MN_PREFLIGHT_FAIL_SETUP", rank); }
bool exits_on_purpose(uint32_t rank) { return hook_names_rank("MN_PREFLIGHT_EXIT_IN_COLLECTIVE", rank); }
bool stalls_pairs(uint32_t rank, bool retest) {
    return hook_names_rank("MN_PREFLIGHT_STALL_RETESTS", rank) ||
           (!retest && hook_names_rank("MN_PREFLIGHT_STALL_PAIRS", rank));
}
bool shares_simulated() {
#ifdef MN_TEST_HOOKS
    return env_or("MN_PREFLIGHT_SIM_SHARE") == "1";
#else
    return false;
#endif
}
std::optional<std::vector<std::string>> gpu_buses_on_purpose() {
#ifdef MN_TEST_HOOKS
    const std::string v = env_or("MN_PREFLIGHT_GPU_BUSES");
    if (!v.empty()) return split_list(v);
#endif
    return std::nullopt;
}
bool slowed_from_round(const std::string& tag) {
#ifdef MN_TEST_HOOKS
    const std::string from = env_or("MN_PREFLIGHT_SLOW_FROM_ROUND");
    if (from.empty()) return false;
    if (tag.rfind("retest:", 0) == 0) return true;
    // "pair:K:Q"
    const std::size_t a = tag.find(':'), b = tag.find(':', a + 1);
    return tag.rfind("pair:", 0) == 0 && b != std::string::npos &&
           std::strtoul(tag.substr(a + 1, b - a - 1).c_str(), nullptr, 10) >= std::strtoul(from.c_str(), nullptr, 10);
#else
    (void)tag;
    return false;
#endif
}

}  // namespace mn::check
