#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 38's table, the GPU classes, on a device-tool machine of 2 GPUs or
# more (scripts/cluster/gpu-cluster.sh's Slurm: n0 and n1, one GPU each):
# each class R times, the check named right, missed, or another node named.
#   run: bash scripts/gpu/gpu-accuracy.sh [R]    (default 20)
#   carry: .device spank/.libs helper/mn-preflight
# Classes:
#   healthy     nothing wrong: PASS, nobody named
#   memory      another process holds all but 512 MiB of n1's GPU
#   compute     another process computes on n1's GPU
#   no-nccl     n1's rank finds no libnccl (MN_PREFLIGHT_LIBNCCL names none)
# Prints a line per run and the table; leaves NCCL_NVLS_ENABLE as the
# machine sets it. Exits non-zero unless every run was right.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-accuracy}
mkdir -p "$R"
RUNS=${1:-20}
exec > >(tee "$R/accuracy.txt") 2>&1
source scripts/gpu/gpu-env.sh
ngpu=$(nvidia-smi -L | grep -c '^GPU')
victim=$((ngpu - 1))
echo "== machine: $ngpu x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NCCL ${MN_PREFLIGHT_NCCL:-libnccl.so.2}; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"

hog=
start_hog() {  # KIND: another process on the last GPU (n1's), until stop_hog
  CUDA_VISIBLE_DEVICES=$victim python3 scripts/gpu/gpu-hog.py "$1" >"$R/hog.txt" 2>&1 &
  hog=$!
  for _ in $(seq 240); do grep -q '^HOG' "$R/hog.txt" && return; sleep 0.25; done
  echo "the hog did not start: $(head -c 300 "$R/hog.txt")"
}
stop_hog() { [ -z "$hog" ] || { kill "$hog"; wait "$hog" 2>/dev/null; hog=; }; }
trap 'stop_hog; bash scripts/cluster/gpu-cluster.sh stop' EXIT

declare -A right missed wrong
for c in healthy memory compute no-nccl; do
  right[$c]=0 missed[$c]=0 wrong[$c]=0
  case $c in memory | compute) start_hog "$c" ;; esac
  cmd="exec $PF --timeout 60"
  [ $c = no-nccl ] && cmd="[ \$SLURM_NODEID = 1 ] && export MN_PREFLIGHT_LIBNCCL=/nonexistent/libnccl.so.2; $cmd"
  for ((i = 1; i <= RUNS; i++)); do
    log=$R/$c.$i.txt
    t0=$(date +%s.%N)
    timeout 120 srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto bash -c "$cmd" >"$log" 2>&1
    rc=$?
    secs=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
    named=$(sed -n 's/^problem: \(n[0-9]*\)\b.*/\1/p' "$log" | sort -u | paste -sd,)
    if [ $c = healthy ]; then
      if [ $rc = 0 ] && [ -z "$named" ]; then right[$c]=$((right[$c] + 1))
      elif [ -n "$named" ]; then wrong[$c]=$((wrong[$c] + 1))
      else missed[$c]=$((missed[$c] + 1))
      fi
    elif [ "$named" = n1 ]; then right[$c]=$((right[$c] + 1))
    elif [ -z "$named" ]; then missed[$c]=$((missed[$c] + 1))
    else wrong[$c]=$((wrong[$c] + 1))
    fi
    printf '%-8s %2d/%d exit %-3s %5.2f s named %-6s %s\n' "$c" "$i" "$RUNS" "$rc" "$secs" "${named:-none}" \
      "$(grep -E '^problem:' "$log" | head -1 | cut -c1-110)"
  done
  stop_hog
done

echo
echo "Made by \`scripts/gpu/gpu-accuracy.sh $RUNS\` on $ngpu x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) (device tool, n0 and n1 one GPU each, $(date -u +%F))."
echo
echo "| class | runs | right | missed | another node named |"
echo "|---|---|---|---|---|"
bad=0
for c in healthy memory compute no-nccl; do
  echo "| $c | $RUNS | ${right[$c]} | ${missed[$c]} | ${wrong[$c]} |"
  bad=$((bad + missed[$c] + wrong[$c]))
done
[ $bad = 0 ] && echo "RESULT PASS" || echo "RESULT FAIL: $bad runs not right"
[ $bad = 0 ]
