#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine: real Flight Recorder dumps of the NCCL loop
# under the watch (scripts/torch/train_loop.py on n0 and n1 of
# scripts/cluster/gpu-cluster.sh), for the reader's fixtures: each rank's
# dump asked for through its pipe while both run (healthy), then rank 0's
# while rank 1 is stopped (rank 0 waiting in a collective). Copied to
# $OUT (fr_healthy_rank0, fr_healthy_rank1, fr_waiting_rank0), with the
# torch release and the Flight Recorder's variables its library knows.
#   run: bash scripts/gpu/gpu-fr-dumps.sh   carry: .device (slurm/, build/ as gpu-watch.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-fr}
mkdir -p "$R"
source scripts/gpu/gpu-env.sh
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
strings "$lib"/libtorch_cuda.so "$lib"/libtorch_cpu.so 2>/dev/null | grep -oE '^TORCH_(FR|NCCL)_[A-Z_]*(DUMP|TRACE|DEBUG|JSON|FR|PIPE)[A-Z_]*$' | sort -u
d=$R/pids; mkdir -p "$d"
BACKEND=nccl MN_WATCH_PIDS=$d STEPS=1000000 SLEEP=0.01 PG_TIMEOUT=60 timeout 100 \
  srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto "$PF" watch --window 30 -- python3 scripts/torch/train_loop.py >"$R/loop.txt" 2>&1 &
spid=$!
for _ in $(seq 600); do [ -s "$d/pid.1" ] && [ -s "$d/pid.0" ] && break; sleep 0.1; done
sleep 3
dir0=$(sed -n 's/^WATCHED rank=0 .*watch_dir=\([^ ]*\).*/\1/p' "$R/loop.txt")
dir1=$(sed -n 's/^WATCHED rank=1 .*watch_dir=\([^ ]*\).*/\1/p' "$R/loop.txt")
echo "dirs: $dir0 $dir1"; ls -la "$dir0" "$dir1"
# ask: write to RANK's pipe in DIR, wait for its dump, copy it as NAME.
ask() {
  local dir=$1 rank=$2 name=$3 i
  rm -f "$dir/fr_rank_$rank"
  timeout 5 sh -c "echo 1 > '$dir/fr_pipe_$rank.pipe'" || echo "no pipe $dir/fr_pipe_$rank.pipe"
  for i in $(seq 50); do [ -s "$dir/fr_rank_$rank" ] && break; sleep 0.2; done
  sleep 1
  cp "$dir/fr_rank_$rank" "$R/$name" 2>/dev/null && echo "$name: $(stat -c %s "$R/$name") bytes after $i looks" || echo "$name: none"
}
ask "$dir0" 0 fr_healthy_rank0
ask "$dir1" 1 fr_healthy_rank1
kill -STOP "$(cat "$d/pid.1")"
sleep 6
ask "$dir0" 0 fr_waiting_rank0
kill -CONT "$(cat "$d/pid.1")"
kill -KILL "$(cat "$d/pid.1")" "$(cat "$d/pid.0")" 2>/dev/null
wait $spid
tail -5 "$R/loop.txt"
python3 - "$R" <<'PY'
import pickle, sys, os
for n in ("fr_healthy_rank0", "fr_waiting_rank0"):
    p = os.path.join(sys.argv[1], n)
    if not os.path.exists(p): continue
    d = pickle.load(open(p, "rb"))
    print(n, "keys", sorted(d.keys()), "version", d.get("version"))
    e = d.get("entries", [])
    print(" entries", len(e))
    for x in e[-2:]:
        print(" ", {k: v for k, v in x.items() if k != "frames"})
PY
