#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine: what the fingerprint reads of a real node
# (issue 40, item 3) and what it costs rank 0 at scale (item 4):
#   readings   this machine's fingerprint (discover --json), and the sysfs
#              files its GPUs' PCIe links come from, side by side
#   healthy    n0 and n1 alike under gpu-cluster.sh's Slurm: PASS, no
#              fingerprint line
#   nccl-env   n1 alone with NCCL_IB_TIMEOUT=22: a warning naming n1
#   sim        tests/bench/mn-rank-sim at MN_SIM_RANKS (default 8192 16384),
#              rank 0's control plane, .device/before against .device/after
#              (each a build's helper/mn-preflight and tests/bench/mn-rank-sim),
#              interleaved (scripts/bench/bench-rank-sim.sh), ROUNDS rounds
#   run: bash scripts/gpu/gpu-node-truth.sh [ROUNDS]   carry: .device
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-node-truth}
mkdir -p "$R"
exec > >(tee "$R/node-truth.txt") 2>&1
rounds=${1:-3}
echo "== readings"
"$TOP/helper/mn-preflight" discover --json | python3 -c '
import json, sys
fp = json.load(sys.stdin)["fingerprint"]
for w in fp.split(" "):
    print("   " + w)'
for d in /sys/bus/pci/drivers/nvidia/0000:*; do
  [ -e "$d" ] || continue
  up=$(dirname "$(readlink -f "$d")")
  echo "   $(basename "$d"): width $(cat "$d/current_link_width")/$(cat "$d/max_link_width")," \
    "speed $(cat "$d/current_link_speed")/$(cat "$d/max_link_speed"); port $(basename "$up") max $(cat "$up/max_link_speed" 2>/dev/null)"
done
source scripts/gpu/gpu-env.sh
echo "== healthy: n0 and n1"
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto "$PF" --timeout 60 >"$R/healthy.txt" 2>&1
echo "   exit $? ($(grep -c fingerprint "$R/healthy.txt") fingerprint lines)"
grep -E '^(n0|n1|problem|warning|PASS|FAIL)' "$R/healthy.txt" | sed 's/^/   /'
echo "== nccl-env: n1 with NCCL_IB_TIMEOUT=22"
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto bash -c \
  "[ \$SLURMD_NODENAME = n1 ] && export NCCL_IB_TIMEOUT=22; exec $PF --timeout 60" >"$R/nccl-env.txt" 2>&1
echo "   exit $?"
grep -E '^(n0|n1|problem|note|PASS|FAIL)' "$R/nccl-env.txt" | sed 's/^/   /'
[ -d .device/before ] || exit 0
echo "== sim: before against after, $rounds rounds"
for b in before after; do chmod +x .device/$b/helper/mn-preflight .device/$b/tests/bench/mn-rank-sim; done
MN_SIM_MODES=healthy MN_SIM_BUILDS="before=$TOP/.device/before after=$TOP/.device/after" \
  bash scripts/bench/bench-rank-sim.sh "$rounds" 2>&1 | grep -v '^round '
