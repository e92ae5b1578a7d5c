#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What --mn-preflight adds to a healthy step: times
#   srun -N3 -n6 --mn-nccl=auto true                      (the step alone)
#   srun -N3 -n6 --mn-nccl=auto --mn-preflight[=OPTS] true (check, then exec)
# interleaved (so drift hits both alike) on the running local cluster (CPU
# path: TCP ring), and prints both medians, the time added and the ratio.
# On Slurm without spank_prepend_task_argv (before 24.11) it times what the
# plugin would put in front of each task instead, `mn-preflight check --exec
# -- true`, and says so.
#   scripts/bench/bench-inline.sh [ROUNDS] [PREFLIGHT-OPTIONS]   (default 9, "")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
rounds=${1:-9}
opts=${2:-}
export SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf
sinfo -h >/dev/null 2>&1 || { echo "bench-inline: no cluster; run scripts/cluster/local-cluster.sh start" >&2; exit 2; }
PF=${MN_PREFLIGHT:-$top/helper/mn-preflight}
bash "$top/scripts/cluster/local-cluster.sh" plugstack required "preflight=$PF" >/dev/null
ver=$(srun --version | awk '{print $2}')
major=${ver%%.*} minor=${ver#*.}
minor=$((10#${minor%%.*}))
step=(srun -N3 -n6 --mn-nccl=auto)
if [ "$major" -gt 24 ] || { [ "$major" -eq 24 ] && [ "$minor" -ge 11 ]; }; then
  form="--mn-preflight${opts:+=$opts}"
  checked=("${step[@]}" "$form" true)
else
  form="mn-preflight check --exec (Slurm $ver has no spank_prepend_task_argv)"
  args=()
  IFS=, read -ra kv <<<"$opts"
  for o in "${kv[@]}"; do args+=("--${o%%=*}"); [[ $o == *=* ]] && args+=("${o#*=}"); done
  checked=("${step[@]}" "$PF" check --exec "${args[@]}" -- true)
fi
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s%N); echo $(((t1 - t0) / 1000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
"${step[@]}" true >/dev/null 2>&1  # warm caches on every node
plain=() with=()
for ((i = 0; i < rounds; i++)); do
  plain+=("$(ms "${step[@]}" true)")
  with+=("$(ms "${checked[@]}")")
done
# One more checked step, to say whether the check passed.
bad=0
"${checked[@]}" >/dev/null 2>&1 || bad=1
m0=$(printf '%s\n' "${plain[@]}" | median)
m1=$(printf '%s\n' "${with[@]}" | median)
awk -v a="$m0" -v b="$m1" -v n="$rounds" -v f="$form" -v v="$ver" -v bad="$bad" 'BEGIN {
  printf "Slurm %s, 3 nodes, 6 tasks, CPU path, %d rounds interleaved\n", v, n
  printf "  median, srun --mn-nccl=auto true: %8.1f ms\n", a / 1000
  printf "  median, the same with %s: %8.1f ms\n", f, b / 1000
  printf "  added by the check: %.1f ms, ratio with/without %.2f\n", (b - a) / 1000, b / a
  if (bad) printf "  WARNING: a checked step failed (see it with the same command by hand)\n"
}'
