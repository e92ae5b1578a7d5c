#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine: no rank silent for long on the GPU path
# (issue 18), and the set_device(LOCAL_RANK) recipe with --gpus-per-task
# (issue 19), under the real Slurm of scripts/cluster/gpu-cluster.sh.
#   run: bash scripts/gpu/gpu-silent.sh   carry: .device spank/.libs helper/mn-preflight
# Sections:
#   stop1   rank 1 SIGSTOPped inside a long NCCL all-reduce (1 GiB,
#           --timeout 200: a 10 s budget): the verdict within 5 s, its node named
#   stop0   the same with rank 0 stopped: rank 1 gives the verdict
#   bind    srun --gpus-per-task=1 (and --gpu-bind=single:1) running
#           scripts/torch/gpu_local_rank.py, with --mn-nccl-explain
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-silent}
mkdir -p "$R"
exec > >(tee "$R/silent.txt") 2>&1
source scripts/gpu/gpu-env.sh
now() { date +%s.%N; }

# stopped RANK: a long check on n0,n1 (--timeout 200: the all-reduce's
# budget is 0.05 x that, 10 s); RANK's process stopped 2 s after rank 0
# says every rank is ready, inside the timed all-reduce. As it should: a
# live rank prints the verdict within 5 s of the stop, naming RANK's node
# as "stopped answering", and srun exits non-zero.
stopped() {
  local who=$1 d=$R/pids.$1 node=n$1 out=$R/stop$1.txt
  rm -rf "$d"; mkdir -p "$d"
  srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto bash -c \
    "echo \$\$ > $d/\$SLURM_PROCID; exec $PF --size 1G --iters 10000 --timeout 200" >"$out" 2>&1 &
  local srun_pid=$! pid="" t0="" t1="" _
  for _ in $(seq 1 300); do
    grep -q 'readiness: .* ranks set up' "$out" && break
    sleep 0.1
  done
  sleep 2
  pid=$(cat "$d/$who" 2>/dev/null)
  t0=$(now)
  [ -n "$pid" ] && kill -STOP "$pid"
  # The verdict's time: when a live rank prints the table's last line. The
  # stopped rank keeps srun waiting until it is resumed and ended.
  for _ in $(seq 1 300); do
    grep -qE '^(PASS|FAIL)' "$out" && { t1=$(now); break; }
    sleep 0.1
  done
  local secs=""
  [ -n "$t1" ] && secs=$(python3 -c "print(f'{$t1-$t0:.2f}')")
  echo "-- stop$who: rank $who (pid ${pid:-?}) stopped in the all-reduce; verdict $([ -n "$secs" ] && echo "$secs s after the stop" || echo "not within 30 s")"
  [ -n "$pid" ] && { kill -CONT "$pid" 2>/dev/null; sleep 2; kill "$pid" 2>/dev/null; }
  wait "$srun_pid"
  local rc=$?
  echo "   srun exit $rc"
  grep -E '^(host|n0|n1|problem|PASS|FAIL|superseded)|stopped answering|all-reduce' "$out" | head -12
  if [ -n "$pid" ] && [ -n "$secs" ] && python3 -c "import sys; sys.exit(0 if $secs <= 5 else 1)" &&
    [ "$rc" != 0 ] && grep -qE "^problem: $node: rank $who: stopped answering" "$out" &&
    [ "$(grep -c '^problem:' "$out")" = 1 ]; then
    echo "   as it should"
    good=$((good + 1))
  else
    echo "   NOT as it should (want: exit non-zero within 5 s, $node alone named 'stopped answering')"
    bad=$((bad + 1))
  fi
}

good=0 bad=0
echo "== stop1: rank 1 stopped inside a long GPU all-reduce"
stopped 1
echo "== stop0: rank 0 stopped inside a long GPU all-reduce"
stopped 0

echo "== bind: --gpus-per-task=1 with set_device(LOCAL_RANK)"
for opt in "--gpus-per-task=1" "--gres=gpu:1 --gpu-bind=single:1" "--gres=gpu:1"; do
  echo "\$ srun -w n0,n1 -N2 --ntasks-per-node=1 $opt --mn-nccl=auto --mn-nccl-launch=task --mn-nccl-explain python3 scripts/torch/gpu_local_rank.py"
  # shellcheck disable=SC2086
  srun -w n0,n1 -N2 --ntasks-per-node=1 $opt --mn-nccl=auto --mn-nccl-launch=task --mn-nccl-explain python3 scripts/torch/gpu_local_rank.py >"$R/bind.txt" 2>&1
  rc=$?
  grep -E 'GPURANK|GPUCHECK|mn_nccl|rror' "$R/bind.txt" | head -10
  echo "exit $rc"
  if [ $rc = 0 ] && grep -q '^GPUCHECK ranks=2 ok=1' "$R/bind.txt"; then good=$((good + 1)); else
    echo "   NOT as it should (want: exit 0, GPUCHECK ranks=2 ok=1)"
    bad=$((bad + 1))
  fi
done
echo
echo "RESULT $([ $bad = 0 ] && echo PASS || echo FAIL): $good of $((good + bad)) cases as they should"
[ $bad = 0 ]
