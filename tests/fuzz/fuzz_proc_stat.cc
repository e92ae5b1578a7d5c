// SPDX-License-Identifier: Apache-2.0
// /proc/PID/stat as mn-preflight watch reads it (outside input: a process
// names itself, and its name may hold any byte, spaces and parentheses
// included). Properties: a line parses or is refused, never crashes; a
// parsed one has a pid above 0 and a state that is one byte; its tree and
// the watch's rule take any list of them without growing past it.
#include "lib/check/stall.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 4096) return 0;
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<mn::ProcStat> all;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t end = text.find('\n', at);
        const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (auto p = mn::parse_proc_stat(line)) {
            FUZZ_CHECK(p->pid > 0, "pid %d", p->pid);
            FUZZ_CHECK(p->comm.size() < line.size(), "name longer than its line");
            all.push_back(*p);
        }
        if (end == std::string::npos) break;
        at = end + 1;
    }
    for (const auto& root : all) {
        const auto tree = mn::process_tree(all, root.pid);
        FUZZ_CHECK(!tree.empty() && tree.size() <= all.size() && tree[0].pid == root.pid, "tree of %d", root.pid);
    }
    mn::StallWatch w(5);
    for (double t = 0; t < 12; t += 3) {
        const auto s = w.look(t, all);
        FUZZ_CHECK(!s || (s->seconds >= 5 && (s->proc.state == 'T' || s->proc.state == 'D')), "stall named early");
    }
    return 0;
}
