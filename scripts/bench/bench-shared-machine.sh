#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Healthy nodes that share one machine are never blamed (issue 41): the
# case as found, three ranks started by hand on 127.0.0.1 as three nodes
# (the variables srun and the plugin give them: SLURM_PROCID/NTASKS/NODEID/
# LOCALID, SLURMD_NODENAME and NCCL_HOSTID node0..2, SLURM_STEP_NODELIST,
# MASTER_ADDR/PORT, MN_NCCL_STEP_SECRET), `mn-preflight --cpu` with default
# options, RUNS checks in a row, nothing else run beside them.
#
#   scripts/bench/bench-shared-machine.sh [RUNS]      default 200
#   MN_BENCH_HOGS=N      N busy loops beside the ranks (default 0)
#   MN_BENCH_BUILDS="before=DIR after=DIR"   builds to compare, interleaved
#                        run by run (DIR/helper/mn-preflight); default this tree
#
# Prints a line per FAIL (its problems) and a summary per build: checks,
# PASS, FAIL naming a node, other FAILs, notes that left a node of the
# shared machine unjudged, the median check time. Exits non-zero when any
# healthy check of the last build failed. Talks only to 127.0.0.1.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
runs=${1:-200}
builds=${MN_BENCH_BUILDS:-"this=$(pwd)"}
for b in $builds; do
  [ -x "${b#*=}/helper/mn-preflight" ] || { echo "bench-shared-machine: no ${b#*=}/helper/mn-preflight: build first (bash scripts/build.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/mn-bench-shared.XXXXXX)
hogs=()
cleanup() {
  [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 "${MN_BENCH_HOGS:-0}"); do
  (while :; do :; done) &
  hogs+=($!)
done

declare -A pass blamed other unjudged times
for i in $(seq 1 "$runs"); do
  for b in $builds; do
    name=${b%%=*} pf=${b#*=}/helper/mn-preflight
    port=$((24000 + (i % 1000) * 3))  # below the ephemeral ports (32768-): no collision with a connection's own
    secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    pids=()
    t0=$(date +%s.%N)
    for r in 0 1 2; do
      env -i PATH=/usr/bin:/bin SLURM_PROCID=$r SLURM_NTASKS=3 SLURM_NODEID=$r SLURM_LOCALID=0 \
        SLURMD_NODENAME=node$r NCCL_HOSTID=node$r SLURM_STEP_NODELIST='node[0-2]' \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port MN_NCCL_STEP_SECRET="$secret" \
        "$pf" --cpu >"$work/out.$r" 2>"$work/err.$r" &
      pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    times[$name]+="$(echo "$(date +%s.%N) - $t0" | bc) "
    if grep -q '^PASS' "$work/out.0"; then
      pass[$name]=$((${pass[$name]:-0} + 1))
    elif grep -q '^problem: node[0-9]' "$work/out.0"; then
      blamed[$name]=$((${blamed[$name]:-0} + 1))
      echo "$name run $i: FAIL naming a node: $(grep '^problem:' "$work/out.0" | head -3 | tr '\n' ' ')"
    else
      other[$name]=$((${other[$name]:-0} + 1))
      echo "$name run $i: FAIL (exit $rc): $(grep -E '^(FAIL|time-out|problem)' "$work/out.0" | head -3 | tr '\n' ' ')"
    fi
    grep -q 'shares one machine' "$work/out.0" && unjudged[$name]=$((${unjudged[$name]:-0} + 1))
  done
done
ok=1
for b in $builds; do
  name=${b%%=*}
  median=$(tr ' ' '\n' <<<"${times[$name]}" | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}')
  echo "bench-shared-machine: $name: $runs checks of 3 nodes on one machine (hogs ${MN_BENCH_HOGS:-0}): PASS ${pass[$name]:-0}, FAIL naming a node ${blamed[$name]:-0}, other FAIL ${other[$name]:-0}; a note left a node unjudged in ${unjudged[$name]:-0}; median check ${median} s"
  ok=$(( ${blamed[$name]:-0} == 0 && ${other[$name]:-0} == 0 ))
done
[ "$ok" = 1 ]
