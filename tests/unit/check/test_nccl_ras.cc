// SPDX-License-Identifier: Apache-2.0
// NCCL's RAS report as the watch condenses it (lib/check/nccl_ras), and the
// step's own RAS address. The reports follow the text format NCCL 2.24 to
// 2.28 print (tests/fixtures/nccl_ras: a job with a rank missing, a
// healthy one).
#include "lib/check/nccl_ras.h"
#include "tests/unit/unit.h"

#include <cstdlib>
#include <set>

using namespace mn;

namespace {

std::string fixture(const std::string& name) {
    const char* src = std::getenv("MN_SRCDIR");
    if (!src) fail_msg("MN_SRCDIR is not set (make check sets it)");
    return file_text(std::string(src) + "/tests/fixtures/nccl_ras/" + name);
}

}  // namespace

// A rank missing: the communicator's INCOMPLETE row, the process and rank
// it misses, the time-out; the version kept apart.
static void a_missing_rank(void**) {
    const RasSummary s = summarize_ras(fixture("missing_rank.txt"));
    assert_str(s.version, "NCCL version 2.28.9 compiled with CUDA 12.9");
    assert_true(s.troubled);
    assert_true(s.lines.size() >= 8);
    assert_contains(s.lines[0], "communicators 0         1         2       0-1         2         2   RUNNING  INCOMPLETE");
    bool process = false, rank = false, timeout = false;
    for (const std::string& l : s.lines) {
        process |= l == "Errors: Process 41177 on node 10.250.0.11 managing GPU 0";
        rank |= l == "Errors: The missing rank: 1";
        timeout |= l == "Warnings: Encountered 1 communication timeout while gathering communicator data";
        assert_true(l.find("Job summary") == std::string::npos && l.find("=====") == std::string::npos);
    }
    assert_true(process && rank && timeout);
}

// Every communicator RUNNING and OK, no errors: nothing to tell.
static void a_healthy_job(void**) {
    const RasSummary s = summarize_ras(fixture("healthy.txt"));
    assert_str(s.version, "NCCL version 2.28.9 compiled with CUDA 12.9");
    assert_false(s.troubled);
    assert_true(s.lines.empty());
}

// Not a report (an empty answer, another server's words): nothing; a
// report of thousands of lines: 16 lines of 300 bytes at most.
static void other_text_and_bounds(void**) {
    assert_true(summarize_ras("").lines.empty());
    assert_false(summarize_ras("HTTP/1.1 400 Bad Request\r\n\r\n").troubled);
    std::string big = "Errors\n======\n";
    for (int i = 0; i < 5000; ++i) big += "  Process " + std::to_string(i) + " on node n" + std::string(400, 'x') + "\n";
    const RasSummary s = summarize_ras(big);
    assert_int_equal(s.lines.size(), 16);
    for (const std::string& l : s.lines) assert_true(l.size() <= 300);
}

// Each step its own loopback address, never the default's 127.0.0.1, the
// same for every task of the step.
static void a_step_address_of_its_own(void**) {
    assert_str(ras_address(1234, 0), ras_address(1234, 0));
    std::set<std::string> seen;
    for (uint32_t job = 1; job <= 200; ++job)
        for (uint32_t step = 0; step < 5; ++step) {
            const std::string a = ras_address(job, step);
            assert_true(a.rfind("127.", 0) == 0);
            assert_true(a.rfind("127.0.", 0) != 0);
            assert_contains(a, ":28028");
            seen.insert(a);
        }
    assert_true(seen.size() >= 995);  // 1,000 steps, next to no two alike
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_missing_rank),
        cmocka_unit_test(a_healthy_job),
        cmocka_unit_test(other_text_and_bounds),
        cmocka_unit_test(a_step_address_of_its_own),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
