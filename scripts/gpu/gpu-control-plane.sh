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
MN_BENCH_CLUSTER=gpu MN_BENCH_SHAPES=${MN_BENCH_SHAPES:-"8x1 32x1 32x8"} \
  bash scripts/bench/bench-control-plane.sh "${1:-3}" 2>&1 | tee "$R/control-plane.txt"
