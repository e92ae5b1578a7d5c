#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The proof on real GPUs, run on a device-tool machine (1 to 4 GPUs):
#   run: bash scripts/gpu/gpu-proof.sh   carry: .device spank/.libs helper/mn-preflight
# Starts a real Slurm there (scripts/cluster/gpu-cluster.sh: n0 and n1 with half of
# the GPUs each, or sharing the one GPU as two NCCL hosts; big with all),
# then the sections MN_PROOF_SECTIONS names (default: all, in this order):
#   healthy   srun --mn-nccl=auto mn-preflight across n0,n1, one task per
#             GPU, three times: the verdict's time from launch to exit
#             (benchmark; goal under 3 s on 4 GPUs), and the table
#   nodemode  one task per node: mn-preflight drives each node's GPUs
#   memory    another process holds almost all of one GPU of n1: the
#             verdict (exit 1 in seconds), its time and the table
#   compute   another process computes on one GPU of n1: the same
#   stuck     one rank's process ends as the collective starts (the test
#             hook MN_PREFLIGHT_EXIT_IN_COLLECTIVE): the others, inside
#             NCCL's non-blocking init waiting for it, are stopped by rank
#             0's word; the verdict, its time and the table
#   torch     mn-preflight's busbw against torch.distributed's, same GPUs,
#             size and iterations, interleaved, three rounds, medians, ratio
#   nccltests mn-preflight's busbw against nccl-tests' all_reduce_perf at the
#             same size in the same run, on big (every GPU), three rounds,
#             medians, ratio (to all_reduce_perf's in-place busbw: both run
#             in place). all_reduce_perf: .device/nccl-tests/all_reduce_perf
#             when carried, else built there from .device/nccl-tests-src
#             (scripts/gpu/bench-busbw.sh --build says how to bring it); 2
#             GPUs or more. scripts/gpu/bench-busbw.sh compares more sizes.
#   emulated  --mn-emulate-nodes=2 on big: NCCL's transports
#   missing   a rank that never arrives: time-out, exit 3, the rank named
# A closing note repeats each fault section's verdict, time and table.
# Leaves NCCL_NVLS_ENABLE as the machine sets it.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-proof}
mkdir -p "$R"
exec > >(tee "$R/proof.txt") 2>&1
source scripts/cluster/slurm-bundle-env.sh
PF=$TOP/helper/mn-preflight
SECTIONS=${MN_PROOF_SECTIONS:-healthy nodemode memory compute stuck torch nccltests emulated missing}
want() { [[ " ${SECTIONS//,/ } " == *" $1 "* ]]; }
echo "== machine: $(nvidia-smi -L | wc -l) GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs); NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}; sections: $SECTIONS"
nvidia-smi topo -m 2>/dev/null | head -6
# The NCCL PyTorch uses, so every side of a benchmark runs the same NCCL.
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
echo "== NCCL for mn-preflight: ${MN_PREFLIGHT_NCCL:-libnccl.so.2 from the loader path}"
bash scripts/cluster/gpu-cluster.sh start || exit 1
ngpu=$(nvidia-smi -L | grep -c '^GPU')
half=$((ngpu / 2)); [ "$half" -ge 1 ] || half=1
# n1's last GPU, as the machine numbers it (n0 and n1 share GPU 0 on one).
victim=$((ngpu - 1))
SUMMARY=$R/summary.txt
: >"$SUMMARY"

now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2-$1:.2f}')"; }

# check NAME ARGS...: mn-preflight across n0,n1, one task per GPU, timed
# from launch to exit; output in $R/NAME.txt.
check() {
  local name=$1; shift
  local t0 t1 rc
  t0=$(now)
  srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto "$PF" "$@" >"$R/$name.txt" 2>&1
  rc=$?; t1=$(now)
  cat "$R/$name.txt"
  echo "exit $rc; verdict from launch to exit: $(secs "$t0" "$t1") s"
  LAST_RC=$rc LAST_S=$(secs "$t0" "$t1")
}

# hog KIND: another process on GPU $victim ("memory": holds all but 512
# MiB; "compute": a matrix product loop); prints its pid once it runs.
hog() {
  CUDA_VISIBLE_DEVICES=$victim python3 scripts/gpu/gpu-hog.py "$1" >"$R/hog.txt" 2>&1 &
  HOG=$!
  for _ in $(seq 120); do grep -q '^HOG' "$R/hog.txt" && break; sleep 0.25; done
  echo "another process on GPU $victim: pid $HOG, $(grep '^HOG' "$R/hog.txt" || echo 'did not start:'; tail -3 "$R/hog.txt")"
}
unhog() { kill "$HOG" 2>/dev/null; wait "$HOG" 2>/dev/null; sleep 1; }

