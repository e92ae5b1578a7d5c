#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mn-preflight's all-reduce busbw beside nccl-tests' all_reduce_perf and
# torch.distributed's all_reduce, on one machine, every GPU a rank (the
# device tool's machines). Once, here, a source copy of nccl-tests:
#   fetch github:NVIDIA/nccl-tests (the `fetch` tool: a git directory
#   /work/.mirror/NVIDIA+nccl-tests/repo), then, in the repository's root:
#     mkdir -p .device/nccl-tests-src &&
#       git -C /work/.mirror/NVIDIA+nccl-tests/repo archive HEAD | tar -x -C .device/nccl-tests-src
# then on the device machine:
#   run: bash scripts/gpu/bench-busbw.sh   carry: .device helper/mn-preflight
# It builds all_reduce_perf there (nvcc, for the GPUs' own architecture,
# into .device/nccl-tests-build) against the NCCL of PyTorch's wheels,
# which mn-preflight (MN_PREFLIGHT_NCCL) and torch then use as well. For
# each size (MN_BENCH_SIZES, default "64M 256M 1G") and round
# (MN_BENCH_ROUNDS, default 3), interleaved: all_reduce_perf -g N,
# mn-preflight with N ranks (one task per GPU on one node: Slurm's and
# the plugin's variables set by hand, no Slurm needed), torch's all_reduce
# (torchrun), each 5 warm-up + 20 timed rounds. Prints the medians side by
# side: size, nccl-tests busbw (in-place, as mn-preflight and torch run;
# out-of-place beside it), mn-preflight busbw, their ratio, torch busbw.
# One GPU: builds and runs all_reduce_perf once, says that an all-reduce
# over one GPU moves nothing, and prints no table.
#   bash scripts/gpu/bench-busbw.sh --build   only builds; prints the path
# MN_BENCH_TORCH=0 leaves torch out (a sweep of sizes for the plateau).
# The column "of best" is each size's nccl-tests busbw over the best of the
# sizes run: where busbw reaches its plateau (mn-preflight's default size).
# MN_PREFLIGHT: another mn-preflight; MN_NCCL_TESTS_SRC: another source
# copy. MN_PREFLIGHT_BASE: an earlier mn-preflight, run in the same rounds
# right after the first (before/after side by side: its busbw, its ratio
# and its whole check's time in columns of their own).
# Leaves NCCL_NVLS_ENABLE as the machine sets it.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
TOP=$(pwd)
SRC=${MN_NCCL_TESTS_SRC:-$TOP/.device/nccl-tests-src}
BUILD=$TOP/.device/nccl-tests-build
PF=${MN_PREFLIGHT:-$TOP/helper/mn-preflight}
R=${OUT:-/tmp/mn-bench-busbw}
SIZES=${MN_BENCH_SIZES:-64M 256M 1G}
ROUNDS=${MN_BENCH_ROUNDS:-3}
ITERS=20 WARMUP=5
mkdir -p "$R"

# The NCCL PyTorch's wheels bring (nvidia-nccl-cu*): its folder, with
# include/ and lib/.
nccl_dir() {
  python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null
}

