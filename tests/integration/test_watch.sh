#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hang watch (issue 39): a real gloo training loop (Debian's torch,
# scripts/torch/train_loop.py) under mn-preflight watch, on the local
# cluster. From Slurm 23.11 the plugin puts the watch in front of each task
# (srun --mn-nccl-watch); before, srun refuses the option naming the form
# that works there, and the same watch is written in front of the program.
# Faults: a rank stopped (SIGSTOP) and a rank killed mid-run: that rank, its
# node and pid named, nobody else; with abort the step ends within seconds.
# A node's link taken down mid-run (its eth0 in its namespace): that node's
# link named by the others, and by its own watcher; back up, the loop recovers.
# Healthy: a pause on every rank and one on rank 0 alone, longer than the
# window: nobody named. Rank 0's watch says the step's one block: the others
# tell it behind the check's doorway, and strangers at its port are not
# heard. And the watcher's own CPU.
source "$(dirname "$0")/lib.sh"
PF=$TOP/helper/mn-preflight
LOOP=$TOP/scripts/torch/train_loop.py
plugstack required "preflight=$PF"

slurm_release_facts
echo "# Slurm $ver: $([ $inline = 1 ] && echo 'srun --mn-nccl-watch' || echo 'mn-preflight watch written in front of the program')"

# watched WHAT CMD...: the srun arguments that watch CMD with WHAT (as
# --mn-nccl-watch=WHAT reads it) on this release.
watched() {
  local what=$1
  shift
  if [ $inline = 1 ]; then
    printf '%s\n' "--mn-nccl-watch=$what" "$@"
  else
    local a=("$PF" watch)
    [[ ",$what," == *,abort,* ]] && a+=(--abort)
    [[ "$what" =~ window=([0-9]+) ]] && a+=(--window "${BASH_REMATCH[1]}")
    [[ ",$what," =~ ,exclude-file=([^,]+), ]] && a+=(--exclude-file "${BASH_REMATCH[1]}")
    [[ ",$what," =~ ,history=([^,]+), ]] && a+=(--history "${BASH_REMATCH[1]}")
    printf '%s\n' "${a[@]}" -- "$@"
  fi
}

# fault SIG RANK WHAT: 3 ranks on 3 nodes in the loop; SIG to RANK's
# process once every rank is in it.
# Sets RC, MS (from the signal to srun's end, or "none"), VICTIM; the
# step's output in $OUT/last.
# start_loop WHAT: the loop on 3 nodes watched with WHAT (STEPS, 600 unless
# set; LIMIT, 120 unless set, seconds for srun), in the background (SPID),
# returning once every rank is in it.
start_loop() {
  local i
  rm -f "$OUT"/pid.*
  mapfile -t args < <(watched "$1" "$PY" "$LOOP")
  MN_WATCH_PIDS=$OUT STEPS=${STEPS:-600} timeout "${LIMIT:-120}" srun -N3 -n3 --mn-nccl "${args[@]}" >"$OUT/last" 2>&1 &
  SPID=$!
  for i in $(seq 300); do
    [ "$(ls "$OUT"/pid.* 2>/dev/null | wc -l)" -ge 3 ] && break
    sleep 0.1
  done
  sleep 1
}

fault() {
  local sig=$1 rank=$2 what=$3 spid t0
  start_loop "$what"
  spid=$SPID
  VICTIM=$(cat "$OUT/pid.$rank" 2>/dev/null)
  MS=none
  [ -n "$VICTIM" ] || { wait $spid; RC=$?; return; }
  t0=$(date +%s%N)
  kill -"$sig" "$VICTIM"
  wait $spid
  RC=$?
  MS=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$sig" = STOP ] && kill -CONT "$VICTIM" 2>/dev/null
}

