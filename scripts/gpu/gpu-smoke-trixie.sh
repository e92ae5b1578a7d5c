#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Smoke test of the Slurm 24.11 bundle on a GPU machine (device tool):
#   run: bash scripts/gpu/gpu-smoke-trixie.sh   carry: .device/slurm-trixie .device/build-trixie
set -uo pipefail
cd "$(dirname "$0")/../.."
export MN_SLURM_BUNDLE=$PWD/.device/slurm-trixie MN_PLUGIN=$PWD/.device/build-trixie/mn_nccl.so
source scripts/cluster/slurm-bundle-env.sh
cat /etc/os-release | head -2; ldd --version | head -1
srun --version
bash scripts/cluster/gpu-cluster.sh start || { tail -30 /tmp/mn-gpu-cluster/log/*; exit 1; }
srun -w n0,n1 -N2 hostname
t0=$(date +%s.%N)
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto --mn-nccl-explain .device/build-trixie/mn-preflight; echo "exit $?"
echo "launch to exit: $(python3 -c "import time; print(round(time.time()-$t0,2))") s"
bash scripts/cluster/gpu-cluster.sh stop
