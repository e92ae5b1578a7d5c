#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's main job, scripts/jobs/example-job.sbatch, through sbatch on
# the local cluster with the plugstack line the package installs (what
# scripts/demo.sh shows): mn-preflight first, then 6 ranks by srun and 6
# under torchrun all-reduce over gloo. The job asks for --gres=gpu:2 and the
# local nodes hand out GPUs without a CUDA driver: the check says so for
# each node and passes on the CPU path.
source "$(dirname "$0")/lib.sh"
plugstack optional default=off

t_example_job() {
  local name="scripts/jobs/example-job.sbatch (3 nodes x 2 tasks, --gres=gpu:2): mn-preflight PASS with a no-driver warning per node, then 12 of 12 ranks all-reduce the right sum"
  MN_PREFLIGHT=$TOP/helper/mn-preflight MN_NCCL_DEMO_SCRIPT=$ALLREDUCE \
    run sbatch --wait -o "$OUT/job" "$TOP/scripts/jobs/example-job.sbatch"
  cat "$OUT/job" >>"$OUT/last" 2>/dev/null
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(count 'ALLREDUCE .* ok=1')" = 12 ] &&
    [ "$(count '^note: warning: node[0-2]: fingerprint: the step asked for 2 GPUs here, but the node has no CUDA driver')" = 3 ] ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

run_checks