t_stopped_rank() {
  local name="a rank stopped (SIGSTOP) mid-run, abort,window=5: only that rank named (node1, rank 1, its pid, state T, wchan), the step ended within 15 s of the stop; its JSON report private to the user; NCCL's RAS asked once at the step's own loopback address (NCCL_RAS_ADDR armed alike on every rank; rank 0 answers with a report of a rank missing, RAS_STANDIN): its telling lines in the evidence, the whole in nccl_ras.txt (0600)"
  rm -f "$OUT/ras_asked"
  RAS_STANDIN=$TOP/tests/fixtures/nccl_ras/missing_rank.txt fault STOP 1 abort,window=5
  local report addr
  report=$(sed -n 's/^.*mn-nccl watch:   report: //p' "$OUT/last" | head -1)
  addr=$(sed -n 's/^RAS_ADDR rank=[0-9] addr=//p' "$OUT/last" | sort -u)
  [[ "$addr" =~ ^127\.[1-9][0-9]*\.[0-9]+\.[1-9][0-9]*:28028$ ]] && [ "$(count '^RAS_ADDR rank=')" = 3 ] &&
    [ "$(wc -l <"$OUT/ras_asked" 2>/dev/null)" = 1 ] && grep -q '^CLIENT PROTOCOL 2|TIMEOUT 2|STATUS|$' "$OUT/ras_asked" &&
    has "mn-nccl watch:   evidence: .*NCCL RAS at ${addr//./\\.} \(whole in /.*/nccl_ras\.txt\): NCCL version 2\.28\.9 compiled with CUDA 12\.9; communicators 0 +1 +2 +0-1 +2 +2 +RUNNING +INCOMPLETE; Errors: INCOMPLETE; .*Errors: The missing rank: 1; Warnings: TIMEOUT" &&
    [ "$(stat -c %a "$(dirname "$report")/nccl_ras.txt" 2>/dev/null)" = 600 ] || { fail "$name" "RAS: addr=$addr asked=$(paste -sd' ' "$OUT/ras_asked" 2>/dev/null)"; return; }
  [ "$MS" != none ] && [ "$MS" -lt 15000 ] &&
    has "mn-nccl watch: process stopped: node1 rank 1 \(LOCAL_RANK 0\), pid $VICTIM \(python3\): state T for [5-9] s" &&
    has 'mn-nccl watch:   evidence: wchan do_signal_stop' && [ "$(count 'mn-nccl watch: process')" = 1 ] &&
    has 'ending step [0-9]+\.[0-9]+ \(scancel\)' && ! has '^DONE' &&
    python3 -c "import json,os,sys; j=json.load(open('$report')); st=os.stat('$report'); sys.exit(0 if j['kind']=='process stopped' and j['rank']=='1' and j['pid']==$VICTIM and st.st_mode&0o777==0o600 and os.stat(os.path.dirname('$report')).st_mode&0o777==0o700 else 1)" ||
    { fail "$name" "rc=$RC, srun ended ${MS} ms after the stop, report=$report"; return; }
  pass "$name (srun ended ${MS} ms after the stop)"
}

t_killed_rank() {
  local name="a rank killed (kill -9) mid-run, abort: that rank named dead (node2, rank 2, SIGKILL), nobody else, the step ended within 10 s"
  fault KILL 2 abort,window=5
  [ "$MS" != none ] && [ "$MS" -lt 10000 ] &&
    has "mn-nccl watch: process dead: node2 rank 2 \(LOCAL_RANK 0\), pid $VICTIM \(.*\): killed by signal 9 \(SIGKILL\)" &&
    [ "$(count 'mn-nccl watch: process')" = 1 ] && ! has '^DONE' ||
    { fail "$name" "rc=$RC, srun ended ${MS} ms after the kill"; return; }
  pass "$name (srun ended ${MS} ms after the kill)"
}

