#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine: mn-preflight opens, in each rank, the GPU
# the program would (task mode: CUDA's device LOCAL_RANK) and names a rank
# whose GPU is unreachable or shared (issue 19), under the real Slurm of
# scripts/cluster/gpu-cluster.sh, on one GPU:
#   unreachable  2 tasks, --gres=gpu:1, Slurm's own variables
#                (MN_NCCL_GPUS=slurm): rank 1's LOCAL_RANK 1 is past its
#                one GPU, as torch.cuda.set_device(1) would be
#   shared       the same with LOCAL_RANK=0 in both: one GPU, two ranks
#   alone        1 task: PASS (the control)
#   run: bash scripts/gpu/gpu-claims.sh   carry: .device spank/.libs helper/mn-preflight
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-claims}
mkdir -p "$R"
exec > >(tee "$R/claims.txt") 2>&1
source scripts/gpu/gpu-env.sh

section() {
  local name=$1
  shift
  echo "== $name"
  timeout 120 "$@" >"$R/$name.txt" 2>&1
  echo "   exit $?"
  grep -E '^(host|n0|n1|problem|PASS|FAIL)|no GPU path|share a GPU' "$R/$name.txt" | head -10 | sed 's/^/   /'
}

section unreachable env MN_NCCL_GPUS=slurm srun -w n0 -N1 -n2 --gres=gpu:1 --mn-nccl=auto "$PF" --timeout 60
section shared env MN_NCCL_GPUS=slurm srun -w n0 -N1 -n2 --gres=gpu:1 --mn-nccl=auto bash -c "LOCAL_RANK=0 exec $PF --timeout 60"
section alone srun -w n0 -N1 -n1 --gres=gpu:1 --mn-nccl=auto "$PF" --timeout 60
