#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hang watch's accuracy (issue 39, doc/accuracy.md): on the local
# cluster (3 nodes, Debian's torch, a gloo training loop,
# scripts/torch/train_loop.py) each case R times:
#   stop      a rank SIGSTOPped mid-run (abort, window 5 s): named right
#             (that rank and node, nobody else), missed, or someone else
#             named; the time from the stop to the step's end
#   kill      a rank killed (kill -9) mid-run: the same
#   link      a node's eth0 taken down in its namespace mid-run (abort,
#             window 5 s): its node named for its link (by the others or
#             itself), no process named; the time to the first block
#   skip      a rank does not call all-reduce 30 and sleeps (abort, window
#             5 s; the loop's own Flight Recorder, RECORDER=1): named an
#             application desync from the ranks' positions; the time from
#             the fault to the step's end
#   kernel    a rank's all-reduce 30 scheduled and never started (RECORDER=1:
#             the CPU's stand-in for a GPU kernel that never ends) on a node
#             whose GPU reports Xid 79 through the stub NVML
#             (tests/fixtures/fake_nvml.c): named GPU stuck, and that node
#             alone in the exclude file; the time from the fault to the end
#   pause     a 12 s pause (MN_BENCH_PAUSE) on every rank (a checkpoint save): anybody named
#             is a false blame
#   pause0    the same pause on rank 0 alone, busy writing, the others
#             waiting in the all-reduce: the same
# The skip, kernel and pause cases run with RECORDER=1: the ranks' positions go to
# rank 0's watch and are compared.
# The rank hit goes round the ranks. "One block": the runs named right in
# exactly one block (rank 0's watch says the step's; for a link, one from
# the nodes that still reach rank 0: the node cut off says its own once its
# link is back, and when that node is rank 0's, each other says its own).
# Prints a line per run and the table;
# the output of each run that was not right stays in MN_BENCH_KEEP
# (default /tmp/mn-bench-watch-misses).
#
#   scripts/bench/bench-watch.sh [R]     default 20; holds /tmp/mn-cluster.lock
#   MN_BENCH_CASES="stop link" picks the cases (default all seven)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=$(pwd)
runs=${1:-20}
pause=${MN_BENCH_PAUSE:-12}
[ "$(id -u)" -eq 0 ] || { echo "bench-watch: run as root (namespaces)" >&2; exit 2; }
[ -x helper/mn-preflight ] || { echo "bench-watch: build first (bash scripts/build.sh)" >&2; exit 2; }
# The kernel case's stub NVML (a fixture of make check's).
[ -f tests/fixtures/nvml-xid/libnvidia-ml.so.1 ] || make -s fixtures >/dev/null || exit 2
exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
trap 'bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1' EXIT
bash scripts/cluster/local-cluster.sh start >/dev/null || exit 1
export SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf
bash scripts/cluster/local-cluster.sh plugstack required "preflight=$top/helper/mn-preflight" >/dev/null
source scripts/torch/debian-torch.sh
PF=$top/helper/mn-preflight
LOOP=$top/scripts/torch/train_loop.py
T=$(mktemp -d /tmp/mn-bench-watch.XXXXXX)
KEEP=${MN_BENCH_KEEP:-/tmp/mn-bench-watch-misses}
mkdir -p "$KEEP"
ver=$(srun --version | awk '{print $2}')
major=${ver%%.*}; minor=${ver#*.}; minor=$((10#${minor%%.*}))
inline=0
{ [ "$major" -gt 23 ] || { [ "$major" -eq 23 ] && [ "$minor" -ge 11 ]; }; } && inline=1
watched() {  # WHAT-as-plugin ABORT(0/1) -> the srun arguments before the program
  if [ $inline = 1 ]; then echo "--mn-nccl-watch=$1"; else
    echo "$PF"; echo watch; [ "$2" = 1 ] && echo --abort; echo --window; echo 5
    [[ ",$1," =~ ,exclude-file=([^,]+), ]] && { echo --exclude-file; echo "${BASH_REMATCH[1]}"; }
    echo --; fi
}
declare -A right missed wrong times one
one() {  # CASE N
  local c=$1 n=$2 rank=$(( $2 % 3 )) i spid t0 ms=none named
  rm -f "$T"/pid.*
  case $c in
  stop | kill)
    mapfile -t a < <(watched abort,window=5 1)
    MN_WATCH_PIDS=$T STEPS=600 timeout 60 srun -N3 -n3 --mn-nccl "${a[@]}" /usr/bin/python3 "$LOOP" >"$T/out" 2>&1 &
    spid=$!
    for i in $(seq 300); do [ "$(ls "$T"/pid.* 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.1; done
    sleep 1
    local v; v=$(cat "$T/pid.$rank" 2>/dev/null)
    t0=$(date +%s%N)
    [ -n "$v" ] && kill -"$([ $c = stop ] && echo STOP || echo KILL)" "$v"
    wait $spid
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ $c = stop ] && [ -n "$v" ] && kill -CONT "$v" 2>/dev/null
    ;;
  link)
    # The hit node's eth0 down in its namespace, up again 2 s after the
    # first "link down" block (or 30 s): the time is to that block.
    mapfile -t a < <(watched abort,window=5 1)
    MN_WATCH_PIDS=$T STEPS=600 timeout 90 srun -N3 -n3 --mn-nccl "${a[@]}" /usr/bin/python3 "$LOOP" >"$T/out" 2>&1 &
    spid=$!
    for i in $(seq 300); do [ "$(ls "$T"/pid.* 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.1; done
    sleep 1
    t0=$(date +%s%N)
    ip netns exec "node$rank" ip link set eth0 down
    for i in $(seq 300); do
      if grep -q 'mn-nccl watch: link down' "$T/out"; then ms=$(( ($(date +%s%N) - t0) / 1000000 )); sleep 2; break; fi
      sleep 0.1
    done
    ip netns exec "node$rank" ip link set eth0 up
    # Its default route went with the link (node 0's address is found by it).
    ip netns exec "node$rank" ip route replace default via "$(ip netns exec "node$rank" ip -4 -o addr show eth0 | awk '{print $4}' | sed 's|\.[0-9]*/.*|.1|')"
    wait $spid
    ;;
  skip)
    mapfile -t a < <(watched abort,window=5 1)
    RECORDER=1 STEPS=100000 SLEEP=0.05 FAULT=skip FAULT_AT=30 FAULT_RANK=$rank timeout 90 \
      srun -N3 -n3 --mn-nccl "${a[@]}" /usr/bin/python3 "$LOOP" >"$T/out" 2>&1
    local end at; end=$(date +%s%N)
    at=$(sed -n 's/^FAULT rank=[0-9]* step=[0-9]* at=\([0-9]*\)\.\([0-9]*\).*/\1\2/p' "$T/out")
    [ -n "$at" ] && ms=$(( end / 1000000 - at ))
    ;;
  kernel)
    # Its all-reduce 30 recorded scheduled and never started (the CPU's
    # stand-in for a GPU kernel that never ends), its node's GPU reporting
    # Xid 79 through the stub NVML: GPU stuck, and its node excluded.
    echo "node$rank 79" >"$T/xids"
    : >"$T/exclude"
    mapfile -t a < <(watched "abort,window=5,exclude-file=$T/exclude" 1)
    RECORDER=1 STEPS=100000 SLEEP=0.05 FAULT=kernel FAULT_AT=30 FAULT_RANK=$rank FAKE_NVML_XIDS=$T/xids \
      LD_LIBRARY_PATH=$top/tests/fixtures/nvml-xid timeout 90 \
      srun -N3 -n3 --mn-nccl "${a[@]}" /usr/bin/python3 "$LOOP" >"$T/out" 2>&1
    local end at; end=$(date +%s%N)
    at=$(sed -n 's/^FAULT rank=[0-9]* step=[0-9]* at=\([0-9]*\)\.\([0-9]*\).*/\1\2/p' "$T/out")
    [ -n "$at" ] && ms=$(( end / 1000000 - at ))
    ;;
  pause | pause0)
    mapfile -t a < <(watched window=5 0)
    RECORDER=1 STEPS=40 PAUSE_AT=10 PAUSE=$pause PAUSE_RANKS=$([ $c = pause ] && echo all || echo 0) \
      PAUSE_WORK=$([ $c = pause ] && echo sleep || echo busy) timeout $((pause + 78)) \
      srun -N3 -n3 --mn-nccl "${a[@]}" /usr/bin/python3 "$LOOP" >"$T/out" 2>&1
    ;;
  esac
  named=$(sed -n 's/^.*mn-nccl watch: \(process [a-z ]*\|ended by its watchdog\|application desync\|GPU stuck\|busy outside collectives\): \(node[0-9]*\) rank \([0-9]*\).*/\2:\3/p' "$T/out" | sort -u | tr '\n' ' ')
  local want="node$rank:$rank "
  # A GPU stuck with its node's Xid: right only with that node excluded.
  [ $c = kernel ] && [ "$(cat "$T/exclude" 2>/dev/null)" != "node$rank" ] && named+="excluded:$(paste -sd, "$T/exclude" 2>/dev/null) "
  # A link is named by its node: "link down: node1: ..." from another node,
  # "link down: node1 rank 1 ..." from its own.
  if [ $c = link ]; then
    named+=$(sed -n 's/^.*mn-nccl watch: link down: \(node[0-9]*\)[: ].*/\1:link/p' "$T/out" | sort -u | tr '\n' ' ')
    want="node$rank:link "
  fi
  # The blocks that named it (a subject's first line each): one, rank 0's,
  # since the watches tell rank 0's (a link's node, cut off, may still say
  # its own once its link is back).
  # A link: one block from the nodes that still reach rank 0 ("link down:
  # nodeX: ..."); the node cut off says its own ("link down: nodeX rank N
  # ...") once its link is back, and is not counted.
  local blocks single
  blocks=$(grep -cE 'mn-nccl watch: (process [a-z ]+|ended by its watchdog|link down|application desync|GPU stuck|busy outside collectives): ' "$T/out")
  single=$blocks
  [ $c = link ] && single=$(grep -cE 'mn-nccl watch: link down: node[0-9]+: ' "$T/out")
  case $c in
  stop | kill | link | skip | kernel)
    [ "$named" = "$want" ] && [ "$single" = 1 ] && one[$c]=$((${one[$c]:-0} + 1))
    if [ "$named" = "$want" ]; then right[$c]=$((${right[$c]:-0} + 1)); times[$c]+="$ms "
    elif [ -z "$named" ]; then missed[$c]=$((${missed[$c]:-0} + 1))
    else wrong[$c]=$((${wrong[$c]:-0} + 1)); fi ;;
  *)
    if [ -z "$named" ] && [ "$(grep -c '^DONE' "$T/out")" = 3 ]; then right[$c]=$((${right[$c]:-0} + 1))
    elif [ -n "$named" ]; then wrong[$c]=$((${wrong[$c]:-0} + 1))
    else missed[$c]=$((${missed[$c]:-0} + 1)); fi ;;
  esac
  # Kept for a look: every run that was not right.
  if [ "${right[$c]:-0}" -lt "$n" ]; then cp "$T/out" "$KEEP/$c.$n.out"; fi
  echo "$c $n: rank $rank; named: ${named:-nobody} in $blocks block(s) ($single counted); ${ms} ms; DONE $(grep -c "^DONE" "$T/out"); srun: $(grep -m1 "srun: error" "$T/out")"
}
for n in $(seq "$runs"); do
  for c in ${MN_BENCH_CASES:-stop kill link skip kernel pause pause0}; do one $c "$n"; done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "-"}'; }
echo
echo "bench-watch: Slurm $ver ($([ $inline = 1 ] && echo 'srun --mn-nccl-watch' || echo 'mn-preflight watch in front'))," \
  "3 nodes, window 5 s, $runs runs per case"
printf '%-8s %6s %9s %7s %12s %s\n' case right "one block" missed "someone else" "median ms to the step's end"
# pause cases: right = nobody named and every rank DONE; missed = nobody named but the loop did not finish;
# link: the time is to the first "link down" block; skip: from the fault to the step's end
for c in ${MN_BENCH_CASES:-stop kill link skip kernel pause pause0}; do
  printf '%-8s %6s %9s %7s %12s %s\n' "$c" "${right[$c]:-0}" "$(case $c in pause*) echo - ;; *) echo "${one[$c]:-0}" ;; esac)" \
    "${missed[$c]:-0}" "${wrong[$c]:-0}" "$(echo "${times[$c]:-}" | median)"
done
rm -rf "$T"
