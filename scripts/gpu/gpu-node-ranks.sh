#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One task per node on real GPUs, with nothing but --mn-nccl=auto (issue 30):
# a plain PyTorch NCCL program gets its RANK/WORLD_SIZE; a wrapper that
# starts torchrun still gets node mode's PET_* (torchrun gives its workers
# their own ranks); Lightning's SLURMEnvironment fits; mn-preflight with one
# task on a 2-GPU node drives both GPUs (node mode's PET_* tell it so).
#   OUT=DIR bash scripts/gpu/gpu-node-ranks.sh     (device tool: carry .device spank/.libs helper/mn-preflight)
# Ends with "gpu-node-ranks: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-node-ranks}
mkdir -p "$R"
source scripts/cluster/slurm-bundle-env.sh
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
bash scripts/cluster/gpu-cluster.sh start || exit 1
ngpu=$(nvidia-smi -L | grep -c '^GPU')
passed=0 failed=0
# case LABEL PATTERN COUNT SRUN-ARGS...: passes when the step exits 0 and
# COUNT lines of its output match PATTERN.
case_of() {
  local label=$1 pattern=$2 want=$3; shift 3
  echo; echo "== $label"; echo "\$ srun $*"
  timeout 300 srun "$@" >"$R/out.txt" 2>&1
  local rc=$? got; got=$(grep -cE "$pattern" "$R/out.txt")
  grep -E "$pattern|^(PASS|FAIL|problem)|rror" "$R/out.txt" | head -12
  if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then passed=$((passed + 1)); echo "-- ok"
  else failed=$((failed + 1)); echo "-- FAILED (rc=$rc, $got of $want lines)"; tail -20 "$R/out.txt"; fi
}
one=(-w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto)
case_of "plain PyTorch (NCCL, env://), one task per node" 'TORCH ranks=2 .*correct=1' 1 \
  "${one[@]}" python3 scripts/torch/torch_allreduce.py $((64 << 20)) 10
case_of "a wrapper that starts torchrun, one task per node (2 launchers x 1 GPU)" 'TORCH ranks=2 .*correct=1' 1 \
  "${one[@]}" bash -c 'exec python3 -m torch.distributed.run scripts/torch/torch_allreduce.py 67108864 10'
case_of "Lightning DDP, Trainer(devices=1, num_nodes=2), one task per node" '^LIGHTNING_FIT PASS' 1 \
  "${one[@]}" python3 scripts/torch/lightning_fit.py --devices 1 --num-nodes 2 --no-require-net --nccl-log-dir "$R/nccl"
if [ "$ngpu" -ge 2 ]; then
  case_of "mn-preflight, one task on big with 2 GPUs: both driven, the pair between them tested" '^big +0 +2 ' 1 \
    -w big -N1 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl=auto "$TOP/helper/mn-preflight"
fi
bash scripts/cluster/gpu-cluster.sh stop >/dev/null 2>&1
echo; echo "gpu-node-ranks: $passed passed, $failed failed"
[ $failed -eq 0 ]
