#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On a device-tool GPU machine: the hang watch (issue 39) over a real NCCL
# training loop (scripts/torch/train_loop.py, BACKEND=nccl, one GPU per
# rank on n0 and n1) under scripts/cluster/gpu-cluster.sh's Slurm (22.05:
# mn-preflight watch written in front of the program).
#   run: bash scripts/gpu/gpu-watch.sh   carry: .device spank/.libs helper/mn-preflight
# Sections:
#   stop    rank 1 SIGSTOPped in the loop, --abort --window 10: rank 1, n1
#           and its pid named in rank 0's block, with where rank 0 stands
#           (its Flight Recorder, asked through its pipe), the step ended;
#           seconds from the stop
#   dump    the same without --abort and the process group's time-out
#           20 s: rank 0's NCCL watchdog gives up and the Flight Recorder
#           it armed dumps into rank 0's watch directory
#   pause   rank 0 alone writes a file for 25 s (a checkpoint) while rank 1
#           waits in NCCL, --window 10: nobody named, both DONE
#   skip    rank 1 does not call all-reduce 300 and sleeps, --abort --window
#           10: rank 1 named an application desync from the two ranks'
#           Flight Recorders (rank 0 waits in #300), the step ended
#   other   rank 1 calls a 4-byte all-reduce as 300: named the same way
#   kernel  rank 1 starts a GPU kernel that never ends before 300: named
#           GPU stuck (its #300 scheduled, rank 0's started)
#   (RUNS=N: skip, other and kernel N times each, with a line of counts)
#   cost    the loop's time (2,000 all-reduces of 1 MiB, no sleep) without
#           and with the watch (--window 12: the Flight Recorder asked for
#           every 2 s, the most often), 3 runs each, interleaved: the ratio
# SECTIONS="skip kernel" runs those only.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
R=${OUT:-/tmp/mn-gpu-watch}
mkdir -p "$R"
exec > >(tee "$R/watch.txt") 2>&1
source scripts/gpu/gpu-env.sh
LOOP=$TOP/scripts/torch/train_loop.py
good=0
bad=0
verdict() { if [ "$1" = 0 ]; then echo "   as it should"; good=$((good + 1)); else echo "   NOT as it should"; bad=$((bad + 1)); fi; }
now() { date +%s.%N; }
S=(srun -w n0,n1 -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl=auto)

# stopped NAME WATCH-OPTIONS...: rank 1 stopped 3 s into the loop; srun's
# end (or 90 s) awaited. Sets SECS (stop to srun's end), PID; output in $R/NAME.txt.
stopped() {
  local name=$1 d=$R/pids.$1 out=$R/$1.txt
  shift
  rm -rf "$d"; mkdir -p "$d"
  BACKEND=nccl MN_WATCH_PIDS=$d STEPS=1000000 SLEEP=0.01 timeout 90 "${S[@]}" "$PF" watch "$@" -- python3 "$LOOP" >"$out" 2>&1 &
  local spid=$! _
  for _ in $(seq 600); do [ -s "$d/pid.1" ] && [ -s "$d/pid.0" ] && break; sleep 0.1; done
  sleep 3
  PID=$(cat "$d/pid.1" 2>/dev/null)
  local t0; t0=$(now)
  [ -n "$PID" ] && kill -STOP "$PID"
  wait $spid
  SECS=$(python3 -c "print(f'{$(now)-$t0:.1f}')")
  [ -n "$PID" ] && { kill -CONT "$PID" 2>/dev/null; kill -KILL "$PID" 2>/dev/null; }
}

on() { [ -z "${SECTIONS:-}" ] || [[ " $SECTIONS " == *" $1 "* ]]; }

# faulted NAME FAULT: rank 1's FAULT at step 300 (scripts/torch/train_loop.py),
# under --abort --window 10; srun's end (or 120 s) awaited. Sets SECS (the
# fault to srun's end); output in $R/NAME.txt.
faulted() {
  local out=$R/$1.txt
  BACKEND=nccl STEPS=1000000 SLEEP=0.01 FAULT=$2 FAULT_AT=300 timeout 120 "${S[@]}" "$PF" watch --abort --window 10 -- \
    python3 "$LOOP" >"$out" 2>&1
  local end; end=$(now)
  local at; at=$(sed -n 's/^FAULT rank=1 step=[0-9]* at=\([0-9.]*\).*/\1/p' "$out")
  SECS=$(python3 -c "print(f'{$end-${at:-0}:.1f}')")
}

