// SPDX-License-Identifier: Apache-2.0
// The machine as the kernel tells it: the boot id that nodes of one machine
// share, and a thread's wait for a CPU, from /proc's text.
#include "lib/util/machine.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/unit/unit.h"

using namespace mn;

static void boot_id_is_a_uuid(void**) {
    assert_str(parse_boot_id("0f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60\n").value(), "0f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60");
    assert_false(parse_boot_id("").has_value());
    assert_false(parse_boot_id("0f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f6").has_value());    // one digit short
    assert_false(parse_boot_id("0f2c1a3e+8d4b-4c9a-9f7e-1b2c3d4e5f60").has_value());   // not a dash
    assert_false(parse_boot_id("0f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5g60").has_value());   // not hex
    // This machine's, read twice: the same (every process of a boot sees one).
    const auto a = boot_id(), b = boot_id();
    assert_true(a.has_value());
    assert_str(*a, *b);
}

static void schedstat_gives_run_and_wait(void**) {
    const auto t = parse_schedstat("2500000000 125000000 42\n");
    assert_true(t.has_value());
    assert_true(t->ran > 2.4999 && t->ran < 2.5001);
    assert_true(t->waited > 0.1249 && t->waited < 0.1251);
    assert_false(parse_schedstat("").has_value());
    assert_false(parse_schedstat("12 x 3").has_value());
    assert_false(parse_schedstat("12").has_value());
    assert_false(parse_schedstat("-5 3 1").has_value());
}

static void wait_share_of_wall(void**) {
    const CpuTimes a{1.0, 0.5}, b{1.2, 0.75};
    assert_true(std::abs(*cpu_wait_share(a, b, 1.0) - 0.25) < 1e-9);
    assert_true(*cpu_wait_share(a, b, 0.1) == 1.0);  // clamped: the wall clock read coarser than the kernel's
    assert_false(cpu_wait_share(a, std::nullopt, 1.0).has_value());
    assert_false(cpu_wait_share(a, b, 0).has_value());
    assert_false(cpu_wait_share(b, a, 1.0).has_value());  // the wait went back: not one thread's two readings
}

// A thread that shares one CPU with busy threads waits for it, and the
// kernel's figure says so; one that sleeps does not.
static void a_starved_thread_waits_and_a_sleeping_one_does_not(void**) {
    if (!thread_cpu_times()) skip();  // a kernel without schedstat: nothing to read
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    std::atomic<bool> stop{false};
    std::vector<std::thread> hogs;
    for (int i = 0; i < 3; ++i)
        hogs.emplace_back([&] {
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            while (!stop) {
            }
        });
    double busy_share = -1, sleep_share = -1;
    std::thread busy([&] {
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        const auto before = thread_cpu_times();
        const auto t0 = std::chrono::steady_clock::now();
        volatile unsigned long n = 0;
        while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) ++n;
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        busy_share = cpu_wait_share(before, thread_cpu_times(), wall).value_or(-1);
    });
    busy.join();
    stop = true;
    for (auto& h : hogs) h.join();
    std::thread idle([&] {
        const auto before = thread_cpu_times();
        // A second: its one wake-up's wait for a CPU (tens of ms on a
        // loaded CI machine) stays well under a tenth of it.
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        sleep_share = cpu_wait_share(before, thread_cpu_times(), 1.0).value_or(-1);
    });
    idle.join();
    // Four busy threads on one CPU: each waits about three quarters of the time.
    if (busy_share < 0.4) fail_msg("a thread sharing one CPU with 3 hogs waited %.2f of its time", busy_share);
    if (sleep_share < 0 || sleep_share > 0.1) fail_msg("a sleeping thread waited %.2f of its time", sleep_share);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(boot_id_is_a_uuid),
        cmocka_unit_test(schedstat_gives_run_and_wait),
        cmocka_unit_test(wait_share_of_wall),
        cmocka_unit_test(a_starved_thread_waits_and_a_sleeping_one_does_not),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
