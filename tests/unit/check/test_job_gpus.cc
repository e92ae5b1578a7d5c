// SPDX-License-Identifier: Apache-2.0
// Which GPUs a prolog checks, and which processes on them are foreign
// (issue 36: a node shared between jobs is never drained over another job).
#include "lib/check/job_gpus.h"

#include "tests/unit/unit.h"

using namespace mn;

namespace {

using Env = std::map<std::string, std::string>;

// slurmd's Prolog environment for a job with GPUs 1 and 3 of the node
// (23.11 sets both lists from the same indices).
void prolog_takes_the_jobs_gpus(void**) {
    auto g = job_gpus({{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_GPUS", "1,3"}, {"CUDA_VISIBLE_DEVICES", "1,3"}});
    assert_true(g.ok());
    assert_false(g->whole_node);
    assert_str(g->cuda_visible(), "1,3");
    assert_true(g->indices());
    assert_str(g->source, "SLURM_JOB_GPUS");
    assert_str(g->text(), "job 42's GPUs 1,3 (SLURM_JOB_GPUS)");
}

// gres.conf without the nvml env flag: only SLURM_JOB_GPUS; another
// release or flags: only CUDA_VISIBLE_DEVICES or GPU_DEVICE_ORDINAL.
void any_of_slurms_lists_will_do(void**) {
    auto g = job_gpus({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_GPUS", "0"}});
    assert_true(g.ok());
    assert_str(g->text(), "job 7's GPU 0 (SLURM_JOB_GPUS)");
    g = job_gpus({{"SLURM_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "2"}});
    assert_true(g.ok());
    assert_str(g->cuda_visible(), "2");
    assert_str(g->source, "CUDA_VISIBLE_DEVICES");
    g = job_gpus({{"SLURM_JOB_ID", "7"}, {"GPU_DEVICE_ORDINAL", "0,1"}});
    assert_true(g.ok());
    assert_str(g->cuda_visible(), "0,1");
}

// A job without GPUs on a GPU node: no GPU at all, never the node's.
void a_job_without_gpus_checks_none(void**) {
    auto g = job_gpus({{"SLURM_JOB_ID", "43"}});
    assert_true(g.ok());
    assert_false(g->whole_node);
    assert_true(g->ids.empty());
    assert_false(g->indices());
    assert_str(g->text(), "job 43 has no GPU on this node");
    g = job_gpus({{"SLURM_JOB_ID", "43"}, {"SLURM_JOB_GPUS", ""}});
    assert_true(g.ok());
    assert_true(g->ids.empty());
    assert_false(g->whole_node);
}

// MIG: CUDA_VISIBLE_DEVICES names the instances, SLURM_JOB_GPUS the parent.
void mig_instances_come_from_cuda_visible_devices(void**) {
    const std::string mig = "MIG-1b2c3d4e-aaaa-bbbb-cccc-0123456789ab";
    auto g = job_gpus({{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", mig}});
    assert_true(g.ok());
    assert_str(g->cuda_visible(), mig);
    assert_false(g->indices());
}

// HealthCheckProgram or an admin's shell: the node's GPUs are all free to check.
void no_job_checks_the_whole_node(void**) {
    auto g = job_gpus({});
    assert_true(g.ok());
    assert_true(g->whole_node);
    assert_str(g->cuda_visible(), "");
    assert_contains(g->text(), "every GPU of the node (no job: SLURM_JOB_ID unset)");
    // A stray SLURM_JOB_GPUS without a job is not a job's.
    g = job_gpus({{"SLURM_JOB_GPUS", "1"}});
    assert_true(g.ok());
    assert_true(g->whole_node);
    assert_true(g->ids.empty());
}

void garbage_is_named_not_guessed(void**) {
    auto g = job_gpus({{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_GPUS", "1;rm -rf /"}});
    assert_false(g.ok());
    assert_contains(g.problem().what, "SLURM_JOB_GPUS='1;rm -rf /'");
    g = job_gpus({{"SLURM_JOB_ID", "x"}});
    assert_false(g.ok());
    assert_contains(g.problem().what, "SLURM_JOB_ID='x'");
}

void a_process_job_from_its_cgroup_or_environment(void**) {
    assert_str(job_of_process("0::/system.slice/slurmstepd.scope/job_41/step_0/user/task_0\n", ""), "41");
    assert_str(job_of_process("12:devices:/slurm/uid_1000/job_1234/step_batch\n0::/\n", ""), "1234");
    // linuxproc, no cgroup of Slurm's: the environment says.
    const char environ_bytes[] = "HOME=/root\0SLURM_JOB_ID=77\0PATH=/bin";
    const std::string environ_text(environ_bytes, sizeof environ_bytes - 1);
    assert_str(job_of_process("0::/user.slice\n", environ_text), "77");
    assert_str(job_of_process("0::/user.slice\n", std::string("A=1\0B=2", 7)), "");
    // Not a job's cgroup, whatever its name holds.
    assert_str(job_of_process("0::/system.slice/myjob_5.service\n", ""), "");
    assert_str(job_of_process("0::/system.slice/job_/x\n", ""), "");
}

void foreign_processes(void**) {
    JobGpus b;
    b.job_id = "42";
    b.ids = {"1"};
    assert_int_equal(static_cast<int>(gpu_user(100, "", 100, b)), static_cast<int>(GpuUser::this_check));
    assert_int_equal(static_cast<int>(gpu_user(200, "42", 100, b)), static_cast<int>(GpuUser::this_job));
    // Job A's process on job B's GPU: A strays, the node is not at fault.
    assert_int_equal(static_cast<int>(gpu_user(300, "41", 100, b)), static_cast<int>(GpuUser::other_job));
    // Nobody's: left behind by an ended job, or a daemon: the GPU is not free.
    assert_int_equal(static_cast<int>(gpu_user(400, "", 100, b)), static_cast<int>(GpuUser::no_job));
    JobGpus node;
    node.whole_node = true;
    assert_int_equal(static_cast<int>(gpu_user(300, "41", 100, node)), static_cast<int>(GpuUser::other_job));
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prolog_takes_the_jobs_gpus),
        cmocka_unit_test(any_of_slurms_lists_will_do),
        cmocka_unit_test(a_job_without_gpus_checks_none),
        cmocka_unit_test(mig_instances_come_from_cuda_visible_devices),
        cmocka_unit_test(no_job_checks_the_whole_node),
        cmocka_unit_test(garbage_is_named_not_guessed),
        cmocka_unit_test(a_process_job_from_its_cgroup_or_environment),
        cmocka_unit_test(foreign_processes),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