# build: all_reduce_perf into $BUILD (kept while the machine stays warm).
build() {
  local nd cuda arch home
  [ -x "$BUILD/all_reduce_perf" ] && return 0
  [ -f "$SRC/src/all_reduce.cu" ] || {
    echo "bench-busbw: $SRC has no nccl-tests source: fetch github:NVIDIA/nccl-tests here, then" \
      "git -C /work/.mirror/NVIDIA+nccl-tests/repo archive HEAD | tar -x -C .device/nccl-tests-src, and carry .device" >&2
    return 2
  }
  nd=$(nccl_dir)
  if [ ! -f "$nd/include/nccl.h" ] || [ ! -f "$nd/lib/libnccl.so.2" ]; then
    echo "bench-busbw: no NCCL from PyTorch's wheels (python3 -c 'import nvidia.nccl')" >&2
    return 2
  fi
  cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
  [ -x "$cuda/bin/nvcc" ] || { echo "bench-busbw: no nvcc (CUDA's compiler) on this machine" >&2; return 2; }
  # The GPUs' own architectures only ("9.0" -> sm_90): a short build.
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d . | sort -u |
    sed 's/.*/-gencode=arch=compute_&,code=sm_&/' | xargs)
  # The wheel has libnccl.so.2 only: the linker's libnccl.so beside it.
  home=$BUILD/nccl-home
  mkdir -p "$home/lib" && ln -sfn "$nd/include" "$home/include" && ln -sf "$nd/lib/libnccl.so.2" "$home/lib/libnccl.so"
  echo "bench-busbw: building all_reduce_perf ($(sed -n 's/^#define NCCL_TESTS_VERSION *//p' "$SRC/src/common.h" 2>/dev/null | head -1)) with $cuda/bin/nvcc, $arch, NCCL $nd"
  make -s -C "$SRC/src" -j"$(nproc)" CUDA_HOME="$cuda" NCCL_HOME="$home" NVCC_GENCODE="$arch" BUILDDIR="$BUILD" \
    "$BUILD/all_reduce_perf" >"$R/nccl-tests-build.txt" 2>&1 ||
    { tail -20 "$R/nccl-tests-build.txt"; echo "bench-busbw: all_reduce_perf did not build" >&2; return 1; }
}

build || exit $?
[ "${1:-}" = --build ] && { echo "$BUILD/all_reduce_perf"; exit 0; }
NCCL_LIB=$(nccl_dir)/lib
export MN_PREFLIGHT_NCCL=$NCCL_LIB/libnccl.so.2
ngpu=$(nvidia-smi -L | grep -c '^GPU')
echo "== machine: $ngpu GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs); NCCL $MN_PREFLIGHT_NCCL; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"

# nccltests SIZE: all_reduce_perf on every GPU; its data row as
# "NCCLTESTS busbw=IN-PLACE oop=OUT-OF-PLACE".
nccltests() {
  LD_LIBRARY_PATH=$NCCL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 300 "$BUILD/all_reduce_perf" -b "$1" -e "$1" -g "$ngpu" \
    -w $WARMUP -n $ITERS >"$R/nccltests-$1.txt" 2>&1
  # size count type redop root | out-of-place time algbw busbw #wrong | in-place time algbw busbw #wrong
  awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print "NCCLTESTS busbw=" $12 " oop=" $8 " wrong=" $9 "," $13; exit}' "$R/nccltests-$1.txt"
}

if [ "$ngpu" -lt 2 ]; then
  row=$(nccltests 64M)
  echo "all_reduce_perf built and ran on the one GPU: ${row:+its data row came, #wrong (out-of-place,in-place) }${row##*wrong=}${row:-no data row: see $R/nccltests-64M.txt}"
  echo "ONE GPU: an all-reduce over one GPU moves nothing between GPUs (busbw = algbw x 2(n-1)/n = 0), so there is nothing to compare: no table. Run it on a machine of 2 GPUs or more."
  exit 0
fi

# preflight SIZE [BINARY TAG]: mn-preflight with every GPU a rank, one
# task per GPU on this one node, as srun --mn-nccl=auto would start it;
# "PREFLIGHT busbw=" (TAG BASE: "BASE busbw=").
preflight() {
  local port=$((20000 + RANDOM % 9000)) secret host r pids=() t0 pf=${2:-$PF} tag=${3:-PREFLIGHT}
  secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  t0=$(date +%s.%N)
  host=$(hostname)
  for ((r = 0; r < ngpu; r++)); do
    env SLURM_PROCID=$r SLURM_NTASKS=$ngpu SLURM_NODEID=0 SLURM_LOCALID=$r SLURMD_NODENAME="$host" \
      SLURM_STEP_NODELIST="$host" LOCAL_RANK=$r LOCAL_WORLD_SIZE=$ngpu MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      MN_NCCL_STEP_SECRET="$secret" NCCL_SOCKET_IFNAME=lo \
      timeout 120 "$pf" --size "$1" --iters $ITERS --no-pairs --json >"$R/$tag-$1.$r.txt" 2>"$R/$tag-$1.$r.err" &
    pids+=($!)
  done
  wait "${pids[@]}"
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["allreduce"]; print("%s busbw=%.2f correct=%d wall=%.2f" % (sys.argv[3], a["busbw_gbps"], a["correct"], float(sys.argv[2])))' \
    "$R/$tag-$1.0.txt" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$tag" 2>/dev/null || { echo "$tag failed:"; tail -5 "$R/$tag-$1.0.err"; }
}

