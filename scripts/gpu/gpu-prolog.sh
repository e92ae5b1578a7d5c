#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The prolog (scripts/slurm/mn-nccl-prolog, issue 36) as slurm.conf's Prolog
# on a 2-GPU device-tool machine (scripts/cluster/gpu-cluster.sh's Slurm;
# node "big" holds both GPUs):
#   run: bash scripts/gpu/gpu-prolog.sh   carry: .device spank/.libs helper/mn-preflight
#   (or MN_PREFLIGHT_BIN=.device/build/mn-preflight MN_PLUGIN=.device/build/mn_nccl.so,
#   stripped copies, with carry .device alone: 64 MiB in all)
# 1. job A holds GPU index 0 (gpu-hog.py memory); job B's prolog on the
#    same node checks B's GPU only and passes, A's hog untouched; the GPU
#    apps sampled during B's start show nothing new on A's GPU.
# 2. a process of no job on the GPU the next job gets: its prolog fails
#    and drains big with a reason that starts with "mn-preflight:".
# 3. the same script as HealthCheckProgram (no job) while A runs: A's GPU
#    is read, not exercised; healthy, it resumes its own drain.
# 4. a process of job A strays onto the GPU the next job gets: noted
#    (ConstrainDevices), the prolog passes, nothing drained.
# Prints "PROLOG job= rc= ms=" per job start. Leaves NCCL_NVLS_ENABLE as set.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
PF=$(realpath "${MN_PREFLIGHT_BIN:-helper/mn-preflight}")
export MN_PLUGIN=$(realpath "${MN_PLUGIN:-spank/.libs/mn_nccl.so}")
R=${OUT:-/tmp/mn-gpu-prolog}
mkdir -p "$R"
source scripts/cluster/slurm-bundle-env.sh
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
bash scripts/cluster/gpu-cluster.sh start >"$R/cluster.txt" 2>&1 || { cat "$R/cluster.txt"; exit 1; }
echo "== $(nvidia-smi -L | tr '\n' ' ')NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"
T=$R/t
mkdir -p "$T"
sed -e "s|@bindir[@]/mn-preflight|$PF|g" -e "s|@libexecdir[@]|$T|g" \
  -e "s|^SCONTROL=.*|SCONTROL=$(command -v scontrol)|" -e "s|^SINFO=.*|SINFO=$(command -v sinfo)|" \
  scripts/slurm/mn-nccl-prolog.in >"$T/mn-nccl-prolog"
chmod 755 "$T/mn-nccl-prolog"
cat >"$T/prolog" <<EOW
#!/bin/sh
t0=\$(date +%s%N)
env >"$T/env.\$SLURM_JOB_ID"
export SLURM_CONF=$SLURM_CONF LD_LIBRARY_PATH=$LD_LIBRARY_PATH MN_PREFLIGHT_NCCL=${MN_PREFLIGHT_NCCL:-}
"$T/mn-nccl-prolog" 2>"$T/err.\$SLURM_JOB_ID"
rc=\$?
echo "PROLOG job=\$SLURM_JOB_ID rc=\$rc ms=\$(( (\$(date +%s%N) - t0) / 1000000 ))" >>"$T/runs"
exit \$rc
EOW
chmod 755 "$T/prolog"
echo "Prolog=$T/prolog" >>"$SLURM_CONF"
scontrol reconfigure
sleep 3
apps() { nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv,noheader; }
wait_line() { local end=$((SECONDS + $1)); until grep -q "$2" "$3" 2>/dev/null; do [ $SECONDS -ge $end ] && return 1; sleep 0.5; done; }
bus() { nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | sed -n "$(($1 + 1))p"; }
echo "== GPU index 0: $(bus 0), index 1: $(bus 1)"