t_stopped_rank_report_only() {
  local name="report (no abort): the stopped rank named once, and the step goes on (still running 20 s after the stop, ended by the test)"
  LIMIT=25 fault STOP 0 window=5
  [ $RC -eq 124 ] && has "mn-nccl watch: process stopped: node0 rank 0 .*state T for" &&
    [ "$(count 'mn-nccl watch: process stopped')" = 1 ] && [ "$(count 'mn-nccl watch: process')" = 1 ] &&
    has 'the step goes on; srun --mn-nccl-watch=abort ends it at this point' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_pauses_are_not_hangs() {
  local name="a 20 s pause on every rank, then one on rank 0 alone, busy writing (the others wait in the all-reduce), window=5, the ranks' positions compared (RECORDER=1; two ranks at least): nobody named, every rank DONE; the Flight Recorder armed into a 0700 directory"
  local ok=1 why=""
  for who in all 0; do
    mapfile -t args < <(watched window=5 "$PY" "$LOOP")
    # With the loop's own Flight Recorder (RECORDER=1), so that the ranks'
    # positions go to rank 0's watch and are compared: rank 0 alone is
    # busy, as a checkpoint's writer is, while the others wait in #11.
    # 20 s: a position is sent once it held the window (5 s) from when its
    # watch first saw it, up to two probes (4 s) into the pause, and its
    # dump is read late on a loaded machine (CI's sid root, niced, missed
    # rank 0's in a 15 s pause).
    run env RECORDER=1 STEPS=40 PAUSE_AT=10 PAUSE=20 PAUSE_RANKS=$who PAUSE_WORK=$([ $who = 0 ] && echo busy || echo sleep) \
      srun -N3 -n3 --mn-nccl "${args[@]}"
    # Rank 0's watch compared them: its positions.jsonl holds two ranks
    # at least (over its comparisons: each compares what came by then;
    # in CI's niced sid root, starved beside the host's builds, one rank's
    # position came too late for the pause, twice) and names nobody.
    local d0; d0=$(sed -n 's/^WATCHED rank=0 .*watch_dir=\([^ ]*\).*/\1/p' "$OUT/last")
    local compared; compared=$(python3 -c "
import json
ls = [json.loads(l) for l in open('$d0/positions.jsonl')]
print(','.join(sorted({r['rank'] for l in ls for r in l['ranks']})), sum(len(l['named']) for l in ls))" 2>&1)
    [ $RC -eq 0 ] && [ "$(count '^DONE')" = 3 ] && ! has 'mn-nccl watch:' && [[ "$compared" =~ ^(0,1|0,2|1,2|0,1,2)\ 0$ ]] &&
      [ "$(count '^WATCHED rank=[0-9] fr_buffer=2000 watch_dir=/.*/mn-nccl-watch\.[0-9]+\.[0-9]+\.[A-Za-z0-9]{6} dir_mode=0o700$')" = 3 ] ||
      { ok=0; why+=" [PAUSE_RANKS=$who rc=$RC compared: $compared]"; }
  done
  [ $ok = 1 ] || { fail "$name" "$why"; return; }
  pass "$name"
}

t_desync_skip() {
  local name="rank 1 does not call all-reduce 30 and sleeps (RECORDER=1: the loop's own Flight Recorder and torch's dump pipe, gloo), abort,window=5: the ranks' positions compared by rank 0's watch name rank 1 an application desync (node1, idle, its last #31; ranks 0 and 2 wait in #32: the warm-up's all-reduce, then the loop's from step 0), nobody else, no node excluded, the step ended; again with rank 1 dumping of its own at the fault and reading its pipe no more (FR_DEAF=1, as torch's watchdog after an NCCL error): its position read from that dump; the block says where every compared rank's dump lies (HOST:PATH)"
  local exclude=$OUT/exclude why="" times=""
  for deaf in 0 1; do
    echo node7 >"$exclude"
    mapfile -t args < <(watched "abort,window=5,exclude-file=$exclude" "$PY" "$LOOP")
    run env RECORDER=1 FR_DEAF=$deaf STEPS=100000 SLEEP=0.05 FAULT=skip FAULT_AT=30 srun -N3 -n3 --mn-nccl "${args[@]}"
    local end; end=$(date +%s.%N)
    local at; at=$(sed -n 's/^FAULT rank=1 step=30 at=\([0-9.]*\).*/\1/p' "$OUT/last")
    local secs; secs=$(python3 -c "print(f'{$end-${at:-0}:.1f}')")
    has "mn-nccl watch: application desync: node1 rank 1 \(LOCAL_RANK 0\), pid [0-9]+ \(python3\): has not called collective #32 of default_pg \(gloo:all_reduce \(Float \[262144\]\)\), in which ranks? (0|2|0, 2) wait: its last is #31" &&
      has "mn-nccl watch:   evidence: Flight Recorder: default_pg: completed #31, enqueued to #31, started #31; nothing waiting; cpu [0-9.]+ % of a core" &&
      has "mn-nccl watch:   Flight Recorder dumps: (node[02]:/[^ ]+/fr_rank_[02] )*node1:/[^ ]+/mn-nccl-watch\.[0-9]+\.[0-9]+\.[A-Za-z0-9]+/fr_rank_1( |$)" &&
      [ "$(count 'mn-nccl watch: [a-zA-Z][a-zA-Z ]+: node[0-9]')" = 1 ] && has 'ending step [0-9]+\.[0-9]+ \(scancel\)' &&
      [ "$(cat "$exclude")" = node7 ] && [ -n "$at" ] && python3 -c "import sys; sys.exit(0 if $secs < 60 else 1)" ||
      { why+=" [FR_DEAF=$deaf: rc=$RC, srun ended $secs s after the fault; exclude file: $(paste -sd, "$exclude")]"; break; }
    times+=" ${secs} s"
  done
  [ -z "$why" ] || { fail "$name" "$why"; return; }
  pass "$name (srun ended$times after the fault)"
}

# A GPU stuck on rank 1 (FAULT=kernel with the loop's recorder: its
# all-reduce 30 enqueued, never started), node1's GPU speaking through a
# stub NVML (tests/fixtures/fake_nvml.c: the Xids of FAKE_NVML_XIDS).
t_gpu_stuck() {
  local name="rank 1's all-reduce #32 scheduled and never started while ranks 0 and 2 started theirs (RECORDER=1, FAULT=kernel; compared with those in a probe after the first came: one or both), abort,window=5,exclude-file=F, NVML through a stub: with Xid 79 on node1 (its GPU off the bus) rank 1 is named GPU stuck with the Xid as evidence and node1 goes into F; with Xid 13 (the program's) it is named GPU stuck and no node is excluded; nobody else named, the step ended"
  local ex=$OUT/exclude xids=$OUT/xids why=""
  for xid in 79 13; do
    echo node7 >"$ex"
    echo "node1 $xid" >"$xids"
    mapfile -t args < <(watched "abort,window=5,exclude-file=$ex" "$PY" "$LOOP")
    run env RECORDER=1 STEPS=100000 SLEEP=0.05 FAULT=kernel FAULT_AT=30 FAKE_NVML_XIDS="$xids" \
      LD_LIBRARY_PATH="$TOP/tests/fixtures/nvml-xid${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" srun -N3 -n3 --mn-nccl "${args[@]}"
    local ok=1
    has "mn-nccl watch: GPU stuck: node1 rank 1 \(LOCAL_RANK 0\), pid [0-9]+ \(python3\): its gloo:all_reduce \(Float \[262144\]\) #32 of default_pg was scheduled on its GPU and has not started for [0-9]+ s, while ranks? (0|2|0, 2) started theirs" &&
      [ "$(count 'mn-nccl watch: [a-zA-Z][a-zA-Z ]+: node[0-9]')" = 1 ] && has 'ending step [0-9]+\.[0-9]+ \(scancel\)' || ok=0
    if [ $xid = 79 ]; then
      has "mn-nccl watch: node1: NVML: Xid 79 on GPU 0000:3b:00.0 at .*: the GPU has fallen off the bus" &&
        has "mn-nccl watch:   evidence: .*NVML: Xid 79 on GPU 0000:3b:00.0" && has "and node1's GPUs reported a hardware fault \(NVML\)" &&
        [ "$(cat "$ex")" = "node[1,7]" ] || ok=0
    else
      ! has 'NVML: Xid' && [ "$(cat "$ex")" = node7 ] || ok=0
    fi
    [ $ok = 1 ] || { why+=" [Xid $xid: rc=$RC, exclude file: $(paste -sd, "$ex")]"; break; }
  done
  [ -z "$why" ] || { fail "$name" "$why"; return; }
  pass "$name"
}

# link_fault WHAT DOWN_S: 3 ranks in the loop; node1's eth0 taken down in
# its namespace once every rank is in it, up again DOWN_S seconds later or
# 2 s after the first "link down" block (DOWN_S=0). Sets RC, MS (from the
# link's loss to the first block, or "none"); the output in $OUT/last.
link_fault() {
  local down=$2 i spid t0
  start_loop "$1"
  spid=$SPID
  t0=$(date +%s%N)
  ip netns exec "${LINK_NODE:-node1}" ip link set eth0 down
  MS=none
  for i in $(seq 300); do
    if [ "$MS" = none ] && grep -q 'mn-nccl watch: link down' "$OUT/last"; then
      MS=$(( ($(date +%s%N) - t0) / 1000000 ))
      [ "$down" = 0 ] && { sleep 2; break; }
    fi
    [ "$down" != 0 ] && [ $(( ($(date +%s%N) - t0) / 1000000000 )) -ge "$down" ] && break
    sleep 0.1
  done
  ip netns exec "${LINK_NODE:-node1}" ip link set eth0 up
  # The link's loss took the node's default route with it (the plugin
  # finds node 0's reachable address by it): back as the cluster set it.
  ip netns exec "${LINK_NODE:-node1}" ip route replace default via "$(ip netns exec "${LINK_NODE:-node1}" ip -4 -o addr show eth0 | awk '{print $4}' | sed 's|\.[0-9]*/.*|.1|')"
  wait $spid
  RC=$?
}

t_link_down() {
  local name="node1's eth0 taken down mid-run, abort,window=5,exclude-file=F,history=D: one block, rank 0's watch's, names node1's link (its address, the data it does not acknowledge, the namer's own eth0 up, seen from node0 and/or node2), no process named, node1 added to F once (node7 kept) and a fabric failure in D/node1.jsonl; the step ends"
  local ex=$OUT/exclude hist=$OUT/hist
  echo "node7" >"$ex"
  rm -rf "$hist"
  link_fault "abort,window=5,exclude-file=$ex,history=$hist" 0
  local summary; summary=$("$PF" history "$hist" 2>&1)
  [ "$MS" != none ] && [ "$MS" -lt 15000 ] && [ $RC -ne 124 ] && [ $RC -ne 0 ] &&
    [ "$(cat "$ex")" = "node[1,7]" ] && has "mn-nccl watch:   exclude file: node1 added to $ex" &&
    has "mn-nccl watch:   history: line in $hist/node1.jsonl" && [ "$(ls "$hist")" = node1.jsonl ] &&
    grep -q '"kind":"fabric"' "$hist/node1.jsonl" && grep -qE '^node1 +[0-9]+ +[0-9]+ +fabric' <<<"$summary" &&
    has "mn-nccl watch: link down: node1: node1 \(10\.250\.0\.11\) does not acknowledge the program's data from node[02]: [0-9]+ (bytes|KiB) unacknowledged on [0-9]+ connections?, [0-9]+ retransmissions?, for [5-9] s; node[02]'s eth0 is up: the link of node1, or the path to it, is down" &&
    has 'mn-nccl watch:   evidence: (the kernel on node[02] retransmits to 10\.250\.0\.11 and hears no acknowledgement; )+seen from node[02] rank [02] \(pid [0-9]+\)(, node[02] rank [02] \(pid [0-9]+\))?$' &&
    [ "$(count 'mn-nccl watch: link down: node1: ')" = 1 ] && [ "$(count 'exclude file: node1 added')" = 1 ] &&
    has 'ending step [0-9]+\.[0-9]+ \(scancel\)' && ! has 'mn-nccl watch: process' && ! has 'link down: node[02]' && ! has '^DONE' ||
    { fail "$name" "rc=$RC, first block ${MS} ms after the link went down"; return; }
  pass "$name (named ${MS} ms after the link went down)"
}

t_rank0_node_cut_off() {
  local name="node0's eth0 (rank 0's node) taken down mid-run, abort,window=5,exclude-file=F: one block naming node0's link, said by the standby (node1's first task's watch, at the same watch port) with why rank 0's could not be told, seen from node1 and/or node2; node0 added to F once; the step ends"
  local ex=$OUT/exclude
  echo "node7" >"$ex"
  LINK_NODE=node0 link_fault "abort,window=5,exclude-file=$ex" 0
  [ "$MS" != none ] && [ $RC -ne 124 ] && [ $RC -ne 0 ] && [ "$(cat "$ex")" = "node[0,7]" ] &&
    [ "$(count 'mn-nccl watch: link down: node0: ')" = 1 ] && [ "$(count 'exclude file: node0 added')" = 1 ] &&
    has 'mn-nccl watch:   evidence: (the kernel on node[12] retransmits to 10\.250\.0\.10 and hears no acknowledgement; )+seen from node[12] rank [12] \(pid [0-9]+\)(, node[12] rank [12] \(pid [0-9]+\))?$' &&
    has "mn-nccl watch:   rank 0's watch \(10\.250\.0\.10:[0-9]+\) could not be told \(.*\), so node1's watch \(the standby\) says the step's block" &&
    ! has 'mn-nccl watch: process' && ! has 'link down: node[12]' ||
    { fail "$name" "rc=$RC, first block ${MS} ms after the link went down, exclude file: $(cat "$ex")"; return; }
  pass "$name (named ${MS} ms after the link went down)"
}

t_rdma_port_down() {
  local name="an RDMA port of the step's goes DOWN mid-run (the DGX H100 fixture tree, MN_NCCL_SYSFS_ROOT; the plugin's NCCL_IB_HCA names its 8 ports), abort,window=5,exclude-file=F: each node's watch names its own mlx5_3:1 (DOWN, phys_state Disabled, the kernel's word: host evidence), one block, each node added to F; mlx5_1:1 unreadable names nobody"
  local ex=$OUT/exclude i
  echo node7 >"$ex"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  local root=$OUT/sysfs/dgx-h100
  mapfile -t args < <(watched "abort,window=5,exclude-file=$ex" "$PY" "$LOOP")
  rm -f "$OUT"/pid.*
  MN_NCCL_SYSFS_ROOT=$root MN_WATCH_PIDS=$OUT STEPS=600 timeout 90 srun -N3 -n3 --mn-nccl "${args[@]}" >"$OUT/last" 2>&1 &
  local spid=$!
  for i in $(seq 300); do [ "$(ls "$OUT"/pid.* 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.1; done
  sleep 2
  echo "1: DOWN" >"$root/class/infiniband/mlx5_3/ports/1/state"
  echo "3: Disabled" >"$root/class/infiniband/mlx5_3/ports/1/phys_state"
  rm -f "$root/class/infiniband/mlx5_1/ports/1/state"
  wait $spid
  RC=$?
  [ $RC -ne 0 ] && [ $RC -ne 124 ] && [ "$(cat "$ex")" = "node[0-2,7]" ] &&
    [ "$(count "mn-nccl watch: link down: node[0-2] rank [0-2] \(LOCAL_RANK 0\), pid [0-9]+ \(python3\): mlx5_3:1, an RDMA port of the step's on node[0-2], is DOWN \(phys_state Disabled\) for [5-9] s")" = 3 ] &&
    has "evidence: node[0-2]'s $root/class/infiniband/mlx5_3/ports/1/state: DOWN" &&
    ! has 'mlx5_1:1' && ! has 'mn-nccl watch: process' && has 'ending step [0-9]+\.[0-9]+ \(scancel\)' ||
    { fail "$name" "rc=$RC exclude file: $(cat "$ex")"; return; }
  pass "$name"
}

# port_counters ROOT PORTDIR VALUE...: the port's counter files, written
# as the kernel does (rcv, then local_ack_timeout_err, then symbol_error;
# the other link-error counters stay 0).
port_counters() {
  local d=$1/$2
  mkdir -p "$d/counters" "$d/hw_counters"
  echo "$3" >"$d/counters/port_rcv_packets"
  echo "$4" >"$d/hw_counters/local_ack_timeout_err"
  echo "$5" >"$d/counters/symbol_error"
  local c
  for c in link_error_recovery port_rcv_errors local_link_integrity_errors; do echo 0 >"$d/counters/$c"; done
}

t_rdma_port_carries_nothing() {
  local name="an RDMA port of the step's stays ACTIVE and carries nothing (the DGX H100 tree, its counters written by the test): every rank waits in all-reduce 20 for ever (FAULT=fabric, RECORDER=1), abort,window=5,exclude-file=F; silent (no packet in, its senders time out): each node's watch names mlx5_3:1 with its counters, blames no node, the step ended; garbled (symbol errors climbing too): each node added to F"
  local kind ok=1 why="" root=$OUT/sysfs/dgx-h100 ex=$OUT/exclude i p
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  local port=class/infiniband/mlx5_3/ports/1
  for kind in silent garbled; do
    echo node7 >"$ex"
    for p in "$root"/class/infiniband/*/ports/*; do port_counters "$root" "${p#"$root"/}" 1000 0 0; done
    mapfile -t args < <(watched "abort,window=5,exclude-file=$ex" "$PY" "$LOOP")
    rm -f "$OUT"/pid.*
    MN_NCCL_SYSFS_ROOT=$root MN_WATCH_PIDS=$OUT RECORDER=1 FAULT=fabric FAULT_AT=20 STEPS=600 \
      timeout 90 srun -N3 -n3 --mn-nccl "${args[@]}" >"$OUT/last" 2>&1 &
    local spid=$!
    # The port carries (packets in, a time-out now and then) until the
    # ranks' fault; from then on nothing comes in and its senders time out.
    local rcv=1000 to=0 se=0
    for i in $(seq 900); do
      kill -0 $spid 2>/dev/null || break
      if grep -q '^FAULT ' "$OUT/last"; then
        to=$((to + 1))
        [ $kind = garbled ] && se=$((se + 7))
      else
        rcv=$((rcv + 50))
        [ $((i % 5)) = 0 ] && to=$((to + 1))
      fi
      port_counters "$root" $port $rcv $to $se
      sleep 0.5
    done
    wait $spid
    RC=$?
    local words="mn-nccl watch: link down: node[0-2] rank [0-2] \(LOCAL_RANK 0\), pid [0-9]+ \(python3\): mlx5_3:1, an RDMA port of the step's on node[0-2], is ACTIVE and took in no packet for [0-9]+ s while"
    if [ $kind = silent ]; then
      [ $RC -ne 0 ] && [ $RC -ne 124 ] && [ "$(cat "$ex")" = node7 ] &&
        [ "$(count "$words its senders timed out [0-9]+ times waiting for acknowledgements: it carries nothing, from this port or its far side")" = 3 ] &&
        has "node[0-2]'s $root/$port/counters/port_rcv_packets: [0-9]+, unchanged for [0-9]+ s while this node's ranks wait in a collective" &&
        has "node[0-2]'s $root/$port/hw_counters/local_ack_timeout_err: [0-9]+ \(\+[0-9]+\)" &&
        has "not added: a port that hears nothing may be let down by its far side" &&
        ! grep -E 'mn-nccl watch: (process [a-z]+|link down|application desync|GPU stuck|busy outside collectives|ended by its watchdog): ' "$OUT/last" | grep -qv 'mlx5_3:1' &&
        has 'ending step [0-9]+\.[0-9]+ \(scancel\)' ||
        { ok=0; why+=" [silent rc=$RC exclude file: $(cat "$ex")]"; }
    else
      [ $RC -ne 0 ] && [ $RC -ne 124 ] && [ "$(cat "$ex")" = "node[0-2,7]" ] &&
        [ "$(count "$words its link counted [0-9]+ errors: the link carries nothing")" = 3 ] &&
        has 'ending step [0-9]+\.[0-9]+ \(scancel\)' || { ok=0; why+=" [garbled rc=$RC exclude file: $(cat "$ex")]"; }
    fi
    [ $ok = 1 ] || break
  done
  [ $ok = 1 ] || { fail "$name" "$why"; return; }
  pass "$name"
}

t_link_down_and_back() {
  local name="node1's eth0 down for 9 s, then up (window=5, no abort): rank 0's watch names node1's link once (node0's and node2's findings), node1's watcher its own eth0 down in a block of its own (it cannot reach rank 0's), nobody's process; the loop recovers and every rank is DONE"
  STEPS=120 link_fault window=5 9
  [ $RC -eq 0 ] && [ "$(count '^DONE')" = 3 ] &&
    has "mn-nccl watch: link down: node1 rank 1 \(LOCAL_RANK 0\), pid [0-9]+ \(python3\): node1's eth0 is down: the program's data waits behind it \([0-9]+ (bytes|KiB) on [0-9]+ connections?\) for [5-9] s" &&
    has "mn-nccl watch: link down: node1: node1 \(10\.250\.0\.11\) does not acknowledge" &&
    [ "$(count 'mn-nccl watch: link down: node1: ')" = 1 ] &&
    has "mn-nccl watch:   rank 0's watch \(10\.250\.0\.10:[0-9]+\) could not be told \(.*\), so this node says it$" &&
    ! has 'mn-nccl watch: process' && ! has 'link down: node[02]' ||
    { fail "$name" "rc=$RC, first block ${MS} ms after the link went down"; return; }
  pass "$name (first block ${MS} ms after the link went down)"
}

# A slow link still carries data: node1's eth0 throttled both ways (tc tbf,
# latency 100 ms) while the loop runs; its retransmissions are acknowledged
# between the kernel's timeouts, and nothing is named.
t_slow_link_is_not_down() {
  local name="node1's link throttled to 20 Mbit/s, then 2 Mbit/s (tc tbf), window=5: the loop slows, nobody named, every rank DONE"
  local ok=1 why="" rate steps
  for rate in 20mbit:12 2mbit:2; do
    steps=${rate#*:} rate=${rate%:*}
    tc qdisc add dev mnv1 root tbf rate "$rate" burst 32kbit latency 100ms
    ip netns exec node1 tc qdisc add dev eth0 root tbf rate "$rate" burst 32kbit latency 100ms
    mapfile -t args < <(watched window=5 "$PY" "$LOOP")
    run env STEPS="$steps" srun -N3 -n3 --mn-nccl "${args[@]}"
    tc qdisc del dev mnv1 root 2>/dev/null
    ip netns exec node1 tc qdisc del dev eth0 root 2>/dev/null
    [ $RC -eq 0 ] && [ "$(count '^DONE')" = 3 ] && ! has 'mn-nccl watch:' || { ok=0; why+=" [$rate rc=$RC]"; }
    why+=" $rate: $(lines '^DONE rank=0' | sed 's/.*seconds=\([0-9.]*\).*/\1/') s;"
  done
  [ $ok = 1 ] || { fail "$name" "$why"; return; }
  pass "$name (the loop's time:$why)"
}

# Strangers at rank 0's watch port (the step's MN_NCCL_WATCH_PORT): bytes
# that prove no step secret, a connection that says nothing. None of them
# is heard: nobody named, and rank 0's watch says at its end who came.
t_strangers_at_the_watch_port() {
  local name="strangers at rank 0's watch port mid-run (garbage three times, a silent connection), window=5: nobody named, every rank DONE; rank 0's watch says at its end that they came from node2's address and none was heard"
  local pid0 port i
  STEPS=80 start_loop window=5
  pid0=$(cat "$OUT/pid.0" 2>/dev/null)
  port=$(tr '\0' '\n' <"/proc/$pid0/environ" 2>/dev/null | sed -n 's/^MN_NCCL_WATCH_PORT=//p')
  if [ -n "$port" ]; then
    for i in 1 2 3; do
      ip netns exec node2 timeout 5 bash -c "exec 3<>/dev/tcp/10.250.0.10/$port; printf 'GARBAGE %s\r\n' $i >&3; sleep 0.3"
    done
    ip netns exec node2 timeout 5 bash -c "exec 3<>/dev/tcp/10.250.0.10/$port; sleep 3.5"
  fi
  wait "$SPID"
  RC=$?
  [ -n "$port" ] && [ $RC -eq 0 ] && [ "$(count '^DONE')" = 3 ] && ! has 'mn-nccl watch: [a-z ]+: node' &&
    has "mn-nccl watch: node0 rank 0's watch port $port: [0-9]+ connections? from 10\.250\.0\.12 .*; none was heard" ||
    { fail "$name" "rc=$RC, port=${port:-none}"; return; }
  pass "$name"
}

t_watchers_cpu() {
  local name="the watcher's own CPU over a 20 s step: under 1 % of a core"
  mapfile -t args < <(watched window=30 bash -c 'sleep 20; echo "TICKS $(cut -d" " -f14,15 /proc/$PPID/stat) $(getconf CLK_TCK)"')
  run srun -N1 -n1 --mn-nccl "${args[@]}"
  local u s hz pct
  read -r u s hz <<<"$(lines '^TICKS' | awk '{print $2, $3, $4}')"
  [ -n "${hz:-}" ] || { fail "$name" "rc=$RC"; return; }
  pct=$(awk -v u="$u" -v s="$s" -v hz="$hz" 'BEGIN {printf "%.2f", 100 * (u + s) / hz / 20}')
  awk -v p="$pct" 'BEGIN {exit !(p < 1)}' || { fail "$name" "${pct} % of a core"; return; }
  pass "$name (${pct} % of a core)"
}

t_refusals() {
  local name="bad values name the option and the fix; $([ $inline = 1 ] && echo 'without mn_nccl the watch is refused' || echo 'before 23.11 srun refuses --mn-nccl-watch naming the form that works, and the program never starts')"
  local ok=1 why=""
  run srun -N1 -n1 --mn-nccl --mn-nccl-watch=abrt echo PROGRAM STARTED
  [ $RC -ne 0 ] && has "--mn-nccl-watch: 'abrt' is not report, abort, off, window=S, exclude-file=PATH or history=DIR; give --mn-nccl-watch=report, abort, off" &&
    ! has 'PROGRAM STARTED' || { ok=0; why+=" [abrt rc=$RC]"; }
  run env MN_NCCL_WATCH=window=1 srun -N1 -n1 --mn-nccl echo PROGRAM STARTED
  [ $RC -ne 0 ] && has "MN_NCCL_WATCH: window='1' is not seconds from 5 to 3600" && ! has 'PROGRAM STARTED' ||
    { ok=0; why+=" [window=1 rc=$RC]"; }
  if [ $inline = 1 ]; then
    run srun -N1 -n1 --mn-nccl-watch echo PROGRAM STARTED
    [ $RC -ne 0 ] && has '--mn-nccl-watch needs mn_nccl on' && ! has 'PROGRAM STARTED' || { ok=0; why+=" [no mn_nccl rc=$RC]"; }
  else
    run srun -N1 -n1 --mn-nccl --mn-nccl-watch echo PROGRAM STARTED
    [ $RC -ne 0 ] && has "--mn-nccl-watch needs Slurm 23.11 or newer \(spank_prepend_task_argv\); this is Slurm $major\.0?$minor" &&
      has 'srun --mn-nccl=auto mn-preflight watch -- PROGRAM' && ! has 'PROGRAM STARTED' || { ok=0; why+=" [22.05 rc=$RC]"; }
  fi
  [ $ok = 1 ] || { fail "$name" "$why"; return; }
  pass "$name"
}

t_site_default() {
  local name="plugstack watch=abort,window=5 (optional line, as the package installs it): $([ $inline = 1 ] && echo 'a step without the option is watched, and the user'"'"'s --mn-nccl-watch=off wins' || echo 'ignored before 23.11, the step runs unwatched')"
  local ok=1 why=""
  plugstack optional "preflight=$PF" watch=abort,window=5
  run srun -N1 -n1 --mn-nccl bash -c 'echo "DIR ${MN_NCCL_WATCH_DIR:-none} PARENT $(cat /proc/$PPID/comm)"'
  if [ $inline = 1 ]; then
    [ $RC -eq 0 ] && has '^DIR /.*/mn-nccl-watch\.[0-9]+\.[0-9]+\.[A-Za-z0-9]{6} PARENT mn-preflight$' || { ok=0; why+=" [default rc=$RC]"; }
    run srun -N1 -n1 --mn-nccl --mn-nccl-watch=off bash -c 'echo "DIR ${MN_NCCL_WATCH_DIR:-none}"'
    [ $RC -eq 0 ] && has '^DIR none$' || { ok=0; why+=" [off rc=$RC]"; }
  else
    [ $RC -eq 0 ] && has '^DIR none PARENT ' && ! has 'PARENT mn-preflight' || { ok=0; why+=" [22.05 rc=$RC]"; }
  fi
  plugstack required "preflight=$PF"
  [ $ok = 1 ] || { fail "$name" "$why"; return; }
  pass "$name"
}

run_checks
