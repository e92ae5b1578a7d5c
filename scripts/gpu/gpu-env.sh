# SPDX-License-Identifier: Apache-2.0
# Sourced by the GPU scripts that run on scripts/cluster/gpu-cluster.sh's
# Slurm (gpu-silent, gpu-claims, gpu-fleet): the device bundle's Slurm on
# the path, SLURM_CONF, PF (this build's mn-preflight), torch's NCCL as
# MN_PREFLIGHT_NCCL where there is one, the cluster started (stopped at
# exit). Needs TOP set and the working directory at the top.
source scripts/cluster/slurm-bundle-env.sh
PF=$TOP/helper/mn-preflight
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
bash scripts/cluster/gpu-cluster.sh start || exit 1
trap 'bash scripts/cluster/gpu-cluster.sh stop' EXIT
