// SPDX-License-Identifier: Apache-2.0
// The machine a process runs on, as the kernel tells it: which boot of which
// machine (nodes in network namespaces or containers of one host share it),
// and how long a thread waited for a CPU. Plain reads of /proc, parsed here
// so that the parsing is tested apart.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mn {

// The kernel's boot id (/proc/sys/kernel/random/boot_id): a random UUID made
// at each boot, the same in every namespace and container of that boot, so
// two nodes that report the same one share a machine and its CPUs. None
// when it cannot be read or is not a UUID.
std::optional<std::string> boot_id();
std::optional<std::string> parse_boot_id(std::string_view text);

// A thread's time on a CPU and waiting, runnable, for one (the kernel's
// schedstat: sum_exec_runtime and run_delay, in ns), in seconds.
struct CpuTimes {
    double ran = 0, waited = 0;
};
// This thread's (/proc/thread-self/schedstat); none where the kernel keeps
// no such figures.
std::optional<CpuTimes> thread_cpu_times();
std::optional<CpuTimes> parse_schedstat(std::string_view text);

// The share of `wall` seconds that a thread waited for a CPU between two
// readings, from 0 to 1; none without both readings or a wall time.
std::optional<double> cpu_wait_share(const std::optional<CpuTimes>& before, const std::optional<CpuTimes>& after,
                                     double wall);

}  // namespace mn
