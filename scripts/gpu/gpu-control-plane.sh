#!/usr/bin/env bash
# On a device-tool GPU machine (16 cores): the control plane's benchmark
# (scripts/bench/bench-control-plane.sh) on scripts/cluster/gpu-cluster.sh's
# Slurm with 32 nodes without GPUs on loopback, CPU path, so that 256 ranks
# share 16 cores rather than the 2 of the project's VM (doc/scale.md).
#   run: cp .device/bin/mn-preflight helper/ && mkdir -p spank/.libs &&
#        cp .device/bin/mn_nccl.so spank/.libs/ && bash scripts/gpu/gpu-control-plane.sh [RUNS]
#   carry: .device   (its bin/ from a build with --enable-test-hooks: scripts/build.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/mn-gpu-control-plane}
mkdir -p "$R"
# The emulated nodes share one machine: one read of its software for all
# (MN_PREFLIGHT_SHARED_READ, mn-preflight(1); srun passes it on). Set it
# empty to time each node's own read.
if [ -z "${MN_PREFLIGHT_SHARED_READ+set}" ]; then
  MN_PREFLIGHT_SHARED_READ=$(mktemp -d /tmp/mn-shared-read.XXXXXX) && chmod 700 "$MN_PREFLIGHT_SHARED_READ"
  export MN_PREFLIGHT_SHARED_READ
fi
MN_BENCH_CLUSTER=gpu MN_BENCH_SHAPES=${MN_BENCH_SHAPES:-"8x1 32x1 32x8"} \
  bash scripts/bench/bench-control-plane.sh "${1:-3}" 2>&1 | tee "$R/control-plane.txt"