note_fault() {  # NAME: the closing note's entry
  {
    echo "-- $1: exit $LAST_RC, verdict from launch to exit $LAST_S s"
    grep -E '^(host |n[01] |problem:|note:|PASS|FAIL)' "$R/$1.txt"
  } >>"$SUMMARY"
}

if want healthy; then
  echo; echo "== healthy: srun --mn-nccl=auto mn-preflight on n0,n1, one task per GPU ($half per node), 3 runs"
  for i in 1 2 3; do check "healthy$i"; echo "HEALTHY_S $LAST_S rc=$LAST_RC" >>"$R/healthy.txt"; done
  python3 - "$R/healthy.txt" <<'PY' | tee -a "$SUMMARY"
import re, statistics, sys
t = [float(x) for x in re.findall(r"HEALTHY_S ([\d.]+)", open(sys.argv[1]).read())]
if t: print(f"-- healthy verdict from launch to exit: median {statistics.median(t):.2f} s of {len(t)} runs ({', '.join(f'{x:.2f}' for x in t)}); goal under 3 s")
PY
fi

if want nodemode; then
  echo; echo "== nodemode: one task per node, mn-preflight drives each node's $half GPUs (intra-node GPU pairs when 2 or more)"
  srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:$half --mn-nccl=auto "$PF"; echo "exit $?"
fi

if want memory; then
  echo; echo "== memory: another process holds almost all of GPU $victim (n1's)"
  [ "$ngpu" = 1 ] && echo "(one GPU: n0 and n1 share it, so both are on the held GPU and both are named)"
  hog memory
  check memory; note_fault memory
  unhog
fi

if want compute; then
  echo; echo "== compute: another process computes on GPU $victim (n1's)"
  [ "$ngpu" = 1 ] && echo "(one GPU: n0 and n1 share it, so both are named)"
  hog compute
  check compute; note_fault compute
  unhog
fi

if want stuck; then
  echo; echo "== stuck: the last rank's process ends as the collective starts; the others wait inside NCCL's init"
  last=$((2 * half - 1))
  t0=$(now)
  srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto bash -c \
    "MN_PREFLIGHT_EXIT_IN_COLLECTIVE=$last exec $PF" >"$R/stuck.txt" 2>&1
  LAST_RC=$?; LAST_S=$(secs "$t0" "$(now)")
  cat "$R/stuck.txt"; echo "exit $LAST_RC; verdict from launch to exit: $LAST_S s"
  note_fault stuck
fi

if want torch; then
  echo; echo "== torch: mn-preflight vs torch.distributed.all_reduce (NCCL), 256 MiB, 5 warm-up + 50 timed, 3 rounds"
  for round in 1 2 3; do
    srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto --mn-nccl-launch=task "$PF" --size 256M --iters 50 --no-pairs --json 2>/dev/null |
      python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); a=d["allreduce"]; print("PREFLIGHT busbw=%.2f time_ms=%.4f correct=%d" % (a["busbw_gbps"], a["time_ms"], a["correct"]))'
    srun -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half --mn-nccl=auto --mn-nccl-launch=task python3 scripts/torch/torch_allreduce.py $((256 << 20)) 50 2>"$R/torch-err.txt" | grep '^TORCH'
  done | tee "$R/bench.txt"
  python3 - "$R/bench.txt" <<'PY' | tee -a "$SUMMARY"
import re, statistics, sys
t = open(sys.argv[1]).read()
p = [float(x) for x in re.findall(r"PREFLIGHT busbw=([\d.]+)", t)]
q = [float(x) for x in re.findall(r"TORCH .*busbw=([\d.]+)", t)]
if p and q:
    mp, mq = statistics.median(p), statistics.median(q)
    print(f"-- busbw medians, 256 MiB on n0,n1: mn-preflight {mp:.2f} GB/s, torch {mq:.2f} GB/s, ratio {mp / mq:.3f} (goal >= 0.97)")
PY
fi