echo "== 1. job A holds index 0; job B starts beside it"
A=$(sbatch --parsable -w big --gres=gpu:1 -o "$R/a.out" --wrap "echo CVD=\$CUDA_VISIBLE_DEVICES; exec python3 $TOP/scripts/gpu/gpu-hog.py memory")
wait_line 90 HOG "$R/a.out" || { echo "job A's hog did not start"; cat "$R/a.out"; }
cat "$R/a.out"
echo "apps before B: $(apps | tr '\n' ';')"
( end=$((SECONDS + 15)); while [ $SECONDS -lt $end ]; do apps; sleep 0.1; done >"$R/sampled" ) &
sampler=$!
t0=$(date +%s.%N)
timeout 40 srun -w big --gres=gpu:1 -t 2 bash -c 'echo "B: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES job $SLURM_JOB_ID"'
echo "B: srun rc=$? in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s"
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
B=$(ls -t "$T" | sed -n 's/^env\.//p' | grep -vx "$A" | head -1)
echo "B's prolog environment: $(grep -E '^(SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL)=' "$T/env.$B" | tr '\n' ' ')"
echo "apps seen on each GPU while B started (pid bus):"
sort -u "$R/sampled" | awk -F', ' '{print "   ", $1, $2}' | sort -u
echo "job A: $(squeue -h -j "$A" -o %T); A's apps after: $(apps | tr '\n' ';')"
echo "B's check again with B's environment, as slurmd ran it:"
env -i PATH=/usr/bin:/bin MN_PREFLIGHT_NCCL="${MN_PREFLIGHT_NCCL:-}" $(grep -E '^(SLURM_JOB_ID|SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL)=' "$T/env.$B") \
  "$PF" --prolog --json
echo "node big: $(sinfo -h -n big -o '%T %E')"

echo "== 2. a process of no job on index 1, then job C"
CUDA_VISIBLE_DEVICES=1 python3 scripts/gpu/gpu-hog.py compute >"$R/stray.out" 2>&1 &
stray=$!
wait_line 60 HOG "$R/stray.out"
C=$(sbatch --parsable --no-requeue -w big --gres=gpu:1 -o /dev/null --wrap true)
end=$((SECONDS + 30)); until sinfo -h -n big -o %T | grep -q drain || [ $SECONDS -ge $end ]; do sleep 0.5; done
echo "job C $C: node big: $(sinfo -h -n big -o '%T') reason: $(sinfo -h -n big -o '%E')"
cat "$T/err.$C" 2>/dev/null
kill $stray; wait $stray 2>/dev/null

echo "== 3. the script as HealthCheckProgram (no job), job A still on index 0"
t0=$(date +%s.%N)
env -i PATH=/usr/bin:/bin SLURM_CONF="$SLURM_CONF" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" MN_PREFLIGHT_NCCL="${MN_PREFLIGHT_NCCL:-}" SLURMD_NODENAME=big \
  MN_PREFLIGHT_ARGS=--json "$T/mn-nccl-prolog"
echo "health check rc=$? in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s; node big: $(sinfo -h -n big -o '%T %E')"

echo "== 4. job A's process strays onto index 1, then job D"
srun --jobid="$A" --overlap -w big bash -c 'CUDA_VISIBLE_DEVICES=1 exec python3 '"$TOP"'/scripts/gpu/gpu-hog.py compute' >"$R/astray.out" 2>&1 &
wait_line 60 HOG "$R/astray.out"
echo "apps: $(apps | tr '\n' ';')"
timeout 40 srun -w big --gres=gpu:1 -t 2 true
echo "D: srun rc=$?; node big: $(sinfo -h -n big -o '%T %E')"
D=$(ls -t "$T" | sed -n 's/^env\.//p' | head -1)
env -i PATH=/usr/bin:/bin MN_PREFLIGHT_NCCL="${MN_PREFLIGHT_NCCL:-}" $(grep -E '^(SLURM_JOB_ID|SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL)=' "$T/env.$D") \
  "$PF" --prolog --json
scancel "$A"
sleep 2
echo "== prolog time per job start (slurmd's Prolog, wrapper included)"
cat "$T/runs"
bash scripts/cluster/gpu-cluster.sh stop >/dev/null 2>&1
