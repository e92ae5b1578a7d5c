#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mn-preflight on the real local Slurm (CPU path: TCP ring on eth0): a
# healthy check, a slow link (tc tbf), an odd MTU, a rank that never
# arrives, a rank stopped (SIGSTOP) in the middle of the check, rank 0
# stopped or killed (another rank gives the verdict), a rank whose set-up
# fails (the MN_PREFLIGHT_FAIL_SETUP test hook), a rank without the step
# secret, bad options, the prolog mode, a node whose GPUs no NCCL drives.
source "$(dirname "$0")/lib.sh"
PF=$TOP/helper/mn-preflight
plugstack required
# The fault-injection tests below need the test build's hooks
# (configure --enable-test-hooks, as scripts/build.sh does).
hooks_built_in() {
  "$PF" --version | grep -q 'test hooks built in' && return 0
  fail "$name" "$PF was built without --enable-test-hooks (scripts/build.sh turns them on)"
  return 1
}

slow_off() {
  tc qdisc del dev mnv1 root 2>/dev/null
  ip netns exec node1 tc qdisc del dev eth0 root 2>/dev/null
  ip netns exec node2 ip link set eth0 mtu 1500 2>/dev/null
  return 0
}
trap slow_off EXIT

# row HOST: the table row of a node.
row() { grep -E "^$1 " "$OUT/last" || true; }

t_pass() {
  local name="healthy: 6 ranks on 3 nodes, TCP ring all-reduce correct, every pair tested, PASS, exit 0"
  run srun -N3 -n6 --mn-nccl=auto "$PF"
  [ $RC -eq 0 ] && has '^PASS' && has 'all-reduce \(cpu, TCP ring on eth0\): 6 ranks, .* result correct' &&
    [ "$(count '^node[0-2] .* ok$')" = 3 ] && has 'pair tests: 3 pairs in 3 rounds' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# rank0_json EXPRS: prints EXPRS (Python, over d) of the verdict object rank 0
# wrote to $OUT/json.0. Run the step with srun -o "$OUT/json.%t": srun
# forwards a long line in pieces, and another task's output may land between
# them on a shared stdout.
rank0_json() {
  $PY -c 'import json,sys
d=json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][0])
print('"$1"')' "$OUT/json.0" 2>&1
}

t_json() {
  local name="--json: one object with verdict, nodes, allreduce and pairs"
  run srun -N3 -n3 -o "$OUT/json.%t" -e "$OUT/err.%t" --mn-nccl "$PF" --json
  local got
  got=$(rank0_json 'd["verdict"], d["exit_code"], len(d["nodes"]), len(d["pairs"]), d["allreduce"]["correct"], d["allreduce"]["ranks"], sorted(n["verdict"] for n in d["nodes"])')
  [ $RC -eq 0 ] && [ "$got" = "PASS 0 3 3 True 3 ['ok', 'ok', 'ok']" ] || { fail "$name" "got: $got"; return; }
  pass "$name"
}

t_slow_node() {
  local name="node1's link slowed with tc tbf: FAIL, exit 1, node1 named slow, node0 and node2 not blamed"
  tc qdisc add dev mnv1 root tbf rate 50mbit burst 32kbit latency 100ms
  ip netns exec node1 tc qdisc add dev eth0 root tbf rate 50mbit burst 32kbit latency 100ms
  run srun -N3 --ntasks-per-node=1 --mn-nccl "$PF"
  slow_off
  local verdict_s; verdict_s=$(sed -n 's/^FAIL (\([0-9.]*\) s)$/\1/p' "$OUT/last")
  [ $RC -eq 1 ] && has '^FAIL' && row node1 | grep -q 'slow: its pairs run at' &&
    row node0 | grep -q ' ok$' && row node2 | grep -q ' ok$' && has '^problem: node1: slow' &&
    ! has '^problem: node[02]' || { fail "$name" "rc=$RC"; return; }
  pass "$name (verdict in ${verdict_s} s)"
}