# torch SIZE: torch.distributed's all_reduce on every GPU; "TORCH ... busbw=".
# Bounded by time, as all_reduce_perf is: neither has a time-out of its own.
torch_ar() {
  local bytes
  bytes=$(python3 -c 'import sys; s=sys.argv[1]; print(int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]] if s[-1] in "KMG" else int(s))' "$1")
  timeout 300 python3 -m torch.distributed.run --standalone --nproc-per-node="$ngpu" scripts/torch/torch_allreduce.py "$bytes" $ITERS 2>"$R/torch-$1.err" | grep '^TORCH' ||
    { echo "TORCH failed:"; tail -5 "$R/torch-$1.err"; }
}

for size in $SIZES; do
  for ((round = 1; round <= ROUNDS; round++)); do
    echo "-- $size round $round"
    nccltests "$size"
    preflight "$size"
    [ -z "${MN_PREFLIGHT_BASE:-}" ] || preflight "$size" "$MN_PREFLIGHT_BASE" BASE
    [ "${MN_BENCH_TORCH:-1}" = 0 ] || torch_ar "$size"
  done
done | tee "$R/bench.txt"

python3 - "$R/bench.txt" "$ngpu" "$ROUNDS" "$WARMUP" "$ITERS" <<'PY' | tee "$R/table.txt"
import re, statistics, sys
text, ngpu, rounds, warmup, iters = open(sys.argv[1]).read(), *sys.argv[2:]
def med(block, pat):
    v = [float(x) for x in re.findall(pat, block)]
    return statistics.median(v) if v else None
fmt = lambda v: f"{v:.1f}" if v is not None else "-"
print(f"busbw in GB/s: medians of {rounds} interleaved rounds, {ngpu} GPUs as ranks on one node, "
      f"{warmup} warm-up + {iters} timed rounds each")
base = "BASE busbw=" in text
print(f"{'size':>6} {'nccl-tests':>10} {'(out-of-place)':>14} {'of best':>7} {'mn-preflight':>12} {'ratio':>6} {'torch':>8} {'check s':>7}"
      + (f" {'before':>8} {'ratio':>6} {'check s':>7}" if base else ""))
rows = []
for size in dict.fromkeys(re.findall(r"^-- (\S+) round", text, re.M)):
    block = "".join(re.findall(rf"^-- {re.escape(size)} round \d+\n(.*?)(?=^-- |\Z)", text, re.S | re.M))
    q, o = med(block, r"NCCLTESTS busbw=([\d.]+)"), med(block, r"NCCLTESTS busbw=[\d.]+ oop=([\d.]+)")
    p, t = med(block, r"PREFLIGHT busbw=([\d.]+)"), med(block, r"TORCH .*busbw=([\d.]+)")
    w = med(block, r"PREFLIGHT .*wall=([\d.]+)")
    b, bw = med(block, r"BASE busbw=([\d.]+)"), med(block, r"BASE .*wall=([\d.]+)")
    rows.append((size, q, o, p, t, w, b, bw))
best = max([r[1] for r in rows if r[1]] or [0])
secs = lambda v: "-" if v is None else f"{v:.2f}"
for size, q, o, p, t, w, b, bw in rows:
    ratio = f"{p / q:.3f}" if p and q else "-"
    of_best = f"{q / best:.3f}" if q and best else "-"
    line = f"{size:>6} {fmt(q):>10} {fmt(o):>14} {of_best:>7} {fmt(p):>12} {ratio:>6} {fmt(t):>8} {secs(w):>7}"
    if base:
        line += f" {fmt(b):>8} {(f'{b / q:.3f}' if b and q else '-'):>6} {secs(bw):>7}"
    print(line)
print("ratio: mn-preflight / nccl-tests (in-place); of best: nccl-tests over its best size here; check s: mn-preflight's whole run, launch to exit (--no-pairs); the raw lines are in bench.txt"
      + ("; before: MN_PREFLIGHT_BASE, same rounds" if base else ""))
PY
