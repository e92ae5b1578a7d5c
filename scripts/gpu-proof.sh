#!/usr/bin/env bash
# The proof on real GPUs, run on a device-tool machine (nvidia-h200-x2, x4):
#   run: bash scripts/gpu-proof.sh   carry: .device spank/.libs helper/mn-preflight
# Starts a real Slurm there (scripts/gpu-cluster.sh), then:
#   1. srun --mn-nccl=auto mn-preflight across n0 and n1, one task per GPU,
#      timed from launch to exit;
#   2. the same with one task per node (mn-preflight drives the node's GPUs);
#   3. the benchmark: mn-preflight's busbw against torch.distributed's, same
#      GPUs, size and iterations, interleaved, three rounds, medians and ratio;
#   4. --mn-emulate-nodes=2 on the node with every GPU: mn-preflight and
#      PyTorch report NCCL's transport between and inside emulated nodes;
#   5. a rank that never arrives: time-out, exit 3, the missing rank named.
# Leaves NCCL_NVLS_ENABLE as the machine sets it.
set -uo pipefail
cd "$(dirname "$0")/.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-proof}
mkdir -p "$R"
exec > >(tee "$R/proof.txt") 2>&1
B=$TOP/.device/slurm
export LD_LIBRARY_PATH=$B/usr/lib/x86_64-linux-gnu/slurm-wlm:$B/usr/lib/x86_64-linux-gnu:$B/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$B/usr/bin:$B/usr/sbin:$PATH
export SLURM_CONF=/tmp/mn-gpu-cluster/slurm.conf
PF=$TOP/helper/mn-preflight
echo "== machine: $(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs); NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"
nvidia-smi topo -m 2>/dev/null | head -6
# The NCCL PyTorch uses, so both sides of the benchmark run the same NCCL.
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
echo "== NCCL for mn-preflight: ${MN_PREFLIGHT_NCCL:-libnccl.so.2 from the loader path}"
bash scripts/gpu-cluster.sh start || exit 1
ngpu=$(nvidia-smi -L | grep -c '^GPU'); half=$((ngpu / 2))

echo; echo "== 1. srun --mn-nccl=auto mn-preflight on n0,n1, one task per GPU ($half per node)"
t0=$(date +%s.%N)
srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto --mn-nccl-explain "$PF"
rc=$?; t1=$(date +%s.%N)
echo "exit $rc; verdict from launch to exit: $(python3 -c "print(f'{$t1-$t0:.2f}')") s"

echo; echo "== 2. one task per node: mn-preflight drives each node's $half GPUs itself"
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:$half --mn-nccl=auto "$PF"; echo "exit $?"

echo; echo "== 3. benchmark: mn-preflight vs torch.distributed.all_reduce (NCCL), 256 MiB, 5 warm-up + 50 timed, 3 rounds"
for round in 1 2 3; do
  srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto --mn-nccl-launch=task "$PF" --size 256M --iters 50 --no-pairs --json 2>/dev/null |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); a=d["allreduce"]; print("PREFLIGHT busbw=%.2f time_ms=%.4f correct=%d" % (a["busbw_gbps"], a["time_ms"], a["correct"]))'
  srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto --mn-nccl-launch=task python3 scripts/torch_allreduce.py $((256 << 20)) 50 2>"$R/torch-err.txt" | grep '^TORCH'
done | tee "$R/bench.txt"
python3 - "$R/bench.txt" <<'PY'
import re, statistics, sys
t = open(sys.argv[1]).read()
p = [float(x) for x in re.findall(r"PREFLIGHT busbw=([\d.]+)", t)]
q = [float(x) for x in re.findall(r"TORCH .*busbw=([\d.]+)", t)]
if p and q:
    mp, mq = statistics.median(p), statistics.median(q)
    print(f"busbw medians: mn-preflight {mp:.2f} GB/s, torch {mq:.2f} GB/s, ratio {mp / mq:.3f} (goal >= 0.97)")
PY

echo; echo "== 4. --mn-emulate-nodes=2 on big ($ngpu GPUs -> 2 emulated nodes of $half)"
srun -w big -N1 -n$ngpu --gres=gpu:$ngpu --mn-nccl=auto --mn-emulate-nodes=2 --mn-nccl-explain "$PF"; echo "exit $?"
echo "-- PyTorch under the same emulation, NCCL's own channel lines:"
NCCL_DEBUG=INFO srun -w big -N1 -n$ngpu --gres=gpu:$ngpu --mn-nccl=auto --mn-emulate-nodes=2 \
  python3 scripts/torch_allreduce.py $((64 << 20)) 10 >"$R/emulated-torch.txt" 2>&1
grep '^TORCH' "$R/emulated-torch.txt"
grep -oE '[0-9]+\[[0-9]+\] -> [0-9]+\[[0-9]+\] (\[(send|receive)\] )?via [A-Za-z0-9/]+' "$R/emulated-torch.txt" | sed 's/^.*via /via /' | sort | uniq -c

echo; echo "== 5. a rank that never arrives (--timeout 6)"
srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:$half --mn-nccl=auto bash -c \
  "if [ \$SLURM_PROCID = 1 ]; then sleep 12; else exec $PF --timeout 6; fi"; echo "exit $?"

bash scripts/gpu-cluster.sh stop