# The same on a machine kept busy on purpose (two busy loops beside the
# cluster, as on a shared CI machine or login node): noise must not name a
# healthy node, and the slow one is named on a confirming retest.
t_slow_node_busy_machine() {
  local name="node1's link slowed, two CPU hogs beside the cluster: node1 named on a confirming retest, nobody else"
  local hogs=() h
  for h in 1 2; do
    (while :; do :; done) &
    hogs+=($!)
  done
  tc qdisc add dev mnv1 root tbf rate 50mbit burst 32kbit latency 100ms
  ip netns exec node1 tc qdisc add dev eth0 root tbf rate 50mbit burst 32kbit latency 100ms
  run srun -N3 --ntasks-per-node=1 --mn-nccl "$PF"
  slow_off
  kill "${hogs[@]}" 2>/dev/null
  wait "${hogs[@]}" 2>/dev/null
  [ $RC -eq 1 ] && row node1 | grep -q 'slow: .*confirmed by' && row node0 | grep -q ' ok$' &&
    row node2 | grep -q ' ok$' && ! has '^problem: node[02]' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# Load that arrives in the middle of the check and slows every node alike
# (the MN_PREFLIGHT_SLOW_FROM_ROUND hook: every pair from the second round
# on waits per pass): the nodes of the later rounds look slow, and so do
# their retests, but so does the control pair of two healthy nodes timed
# among them. Nobody is named; the JSON lists the control apart.
t_load_during_retests() {
  local name="load from the second pair round on, every node alike: the suspect's retests are slow, and so is the control timed beside them; PASS, nobody named"
  hooks_built_in || return
  run env MN_PREFLIGHT_SLOW_FROM_ROUND=1 srun -N3 --ntasks-per-node=1 -o "$OUT/json.%t" --mn-nccl "$PF" --json
  local got
  got=$(rank0_json 'd["verdict"], len(d["retests"]), len(d["retest_controls"]), [n["host"] for n in d["nodes"] if n["verdict"] != "ok"], [x for x in d["notes"] if "but so did a control" in x][:1]')
  echo "$got" >>"$OUT/last"
  [ $RC -eq 0 ] && [[ "$got" == "PASS 2 1 [] ["?"node"*"its first pairs looked slow"*"and so did its retests"*"but so did a control node"*"timed beside them: the healthy nodes ran slow then too, not this one alone; not named"?"]" ]] ||
    { fail "$name" "rc=$RC" "got: $got"; return; }
  pass "$name"
}

t_odd_mtu() {
  local name="node2's eth0 at MTU 1400: FAIL, node2 named as differing from the majority"
  ip netns exec node2 ip link set eth0 mtu 1400
  run srun -N3 --ntasks-per-node=1 --mn-nccl "$PF" --no-pairs
  slow_off
  [ $RC -eq 1 ] && row node2 | grep -q 'fabric differs from the majority: MTU 1400 (others 1500)' &&
    row node0 | grep -q ' ok$' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_rank_never_arrives() {
  local name="a rank that never arrives: time-out within --timeout, exit 3, the rank and its node named"
  local t0=$SECONDS
  run srun -N2 -n2 --mn-nccl bash -c "if [ \$SLURM_PROCID = 1 ]; then sleep 8; else exec $PF --timeout 4; fi"
  [ $RC -eq 3 ] && has 'time-out: rendezvous: rank 1 did not arrive \(none from node1\)' && has 'FAIL \(.*time-out\)' &&
    [ $((SECONDS - t0)) -lt 30 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# signal_rank RANK SIGNAL CMD...: runs the step CMD (each task writes its
# pid to $OUT/pid.$SLURM_PROCID, then execs the check) in the background,
# sends SIGNAL to that rank's process 1.5 s after every rank's check began
# its rendezvous (MN_PREFLIGHT_START_LOG, a test hook: on a slow machine,
# under ASan, a rank stopped before it arrived is one that "did not
# arrive", a time-out, not the stop in the middle these tests show; TASKS,
# 3 unless set, is the step's number of tasks), and
# waits for a verdict line (^FAIL or ^PASS) in any task's output. Then
# resumes a stopped process and waits for srun. Sets MS (from the signal
# to the verdict, or "none"), VERDICT_FROM (the task that printed it), RC;
# every task's stdout and stderr in $OUT/last.
signal_rank() {
  local before
  before=$(fork_deadlocks)
  signal_rank_once "$@"
  local tries=1
  while [ $tries -lt 3 ] && fork_deadlock_since "$before"; do
    before=$(fork_deadlocks)
    tries=$((tries + 1))
    signal_rank_once "$@"
  done
}
signal_rank_once() {
  local rank=$1 sig=$2 i f victim t0 spid hooked=0
  shift 2
  "$PF" --version | grep -q 'test hooks built in' && hooked=1
  rm -f "$OUT"/pid.* "$OUT"/out.* "$OUT"/err.* "$OUT/started"
  MN_PREFLIGHT_START_LOG=$OUT/started timeout 120 srun -o "$OUT/out.%t" -e "$OUT/err.%t" "$@" >"$OUT/srun" 2>&1 &
  spid=$!
  for i in $(seq 600); do
    [ "$(ls "$OUT"/pid.* 2>/dev/null | wc -l)" -ge "${TASKS:-3}" ] &&
      { [ $hooked = 0 ] || [ "$(cut -d' ' -f1 "$OUT/started" 2>/dev/null | sort -u | wc -l)" -ge "${TASKS:-3}" ]; } && break
    sleep 0.1
  done
  sleep 1.5
  victim=$(cat "$OUT/pid.$rank" 2>/dev/null)
  [ -n "$victim" ] || { MS=none; wait $spid; RC=$?; return; }
  # The inline check runs in a child of the task's process.
  [ -n "${SIGNAL_CHILD:-}" ] && victim=$(cat "/proc/$victim/task/$victim/children" | awk '{print $1}')
  t0=$(date +%s%N)
  kill -"$sig" "$victim"
  MS=none VERDICT_FROM=
  for i in $(seq 200); do
    f=$(grep -lE '^(FAIL|PASS)' "$OUT"/out.* 2>/dev/null | head -1)
    if [ -n "$f" ]; then
      MS=$(( ($(date +%s%N) - t0) / 1000000 ))
      VERDICT_FROM=${f##*.}
      break
    fi
    sleep 0.05
  done
  # A stopped rank resumes late: it must end quietly, not with a second verdict.
  sleep 0.5
  [ "$sig" = STOP ] && kill -CONT "$victim"
  wait $spid
  RC=$?
  for f in "$OUT"/out.* "$OUT"/err.* "$OUT/srun"; do sed "s|^|${f##*/}: |" "$f"; done >"$OUT/last"
}

# The task command: its pid, then the check.
pid_then() { echo "echo \$\$ > $OUT/pid.\$SLURM_PROCID; exec $*"; }

t_rank_stopped() {
  local name="a rank stopped (SIGSTOP) 1.5 s into a check with --timeout 40: exit 1 within 8 s of the stop, that rank, its node and the phase named, nobody else blamed"
  signal_rank 2 STOP -N3 -n3 --mn-nccl bash -c "$(pid_then "$PF" --timeout 40 --size 64M --iters 50)"
  [ $RC -eq 1 ] && [ "$MS" != none ] && [ "$MS" -lt 8000 ] && [ "$VERDICT_FROM" = 0 ] &&
    has '^out.0: node2 .*rank 2: stopped answering in (the rendezvous|readiness|the all-reduce|the pair tests) \(nothing heard from it for 3 s\)$' &&
    has '^out.0: problem: node2: rank 2: stopped answering in ' && [ "$(count '^out.0: problem:')" = 1 ] &&
    has '^out.0: node0 .*waited on node2$' && has '^out.0: node1 .*waited on node2$' && [ "$(count '^out.[0-9]+: FAIL')" = 1 ] ||
    { fail "$name" "rc=$RC, verdict after ${MS} ms from task ${VERDICT_FROM:-?}"; return; }
  pass "$name (verdict ${MS} ms after the stop)"
}

t_rank0_stopped() {
  local name="rank 0 stopped (SIGSTOP): rank 1 prints the table naming node0 within 8 s, exit 1; rank 0, resumed, gives no second verdict"
  signal_rank 0 STOP -N3 -n3 --mn-nccl bash -c "$(pid_then "$PF" --timeout 40 --size 64M --iters 50)"
  [ $RC -eq 1 ] && [ "$MS" != none ] && [ "$MS" -lt 8000 ] && [ "$VERDICT_FROM" = 1 ] &&
    has '^out.1: node0 .*rank 0: stopped answering in ' && has '^out.1: problem: node0: rank 0: stopped answering' &&
    [ "$(count '^out.1: problem:')" = 1 ] && has '^out.1: node1 .*waited on node0$' && has '^out.1: node2 .*waited on node0$' &&
    has '^out.1: note: rank 0 was lost; rank 1 \(node1\) gave this verdict in its place' &&
    [ "$(count '^out.[0-9]+: (FAIL|PASS)')" = 1 ] && has '^out.0: superseded: rank 1 on node1 gave the verdict \(exit 1\)$' ||
    { fail "$name" "rc=$RC, verdict after ${MS} ms from task ${VERDICT_FROM:-?}"; return; }
  pass "$name (verdict ${MS} ms after the stop)"
}

# Rank 0 stopped before the rendezvous is over (rank 2 comes 8 s late): no
# standby is named yet, so rank 1, hearing nothing for 3 s, gives up and
# ends. Rank 0, resumed 10 s later, sees rank 1's end right after its own
# pause: that end is the pause's doing. Rank 0 names its own node (it was
# not running and did not wait for a CPU: stopped), never node1.
t_rank0_stopped_in_rendezvous() {
  local name="rank 0 stopped while the rendezvous waits for a late rank: rank 1 gives up; rank 0, resumed, names node0 (not running, stopped), notes rank 1's end as not its fault, never blames node1"
  TASKS=2 signal_rank 0 STOP -N3 -n3 --mn-nccl bash -c \
    "if [ \$SLURM_PROCID = 2 ]; then sleep 8; fi; $(pid_then "$PF" --timeout 40 --size 64M --iters 50)"
  # Exit 1 (rank 0's verdict), or 3 where the late rank 2 found rank 0 gone.
  [ $RC -eq 1 ] || [ $RC -eq 3 ] && has '^err.1: .*rank 0 was lost before it named the standbys' &&
    has '^out.0: problem: node0: rank 0: not running for [0-9.]+ s \(it waited [0-9.]+ s of it for a CPU: stopped, as by SIGSTOP, a cgroup freezer or a paused machine\) in (the rendezvous|readiness); the ranks waiting for it gave up' &&
    [ "$(count '^out.0: problem:')" = 1 ] && has '^out.0: note: node1 rank 1: ended while rank 0 was not running .*: not its fault' &&
    ! has '^out.[0-9]+: (problem: )?node1 .*(its process ended|stopped answering)' && [ "$(count '^out.[0-9]+: (FAIL|PASS)')" = 1 ] ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# The same stop outlasting rank 0's rendezvous budget (--timeout 16: 8 s;
# the test resumes it after 10 s or more): its deadline passed while it was
# not running. Rank 0, resumed, still hears what came meanwhile (rank 1's
# end) and names its own pause, never a time-out "none from node2".
t_rank0_stopped_past_rendezvous() {
  local name="rank 0 stopped until past its rendezvous budget: resumed, it names node0 (not running), notes rank 1's end as not its fault, no time-out blaming the late node2"
  TASKS=2 signal_rank 0 STOP -N3 -n3 --mn-nccl bash -c \
    "if [ \$SLURM_PROCID = 2 ]; then sleep 5; fi; $(pid_then "$PF" --timeout 16 --size 64M --iters 50)"
  # Rank 2 may still get in during the second rank 0 hears after it
  # resumes: then the pause is named in readiness.
  [ $RC -eq 1 ] || [ $RC -eq 3 ] && [ "$MS" = none ] &&
    has '^out.0: problem: node0: rank 0: not running for [0-9.]+ s \(it waited [0-9.]+ s of it for a CPU: stopped, as by SIGSTOP, a cgroup freezer or a paused machine\) in (the rendezvous|readiness); the ranks waiting for it gave up' &&
    [ "$(count '^out.0: problem:')" = 1 ] && has '^out.0: note: node1 rank 1: ended while rank 0 was not running .*: not its fault' &&
    ! has '^out.0: .*(time-out|none from node2)' && ! has '^out.[0-9]+: (problem: )?node[12] .*(its process ended|stopped answering)' &&
    { ! has '^out.0: note: strangers' || has '^out.0: note: strangers: .*ranks that gave up knocking meanwhile'; } &&
    [ "$(count '^out.[0-9]+: (FAIL|PASS)')" = 1 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# The standby's door is a port like the others: another user on node1
# holds connections to every port it finds there (the standby's and the
# data port among them, read from /proc/net/tcp) while rank 0 is stopped.
# Rank 1 still takes over and names node0 alone; the strangers are a note
# in its verdict, never a node's fault.
t_rank0_stopped_standby_held() {
  local name="rank 0 stopped while another user holds every port on node1 (the standby's included): rank 1 still gives the verdict naming node0 alone, exit 1, and notes the strangers at its standby port"
  local copy; copy=$(mktemp /tmp/mn-stranger.XXXXXX)
  cp "$TOP/tests/integration/stranger.py" "$copy" && chmod 0644 "$copy"
  ip netns exec node1 setpriv --reuid=65534 --regid=65534 --clear-groups $PY "$copy" dataflood 10.250.0.11 40 \
    --skip 6818 --most 400 >"$OUT/stranger.log" 2>&1 &
  local sp=$!
  signal_rank 0 STOP -N3 -n3 --mn-nccl bash -c "$(pid_then "$PF" --timeout 40 --size 64M --iters 50)"
  kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null; rm -f "$copy"
  local held; held=$(grep -c '^STRANGER holds connections to port' "$OUT/stranger.log")
  [ $RC -eq 1 ] && [ "$MS" != none ] && [ "$VERDICT_FROM" = 1 ] &&
    has '^out.1: problem: node0: rank 0: stopped answering' && [ "$(count '^out.1: problem:')" = 1 ] &&
    has "^out.1: note: strangers at rank 1's standby port: .*10\.250\.0\.11" && [ "$held" -ge 2 ] ||
    { fail "$name" "rc=$RC, verdict after ${MS} ms from task ${VERDICT_FROM:-?}, ports held $held"; return; }
  pass "$name (verdict ${MS} ms after the stop, $held ports held)"
}

t_rank0_killed() {
  local name="rank 0 killed (kill -9): rank 1 prints the table naming node0 within 8 s; ranks 1 and 2 exit 1"
  signal_rank 0 KILL -N3 -n3 --mn-nccl bash -c "$(pid_then "$PF" --timeout 40 --size 64M --iters 50)"
  [ "$MS" != none ] && [ "$MS" -lt 8000 ] && [ "$VERDICT_FROM" = 1 ] &&
    has '^out.1: node0 .*rank 0: its process ended during ' && [ "$(count '^out.1: problem:')" = 1 ] &&
    has '^out.1: node2 .*waited on node0$' && has 'node1: task 1: Exited with exit code 1' &&
    has 'node2: task 2: Exited with exit code 1' || { fail "$name" "rc=$RC, verdict after ${MS} ms from task ${VERDICT_FROM:-?}"; return; }
  pass "$name (verdict ${MS} ms after the kill)"
}

t_rank0_stopped_exec() {
  local name="check --exec --exclude-file (srun --mn-preflight's mode), rank 0's check stopped: rank 1 reports, the exclude file says node0, the program never starts"
  local ex=$OUT/exclude
  echo stale >"$ex"
  SIGNAL_CHILD=1 signal_rank 0 STOP -N3 -n3 --mn-nccl bash -c "$(pid_then "$PF" check --exec --exclude-file "$ex" \
    --timeout 40 --size 64M --iters 50 -- bash -c "'echo PROGRAM STARTED'")"
  local got; got=$(cat "$ex" 2>/dev/null)
  [ $RC -eq 1 ] && [ "$MS" != none ] && [ "$MS" -lt 8000 ] && [ "$got" = node0 ] && ! has 'PROGRAM STARTED' &&
    [ "$(count 'nodes to exclude:')" = 1 ] && has "nodes to exclude: node0 \(written to $ex\)" ||
    { fail "$name" "rc=$RC, verdict after ${MS} ms, exclude file '$got'"; return; }
  pass "$name (verdict ${MS} ms after the stop)"
}

t_setup_fails() {
  local name="a rank whose set-up fails (MN_PREFLIGHT_FAIL_SETUP=1): exit 1 (not a time-out) in seconds, only node1 named, node0 and node2 'waited on node1'"
  local t0 t
  hooks_built_in || return
  t0=$(date +%s%N)
  run srun -N3 -n3 --mn-nccl bash -c "MN_PREFLIGHT_FAIL_SETUP=1 exec $PF --timeout 30"
  t=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ $RC -eq 1 ] && has '^FAIL \([0-9.]+ s\)$' && ! has 'time-out' &&
    row node1 | grep -q 'rank 1: set-up failed on purpose (MN_PREFLIGHT_FAIL_SETUP' &&
    row node0 | grep -q 'waited on node1$' && row node2 | grep -q 'waited on node1$' &&
    [ "$(count '^problem:')" = 1 ] && has '^problem: node1: rank 1: set-up failed on purpose' &&
    [ $t -lt 10000 ] || { fail "$name" "rc=$RC, ${t} ms from srun to exit"; return; }
  # The same in JSON: the verdicts, the culprit alone in problems.
  run srun -N3 -n3 -o "$OUT/json.%t" -e "$OUT/err.%t" --mn-nccl bash -c "MN_PREFLIGHT_FAIL_SETUP=1 exec $PF --timeout 30 --json"
  local got
  got=$(rank0_json 'd["exit_code"], [(n["host"], n["verdict"][:31], n["waited_on"]) for n in d["nodes"]], len(d["problems"])')
  [ $RC -eq 1 ] && [ "$got" = "1 [('node0', 'waited on node1', ['node1']), ('node1', 'rank 1: set-up failed on purpos', []), ('node2', 'waited on node1', ['node1'])] 1" ] ||
    { fail "$name" "json: $got"; return; }
  pass "$name (${t} ms from srun to exit)"
}

t_rank_dies_in_collective() {
  local name="a rank whose process ends as the all-reduce starts (MN_PREFLIGHT_EXIT_IN_COLLECTIVE=2): the others, waiting to connect the ring, are stopped; exit 1 in seconds, only node2 named"
  local t0 t
  hooks_built_in || return
  t0=$(date +%s%N)
  run srun -N3 -n3 --mn-nccl bash -c "MN_PREFLIGHT_EXIT_IN_COLLECTIVE=2 exec $PF --timeout 30"
  t=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ $RC -eq 1 ] && ! has 'time-out' && row node2 | grep -q 'rank 2: its process ended during the all-reduce' &&
    row node0 | grep -q 'waited on node2$' && row node1 | grep -q 'waited on node2$' &&
    [ "$(count '^problem:')" = 1 ] && [ $t -lt 10000 ] || { fail "$name" "rc=$RC, ${t} ms from srun to exit"; return; }
  pass "$name (${t} ms from srun to exit)"
}

# Two ranks a node: rank 3 is node1's member (its leader is rank 2), so
# node1's leader waits for it, and the leaders' ring waits on node1.
t_member_dies_in_collective() {
  local name="a node's second rank ends as the all-reduce starts (6 ranks on 3 nodes, MN_PREFLIGHT_EXIT_IN_COLLECTIVE=3): exit 1 in seconds, only node1 named, its leader and the other nodes 'waited'"
  local t0 t
  hooks_built_in || return
  t0=$(date +%s%N)
  run srun -N3 --ntasks-per-node=2 --mn-nccl bash -c "MN_PREFLIGHT_EXIT_IN_COLLECTIVE=3 exec $PF --timeout 30"
  t=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ $RC -eq 1 ] && ! has 'time-out' && row node1 | grep -q 'rank 3: its process ended during the all-reduce' &&
    row node0 | grep -q 'waited on node1$' && row node2 | grep -q 'waited on node1$' &&
    [ "$(count '^problem:')" = 1 ] && [ $t -lt 10000 ] || { fail "$name" "rc=$RC, ${t} ms from srun to exit"; return; }
  pass "$name (${t} ms from srun to exit)"
}

# Ranks behind their node's leader (above 1,024 ranks; here the test hook
# MN_PREFLIGHT_GATHER_ABOVE=0, two ranks a node, block distribution): node0's
# rank 1 joins rank 0, node1's rank 3 its leader rank 2, node2's rank 5 its
# leader rank 4, each node's door an abstract local socket in its network
# namespace.
gather() { echo "export MN_PREFLIGHT_GATHER_ABOVE=0; $*"; }

t_gathered_at_leaders() {
  local name="two ranks a node through their node's leader (MN_PREFLIGHT_GATHER_ABOVE=0): PASS, rank 0 takes 3 connections (rank 1 and the leaders), the ranks' words come Relayed"
  hooks_built_in || return
  run srun -N3 --ntasks-per-node=2 -o "$OUT/json.%t" -e "$OUT/err.%t" --mn-nccl bash -c "$(gather exec "$PF" --json)"
  local got
  got=$(rank0_json 'd["verdict"], d["control"]["accepted"], d["control"]["messages_by_kind"].get("Relayed", 0) > 0')
  [ $RC -eq 0 ] && [ "$got" = "PASS 3 True" ] || { fail "$name" "rc=$RC json: $got"; return; }
  pass "$name"
}

t_member_stopped_behind_its_leader() {
  local name="rank 3 stopped (SIGSTOP) behind its leader rank 2: its leader names it silent, exit 1 within 8 s of the stop, only node1 and rank 3 named"
  hooks_built_in || return
  TASKS=6 signal_rank 3 STOP -N3 --ntasks-per-node=2 --mn-nccl bash -c "$(gather "$(pid_then "$PF" --timeout 40 --size 64M --iters 50)")"
  [ $RC -eq 1 ] && [ "$MS" != none ] && [ "$MS" -lt 8000 ] && [ "$VERDICT_FROM" = 0 ] &&
    has '^out.0: node1 .*rank 3: stopped answering in .*\(nothing heard from it for 3 s\)$' &&
    [ "$(count '^out.0: problem:')" = 1 ] && has '^out.0: node2 .*waited on node1$' ||
    { fail "$name" "rc=$RC, verdict after ${MS} ms from task ${VERDICT_FROM:-?}"; return; }
  pass "$name (verdict ${MS} ms after the stop)"
}

t_leader_stopped() {
  local name="node1's leader (rank 2) stopped (SIGSTOP): rank 0 names it, not rank 3 behind it, which ends saying its leader was lost; exit 1 within 8 s"
  hooks_built_in || return
  TASKS=6 signal_rank 2 STOP -N3 --ntasks-per-node=2 --mn-nccl bash -c "$(gather "$(pid_then "$PF" --timeout 40 --size 64M --iters 50)")"
  [ $RC -eq 1 ] && [ "$MS" != none ] && [ "$MS" -lt 8000 ] && [ "$VERDICT_FROM" = 0 ] &&
    has '^out.0: node1 .*rank 2: stopped answering in ' && [ "$(count '^out.0: problem:')" = 1 ] &&
    ! has '^out.0: .*rank 3: ' && has "^err.3: mn-preflight: node1 rank 3: its node's leader \(LOCAL_RANK 0\), its way to rank 0: " ||
    { fail "$name" "rc=$RC, verdict after ${MS} ms from task ${VERDICT_FROM:-?}"; return; }
  pass "$name (verdict ${MS} ms after the stop)"
}

t_wrong_secret() {
  local name="a rank without the step's secret is refused by rank 0 at once (it says so, and gives up), counted as a stranger by address, and the check times out, disturbed"
  run srun -N3 -n3 --mn-nccl bash -c "[ \$SLURM_PROCID = 2 ] && export MN_NCCL_STEP_SECRET=guessed; exec $PF --timeout 6"
  [ $RC -eq 3 ] && has "^note: strangers: 1 connection from 10\.250\.0\.12 \(1 did not prove the step secret\)" &&
    has "rank 2: rank 0: 10\.250\.0\.10:[0-9]* refused this rank: it does not take this rank's proof of the step secret" &&
    has 'rank 2 did not arrive' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_secret_per_step() {
  local name="MN_NCCL_STEP_SECRET: 64 hex digits, the same in every task of a step, new in the next step"
  run srun -N2 -n4 --mn-nccl bash -c 'echo "SECRET $MN_NCCL_STEP_SECRET"'
  local a; a=$(lines '^SECRET' | sort -u)
  run srun -N2 -n4 --mn-nccl bash -c 'echo "SECRET $MN_NCCL_STEP_SECRET"'
  local b; b=$(lines '^SECRET' | sort -u)
  run srun -N1 -n1 bash -c 'echo "SECRET ${MN_NCCL_STEP_SECRET-none}"'
  [ "$(wc -l <<<"$a")" = 1 ] && [[ "$a" =~ ^SECRET\ [0-9a-f]{64}$ ]] && [ "$a" != "$b" ] && has '^SECRET none$' ||
    { fail "$name" "a=$a b=$b"; return; }
  pass "$name"
}

t_bad_options() {
  local name="bad options and a missing step: exit 2, each naming the option or variable and the fix"
  local ok=1
  "$PF" --timeout 0 >"$OUT/last" 2>&1; [ $? -eq 2 ] && has '--timeout needs seconds, from 1 to 600' || ok=0
  "$PF" --size 12 >"$OUT/last" 2>&1; [ $? -eq 2 ] && has "--size needs 4K to 8G, e.g. --size 64M \(got '12'\)" || ok=0
  "$PF" --min-busbw fast >"$OUT/last" 2>&1; [ $? -eq 2 ] && has "--min-busbw needs a bandwidth in GB/s" || ok=0
  "$PF" --iters 0 >"$OUT/last" 2>&1; [ $? -eq 2 ] && has "--iters needs a whole number from 1 to 10000" || ok=0
  "$PF" --mode fast >"$OUT/last" 2>&1; [ $? -eq 2 ] && has "--mode='fast' is not a valid mode" || ok=0
  "$PF" --frobnicate >"$OUT/last" 2>&1; [ $? -eq 2 ] && has "^mn-preflight: check: unknown option '--frobnicate'$" || ok=0
  env -u SLURM_PROCID -u MASTER_ADDR "$PF" >"$OUT/last" 2>&1; [ $? -eq 2 ] &&
    has 'SLURM_PROCID is not set; run it as a step: srun --mn-nccl=auto mn-preflight' || ok=0
  # Under srun but without the plugin: no MASTER_ADDR.
  run srun -N1 -n1 "$PF"; [ $RC -eq 2 ] && has 'MASTER_ADDR is not set' || ok=0
  # --gpu where no rank has a GPU path: rank 0 says why, per node.
  run srun -N2 -n2 --mn-nccl "$PF" --gpu
  [ $RC -eq 1 ] && has 'no GPU path: no CUDA driver \(libcuda.so.1 not found\)' || ok=0
  [ $ok = 1 ] || { fail "$name"; return; }
  pass "$name"
}

t_usage_errors() {
  local name="usage errors, as srun runs them: one line naming the subcommand and a try line, exit 2; SUB --help exit 0"
  local ok=1 why="" want
  # ARGS... -> exit 2 and exactly $want (its line and the try line) from
  # the task, srun's own "task 0: Exited with exit code 2" aside.
  usage_is() {
    local out err
    out=$(srun -N1 -n1 -w node1 --mn-nccl "$PF" "$@" 2>"$OUT/err"); local rc=$?
    err=$(grep -v '^srun: ' "$OUT/err")
    [ $rc -eq 2 ] && [ -z "$out" ] && [ "$err" = "$want" ] || { ok=0; why+=" [$*: rc=$rc err=$err]"; }
  }
  want=$'mn-preflight: check: unknown option \'--timout\'; did you mean --timeout?\ntry \'mn-preflight check --help\''
  usage_is --timout 3
  want=$'mn-preflight: history: unknown option \'--jsn\'; did you mean --json?\ntry \'mn-preflight history --help\''
  usage_is history /tmp --jsn
  want=$'mn-preflight: discover: --timeout is an option of check and prolog, not of discover\ntry \'mn-preflight discover --help\''
  usage_is discover --timeout 5
  want=$'mn-preflight: prolog: --reason-file needs a value: a file, e.g. --reason-file /run/mn-preflight.reason\ntry \'mn-preflight prolog --help\''
  usage_is --prolog --reason-file
  want=$'mn-preflight: unknown subcommand \'prologue\'; did you mean prolog?\ntry \'mn-preflight --help\''
  usage_is prologue
  local sub
  for sub in check prolog discover history; do
    "$PF" "$sub" --help >"$OUT/last" 2>&1 && has "^usage: .*mn-preflight \\[?$sub" || { ok=0; why+=" [$sub --help]"; }
  done
  "$PF" --help >"$OUT/last" 2>&1 && has "'mn-preflight SUBCOMMAND --help'" && [ "$(wc -l <"$OUT/last")" -lt 16 ] ||
    { ok=0; why+=" [--help]"; }
  # discover --mode ib on a node without InfiniBand names --mode, not the plugin's --mn-nccl=ib.
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs" >/dev/null
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/no-rdma run "$PF" discover --mode ib
  [ $RC -eq 1 ] && has '^mn-preflight: [^:]+: --mode ib: this node has no ACTIVE InfiniBand port' &&
    has 'use --mode auto to take what the node has' && ! has 'mn-nccl=' || { ok=0; why+=" [discover --mode ib: rc=$RC]"; }
  [ $ok = 1 ] || { fail "$name" "$why"; return; }
  pass "$name"
}

t_prolog() {
  local name="--prolog: healthy node passes; all HCA ports down or a forced class missing fails with a one-line reason"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  run srun -N1 -n1 -w node1 "$PF" --prolog
  # A job without GPUs (srun asks none): no GPU of the node is the job's.
  local healthy=$RC; has '^mn-preflight: node1: ok \(fabric socket; job [0-9]+ has no GPU on this node' || healthy=x
  rm -f "$OUT/reason"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/all-down run "$PF" --prolog --reason-file "$OUT/reason"
  local down=$RC
  local reason; reason=$(cat "$OUT/reason" 2>/dev/null)
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/no-rdma run "$PF" --prolog --mode ib
  local forced=$RC; has 'the node has no ACTIVE InfiniBand port|no ACTIVE InfiniBand' || forced=x
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run "$PF" --prolog --json
  local json=$RC; has '"verdict":"PASS","fabric":"ib"' || json=x
  [ "$healthy" = 0 ] && [ "$down" = 1 ] && [ "$forced" = 1 ] && [ "$json" = 0 ] &&
    [[ "$reason" == *": no usable RDMA port (mlx5_0:1 "*"DOWN"* ]] && [ "$(wc -l <"$OUT/reason")" = 1 ] ||
    { fail "$name" "healthy=$healthy down=$down forced=$forced json=$json reason=$reason"; return; }
  pass "$name"
}

# A driver that shows 2 GPUs (tests/fixtures/fake_cuda.c) and no NCCL
# (MN_PREFLIGHT_NCCL, the deprecated name still read, names no file), on
# the nodes given.
CUDA2=$TOP/tests/fixtures/cuda-2gpus
stranded_check() {
  local nodes=$1
  shift
  run srun -N3 --ntasks-per-node=1 --mn-nccl bash -c \
    "case \$SLURMD_NODENAME in $nodes) export LD_LIBRARY_PATH=$CUDA2 MN_PREFLIGHT_NCCL=$OUT/no-such-dir/libnccl.so.2 ;; esac; exec $PF --no-pairs $*"
}

t_gpus_without_nccl() {
  local name="node1 shows 2 GPUs and has no NCCL: FAIL before any all-reduce, node1 named with the fix, never a PASS on TCP alone"
  [ -f "$CUDA2/libcuda.so.1" ] || { fail "$name" "the stub CUDA driver is not built (make check builds it)"; return; }
  stranded_check node1
  grep -E '^(node[0-2] |problem|FAIL|PASS)' "$OUT/last" | sed 's/^/    /'
  [ $RC -eq 1 ] && has '^FAIL' && ! has '^PASS' && has '^node1 .*no GPU path on 2 GPU\(s\): no NCCL' &&
    has 'node1 rank 1 has 2 GPU\(s\) and no GPU path .*libnccl2.*MN_PREFLIGHT_LIBNCCL.*--cpu' &&
    ! has '^node[02] .*no GPU path' && ! has 'all-reduce \(cpu' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_gpus_without_nccl_cpu_asked() {
  local name="every node shows GPUs and has no NCCL, --cpu asked: PASS over TCP, saying the GPUs and NCCL were not checked"
  [ -f "$CUDA2/libcuda.so.1" ] || { fail "$name" "the stub CUDA driver is not built (make check builds it)"; return; }
  stranded_check 'node*' --cpu
  [ $RC -eq 0 ] && has '^PASS' && has 'all-reduce \(cpu, TCP ring on eth0\)' &&
    has '^note: --cpu: the network was checked over TCP alone, not the GPUs or NCCL' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# A root holding glibc and nothing else (as a container image may be; libm
# is glibc's, used by nlohmann-json's CBOR reader):
# mn-preflight carries its C++ runtime and libcrypto and loads the rest
# where present, so the check runs there on every node, and --version says
# the glibc it needs, no older than the newest symbol version it uses.
t_needs_only_glibc() {
  local name="mn-preflight in a root with glibc alone (ld.so, libc.so.6, libm.so.6): PASS on 3 nodes; --version names a glibc no older than its newest GLIBC_ symbol"
  # The sanitizer build links the sanitizers' shared runtimes: nothing to
  # prove there. Any other build must carry its runtimes (a release whose
  # static libcrypto needs more archives once went without, unseen).
  if readelf -d "$PF" | grep -q 'Shared library: \[lib[a-z]*san\.so'; then
    echo "# skipped: $name: the sanitizer build links the sanitizers' runtimes"
    return
  fi
  "$PF" --version | grep -q 'C++ runtime and libcrypto built in' ||
    { fail "$name" "this build does not carry its runtimes: $("$PF" --version | sed 's/.*; needs //') (configure: 'mn-preflight links libstdc++ and libcrypto.a statically')"; return; }
  local root=$OUT/glibc-only
  mkdir -p "$root/lib64" "$root/lib/x86_64-linux-gnu" "$root/tmp"
  cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/" && cp -L /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libm.so.6 \
    "$root/lib/x86_64-linux-gnu/" && cp "$PF" "$root/mn-preflight" || { fail "$name" "could not build the root"; return; }
  local needed newest claimed
  needed=$(readelf -d "$PF" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
  newest=$(objdump -T "$PF" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  claimed=$("$PF" --version | sed -n 's/.*needs glibc \([0-9.]*\) or newer.*/\1/p')
  run srun -N3 --ntasks-per-node=1 --mn-nccl /usr/sbin/chroot "$root" /mn-preflight --no-pairs
  [ $RC -eq 0 ] && has '^PASS' && has 'result correct' && [ -z "$(tr ' ' '\n' <<<"$needed" | grep -vxE 'ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|')" ] &&
    [ -n "$claimed" ] && [ "$(printf '%s\n%s\n' "$newest" "$claimed" | sort -V | tail -1)" = "$claimed" ] ||
    { fail "$name" "rc=$RC needed='$needed' newest GLIBC_$newest, --version says '$claimed'"; return; }
  pass "$name"
}

t_emulated() {
  local name="mn-preflight under --mn-emulate-nodes=2: one real node reported as two emulated nodes, PASS"
  run srun -N1 -n4 -w node2 --mn-nccl --mn-emulate-nodes=2 "$PF"
  [ $RC -eq 0 ] && has '^node2-emu0 +0-1 ' && has '^node2-emu1 +2-3 ' && has 'pair tests: 1 pairs' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

run_checks
