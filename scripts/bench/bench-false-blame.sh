#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# No healthy node blamed under noise (issue 18): on the local cluster of
# NODES nodes, R healthy checks and R checks with the last node's link at
# MBIT (tc tbf both ways), with 1 and then 8 tasks per node; optionally
# with CPU hogs beside the cluster, as on a shared machine.
#
#   scripts/bench/bench-false-blame.sh [R [NODES [MBIT]]]   default: 10 runs, 32 nodes, 20 Mbit/s
#   MN_BENCH_HOGS=N      N busy loops beside the cluster (default 0)
#   MN_BENCH_TASKS="1 8" the tasks per node to run (default both)
#   MN_BENCH_SLOW_EVERY=K a slow check after every K-th healthy one only
#                        (default 1: after each), for long healthy series
#
# Prints a line per check (exit, time from launch, nodes named in the
# problems) and a summary per tasks-per-node: healthy FAILs, how often the
# slow node was named, every other node ever named, median verdict times.
# Exits non-zero unless no healthy check failed, the slow node was named in
# every slow check and nobody else ever was. Holds /tmp/mn-cluster.lock.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=$(pwd)
runs=${1:-10}
nodes=${2:-32}
mbit=${3:-20}
slow=$((nodes - 1))
[ "$(id -u)" -eq 0 ] || { echo "bench-false-blame: run as root (namespaces, tc)" >&2; exit 2; }
[ -x helper/mn-preflight ] || { echo "bench-false-blame: build first (bash scripts/build.sh)" >&2; exit 2; }

exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
export MN_CLUSTER_NODES=$nodes
hogs=()
unslow() {
  tc qdisc del dev "mnv$slow" root 2>/dev/null
  ip netns exec "node$slow" tc qdisc del dev eth0 root 2>/dev/null
}
cleanup() {
  unslow
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1
}
trap cleanup EXIT
bash scripts/cluster/local-cluster.sh start >/dev/null || { echo "bench-false-blame: the cluster did not start"; exit 1; }
eval "$(bash scripts/cluster/local-cluster.sh env)"
for _ in $(seq 1 "${MN_BENCH_HOGS:-0}"); do
  (while :; do :; done) &
  hogs+=($!)
done
out=$(mktemp -d /tmp/mn-blame.XXXXXX)
median() { python3 -c "import statistics, sys; v = [float(x) for x in sys.argv[1:]]; print(f'{statistics.median(v):.2f}' if v else '-')" "$@"; }

# check TASKS LABEL: one check over every node; sets rc, secs, named.
check() {
  local t0 t1 f="$out/$2"
  t0=$(date +%s.%N)
  timeout 300 srun -N"$nodes" --ntasks-per-node="$1" --mn-nccl=auto "$top/helper/mn-preflight" >"$f" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  secs=$(python3 -c "print(round($t1 - $t0, 2))")
  named=$(sed -n 's/^problem: \([^:]*\):.*/\1/p' "$f" | sort -u | paste -sd,)
  printf '  %-12s exit %d in %6.2f s; named: %s\n' "$2" "$rc" "$secs" "${named:-none}"
}

ok=1
echo "== $nodes nodes, node$slow at $mbit Mbit/s in the slow runs, $runs runs each, ${MN_BENCH_HOGS:-0} CPU hogs, this machine $(nproc) cores, $(date -u +%F)"
for tasks in ${MN_BENCH_TASKS:-1 8}; do
  echo "-- $tasks task(s) per node ($((nodes * tasks)) ranks), healthy and slow interleaved"
  hfail=0 found=0 slows=0 others="" ht=() st=()
  for r in $(seq 1 "$runs"); do
    check "$tasks" "healthy-$tasks-$r"
    [ $rc = 0 ] || { hfail=$((hfail + 1)); others="$others,$named"; grep -E '^(problem|note)' "$out/healthy-$tasks-$r" | head -4 | sed 's/^/      /'; }
    ht+=("$secs")
    [ $((r % ${MN_BENCH_SLOW_EVERY:-1})) = 0 ] || continue
    slows=$((slows + 1))
    tc qdisc add dev "mnv$slow" root tbf rate "${mbit}mbit" burst 32kbit latency 100ms
    ip netns exec "node$slow" tc qdisc add dev eth0 root tbf rate "${mbit}mbit" burst 32kbit latency 100ms
    check "$tasks" "slow-$tasks-$r"
    unslow
    st+=("$secs")
    [[ ",$named," == *",node$slow,"* ]] && [ $rc = 1 ] && found=$((found + 1))
    extra=$(tr ',' '\n' <<<"$named" | grep -vx "node$slow" | grep -v '^$' | paste -sd,)
    [ -z "$extra" ] || { others="$others,$extra"; grep -E '^problem' "$out/slow-$tasks-$r" | head -4 | sed 's/^/      /'; }
  done
  others=$(tr ',' '\n' <<<"$others" | grep -v '^$' | sort | uniq -c | awk '{print $2 " x" $1}' | paste -sd' ')
  echo "   summary, $tasks task(s) per node: healthy FAIL $hfail of $runs; node$slow named in $found of $slows;" \
    "others named: ${others:-none}; median verdict time healthy $(median "${ht[@]}") s, slow $(median "${st[@]}") s"
  [ $hfail = 0 ] && [ $found = "$slows" ] && [ -z "$others" ] || ok=0
done
rm -rf "$out"
[ $ok = 1 ] && echo "RESULT PASS: nobody healthy named, node$slow named every time" || echo "RESULT FAIL"
[ $ok = 1 ]
