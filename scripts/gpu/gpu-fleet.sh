#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine: the fingerprint on real NCCL, driver and
# GPUs (issue 21), under the real Slurm of scripts/cluster/gpu-cluster.sh:
#   discover   each node's software line (what the hello carries)
#   healthy    n0 and n1 alike: PASS, with --history and --metrics-dir; the
#              history summary and n0's metrics file (with NVML's readings)
#   odd        n1 given another NCCL (the 2.18.5 stub) through
#              MN_PREFLIGHT_NCCL: FAIL before NCCL's init, n1 named alone
#   run: bash scripts/gpu/gpu-fleet.sh   carry: .device spank/.libs helper/mn-preflight tests/fixtures/nccl-2.18.5
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-fleet}
mkdir -p "$R"
exec > >(tee "$R/fleet.txt") 2>&1
source scripts/gpu/gpu-env.sh
STUB=$TOP/tests/fixtures/nccl-2.18.5/libnccl.so
torch_nccl=$(python3 -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null)
H=$R/history M=$R/metrics
rm -rf "$H" "$M"
mkdir -p "$M"

echo "== discover (torch's NCCL: ${torch_nccl:-unknown})"
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto "$PF" discover | grep '^software'
echo "== healthy: n0 and n1, --history and --metrics-dir"
MN_PREFLIGHT_TORCH_NCCL=$torch_nccl srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto \
  "$PF" --timeout 60 --history "$H" --metrics-dir "$M" >"$R/healthy.txt" 2>&1
echo "   exit $?"
grep -E '^(host|n0|n1|problem|warning|PASS|FAIL)' "$R/healthy.txt" | sed 's/^/   /'
"$PF" history "$H" | sed 's/^/   /'
echo "   -- $M/mn_preflight_n0.prom (samples):"
grep -v '^#' "$M/mn_preflight_n0.prom" | head -40 | sed 's/^/   /'
command -v promtool >/dev/null && promtool check metrics <"$M/mn_preflight_n0.prom" && echo "   promtool: ok"
echo "== odd: n1 with another NCCL ($STUB)"
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto bash -c \
  "[ \$SLURMD_NODENAME = n1 ] && export MN_PREFLIGHT_NCCL=$STUB; exec $PF --timeout 60 --history $H" >"$R/odd.txt" 2>&1
echo "   exit $?"
grep -E '^(host|n0|n1|problem|PASS|FAIL)' "$R/odd.txt" | sed 's/^/   /'
"$PF" history "$H" --drain 1/2 | sed 's/^/   /'
