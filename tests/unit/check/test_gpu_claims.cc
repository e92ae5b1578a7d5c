// SPDX-License-Identifier: Apache-2.0
// The GPU a rank opens as the program would, and ranks of one host that
// share a GPU (issue 19).
#include "lib/check/gpu_claims.h"

#include "tests/unit/unit.h"

using namespace mn;

namespace {

void local_rank_selects_its_place(void**) {
    auto g = task_gpu(1, 2, "3,5");
    assert_true(g.ok());
    assert_int_equal(*g, 1);
    g = task_gpu(0, 1, "5");
    assert_true(g.ok());
    assert_int_equal(*g, 0);
}

// --gpus-per-task=1 as Slurm alone gives it: task 1 sees one GPU. The
// check must fail where the program would, not open GPU 1 % 1 = 0.
void local_rank_past_the_list_is_named_with_the_fix(void**) {
    auto g = task_gpu(1, 1, "1");
    assert_false(g.ok());
    assert_contains(g.problem().what, "LOCAL_RANK 1 has no GPU");
    assert_contains(g.problem().what, "CUDA_VISIBLE_DEVICES=1");
    assert_contains(g.problem().what, "invalid device ordinal");
    assert_contains(g.problem().fix, "--gpus-per-task=1");
    g = task_gpu(0, 0, "");
    assert_false(g.ok());
    assert_contains(g.problem().what, "CUDA_VISIBLE_DEVICES unset");
}

void bus_id_from_the_description(void**) {
    assert_str(gpu_identity("GPU0 (0000:07:00.0)"), "0000:07:00.0");
    assert_str(gpu_identity("GPU3"), "GPU3");
    assert_str(gpu_identity("GPU1 ()"), "GPU1 ()");
}

GpuClaim claim(uint32_t rank, const std::string& host, const std::string& gpu) {
    return {rank, host, host, {gpu}};
}

void own_gpus_share_nothing(void**) {
    const std::vector<GpuClaim> c = {claim(0, "n0", "GPU0 (0000:07:00.0)"), claim(1, "n0", "GPU1 (0000:0f:00.0)"),
                                     claim(2, "n1", "GPU0 (0000:07:00.0)"), claim(3, "n1", "GPU1 (0000:0f:00.0)")};
    assert_int_equal(shared_gpus(c).size(), 0);
}

// Two ranks whose CUDA_VISIBLE_DEVICES lists differ but name one physical
// GPU (CUDA numbers differ, the bus id does not).
void same_bus_id_on_one_host_is_shared(void**) {
    const std::vector<GpuClaim> c = {claim(0, "n0", "GPU0 (0000:07:00.0)"), claim(1, "n0", "GPU1 (0000:07:00.0)"),
                                     claim(2, "n1", "GPU0 (0000:07:00.0)"), claim(3, "n1", "GPU1 (0000:0f:00.0)")};
    const auto s = shared_gpus(c);
    assert_int_equal(s.size(), 1);
    assert_str(s[0].host_id, "n0");
    assert_str(s[0].gpu, "0000:07:00.0");
    assert_int_equal(s[0].ranks.size(), 2);
    assert_int_equal(s[0].ranks[0], 0);
    assert_int_equal(s[0].ranks[1], 1);
    assert_contains(s[0].text(), "ranks 0 and 1 of n0 both open GPU 0000:07:00.0");
    assert_contains(s[0].text(), "Duplicate GPU detected");
}

void three_ranks_on_one_gpu(void**) {
    const std::vector<GpuClaim> c = {claim(4, "n0", "GPU0 (0000:07:00.0)"), claim(2, "n0", "GPU0 (0000:07:00.0)"),
                                     claim(7, "n0", "GPU0 (0000:07:00.0)")};
    const auto s = shared_gpus(c);
    assert_int_equal(s.size(), 1);
    assert_contains(s[0].text(), "ranks 2, 4 and 7 of n0 all open GPU");
}

// Emulated nodes on one machine carry their own NCCL_HOSTID: NCCL counts
// them as hosts, so one GPU under two of them is no duplicate to NCCL.
void other_host_ids_never_share(void**) {
    std::vector<GpuClaim> c = {claim(0, "n0", "GPU0 (0000:07:00.0)"), claim(1, "n0-e1", "GPU0 (0000:07:00.0)")};
    assert_int_equal(shared_gpus(c).size(), 0);
    // A node-mode rank with all of a node's GPUs is one claim of several.
    c = {{0, "n0", "n0", {"GPU0 (0000:07:00.0)", "GPU1 (0000:0f:00.0)"}}, claim(1, "n0", "GPU1 (0000:0f:00.0)")};
    const auto s = shared_gpus(c);
    assert_int_equal(s.size(), 1);
    assert_str(s[0].gpu, "0000:0f:00.0");
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(local_rank_selects_its_place),
        cmocka_unit_test(local_rank_past_the_list_is_named_with_the_fix),
        cmocka_unit_test(bus_id_from_the_description),
        cmocka_unit_test(own_gpus_share_nothing),
        cmocka_unit_test(same_bus_id_on_one_host_is_shared),
        cmocka_unit_test(three_ranks_on_one_gpu),
        cmocka_unit_test(other_host_ids_never_share),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
