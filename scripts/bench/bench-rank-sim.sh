#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Rank 0's control plane at scale on this machine, side by side:
# tests/bench/mn-rank-sim (N ranks played in one process against a real
# rank 0, doc/scale.md) for each build, interleaved round by round, healthy
# and with one silent rank; medians and the ratio of each build's control
# plane to the first build's.
#
#   MN_SIM_BUILDS="before=DIR after=DIR" scripts/bench/bench-rank-sim.sh [ROUNDS]
#
# Each DIR holds a build's helper/mn-preflight and tests/bench/mn-rank-sim
# (configured with --enable-test-hooks; a build's sim speaks its own
# protocol; `make bench` builds the sim). Default: this tree's build alone,
# its sim built here. MN_SIM_RANKS (default
# "8192 16384"), MN_SIM_MODES (default "healthy silent").
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
builds=${MN_SIM_BUILDS:-"this=$here"}
ranks=${MN_SIM_RANKS:-"8192 16384"}
[ -n "${MN_SIM_BUILDS:-}" ] || make -s -C "$here" bench
modes=${MN_SIM_MODES:-"healthy silent"}
out=$(mktemp -d /tmp/mn-bench-rank-sim.XXXXXX)
trap 'rm -rf "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  for n in $ranks; do
    for mode in $modes; do
      for b in $builds; do
        name=${b%%=*} dir=${b#*=}
        args=(--preflight "$dir/helper/mn-preflight" --ranks "$n" --timeout 30 --json)
        [ "$mode" = silent ] && args+=(--silent 1)
        echo "round $i: $name $n $mode (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        "$dir/tests/bench/mn-rank-sim" "${args[@]}" 2>/dev/null | tail -1 |
          sed "s/^{/{\"build\":\"$name\",\"mode\":\"$mode\",/" >>"$out/runs.jsonl" || true
      done
    done
  done
done
python3 - "$out/runs.jsonl" "$builds" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
order = [b.split("=", 1)[0] for b in sys.argv[2].split()]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
print("| ranks | mode | build | ok | ctl s (median, range) | rdzv | ready | go | rank 0 cpu s | msgs in | sim cpu s | named after s | ctl vs %s |" % order[0])
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
base = {}
for n in sorted({r["ranks"] for r in runs}):
    for mode in ("healthy", "silent"):
        for b in order:
            rs = [r for r in runs if r["ranks"] == n and r["mode"] == mode and r["build"] == b]
            if not rs:
                continue
            ctl = [r["ctl_s"] for r in rs if r["ok"]]
            ph = lambda k: med([r["phases_s"].get(k, 0) for r in rs if r["ok"]])
            m = med(ctl)
            if b == order[0]:
                base[(n, mode)] = m
            ratio = m / base[(n, mode)] if base.get((n, mode)) else float("nan")
            named = med([r["to_name_s"] for r in rs if r["ok"] and r["to_name_s"] >= 0])
            rng = "%.3f-%.3f" % (min(ctl), max(ctl)) if ctl else "-"
            print("| %d | %s | %s | %d/%d | %.3f (%s) | %.3f | %.3f | %.3f | %.2f | %d | %.2f | %s | %.2f |" % (
                n, mode, b, sum(r["ok"] for r in rs), len(rs), m, rng, ph("rendezvous"), ph("readiness"), ph("go"),
                med([r["rank0_cpu_s"] for r in rs]), med([r["rank0_msgs_in"] for r in rs]),
                med([r["sim_cpu_s"] for r in rs]), "%.2f" % named if mode == "silent" else "", ratio))
EOF
