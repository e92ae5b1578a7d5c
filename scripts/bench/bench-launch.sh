#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the plugin adds to a step's launch: times `srun -N3 -n12 true` with and
# without --mn-nccl=auto, interleaved (so drift hits both alike), on the
# running local cluster, and prints the medians and their ratio.
#   scripts/bench/bench-launch.sh [ROUNDS]      (default 30)
set -euo pipefail
rounds=${1:-30}
export SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf
sinfo -h >/dev/null 2>&1 || { echo "bench-launch: no cluster; run scripts/cluster/local-cluster.sh start" >&2; exit 2; }
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
with=() without=()
srun -N3 -n12 --mn-nccl=auto true  # warm caches on every node
for ((i = 0; i < rounds; i++)); do
  without+=("$(ms srun -N3 -n12 true)")
  with+=("$(ms srun -N3 -n12 --mn-nccl=auto true)")
done
m0=$(printf '%s\n' "${without[@]}" | median)
m1=$(printf '%s\n' "${with[@]}" | median)
awk -v a="$m0" -v b="$m1" -v n="$rounds" 'BEGIN {
  printf "srun -N3 -n12 true, %d rounds interleaved\n", n
  printf "  median without --mn-nccl: %.1f ms\n", a / 1000
  printf "  median with --mn-nccl=auto: %.1f ms\n", b / 1000
  printf "  ratio with/without: %.3f (goal: at most 1.03)\n", b / a
}'
