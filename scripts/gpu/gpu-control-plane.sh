#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine (16 cores): the control plane's benchmark
# (scripts/bench/bench-control-plane.sh) on scripts/cluster/gpu-cluster.sh's
# Slurm with 32 nodes without GPUs on loopback, CPU path, so that 256 ranks
# share 16 cores rather than the 2 of the project's VM (doc/scale.md).
#   run: cp .device/bin/mn-preflight helper/ && mkdir -p spank/.libs &&
#        cp .device/bin/mn_nccl.so spank/.libs/ && bash scripts/gpu/gpu-control-plane.sh [RUNS]
#   carry: .device   (its bin/ from a build with --enable-test-hooks: scripts/build.sh)
#
# 1,024 emulated nodes x 8 tasks (8,192 ranks, issue 29) on one 32-core
# machine (nvidia-h100-x2 or nvidia-h200-x2): 32 slurmd of 256 tasks, each
# 32 emulated nodes (--mn-emulate-nodes=32: shape 1024x8:32), one run, the
# machine's software read once for all nodes (MN_PREFLIGHT_SHARED_READ,
# below) and a longer --timeout for the launch:
#   sysctl -w net.core.somaxconn=16384 kernel.pid_max=4194304 kernel.threads-max=4194304 \
#     net.ipv4.ip_local_port_range="30000 65535";
#   (the device machine allows 20,000 open files and ~1 M processes and no
#   more. 8,192 ranks on one address take about 24,000 of its ephemeral
#   ports, listeners and connections; the default 32768-60999 ran out on a
#   second run within a minute of the first. 30000 and up leaves the
#   slurmd ports (16817, 17001 on) and MASTER_PORT's 20000-29999 alone)
#   MN_BENCH_SHAPES="32x8 1024x8:32" MN_BENCH_TIMEOUT=240 MN_BENCH_STEP_LIMIT=420 bash scripts/gpu/gpu-control-plane.sh 1
# Each rank holds 2 threads at most on the CPU path (main and the control
# thread; a node's leader one more while its ring connects), so 8,192 ranks
# need about 17,000 threads besides slurmstepd's: a rank that cannot get one
# says "mn-preflight: rank R on NODE: cannot start ...: Resource temporarily
# unavailable" and exits 1. Rank 0's --json "control" object counts its
# messages by kind (messages_by_kind).
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
