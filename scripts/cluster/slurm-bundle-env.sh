# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that drive scripts/cluster/gpu-cluster.sh's Slurm
# on a GPU machine: the unpacked Debian Slurm of .device/slurm (or
# MN_SLURM_BUNDLE, e.g. .device/slurm-trixie; scripts/cluster/fetch-slurm-bundle.sh)
# on PATH and the loader's path, and SLURM_CONF of that cluster
# (MN_GPU_CLUSTER_DIR, default /tmp/mn-gpu-cluster). Needs the working
# directory at the repository's top.
B=${MN_SLURM_BUNDLE:-$PWD/.device/slurm}
export LD_LIBRARY_PATH=$B/usr/lib/x86_64-linux-gnu/slurm-wlm:$B/usr/lib/x86_64-linux-gnu:$B/lib/x86_64-linux-gnu:$B/extra-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$B/usr/bin:$B/usr/sbin:$PATH
export SLURM_CONF=${MN_GPU_CLUSTER_DIR:-/tmp/mn-gpu-cluster}/slurm.conf
