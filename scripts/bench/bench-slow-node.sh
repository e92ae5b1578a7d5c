#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One slow node among many (CPU path): how long mn-preflight takes to name
# it, beside the same check with every node healthy, in one run.
#
#   scripts/bench/bench-slow-node.sh [NODES [MBIT]]     default: 32 nodes, 20 Mbit/s
#
# Starts the local cluster with NODES nodes (scripts/cluster/local-cluster.sh,
# holding /tmp/mn-cluster.lock), runs `srun -N NODES --mn-nccl=auto
# mn-preflight` healthy, then with the last node's link limited to MBIT by
# tc tbf both ways, and prints both verdicts' times, the nodes named in the
# problems and whether anyone else was blamed. Exits non-zero unless the
# healthy run passes and the slow run fails naming the slow node alone.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=$(pwd)
nodes=${1:-32}
mbit=${2:-20}
slow=$((nodes - 1))
[ "$(id -u)" -eq 0 ] || { echo "bench-slow-node: run as root (namespaces, tc)" >&2; exit 2; }
[ -x helper/mn-preflight ] || { echo "bench-slow-node: build first (bash scripts/build.sh)" >&2; exit 2; }

exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
export MN_CLUSTER_NODES=$nodes
unslow() {
  tc qdisc del dev "mnv$slow" root 2>/dev/null
  ip netns exec "node$slow" tc qdisc del dev eth0 root 2>/dev/null
}
trap 'unslow; bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1' EXIT
bash scripts/cluster/local-cluster.sh start >/dev/null || { echo "bench-slow-node: the cluster did not start"; exit 1; }
eval "$(bash scripts/cluster/local-cluster.sh env)"
out=$(mktemp -d /tmp/mn-slow.XXXXXX)

# check LABEL: one check over every node; its output in $out/LABEL.
check() {
  local t0 t1
  t0=$(date +%s.%N)
  timeout 180 srun -N"$nodes" --ntasks-per-node=1 --mn-nccl=auto "$top/helper/mn-preflight" >"$out/$1" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  secs=$(python3 -c "print(round($t1 - $t0, 2))")
  named=$(sed -n 's/^problem: \([^:]*\):.*/\1/p' "$out/$1" | sort -u | paste -sd,)
  printf '%-8s exit %d in %6.2f s from launch; nodes named in problems: %s\n' "$1" "$rc" "$secs" "${named:-none}"
}

echo "== $nodes nodes, one task each; node$slow limited to $mbit Mbit/s in the second run (this machine: $(nproc) cores)"
check healthy
healthy_rc=$rc healthy_s=$secs
tc qdisc add dev "mnv$slow" root tbf rate "${mbit}mbit" burst 32kbit latency 100ms
ip netns exec "node$slow" tc qdisc add dev eth0 root tbf rate "${mbit}mbit" burst 32kbit latency 100ms
check slow
slow_rc=$rc slow_s=$secs slow_named=$named
unslow
grep -E "^(problem|FAIL|PASS)" "$out/slow" | head -5
echo "-- verdict time: healthy $healthy_s s, with node$slow at $mbit Mbit/s $slow_s s, ratio $(python3 -c "print(round($slow_s / $healthy_s, 2))")"
ok=1
[ "$healthy_rc" = 0 ] || { echo "RESULT FAIL: the healthy check did not pass"; ok=0; sed 's/^/  | /' "$out/healthy" | tail -8; }
[ "$slow_rc" = 1 ] && [ "$slow_named" = "node$slow" ] ||
  { echo "RESULT FAIL: expected exit 1 naming node$slow alone, got exit $slow_rc naming ${slow_named:-none}"; ok=0; }
rm -rf "$out"
[ $ok = 1 ] && echo "RESULT PASS: node$slow named alone"
[ $ok = 1 ]
