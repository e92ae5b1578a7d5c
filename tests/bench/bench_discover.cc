// Fabric discovery cost per node and step: read_sysfs_ports + choose_fabric
// on a fixture tree, repeated; prints the median of batches in ms per call.
//   bench_discover SYSFS_ROOT [CALLS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lib/fabric.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_discover SYSFS_ROOT [CALLS]\n");
        return 2;
    }
    const int calls = argc > 2 ? std::atoi(argv[2]) : 200;
    std::vector<double> ms;
    std::size_t chosen = 0;
    for (int i = 0; i < calls; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto c = mn::choose_fabric(mn::read_sysfs_ports(argv[1]), mn::Mode::Auto);
        auto t1 = std::chrono::steady_clock::now();
        chosen = c ? c->env.size() : 0;
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("discovery on %s: %d calls, median %.3f ms, p90 %.3f ms, max %.3f ms per call (%zu variables)\n",
                argv[1], calls, ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.back(), chosen);
    return 0;
}
