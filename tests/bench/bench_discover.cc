// SPDX-License-Identifier: Apache-2.0
// Fabric discovery cost per node and step, side by side in one run:
//   1. discover_ports + choose_fabric (what every step pays),
//   2. the same plus hwloc's topology load and the GPU to HCA locality
//      (what --mn-nccl-explain and mn-preflight discover pay).
// Prints medians in ms per call and the ratio of 2 to 1.
//   bench_discover SYSFS_ROOT [CALLS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "lib/fabric/fabric.h"
#include "lib/fabric/topology.h"
#include "lib/fabric/verbs.h"

namespace {

struct Stats {
    double median, p90, max;
};

Stats time_calls(int calls, const std::function<void()>& f) {
    std::vector<double> ms;
    for (int i = 0; i < calls; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return {ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.back()};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_discover SYSFS_ROOT [CALLS]\n");
        return 2;
    }
    const std::string root = argv[1];
    const int calls = std::max(1, argc > 2 ? std::atoi(argv[2]) : 200);
    std::size_t vars = 0, gpus = 0;
    std::string note;
    const Stats plain = time_calls(calls, [&] {
        auto c = mn::choose_fabric(mn::discover_ports(root), mn::Mode::Auto);
        vars = c ? c->env.size() : 0;
    });
    const Stats with_hwloc = time_calls(calls, [&] {
        auto c = mn::choose_fabric(mn::discover_ports(root), mn::Mode::Auto);
        if (!c) return;
        const auto l = mn::gpu_locality(root, *c);
        gpus = l.gpus.size();
        note = l.note;
    });
    std::printf("%s: %d calls\n", root.c_str(), calls);
    std::printf("  fabric discovery          median %.3f ms, p90 %.3f ms, max %.3f ms (%zu variables)\n",
                plain.median, plain.p90, plain.max, vars);
    std::printf("  + hwloc locality          median %.3f ms, p90 %.3f ms, max %.3f ms (%zu GPUs; %s)\n",
                with_hwloc.median, with_hwloc.p90, with_hwloc.max, gpus, note.c_str());
    std::printf("  ratio with/without hwloc  %.1f\n", plain.median > 0 ? with_hwloc.median / plain.median : 0.0);
    return 0;
}
