#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a container image must bring for mn-preflight, on real GPUs (issue 26):
#  - GPUs and no usable NCCL on one node: the check FAILs naming that node
#    (never a PASS timed over TCP alone); with --cpu it PASSes and says it
#    checked the network alone;
#  - mn-preflight from a root holding glibc, the driver's libcuda and
#    libnvidia-ml and an NCCL, nothing else (no libstdc++, libcrypto, hwloc,
#    libibverbs: what an image may lack): the GPU path PASSes, busbw given.
#   OUT=DIR bash scripts/gpu/gpu-containers.sh   (device tool: carry .device spank/.libs helper/mn-preflight)
# Ends with "gpu-containers: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-containers}
mkdir -p "$R"
source scripts/cluster/slurm-bundle-env.sh
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] || nccl=$(ldconfig -p | awk '/libnccl.so.2 / {print $NF; exit}')
[ -f "$nccl" ] || { echo "gpu-containers: no libnccl.so.2 here"; echo "gpu-containers: 0 passed, 1 failed"; exit 1; }
bash scripts/cluster/gpu-cluster.sh start || exit 1
passed=0 failed=0
# check LABEL WANT-RC PATTERN... -- SRUN-ARGS: passes when the step exits
# WANT-RC and every PATTERN matches its output.
check() {
  local label=$1 want=$2; shift 2
  local pats=()
  while [ "$1" != -- ]; do pats+=("$1"); shift; done
  shift
  echo; echo "== $label"; echo "\$ srun $*"
  timeout 300 srun "$@" >"$R/out.txt" 2>&1
  local rc=$? ok=1 p
  grep -E '^(n0|n1|big|c[0-9]) |^(PASS|FAIL|problem|note)|all-reduce \(' "$R/out.txt" | head -12
  [ $rc -eq "$want" ] || ok=0
  for p in "${pats[@]}"; do grep -qE "$p" "$R/out.txt" || { echo "   missing: $p"; ok=0; }; done
  if [ $ok = 1 ]; then passed=$((passed + 1)); echo "-- ok"
  else failed=$((failed + 1)); echo "-- FAILED (rc=$rc, wanted $want)"; tail -20 "$R/out.txt"; fi
}
both=(-w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto)
# n1 given an NCCL path that does not exist: its GPUs stay visible to CUDA.
no_nccl_on_n1="if [ \$SLURMD_NODENAME = n1 ]; then export MN_PREFLIGHT_NCCL=$R/no-such/libnccl.so.2; else export MN_PREFLIGHT_NCCL=$nccl; fi"
check "n1 has GPUs and no NCCL: FAIL naming n1, no TCP-only PASS" 1 \
  '^FAIL' '^n1 .*no GPU path on [0-9]+ GPU' 'n1 rank 1 has [0-9]+ GPU\(s\) and no GPU path' -- \
  "${both[@]}" bash -c "$no_nccl_on_n1; exec $TOP/helper/mn-preflight --no-pairs"
grep -qE '^PASS' "$R/out.txt" && { echo "   a PASS was printed"; failed=$((failed + 1)); }
check "the same with --cpu: PASS over TCP, saying the GPUs and NCCL were not checked" 0 \
  '^PASS' 'all-reduce \(cpu, TCP ring' '^note: --cpu: the network was checked over TCP alone' -- \
  "${both[@]}" bash -c "$no_nccl_on_n1; exec $TOP/helper/mn-preflight --no-pairs --cpu"

# A root with glibc, the driver's user-space libraries and NCCL: what an
# image without hwloc, libibverbs, libstdc++ or libcrypto has.
root=$R/glibc-driver-nccl
rm -rf "$root"
mkdir -p "$root/lib64" "$root/usr/lib" "$root/tmp" "$root/dev" "$root/proc" "$root/sys" "$root/etc"
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
copy_lib() { [ -n "$1" ] && [ -f "$1" ] && cp -L "$1" "$root/usr/lib/$(basename "$1")"; }
for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
  copy_lib "$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ {print $NF; exit}')"
done
for l in libcuda.so.1 libnvidia-ml.so.1; do
  p=$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ {print $NF; exit}')
  copy_lib "$p" || echo "   no $l on this machine"
done
cp -L "$nccl" "$root/usr/lib/libnccl.so.2"
# What the driver's libraries and NCCL need themselves (NCCL: libstdc++ and
# libgcc_s, which any image with NCCL has): theirs, not mn-preflight's.
for pass in 1 2; do
  for f in "$root"/usr/lib/*; do
    for n in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
      [ -f "$root/usr/lib/$n" ] || [ "$n" = ld-linux-x86-64.so.2 ] ||
        copy_lib "$(ldconfig -p | awk -v x="$n" '$1 == x && /x86-64/ {print $NF; exit}')"
    done
  done
done
cp "$TOP/helper/mn-preflight" "$root/mn-preflight"
echo "/usr/lib" >"$root/etc/ld.so.conf"
echo "the root's libraries: $(ls "$root/usr/lib" | tr '\n' ' ')"
echo "mn-preflight's own: $(readelf -d "$root/mn-preflight" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
# The GPU device files and /proc, /sys as a container runtime gives them.
mount --rbind /dev "$root/dev" && mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys"
# The root has no env or shell: the variables are set before chroot.
in_root="export LD_LIBRARY_PATH=/usr/lib MN_PREFLIGHT_NCCL=/usr/lib/libnccl.so.2; exec /usr/sbin/chroot $root /mn-preflight --no-pairs"
check "mn-preflight from a root of glibc + driver + NCCL only: the GPU path PASSes" 0 \
  '^PASS' 'all-reduce \(gpu, NCCL ' 'result correct' -- \
  "${both[@]}" bash -c "$in_root"
umount -R "$root/dev" "$root/sys" 2>/dev/null
umount "$root/proc" 2>/dev/null
bash scripts/cluster/gpu-cluster.sh stop >/dev/null 2>&1
echo; echo "gpu-containers: $passed passed, $failed failed"
[ $failed -eq 0 ]
