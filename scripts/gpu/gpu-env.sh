# Sourced by the GPU scripts that run on scripts/cluster/gpu-cluster.sh's
# Slurm (gpu-silent, gpu-claims, gpu-fleet): the device bundle's Slurm on
# the path, SLURM_CONF, PF (this build's mn-preflight), torch's NCCL as
# MN_PREFLIGHT_NCCL where there is one, the cluster started (stopped at
# exit). Needs TOP set and the working directory at the top.
B=${MN_SLURM_BUNDLE:-$TOP/.device/slurm}
export LD_LIBRARY_PATH=$B/usr/lib/x86_64-linux-gnu/slurm-wlm:$B/usr/lib/x86_64-linux-gnu:$B/lib/x86_64-linux-gnu:$B/extra-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$B/usr/bin:$B/usr/sbin:$PATH
export SLURM_CONF=${MN_GPU_CLUSTER_DIR:-/tmp/mn-gpu-cluster}/slurm.conf
PF=$TOP/helper/mn-preflight
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
bash scripts/cluster/gpu-cluster.sh start || exit 1
trap 'bash scripts/cluster/gpu-cluster.sh stop' EXIT
