#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# srun --mn-preflight on a GPU machine, under the Slurm 24.11 bundle (the
# release with spank_prepend_task_argv): the inline check on the GPU path,
# then PyTorch's NCCL all-reduce in the same step; the time the option adds
# to a healthy step, interleaved with the same step without it; and, with
# two GPUs or more, one node's GPU held by another process (FAIL, the
# program never starts, the exclude file names that node).
#   prepare (CPU machine): bash scripts/cluster/fetch-slurm-bundle.sh trixie
#   run (device tool):     bash scripts/gpu/gpu-inline.sh [ROUNDS]
#                          carry: .device/slurm-trixie .device/build-trixie
set -uo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-7}
export MN_SLURM_BUNDLE=$PWD/.device/slurm-trixie MN_PLUGIN=$PWD/.device/build-trixie/mn_nccl.so
PF=$PWD/.device/build-trixie/mn-preflight
export MN_PLUGSTACK_ARGS="preflight=$PF"
source scripts/cluster/slurm-bundle-env.sh
[ -x "$PF" ] || { echo "gpu-inline: $PF missing: run scripts/cluster/fetch-slurm-bundle.sh trixie and carry .device" >&2; exit 2; }
srun --version
bash scripts/cluster/gpu-cluster.sh start || { tail -30 /tmp/mn-gpu-cluster/log/*; exit 1; }
trap 'bash scripts/cluster/gpu-cluster.sh stop' EXIT
ngpu=$(nvidia-smi -L | grep -c '^GPU')
# Its files come back from the device tool under $OUT.
W=${OUT:-/tmp}/mn-gpu-inline
rm -rf "$W" && mkdir -p "$W"
step=(srun -w big -N1 -n"$ngpu" --gres=gpu:"$ngpu" --mn-nccl=auto)
result=0
verdict() { echo "RESULT $1: $2"; [ "$1" = PASS ] || result=1; }

echo "== 1. healthy: the check on $ngpu GPUs of one node, then PyTorch's NCCL all-reduce in the same step"
t0=$(date +%s.%N)
"${step[@]}" --mn-preflight python3 scripts/torch/torch_allreduce.py 2>&1 | tee "$W/pass.log"
rc=${PIPESTATUS[0]}
echo "exit $rc, launch to exit $(python3 -c "import time; print(round(time.time()-$t0,2))") s"
[ "$rc" = 0 ] && [ "$(grep -c '^PASS' "$W/pass.log")" = 1 ] && grep -q 'all-reduce (gpu, NCCL' "$W/pass.log" &&
  grep -q '^TORCH .*correct=1' "$W/pass.log" && verdict PASS "inline GPU check passed once, then torch ran" ||
  verdict FAIL "inline GPU check then torch (rc=$rc)"

echo "== 2. the program's environment with and without the option (values that differ per step masked)"
prog='env | LC_ALL=C sort | sed -E "s/^(SLURM_JOB_ID|SLURM_JOBID|SLURM_STEP_ID|SLURM_STEPID|SLURM_TASK_PID|SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT|SLURM_JOB_START_TIME|SLURM_JOB_END_TIME|SLURM_JOB_SLUID|SLURM_JOB_NAME|MN_NCCL_STEP_SECRET|PET_RDZV_ID|TMPDIR|_)=.*/\1=*/; s/^/$SLURM_PROCID /"'
# Only the "RANK NAME=VALUE" lines: the check's table goes to the same stdout.
MASTER_PORT=29555 "${step[@]}" bash -c "$prog" 2>/dev/null | grep -E '^[0-9]+ ' | sort >"$W/env.plain"
MASTER_PORT=29555 "${step[@]}" --mn-preflight=no-pairs bash -c "$prog" 2>/dev/null | grep -E '^[0-9]+ ' | sort >"$W/env.checked"
if [ -s "$W/env.plain" ] && grep -q ' MASTER_PORT=29555$' "$W/env.checked" && diff "$W/env.plain" "$W/env.checked" >"$W/env.diff"; then
  verdict PASS "same environment ($(wc -l <"$W/env.plain") variable lines over $ngpu tasks)"
else
  verdict FAIL "environments differ ($(wc -l <"$W/env.plain") lines without, $(wc -l <"$W/env.checked") with the option):"
  diff "$W/env.plain" "$W/env.checked" | head -20
fi

echo "== 3. time added to a healthy step: $rounds rounds interleaved, srun ... true with and without --mn-preflight"
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
"${step[@]}" true >/dev/null 2>&1
plain=() with=()
for ((i = 0; i < rounds; i++)); do
  plain+=("$(ms "${step[@]}" true)")
  with+=("$(ms "${step[@]}" --mn-preflight true)")
done
m0=$(printf '%s\n' "${plain[@]}" | median)
m1=$(printf '%s\n' "${with[@]}" | median)
echo "  runs without (ms): ${plain[*]}"
echo "  runs with    (ms): ${with[*]}"
awk -v a="$m0" -v b="$m1" -v g="$ngpu" 'BEGIN {
  printf "  %d GPUs of one node: median without %.0f ms, with --mn-preflight %.0f ms; added %.0f ms (goal: under 2000), ratio %.2f\n", g, a, b, b - a, b / a }'
[ $((m1 - m0)) -lt 2000 ] && verdict PASS "added time under 2 s" || verdict FAIL "added time $((m1 - m0)) ms"

if [ "$ngpu" -ge 2 ]; then
  half=$((ngpu / 2))
  echo "== 4. n1's first GPU (physical GPU $half) held by another process: FAIL, the program never starts, n1 named"
  CUDA_VISIBLE_DEVICES=$half python3 -c '
import torch, time
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free * 0.97), dtype=torch.uint8, device="cuda")
print("HOG holds", round(x.numel() / 2**30, 1), "GiB", flush=True)
time.sleep(300)' &
  hog=$!
  sleep 8
  t0=$(date +%s.%N)
  srun -w n0,n1 -N2 --ntasks-per-node="$half" --gres=gpu:"$half" --mn-nccl=auto \
    --mn-preflight="timeout=30,exclude-file=$W/exclude" bash -c 'echo PROGRAM STARTED' 2>&1 | tee "$W/fail.log"
  rc=${PIPESTATUS[0]}
  echo "exit $rc, verdict after $(python3 -c "import time; print(round(time.time()-$t0,2))") s; exclude file: $(cat "$W/exclude" 2>/dev/null || echo '(none)')"
  kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
  [ "$rc" != 0 ] && ! grep -q 'PROGRAM STARTED' "$W/fail.log" && [ "$(grep -c '^FAIL' "$W/fail.log")" = 1 ] &&
    verdict PASS "held GPU: FAIL, program never started" || verdict FAIL "held GPU (rc=$rc)"
  [ "$(cat "$W/exclude" 2>/dev/null)" = n1 ] && verdict PASS "exclude file names n1 alone" ||
    verdict FAIL "exclude file '$(cat "$W/exclude" 2>/dev/null)' (want n1; before issue 10's fix the check may blame waiting ranks too)"
fi
echo "gpu-inline: $([ $result = 0 ] && echo PASS || echo FAIL)"
exit $result