if want nccltests; then
  echo; echo "== nccltests: mn-preflight vs nccl-tests all_reduce_perf, 64 MiB, 5 warm-up + 20 timed, every GPU of big, 3 rounds"
  ART=$TOP/.device/nccl-tests/all_reduce_perf
  [ -x "$ART" ] || ART=$(bash scripts/gpu/bench-busbw.sh --build 2>&1 | tail -1)
  if [ ! -x "$ART" ]; then
    echo "SKIPPED: no all_reduce_perf ($ART): carry .device/nccl-tests-src (scripts/gpu/bench-busbw.sh says how) or a prebuilt .device/nccl-tests/all_reduce_perf" | tee -a "$SUMMARY"
  elif [ "$ngpu" -lt 2 ]; then
    echo "SKIPPED: one GPU (an all-reduce of one rank moves nothing between GPUs; all_reduce_perf cannot put two ranks on one GPU)" | tee -a "$SUMMARY"
  else
    # all_reduce_perf's NCCL and CUDA runtime: PyTorch's wheels' libraries.
    nvlibs=$(python3 -c 'import nvidia, os, glob; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "*", "lib", "*.so*"))})))' 2>/dev/null)
    for round in 1 2 3; do
      srun -w big -N1 -n$ngpu --gres=gpu:$ngpu --mn-nccl=auto "$PF" --size 64M --iters 20 --no-pairs --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); a=d["allreduce"]; print("PREFLIGHT busbw=%.2f time_ms=%.4f correct=%d" % (a["busbw_gbps"], a["time_ms"], a["correct"]))'
      LD_LIBRARY_PATH=$nvlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$ART" -b 64M -e 64M -g "$ngpu" -w 5 -n 20 >"$R/nccltests$round.txt" 2>&1
      # The data row: size count type redop root | out-of-place time algbw busbw #wrong | in-place ...
      awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print "NCCLTESTS busbw=" $12 " time_us=" $10 " outofplace_busbw=" $8; exit}' "$R/nccltests$round.txt"
      grep -q 'Avg bus bandwidth' "$R/nccltests$round.txt" || tail -5 "$R/nccltests$round.txt"
    done | tee "$R/nccltests.txt"
    python3 - "$R/nccltests.txt" <<'PY' | tee -a "$SUMMARY"
import re, statistics, sys
t = open(sys.argv[1]).read()
p = [float(x) for x in re.findall(r"PREFLIGHT busbw=([\d.]+)", t)]
q = [float(x) for x in re.findall(r"NCCLTESTS busbw=([\d.]+)", t)]
if p and q:
    mp, mq = statistics.median(p), statistics.median(q)
    print(f"-- busbw medians, 64 MiB on every GPU of big: mn-preflight {mp:.2f} GB/s, nccl-tests all_reduce_perf (in-place) {mq:.2f} GB/s, ratio {mp / mq:.3f}")
else:
    print(f"-- nccltests: no figures (mn-preflight {p}, all_reduce_perf {q}); see nccltests*.txt")
PY
  fi
fi

if want emulated; then
  echo; echo "== emulated: --mn-emulate-nodes=2 on big ($ngpu GPUs -> 2 emulated nodes)"
  if [ "$ngpu" -lt 2 ]; then
    echo "SKIPPED: one GPU (n0 and n1 already share it as two NCCL hosts above)"
  else
    srun -w big -N1 -n$ngpu --gres=gpu:$ngpu --mn-nccl=auto --mn-emulate-nodes=2 --mn-nccl-explain "$PF"; echo "exit $?"
    echo "-- PyTorch under the same emulation, NCCL's own channel lines:"
    NCCL_DEBUG=INFO srun -w big -N1 -n$ngpu --gres=gpu:$ngpu --mn-nccl=auto --mn-emulate-nodes=2 \
      python3 scripts/torch/torch_allreduce.py $((64 << 20)) 10 >"$R/emulated-torch.txt" 2>&1
    grep '^TORCH' "$R/emulated-torch.txt"
    grep -oE '[0-9]+\[[0-9]+\] -> [0-9]+\[[0-9]+\] (\[(send|receive)\] )?via [A-Za-z0-9/]+' "$R/emulated-torch.txt" | sed 's/^.*via /via /' | sort | uniq -c
  fi
fi

if want missing; then
  echo; echo "== missing: a rank that never arrives (--timeout 6)"
  srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:$half --mn-nccl=auto bash -c \
    "if [ \$SLURM_PROCID = 1 ]; then sleep 12; else exec $PF --timeout 6; fi"; echo "exit $?"
fi

bash scripts/cluster/gpu-cluster.sh stop
echo; echo "== closing note"
cat "$SUMMARY"