# RUNS=N repeats each of these N times (a campaign: one line a run, then
# named right / one block / median seconds from the fault to srun's end).
for f in skip:application.desync other:application.desync kernel:GPU.stuck; do
  name=${f%%:*} kind=${f#*:}
  on "$name" || continue
  echo "-- $name: rank 1's fault at all-reduce 300, --abort --window 10"
  right=0 secs=()
  for run in $(seq "${RUNS:-1}"); do
    faulted "$name" "$name"
    [ "${RUNS:-1}" = 1 ] && grep -E '^FAULT|mn-nccl watch' "$R/$name.txt" | cut -c1-400 | head -20
    cp "$R/$name.txt" "$R/$name.$run.txt"
    echo "   run $run: srun ended $SECS s after the fault"
    grep -qE "mn-nccl watch: $kind: n1 rank 1 " "$R/$name.txt" &&
      [ "$(grep -cE 'mn-nccl watch: [a-zA-Z][a-zA-Z ]+: n[0-9]' "$R/$name.txt")" = 1 ] &&
      python3 -c "import sys; sys.exit(0 if $SECS < 45 else 1)"
    rc=$?
    [ $rc = 0 ] && { right=$((right + 1)); secs+=("$SECS"); }
    [ "${RUNS:-1}" = 1 ] || [ $rc = 0 ] || grep -E '^FAULT|mn-nccl watch' "$R/$name.txt" | cut -c1-300 | head -8
  done
  [ "${RUNS:-1}" = 1 ] || echo "   $name: $right of ${RUNS} named right in one block; median $(printf '%s\n' "${secs[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}') s from the fault to the step's end"
  [ "$right" = "${RUNS:-1}" ]
  verdict $?
done

on stop && {
echo "-- stop: rank 1 stopped, --abort --window 10"
stopped stop --abort --window 10
grep -E 'mn-nccl watch' "$R/stop.txt"
echo "   srun ended $SECS s after the stop"
grep -qE "mn-nccl watch: process stopped: n1 rank 1 .*pid $PID " "$R/stop.txt" &&
  [ "$(grep -c 'mn-nccl watch: process' "$R/stop.txt")" = 1 ] &&
  grep -qE "mn-nccl watch:   Flight Recorder, rank 0: default_pg: completed #[0-9]+, enqueued to #[0-9]+" "$R/stop.txt" &&
  python3 -c "import sys; sys.exit(0 if $SECS < 20 else 1)"
verdict $?

}

on dump && {
echo "-- dump: rank 1 stopped, --window 10, the process group's time-out 20 s"
PG_TIMEOUT=20 stopped dump --window 10
grep -E 'mn-nccl watch|Watchdog caught|timed out|Flight|dump' "$R/dump.txt" | head -12
d0=$(sed -n 's/^WATCHED rank=0 .*watch_dir=\([^ ]*\).*/\1/p' "$R/dump.txt")
echo "   rank 0's watch directory $d0:"; ls -la "$d0" 2>&1 | sed 's/^/     /'
grep -qE "mn-nccl watch: process stopped: n1 rank 1 " "$R/dump.txt" && ls "$d0" | grep -q '^fr_rank_0'
verdict $?

}

on pause && {
echo "-- pause: rank 0 alone writes a file for 25 s, rank 1 waits in NCCL, --window 10"
BACKEND=nccl STEPS=200 SLEEP=0.01 PAUSE_AT=100 PAUSE=25 PAUSE_RANKS=0 PAUSE_WORK=busy timeout 120 "${S[@]}" "$PF" watch --window 10 -- \
  python3 "$LOOP" >"$R/pause.txt" 2>&1
rc=$?
grep -E '^DONE|mn-nccl watch' "$R/pause.txt"
[ $rc = 0 ] && [ "$(grep -c '^DONE' "$R/pause.txt")" = 2 ] && ! grep -q 'mn-nccl watch:' "$R/pause.txt"
verdict $?

}

on cost && {
echo "-- cost: 2,000 all-reduces of 1 MiB, without and with the watch, 3 runs each"
for i in 1 2 3; do
  for w in without with; do
    cmd=(python3 "$LOOP")
    [ $w = with ] && cmd=("$PF" watch --window 12 -- python3 "$LOOP")
    BACKEND=nccl STEPS=2000 SLEEP=0 timeout 120 "${S[@]}" "${cmd[@]}" >"$R/cost.$w.$i.txt" 2>&1
    echo "   $w $i: $(sed -n 's/^DONE rank=0 .*seconds=\([0-9.]*\).*/\1/p' "$R/cost.$w.$i.txt") s"
  done
done
python3 - "$R" <<'PY'
import glob, re, statistics, sys
t = {}
for w in ("without", "with"):
    t[w] = [float(re.search(r"^DONE rank=0 .*seconds=([0-9.]+)", open(f).read(), re.M).group(1))
            for f in sorted(glob.glob(f"{sys.argv[1]}/cost.{w}.*.txt"))]
m = {w: statistics.median(v) for w, v in t.items()}
print(f"   median {m['without']:.3f} s without, {m['with']:.3f} s with: ratio (without/with) {m['without'] / m['with']:.3f}")
PY
}
echo "gpu-watch: $good as they should, $bad not"
