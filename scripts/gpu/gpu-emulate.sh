#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --mn-emulate-nodes with a Slurm-aware framework on real GPUs (device tool):
#   run: bash scripts/gpu/gpu-emulate.sh   carry: .device spank/.libs
# (nvidia-h200-x2 for K=2 on 2 GPUs; nvidia-h200-x4 adds K=4 on 4 GPUs and
# K=2 of 2 GPUs each; on one GPU, two emulated nodes share it.)
# Starts a real Slurm there (scripts/cluster/gpu-cluster.sh) and runs
# scripts/torch/lightning_fit.py, a Lightning DDP fit that takes its layout from
# Slurm's variables, on the node "big" (every GPU of the machine):
#   1. before: the same fit without --mn-emulate-nodes' Slurm view would be
#      refused by Lightning; shown with --mn-nccl alone on 2 tasks;
#   2. K=2 on 2 GPUs: srun -N1 -n2 --gres=gpu:2 --mn-nccl=auto --mn-emulate-nodes=2;
#   3. K=4 on 4 GPUs, and K=2 with 2 GPUs per emulated node (4 GPUs);
#   4. one GPU only: two tasks on the one GPU, one emulated node each
#      (NCCL_HOSTID distinct, so NCCL accepts two ranks on one GPU).
# Each run prints LIGHTNING_FIT PASS|FAIL with the transport NCCL used
# between emulated nodes (NET/Socket expected) and inside them; the last
# line sums up. Leaves NCCL_NVLS_ENABLE as the machine sets it.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-emulate}
mkdir -p "$R"
exec > >(tee "$R/emulate.txt") 2>&1
source scripts/cluster/slurm-bundle-env.sh
FIT=$TOP/scripts/torch/lightning_fit.py

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "== machine: $ngpu GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs); NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"
python3 -c '
import torch
try:
    import lightning as L
except ImportError:
    import pytorch_lightning as L
print("== torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())), "Lightning", L.__version__)' ||
  { echo "RESULT FAIL: torch or Lightning missing on this machine"; exit 2; }
[ "$ngpu" -ge 1 ] || { echo "RESULT FAIL: no GPU"; exit 2; }
bash scripts/cluster/gpu-cluster.sh start || exit 1
trap 'bash scripts/cluster/gpu-cluster.sh stop' EXIT

passed=0 failed=0
# fit LABEL SRUN-ARGS... -- FIT-ARGS...: one srun of the fit; counts PASS/FAIL.
fit() {
  local label=$1; shift
  local srun_args=() fit_args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srun_args+=("$1"); shift; done
  shift
  fit_args=("$@")
  echo; echo "== $label"
  echo "\$ srun ${srun_args[*]} python3 scripts/torch/lightning_fit.py ${fit_args[*]}"
  local log=$R/fit-$((passed + failed)).txt
  timeout 300 srun "${srun_args[@]}" python3 "$FIT" --nccl-log-dir "$R/nccl-$((passed + failed))" "${fit_args[@]}" >"$log" 2>&1
  local rc=$?
  grep -E '^(RANK |LIGHTNING_FIT )' "$log"
  if [ $rc -eq 0 ] && grep -q '^LIGHTNING_FIT PASS' "$log"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "exit $rc; the end of its output:"
    grep -vE '^(RANK |LIGHTNING_FIT )' "$log" | tail -15 | sed 's/^/  | /'
  fi
  # NCCL's own lines, as it printed them, for the record.
  cat "$R"/nccl-$((passed + failed - 1))/nccl.*.log 2>/dev/null |
    grep -oE '[0-9]+\[[0-9]+\] -> [0-9]+\[[0-9]+\] (\[(send|receive)\] )?via [A-Za-z0-9/]+' | sed 's/^.*via /via /' |
    sort | uniq -c | sed 's/^/  NCCL channels: /'
}

echo; echo "== 1. control: 2 tasks on one node, --mn-nccl without emulation; Lightning is told num_nodes=2"
timeout 300 srun -w big -N1 -n2 --gres=gpu:$(( ngpu >= 2 ? 2 : 1 )) --mn-nccl=auto python3 "$FIT" --devices 1 --num-nodes 2 \
  >"$R/control.txt" 2>&1
echo "exit $? (non-zero expected); Lightning says:"
grep -oE '(You set `--ntasks=[^.]*\.|You set `devices=[^.]*\.|You set `num_nodes=[^.]*\.)' "$R/control.txt" | sort -u | sed 's/^/  /'

if [ "$ngpu" -ge 2 ]; then
  fit "2. K=2 on 2 GPUs: 2 emulated nodes x 1 GPU" \
    -w big -N1 -n2 --gres=gpu:2 --mn-nccl=auto --mn-emulate-nodes=2 -- --devices 1 --num-nodes 2
fi
if [ "$ngpu" -ge 4 ]; then
  fit "3a. K=4 on 4 GPUs: 4 emulated nodes x 1 GPU" \
    -w big -N1 -n4 --gres=gpu:4 --mn-nccl=auto --mn-emulate-nodes=4 -- --devices 1 --num-nodes 4
  fit "3b. K=2 on 4 GPUs: 2 emulated nodes x 2 GPUs" \
    -w big -N1 -n4 --gres=gpu:4 --mn-nccl=auto --mn-emulate-nodes=2 -- --devices 2 --num-nodes 2
fi
if [ "$ngpu" -eq 1 ]; then
  # The plugin splits the GPUs Slurm gives K ways, and one GPU does not
  # split: give the step none (no --gres), so both tasks see the machine's
  # one GPU, each as its own emulated node with its own NCCL_HOSTID.
  fit "4. one GPU shared by 2 emulated nodes (no --gres: both tasks see GPU 0)" \
    -w big -N1 -n2 --mn-nccl=auto --mn-emulate-nodes=2 -- --devices 1 --num-nodes 2
fi

echo
echo "RESULT $([ $failed -eq 0 ] && [ $passed -gt 0 ] && echo PASS || echo FAIL): $passed passed, $failed failed ($ngpu GPUs)"
[ $failed -eq 0 ] && [ $passed -gt 0 ]
