#!/usr/bin/env bash
# On a device-tool GPU machine: no rank silent for long on the GPU path
# (issue 18), and the set_device(LOCAL_RANK) recipe with --gpus-per-task
# (issue 19), under the real Slurm of scripts/cluster/gpu-cluster.sh.
#   run: bash scripts/gpu/gpu-silent.sh   carry: .device spank/.libs helper/mn-preflight
# Sections:
#   stop1   rank 1 SIGSTOPped 5 s into a long NCCL all-reduce (1 GiB,
#           --iters 10000, --timeout 60): the verdict's time after the stop
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

# stopped RANK: a long check on n0,n1; RANK's process stopped 5 s in.
stopped() {
  local who=$1 d=$R/pids.$1
  rm -rf "$d"; mkdir -p "$d"
  srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto bash -c \
    "echo \$\$ > $d/\$SLURM_PROCID; exec $PF --size 1G --iters 10000 --timeout 60" >"$R/stop$who.txt" 2>&1 &
  local srun_pid=$!
  sleep 5
  local pid
  pid=$(cat "$d/$who" 2>/dev/null)
  local t0
  t0=$(now)
  [ -n "$pid" ] && kill -STOP "$pid"
  # The verdict's time: when a live rank prints the table's last line. The
  # stopped rank keeps srun waiting until it is resumed and ended.
  local t1=""
  for _ in $(seq 1 300); do
    grep -qE '^(PASS|FAIL)' "$R/stop$who.txt" && { t1=$(now); break; }
    sleep 0.1
  done
  echo "-- stop$who: rank $who (pid ${pid:-?}) stopped 5 s in; verdict $([ -n "$t1" ] && python3 -c "print(f'{$t1-$t0:.2f} s after the stop')" || echo "not within 30 s")"
  [ -n "$pid" ] && { kill -CONT "$pid" 2>/dev/null; sleep 2; kill "$pid" 2>/dev/null; }
  wait "$srun_pid"
  echo "   srun exit $?"
  grep -E '^(host|n0|n1|problem|PASS|FAIL|superseded)|stopped answering|all-reduce' "$R/stop$who.txt" | head -12
}

echo "== stop1: rank 1 stopped inside a long GPU all-reduce"
stopped 1
echo "== stop0: rank 0 stopped inside a long GPU all-reduce"
stopped 0

echo "== bind: --gpus-per-task=1 with set_device(LOCAL_RANK)"
for opt in "--gpus-per-task=1" "--gres=gpu:1 --gpu-bind=single:1" "--gres=gpu:1"; do
  echo "\$ srun -w n0,n1 -N2 --ntasks-per-node=1 $opt --mn-nccl=auto --mn-nccl-launch=task --mn-nccl-explain python3 scripts/torch/gpu_local_rank.py"
  # shellcheck disable=SC2086
  srun -w n0,n1 -N2 --ntasks-per-node=1 $opt --mn-nccl=auto --mn-nccl-launch=task --mn-nccl-explain python3 scripts/torch/gpu_local_rank.py 2>&1 |
    grep -E 'GPURANK|GPUCHECK|mn_nccl|rror' | head -10
  echo "exit ${PIPESTATUS[0]}"
done
