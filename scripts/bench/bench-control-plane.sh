#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What mn-preflight's control plane costs as the step grows (issue 20,
# item 3; doc/scale.md models it): on the local cluster, healthy checks
# (CPU path) at 3, 8, 16 and 32 nodes x 1 task and 32 nodes x 8 tasks,
# R runs each, and per run:
#   wall     srun's launch to its exit (the healthy verdict as a job sees it)
#   spread   launch to the last rank's start (srun and slurmd, not ours)
#   rdzv     the last rank's start to rank 0 having every rank: the
#            rendezvous' own time, launch skew taken out
#   ready, go, verdict   rank 0's readiness, go words and verdict
#   ctl      rdzv + ready + go + verdict: the control plane's own time
#   coll, pairs          the all-reduce and the pair rounds (apart)
#   conns    connections rank 0 accepted; socks: sockets it held at the verdict
#   msgs, KiB            rank 0's control messages and bytes, in/out
#   cpu      rank 0's CPU time (user + system) for the whole check
# From mn-preflight --json's "control" object and the test hook
# MN_PREFLIGHT_START_LOG (each rank's start), so the build must be
# configured with --enable-test-hooks (scripts/build.sh does).
#
#   scripts/bench/bench-control-plane.sh [R]      default 3 runs per shape
#   MN_BENCH_SHAPES="3x1 8x1 16x1 32x1 32x8"      nodes x tasks per node
#                  NxT:K  N nodes x T tasks as emulated nodes, K to a slurmd
#                  (srun -N N/K --ntasks-per-node T*K --mn-emulate-nodes=K):
#                  1024x8:32 is 8,192 ranks on 32 slurmd
#   MN_BENCH_BUILDS="before=/tmp/old/mn-preflight after=helper/mn-preflight"
#                  several builds, interleaved run by run (default: this
#                  tree's helper/mn-preflight as "this")
#
#   MN_BENCH_TIMEOUT=S     mn-preflight's --timeout (default its own, 60 s)
#   MN_BENCH_STEP_LIMIT=S  a check's srun is killed after S s (default 300)
#   MN_BENCH_KEEP=DIR      each check's .json, .err and .starts kept in DIR
#   MN_BENCH_CLUSTER=gpu   on a GPU machine of the device tool (16 cores):
#                  scripts/cluster/gpu-cluster.sh's Slurm on loopback with
#                  as many nodes without GPUs as the largest shape, checks
#                  on the CPU path (--cpu); run through scripts/gpu/gpu-control-plane.sh
#
# Prints one line per check, then per shape and build the medians, and the
# growth of each figure against the ranks' growth. Holds /tmp/mn-cluster.lock.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=$(pwd)
runs=${1:-3}
shapes=${MN_BENCH_SHAPES:-3x1 8x1 16x1 32x1 32x8}
builds=${MN_BENCH_BUILDS:-this=$top/helper/mn-preflight}
[ "$(id -u)" -eq 0 ] || { echo "bench-control-plane: run as root (namespaces)" >&2; exit 2; }
# shape NxT[:K] -> "N T K": nodes and tasks per node as the check sees
# them, and the emulated nodes per slurmd (1: none); the slurmd are N/K.
shape() {
  local s=$1 k=1 n t
  case $s in *:*) k=${s#*:} s=${s%:*} ;; esac
  n=${s%x*} t=${s#*x}
  [ $((n % k)) = 0 ] || { echo "bench-control-plane: shape $1: $k does not divide $n nodes" >&2; exit 2; }
  echo "$n $t $k"
}
maxn=0 maxt=8  # slurmd nodes, and tasks on one slurmd
for s in $shapes; do
  read -r n t k < <(shape "$s") || exit 2
  [ $((n / k)) -gt "$maxn" ] && maxn=$((n / k))
  [ $((t * k)) -gt "$maxt" ] && maxt=$((t * k))
done
for b in $builds; do
  bin=${b#*=}
  [[ $bin = /* ]] || bin=$top/$bin
  [ -x "$bin" ] || { echo "bench-control-plane: no $bin (build first: bash scripts/build.sh)" >&2; exit 2; }
done

exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
t0=$(date +%s)
step_args=() check_args=()
[ -n "${MN_BENCH_TIMEOUT:-}" ] && check_args+=(--timeout "$MN_BENCH_TIMEOUT")
if [ "${MN_BENCH_CLUSTER:-local}" = gpu ]; then
  source scripts/cluster/slurm-bundle-env.sh
  export MN_GPU_CLUSTER_CPU_NODES=$maxn MN_GPU_CLUSTER_CPU_NODE_CPUS=$((maxt > 16 ? maxt : 16))
  trap 'bash "$top/scripts/cluster/gpu-cluster.sh" stop >/dev/null 2>&1' EXIT
  bash scripts/cluster/gpu-cluster.sh start >/dev/null 2>&1
  started() { [ "$(sinfo -h -N -p cpu -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" = "$maxn" ]; }
  step_args=(-p cpu) check_args+=(--cpu)
else
  export MN_CLUSTER_NODES=$maxn MN_CLUSTER_CPUS=$maxt
  trap 'bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1' EXIT
  # On a busy machine 32 slurmd may register after local-cluster.sh has
  # stopped waiting: give them a while longer.
  started() { [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | wc -l)" = "$maxn" ]; }
  # A cluster a run before left half up (namespaces of a larger one) first goes.
  bash scripts/cluster/local-cluster.sh stop >/dev/null 2>&1
  bash scripts/cluster/local-cluster.sh start >/dev/null 2>&1
  eval "$(bash scripts/cluster/local-cluster.sh env)"
fi
for _ in $(seq 60); do started && break; sleep 2; done
started || { echo "bench-control-plane: the cluster did not start"; sinfo; exit 1; }
out=$(mktemp -d /tmp/mn-ctlbench.XXXXXX)
rows=$out/rows.tsv
echo "== mn-preflight's control plane, CPU path, $runs runs per shape; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at start; $(uname -r); $(date -u +%F)"
echo "   cluster of $maxn nodes started in $(($(date +%s) - t0)) s"

# check NAME BIN NODES TASKS RUN [K]: one healthy check of NODES x TASKS
# (emulated, K to a slurmd, when K > 1); a row into $rows.
check() {
  local name=$1 bin=$2 n=$3 t=$4 r=$5 k=${6:-1} f="$out/$1-$3x$4-$5"
  rm -f "$f.starts"
  local launch rc emu=() w
  [ "$k" -gt 1 ] && emu=(--mn-emulate-nodes="$k")
  # Thousands of ranks on one host share its ephemeral ports, and a check's
  # connections wait in TIME_WAIT for 60 s after it: the next check's
  # ranks then found no free port to listen on. Wait for them to drain.
  for ((w = 0; w < 90; w++)); do
    [ "$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "06"' | wc -l)" -lt 2000 ] && break
    sleep 1
  done
  [ "$w" -gt 0 ] && echo "  (waited ${w} s for the last check's connections in TIME_WAIT)"
  launch=$(date +%s.%N)
  MN_PREFLIGHT_START_LOG=$f.starts timeout "${MN_BENCH_STEP_LIMIT:-300}" srun "${step_args[@]}" -N$((n / k)) \
    --ntasks-per-node=$((t * k)) "${emu[@]}" --mn-nccl=auto "$bin" --json "${check_args[@]}" >"$f.json" 2>"$f.err"
  rc=$?
  python3 - "$name" "$n" "$t" "$r" "$rc" "$launch" "$(date +%s.%N)" "$f" >>"$rows" <<'EOF'
import json, sys
name, n, t, r, rc, launch, end, f = sys.argv[1:]
launch, end = float(launch), float(end)
try:
    rep = json.loads(open(f + ".json").read().strip().splitlines()[-1])
except Exception:
    rep = {}
c = rep.get("control", {})
ph = c.get("phases_s", {})
starts = [float(l.split()[1]) for l in open(f + ".starts") if len(l.split()) == 2] if rc == "0" else []
row = {"build": name, "shape": f"{n}x{t}", "ranks": int(n) * int(t), "run": int(r), "rc": int(rc),
       "verdict": rep.get("verdict", "?"), "wall": end - launch}
if c and starts:
    gathered = c["start_unix"] + ph.get("rendezvous", 0)
    row.update(spread=max(starts) - launch, rdzv=gathered - max(starts), ready=ph.get("readiness", 0),
               go=ph.get("go", 0), coll=ph.get("collective", 0), pairs=ph.get("pairs", 0),
               verdict_s=ph.get("verdict", 0), conns=c["accepted"], socks=c["sockets"],
               msgs_in=c["messages_received"], msgs_out=c["messages_sent"],
               kib_in=c["bytes_received"] / 1024, kib_out=c["bytes_sent"] / 1024, cpu=c["cpu_s"])
    row["ctl"] = row["rdzv"] + row["ready"] + row["go"] + row["verdict_s"]
print(json.dumps(row))
EOF
  python3 - "$rows" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
if "ctl" in r:
    print(f"  {r['build']:<7} {r['shape']:>5} #{r['run']} exit {r['rc']} {r['verdict']} wall {r['wall']:6.2f} s, "
          f"spread {r['spread']:5.2f}, ctl {r['ctl']:5.3f} (rdzv {r['rdzv']:.3f} ready {r['ready']:.3f} go {r['go']:.3f} "
          f"verdict {r['verdict_s']:.3f}), coll {r['coll']:.2f}, pairs {r['pairs']:.2f}, conns {r['conns']}, cpu {r['cpu']:.2f} s")
else:
    print(f"  {r['build']:<7} {r['shape']:>5} #{r['run']} exit {r['rc']} {r['verdict']} wall {r['wall']:6.2f} s (no figures)")
EOF
  [ "$rc" = 0 ] || { python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print("\n".join(r.get("problems", [])[:4]) or r.get("timed_out", ""))' "$f.json" 2>/dev/null; sed -n '1,6p' "$f.err"; } | sed 's/^/      /'
}

for s in $shapes; do
  read -r n t k < <(shape "$s")
  for r in $(seq 1 "$runs"); do
    for b in $builds; do
      bin=${b#*=}
      [[ $bin = /* ]] || bin=$top/$bin
      check "${b%%=*}" "$bin" "$n" "$t" "$r" "$k"
    done
  done
done

python3 - "$rows" "$shapes" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
shapes = [s.split(":")[0] for s in sys.argv[2].split()]
builds = list(dict.fromkeys(r["build"] for r in rows))
cols = [("wall", "wall s", 2), ("spread", "spread", 2), ("rdzv", "rdzv", 3), ("ready", "ready", 3), ("go", "go", 3),
        ("verdict_s", "verdict", 3), ("ctl", "ctl s", 3), ("coll", "coll", 2), ("pairs", "pairs", 2),
        ("conns", "conns", 0), ("socks", "socks", 0), ("msgs_in", "msgs in", 0), ("msgs_out", "msgs out", 0),
        ("kib_in", "KiB in", 0), ("kib_out", "KiB out", 0), ("cpu", "cpu s", 2)]
med = {}
print("\nmedians per shape (nodes x tasks); ctl = rdzv + ready + go + verdict, the control plane's own time")
print(f"{'build':<7} {'shape':>5} {'ranks':>5} {'ok':>3} " + " ".join(f"{h:>8}" for _, h, _ in cols))
for b in builds:
    for s in shapes:
        rs = [r for r in rows if r["build"] == b and r["shape"] == s]
        good = [r for r in rs if r["rc"] == 0 and "ctl" in r]
        m = {k: statistics.median(r[k] for r in good) for k, _, _ in cols} if good else {}
        med[b, s] = m
        ranks = rs[0]["ranks"] if rs else 0
        cells = " ".join(f"{m[k]:>8.{p}f}" if m else f"{'-':>8}" for k, _, p in cols)
        print(f"{b:<7} {s:>5} {ranks:>5} {len(good):>1}/{len(rs):<1} {cells}")
print("\ngrowth from the smallest to each shape (ranks' own growth first); ~1 = flat, = ranks' = linear")
keys = [("ctl", "ctl"), ("rdzv", "rdzv"), ("verdict_s", "verdict"), ("conns", "conns"), ("msgs_in", "msgs in"),
        ("kib_in", "KiB in"), ("kib_out", "KiB out"), ("cpu", "cpu"), ("wall", "wall")]
print(f"{'build':<7} {'shape':>5} {'ranks x':>8} " + " ".join(f"{h:>8}" for _, h in keys))
for b in builds:
    base = med.get((b, shapes[0]))
    r0 = next((r["ranks"] for r in rows if r["shape"] == shapes[0]), 1)
    for s in shapes[1:]:
        m = med.get((b, s))
        if not base or not m:
            continue
        rk = next(r["ranks"] for r in rows if r["shape"] == s) / r0
        cells = " ".join(f"{m[k] / base[k]:>8.1f}" if base[k] > 0 else f"{'-':>8}" for k, _ in keys)
        print(f"{b:<7} {s:>5} {rk:>8.1f} {cells}")
if len(builds) > 1:
    print("\nside by side, ctl s (control plane's own time) and rank 0's cpu s:")
    for s in shapes:
        print(f"  {s:>5}: " + ", ".join(f"{b} ctl {med[b, s].get('ctl', float('nan')):.3f} cpu {med[b, s].get('cpu', float('nan')):.2f}"
                                      for b in builds if (b, s) in med))
bad = [r for r in rows if r["rc"] != 0]
print(f"\n{len(rows) - len(bad)} of {len(rows)} checks passed")
sys.exit(1 if bad else 0)
EOF
rc=$?
# MN_BENCH_KEEP=DIR: each check's output (.json, .err, .starts) kept there.
if [ -n "${MN_BENCH_KEEP:-}" ]; then mkdir -p "$MN_BENCH_KEEP" && cp -r "$out"/. "$MN_BENCH_KEEP"/; fi
rm -rf "$out"
exit $rc
