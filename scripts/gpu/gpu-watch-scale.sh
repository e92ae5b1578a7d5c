#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hang watch at scale (issue 39, item 7): MN_SCALE_NODES slurmd x
# MN_SCALE_TASKS tasks (default 32 x 256 = 8,192 tasks, 1,024 x 8 as the
# tasks go) of scripts/cluster/gpu-cluster.sh's Slurm on one device-tool
# machine, each task a program under mn-preflight watch --abort. Once every
# task runs: MN_SCALE_QUIET seconds (30) in which nobody may be named, the
# watchers' CPU measured meanwhile; then task MN_SCALE_VICTIM (5000) is
# stopped (SIGSTOP), and the step must end with one block, rank 0's, naming
# that rank on its node. Prints one line per measure and "watch-scale: PASS"
# or "watch-scale: FAIL (why)".
#   run: cp .device/build/mn-preflight helper/ && mkdir -p spank/.libs &&
#        cp .device/build/mn_nccl.so spank/.libs/ && <sysctls below> && bash scripts/gpu/gpu-watch-scale.sh
#   carry: .device (slurm/ from scripts/cluster/fetch-slurm-bundle.sh, build/ stripped)
#   sysctl -w kernel.pid_max=4194304 kernel.threads-max=4194304
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
R=${OUT:-/tmp/mn-gpu-watch-scale}
mkdir -p "$R"
nodes=${MN_SCALE_NODES:-32} per=${MN_SCALE_TASKS:-256} victim=${MN_SCALE_VICTIM:-5000}
window=${MN_SCALE_WINDOW:-10} quiet=${MN_SCALE_QUIET:-30}
total=$((nodes * per))
source scripts/cluster/slurm-bundle-env.sh
export MN_GPU_CLUSTER_CPU_NODES=$nodes MN_GPU_CLUSTER_CPU_NODE_CPUS=$per
trap 'bash "$top/scripts/cluster/gpu-cluster.sh" stop >/dev/null 2>&1' EXIT
t0=$(date +%s)
bash scripts/cluster/gpu-cluster.sh start >"$R/cluster.log" 2>&1
for _ in $(seq 90); do
  [ "$(sinfo -h -N -p cpu -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" = "$nodes" ] && break
  sleep 2
done
echo "watch-scale: $nodes nodes x $per tasks = $total tasks; $(nproc) cores; cluster up in $(($(date +%s) - t0)) s"
pids=$(mktemp -d /tmp/mn-watch-pids.XXXXXX)
chmod 777 "$pids"
fail() { echo "watch-scale: FAIL ($*)"; exit 1; }
launch=$(date +%s.%N)
timeout 900 srun -p cpu -N"$nodes" --ntasks-per-node="$per" --mn-nccl=auto \
  "$top/helper/mn-preflight" watch --abort --window "$window" -- \
  sh -c 'echo $$ >"'"$pids"'/pid.$SLURM_PROCID"; exec sleep 1200' >"$R/step.out" 2>&1 &
spid=$!
for _ in $(seq 600); do
  [ "$(ls "$pids" | wc -l)" -ge "$total" ] && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 1
done
up=$(ls "$pids" | wc -l)
echo "watch-scale: $up of $total tasks running $(awk -v a="$launch" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}') s after launch"
[ "$up" -ge "$total" ] || fail "only $up tasks started; $(tail -3 "$R/step.out")"
# The watchers' CPU over the quiet window: every mn-preflight watch process.
ticks() { cat /proc/[0-9]*/stat 2>/dev/null | awk '$2 == "(mn-preflight)" {n++; t += $14 + $15} END {print n + 0, t + 0}'; }
read -r n1 c1 < <(ticks)
sleep "$quiet"
read -r n2 c2 < <(ticks)
hz=$(getconf CLK_TCK)
named=$(grep -c 'mn-nccl watch: ' "$R/step.out")
awk -v n="$n2" -v c="$((c2 - c1))" -v hz="$hz" -v q="$quiet" 'BEGIN {
  printf "watch-scale: quiet %d s: %d watchers used %.2f s of CPU: %.4f %% of a core each, %.3f %% for 8 on a node\n",
    q, n, c / hz, 100 * c / hz / q / n, 800 * c / hz / q / n }'
echo "watch-scale: blocks said while every task ran: $named"
[ "$named" = 0 ] || fail "named while healthy: $(grep -m3 'mn-nccl watch: ' "$R/step.out")"
vpid=$(cat "$pids/pid.$victim")
stop=$(date +%s.%N)
kill -STOP "$vpid"
wait "$spid"
rc=$?
end=$(date +%s.%N)
kill -CONT "$vpid" 2>/dev/null
first=$(grep -m1 -n 'mn-nccl watch: process stopped' "$R/step.out")
blocks=$(grep -c 'mn-nccl watch: process stopped' "$R/step.out")
# Every watch line but the block's own.
grep 'mn-nccl watch: ' "$R/step.out" | grep -v 'process stopped\|  evidence\|  report\|  --abort\|  Flight' >"$R/others"
others=$(wc -l <"$R/others")
echo "watch-scale: rank $victim (pid $vpid) stopped; the step ended $(awk -v a="$stop" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s later (rc $rc); blocks naming it: $blocks; other watch lines: $others"
grep 'mn-nccl watch: ' "$R/step.out" | head -8
grep -q "mn-nccl watch: process stopped: c[0-9]* rank $victim (LOCAL_RANK [0-9]*), pid $vpid" "$R/step.out" ||
  fail "rank $victim not named: $(grep -m3 'mn-nccl watch' "$R/step.out")"
[ "$blocks" = 1 ] || fail "$blocks blocks named it"
[ "$others" = 0 ] || fail "other watch lines: $(head -3 "$R/others")"
rm -rf "$pids"
echo "watch-scale: PASS"
