#!/usr/bin/env bash
# The main job: installs what is missing, builds, starts the local 3-node
# Slurm, submits scripts/jobs/example-job.sbatch (mn-preflight's check of the
# nodes, a real `srun --mn-nccl=auto` PyTorch all-reduce, then the same
# through torchrun), shows its output and stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
bash scripts/install-deps.sh
bash scripts/build.sh
# One local cluster at a time on a machine (fixed bridge and addresses).
exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
trap 'bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1' EXIT
bash scripts/cluster/local-cluster.sh plugstack optional default=off
bash scripts/cluster/local-cluster.sh start
export SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf
# Workarounds for Debian's torch builds (not the plugin's business).
source "scripts/torch/debian-torch.sh"
out=$(mktemp /tmp/mn-demo.XXXXXX)
echo "== sbatch scripts/jobs/example-job.sbatch"
rc=0
# The local nodes' GPUs are device files without a CUDA driver: a job that
# asks for them is rightly warned by the check ("the step asked for 2 GPUs
# here, but the node has no CUDA driver"). This cluster has no usable GPUs,
# so the demo asks for none and runs on CPUs; on a GPU cluster the script's
# --gres=gpu:2 stands (the command line wins over #SBATCH lines). Without
# GPUs torchrun starts one worker per node: 6 ranks by srun, 3 under it.
MN_PREFLIGHT=$top/helper/mn-preflight MN_NCCL_DEMO_SCRIPT=$top/scripts/torch/allreduce.py \
  sbatch --gres=gpu:0 --wait -o "$out" scripts/jobs/example-job.sbatch || rc=$?
sed -e '/^\*\*\*\*/d' -e '/OMP_NUM_THREADS/d' -e '/^WARNING:torch.distributed.run:$/d' "$out"
ok=$(grep -c 'ALLREDUCE .* ok=1' "$out" || true)
preflight=$(grep -c '^PASS' "$out" || true)
rm -f "$out"
echo "== mn-preflight: $([ "$preflight" = 1 ] && echo PASS || echo 'no PASS'); $ok of 9 ranks finished the all-reduce with the right sum (6 by srun, 3 under torchrun, one per node without GPUs); sbatch exit $rc"
[ "$rc" -eq 0 ] && [ "$ok" -eq 9 ] && [ "$preflight" = 1 ]
