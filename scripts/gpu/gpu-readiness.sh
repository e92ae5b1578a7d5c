#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Readiness and a busy GPU, before and after side by side, on a device-tool
# machine of 2 GPUs or more (scripts/cluster/gpu-cluster.sh's Slurm):
#   run: MN_PREFLIGHT_BASE=PATH bash scripts/gpu/gpu-readiness.sh [ROUNDS]
#        (or MN_PREFLIGHT_BUILDS="NAME=PATH ...", several builds)
#   carry: .device spank/.libs helper/mn-preflight (and the earlier binary)
# ROUNDS (default 3) interleaved rounds, each binary in turn:
#   healthy  srun -w n0,n1, one task per GPU, --json: launch to exit and
#            the phases (control.phases_s)
#   busy     another process computes on the last GPU (n1's; big's last):
#            --mn-emulate-nodes=2 on big, then n0,n1: exit code, launch to
#            exit, each node's verdict (only the busy GPU's node named)
# Prints every run and the medians by binary and case. Leaves
# NCCL_NVLS_ENABLE as the machine sets it.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-readiness}
mkdir -p "$R"
source scripts/cluster/slurm-bundle-env.sh
PF=$TOP/helper/mn-preflight
BASE=${MN_PREFLIGHT_BASE:-}
ROUNDS=${1:-3}
nccl=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -f "$nccl" ] && export MN_PREFLIGHT_NCCL=$nccl
bash scripts/cluster/gpu-cluster.sh start >"$R/cluster.txt" 2>&1 || { cat "$R/cluster.txt"; exit 1; }
ngpu=$(nvidia-smi -L | grep -c '^GPU')
half=$((ngpu / 2)); [ "$half" -ge 1 ] || half=1
victim=$((ngpu - 1))
bins=("after=$PF"); [ -z "$BASE" ] || bins+=("before=$BASE")
# MN_PREFLIGHT_BUILDS="NAME=PATH ...": these builds instead, interleaved.
[ -z "${MN_PREFLIGHT_BUILDS:-}" ] || read -r -a bins <<<"$MN_PREFLIGHT_BUILDS"
echo "== machine: $ngpu x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); NCCL ${MN_PREFLIGHT_NCCL:-libnccl.so.2}; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset}"
n=0

# one TAG CASE BINARY SRUN-ARGS...: one check; "RUN tag= case= rc= s= ...".
one() {
  local tag=$1 case=$2 bin=$3 t0 rc out
  shift 3
  out=$R/$case-$tag-$((++n)).json
  t0=$(date +%s.%N)
  rm -f "$out.starts"
  MN_PREFLIGHT_START_LOG=$out.starts timeout 120 srun "$@" --mn-nccl=auto "$bin" --json >"$out" 2>"$out.err"
  rc=$?
  python3 - "$out" "$tag" "$case" "$rc" "$t0" "$(date +%s.%N)" <<'PY'
import json, sys
p, tag, case, rc, t0, t1 = sys.argv[1:]
t0, t1 = float(t0), float(t1)
line = f"RUN tag={tag} case={case} rc={rc} s={t1 - t0:.2f}"
try:
    d = json.loads(open(p).read().strip().splitlines()[-1])
    c = d.get("control", {})
    ph = c.get("phases_s", {})
    # From the test hook MN_PREFLIGHT_START_LOG: "RANK TIME" at each rank's
    # start, "RANK TIME checked" when its check is over.
    try:
        log = [l.split() for l in open(p + ".starts")]
        starts = [float(f[1]) for f in log if len(f) == 2]
        done = [float(f[1]) for f in log if len(f) == 3]
    except (OSError, ValueError):
        starts, done = [], []
    # launch: srun's launch to the last rank's start.
    if starts:
        line += f" launch={max(starts) - t0:.2f}"
    if "start_unix" in c:
        verdict_at = c['start_unix'] + c['elapsed_s']
        # tail: rank 0's verdict to srun's exit, in two: to the last rank
        # done with its check, then the processes' exit and srun's wait.
        line += f" to_rank0={c['start_unix'] - t0:.2f} tail={t1 - verdict_at:.2f}"
        if done:
            line += f" checked={max(done) - verdict_at:.2f} exited={t1 - max(done):.2f}"
    line += " phases=" + ",".join(f"{k}:{v:.2f}" for k, v in ph.items())
    a = d.get("allreduce", {})
    line += f" init_s={a.get('init_s')} busbw={a.get('busbw_gbps')}"
    line += " nodes=" + ";".join(f"{x['host']}:{x['verdict'][:60]}" for x in d.get("nodes", []))
    line += " problems=" + " | ".join(q[:100] for q in d.get("problems", []))[:300]
except Exception as e:
    line += f" (no JSON: {e})"
print(line)
PY
}

for ((round = 1; round <= ROUNDS; round++)); do
  for b in "${bins[@]}"; do
    one "${b%%=*}" healthy "${b#*=}" -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half
  done
done | tee "$R/healthy.txt"

# MN_READINESS_CASES=healthy: the healthy runs only.
if [ "${MN_READINESS_CASES:-all}" = healthy ]; then
  bash scripts/cluster/gpu-cluster.sh stop >/dev/null 2>&1
  : >"$R/busy.txt"
else
CUDA_VISIBLE_DEVICES=$victim python3 scripts/gpu/gpu-hog.py compute >"$R/hog.txt" 2>&1 &
HOG=$!
for _ in $(seq 120); do grep -q '^HOG' "$R/hog.txt" && break; sleep 0.25; done
echo "another process computes on GPU $victim: pid $HOG $(grep -c '^HOG' "$R/hog.txt")"
for ((round = 1; round <= ROUNDS; round++)); do
  for b in "${bins[@]}"; do
    one "${b%%=*}" busy-emulated "${b#*=}" -w big -N1 -n$ngpu --gres=gpu:$ngpu --mn-emulate-nodes=2
    one "${b%%=*}" busy-n0n1 "${b#*=}" -w n0,n1 -N2 --ntasks-per-node=$half --gres=gpu:$half
  done
done | tee "$R/busy.txt"
kill "$HOG"; wait "$HOG" 2>/dev/null
bash scripts/cluster/gpu-cluster.sh stop >/dev/null 2>&1
fi
python3 - "$R/healthy.txt" "$R/busy.txt" <<'PY'
import re, statistics, sys
text = "".join(open(p).read() for p in sys.argv[1:])
rows = {}
for tag, case, rc, s in re.findall(r"RUN tag=(\S+) case=(\S+) rc=(\d+) s=([\d.]+)", text):
    rows.setdefault((case, tag), []).append((float(s), rc))
print("launch to exit (s), medians, by case and binary:")
for (case, tag), v in sorted(rows.items()):
    print(f"  {case:<14} {tag:<7} {statistics.median(x for x, _ in v):.2f}  (runs {', '.join(f'{x:.2f}' for x, _ in v)}; exit {','.join(sorted(set(r for _, r in v)))})")
PY
