#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a node's first task reads of its software and GPUs (the fingerprint:
# driver, NCCL's version and plugin, the GPUs, verbs providers), timed as
# N nodes emulated on one machine pay it: N `mn-preflight discover` started
# at once, launch to the last exit. Before and after side by side:
#   bash scripts/gpu/bench-node-read.sh [ROUNDS]   (default 3; N in MN_BENCH_NODES, default "1 32")
#   MN_PREFLIGHT (default helper/mn-preflight), MN_PREFLIGHT_BASE (an earlier one)
# For the new binary also with MN_PREFLIGHT_SHARED_READ (emulated nodes of
# one machine share one read). Interleaved rounds, medians in seconds.
# Runs anywhere (a CPU machine reads no GPUs); on the device tool's
# machines: carry .device, run from the copy there.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
PF=${MN_PREFLIGHT:-$TOP/helper/mn-preflight}
BASE=${MN_PREFLIGHT_BASE:-}
ROUNDS=${1:-3}
R=${OUT:-/tmp/mn-bench-node-read}
mkdir -p "$R"
share=$(mktemp -d /tmp/mn-node-read.XXXXXX)
chmod 700 "$share"
export SLURM_JOB_ID=${SLURM_JOB_ID:-4242}

# burst N BINARY [SHARED-DIR]: N reads at once; seconds to the last exit.
burst() {
  local n=$1 bin=$2 dir=${3:-} t0 i pids=() step=$RANDOM
  t0=$(date +%s.%N)
  for ((i = 0; i < n; i++)); do
    SLURM_STEP_ID=$step MN_PREFLIGHT_SHARED_READ=$dir "$bin" discover --json >"$R/read.$i.json" 2>"$R/read.$i.err" &
    pids+=($!)
  done
  wait "${pids[@]}"
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", b - a }'
  grep -q fingerprint "$R/read.0.json" || { echo "no fingerprint:" >&2; head -c 300 "$R/read.0.err" >&2; }
}

for ((round = 1; round <= ROUNDS; round++)); do
  for n in ${MN_BENCH_NODES:-1 32}; do
    echo "READ n=$n bin=after s=$(burst "$n" "$PF")"
    echo "READ n=$n bin=after-shared s=$(burst "$n" "$PF" "$share")"
    [ -z "$BASE" ] || echo "READ n=$n bin=before s=$(burst "$n" "$BASE")"
  done
done | tee "$R/node-read.txt"
grep -o '"fingerprint":"[^"]*"' "$R/read.0.json" | head -1
rm -rf "$share"
python3 - "$R/node-read.txt" <<'PY'
import re, statistics, sys
rows = {}
for n, b, s in re.findall(r"READ n=(\d+) bin=(\S+) s=([\d.]+)", open(sys.argv[1]).read()):
    rows.setdefault((int(n), b), []).append(float(s))
print("node reads at once, launch to the last exit (s), medians:")
for (n, b), v in sorted(rows.items()):
    print(f"  {n:>4} nodes  {b:<13} {statistics.median(v):.3f}  ({', '.join(f'{x:.3f}' for x in v)})")
PY
