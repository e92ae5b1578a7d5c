#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Inputs that crashed a parser under the fuzzers (tests/fuzz), through the
# real path: srun, slurmstepd with the plugin, mn-preflight. Each must end as
# a clear message in a step that still runs, never as a dead slurmstepd.
source "$(dirname "$0")/lib.sh"
plugstack required

# hwloc 2.9.0 dies on this topology.xml; MN_NCCL_SYSFS_ROOT lets a user
# point the plugin's --mn-nccl-explain (in slurmstepd) at it.
t_topology_xml_that_crashes_hwloc() {
  local name="a topology.xml that crashes hwloc: the step runs, explain says locality is unknown, discover too"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs" >/dev/null
  cp "$TOP/tests/fuzz/corpus/hwloc_xml/regress-hwloc-segv-truncated" "$OUT/sysfs/dgx-h100/topology.xml"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N2 -n2 --mn-nccl --mn-nccl-explain echo STEP-RAN
  local rc=$RC ran; ran=$(count '^STEP-RAN$')
  local unknown; unknown=$(count "locality: unknown: hwloc cannot read the topology file $OUT/sysfs/dgx-h100/topology.xml")
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N1 -n1 --mn-nccl "$TOP/helper/mn-preflight" discover
  local drc=$RC
  [ "$rc" = 0 ] && [ "$ran" = 2 ] && [ "$unknown" = 2 ] && [ "$drc" = 0 ] && has 'hwloc cannot read the topology file' ||
    { fail "$name" "rc=$rc ran=$ran unknown=$unknown discover rc=$drc"; return; }
  pass "$name"
}

# A site's plugin (no user_sysfs_root= in plugstack.conf) never parses a
# tree a user names as root: the node's own /sys, and the task is told.
t_user_sysfs_root_closed_by_default() {
  local name="without plugstack's user_sysfs_root=yes, slurmstepd reads /sys, not the step's MN_NCCL_SYSFS_ROOT, and says so"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs" >/dev/null
  MN_USER_SYSFS_ROOT=no plugstack required
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N2 -n2 --mn-nccl bash -c 'echo "HCA=${NCCL_IB_HCA:-none} IB_DISABLE=${NCCL_IB_DISABLE:-}"'
  local rc=$RC hca; hca=$(count '^HCA=none IB_DISABLE=1$')
  local told; told=$(count "warning: MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 is not read here: the node's /sys is")
  plugstack required
  # The rig's line (user_sysfs_root=yes) reads the fixture: the DGX's HCAs.
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N2 -n2 --mn-nccl bash -c 'echo "HCA=${NCCL_IB_HCA:-none}"'
  local open; open=$(count '^HCA=(=|\^=)?mlx5')
  [ "$rc" = 0 ] && [ "$hca" = 2 ] && [ "$told" -ge 1 ] && [ "$open" = 2 ] ||
    { fail "$name" "rc=$rc none=$hca told=$told opened=$open" "$(head -5 "$OUT/last")"; return; }
  pass "$name"
}

# ---- another user on the nodes and the network (doc/security.md) ---------
# The stranger (stranger.py) runs as nobody inside a node's network
# namespace; the step's MASTER_PORT is the user's own (the plugin keeps
# it), as predictable as the one the plugin derives from squeue's ids.
PF=$TOP/helper/mn-preflight
STRANGER=$TOP/tests/integration/stranger.py
# nobody cannot read the tree (a release root keeps it under /root) nor $OUT:
# the script goes to a file of its own that anyone may read.
STRANGER_COPY=$(mktemp /tmp/mn-stranger.XXXXXX)
cp "$STRANGER" "$STRANGER_COPY" && chmod 0644 "$STRANGER_COPY"
# node1's link, throttled by t_slow_node_held_by_strangers.
tc_off() {
  tc qdisc del dev mnv1 root 2>/dev/null
  ip netns exec node1 tc qdisc del dev eth0 root 2>/dev/null
  return 0
}
trap 'rm -f "$STRANGER_COPY"; tc_off' EXIT
as_stranger() {  # NODE CMD...: in NODE's namespace, as nobody, in the background; $STRANGER_PID (stop_stranger stops all)
  local node=$1; shift
  [ ${#STRANGER_PIDS[@]} = 0 ] && : >"$OUT/stranger.log"  # one log per case
  ip netns exec "$node" setpriv --reuid=65534 --regid=65534 --clear-groups $PY "$STRANGER_COPY" "$@" \
    >>"$OUT/stranger.log" 2>&1 &
  STRANGER_PID=$!
  STRANGER_PIDS+=("$!")
  sleep 0.3
  kill -0 "$STRANGER_PID" 2>/dev/null || echo "    (the stranger did not start: $(head -c 300 "$OUT/stranger.log"))"
}
stop_stranger() {
  local p
  for p in "${STRANGER_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  STRANGER_PIDS=()
}
STRANGER_PIDS=()
free_port() { echo $((24000 + RANDOM % 4000)); }
# Each rank's own exit status, on a line of its own.
rank_exits() { lines '^EXIT ' | awk '{print $2 ":" $3}' | sort | paste -sd' '; }

squatter_case() {  # PROTO: the port held by a stranger speaking that protocol
  local proto=$1 port; port=$(free_port)
  as_stranger node0 squat 0.0.0.0 "$port" 20 --proto "$proto"
  sleep 0.5
  MASTER_PORT=$port run srun -N3 -n3 --mn-nccl bash -c \
    "$PF --timeout 8; echo \"EXIT \$SLURM_PROCID \$?\"; $PF check --timeout 8 --exec -- touch $OUT/launched.\$SLURM_PROCID; echo \"EXEC \$SLURM_PROCID \$?\""
  stop_stranger
}

t_port_held_by_a_squatter() {
  local name="MASTER_PORT held by another user who speaks the protocol (a forged welcome, 'done, exit 0'): every rank fails, rank 0 says it cannot listen, the others that the holder does not prove the secret; check --exec never starts the program"
  rm -f "$OUT"/launched.*
  squatter_case 6
  local exits; exits=$(rank_exits)
  local execs; execs=$(lines '^EXEC ' | awk '$3 == 0' | wc -l)
  [ "$(lines '^EXIT ' | wc -l)" = 3 ] && ! grep -q ':0$' <<<"${exits// /$'\n'}" && [ "$execs" = 0 ] &&
    has "rank 0 could not listen on MASTER_PORT" && has "does not prove this step's secret" &&
    [ -z "$(ls "$OUT"/launched.* 2>/dev/null)" ] ||
    { fail "$name" "exits=$exits exec-zero=$execs launched=$(ls "$OUT"/launched.* 2>/dev/null | wc -l)"; return; }
  pass "$name ($exits)"
}

# PROTO NAME TEXT...: the port held by a squatter of an older protocol:
# every rank fails, saying each TEXT; none exits 0, no program starts.
older_squatter() {
  local proto=$1 name=$2 t ok=1 exits
  shift 2
  rm -f "$OUT"/launched.*
  squatter_case "$proto"
  exits=$(rank_exits)
  [ "$(lines '^EXIT ' | wc -l)" = 3 ] && ! grep -q ':0$' <<<"${exits// /$'\n'}" &&
    [ -z "$(ls "$OUT"/launched.* 2>/dev/null)" ] || ok=0
  for t in "$@"; do has "$t" || ok=0; done
  [ $ok = 1 ] || { fail "$name" "exits=$exits"; return; }
  pass "$name ($exits)"
}

t_port_held_by_an_old_protocol() {
  older_squatter 1 "MASTER_PORT held by a stranger speaking protocol 1 (no version, unsealed 'done, exit 0'): every rank fails, none exits 0, no program starts" \
    "did not send mn-preflight's challenge: another process holds the port"
}

t_port_held_by_another_build() {
  older_squatter 2 "MASTER_PORT held by an mn-preflight of protocol 2 (an older build, key=value messages): every rank fails naming both protocols and the fix, none exits 0, no program starts" \
    'speaks protocol 2 \(mn-nccl before 0\.2\.0\), this one protocol 6 \(mn-nccl ' "install one mn-nccl release on every node"
}

t_flood_on_master_port() {
  local name="a healthy check under a flood on MASTER_PORT (200 idle, 20 slowloris, 30/s new one-byte and forged-text connections; ranks 1-2 arrive 2 s late): PASS, nobody named, the strangers in one note line, their text nowhere"
  local port; port=$(free_port)
  as_stranger node1 flood 10.250.0.10 "$port" 25 --idle 200 --slow 20 --rate 10
  local t0; t0=$(date +%s.%N)
  MASTER_PORT=$port run srun -N3 -n3 --mn-nccl bash -c \
    "[ \$SLURM_PROCID = 0 ] || sleep 2; exec $PF --timeout 20 --history $OUT/hist-flood"
  local secs; secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  stop_stranger
  local notes; notes=$(count '^note: strangers: .* connections from 10\.250\.0\.11 \(')
  [ $RC -eq 0 ] && has '^PASS' && [ "$notes" = 1 ] && [ "$(count '^note: ')" -le 3 ] &&
    ! grep -rq FORGED-BY-STRANGER "$OUT/last" "$OUT/hist-flood" &&
    ! grep -q '"kind":"\(fault\|timeout\)"' "$OUT"/hist-flood/*.jsonl ||
    { fail "$name" "rc=$RC notes=$notes $(tail -1 "$OUT/stranger.log")"; return; }
  pass "$name ($secs s; $(sed -n 's/^note: strangers: \([0-9]* connections\).*/\1/p' "$OUT/last"))"
}

# Issue 38's jam: another user holds thousands of connections at
# MASTER_PORT and reopens each one the doorway cuts off, from node1 (the
# address rank 1 comes from too). The doorway takes the whole backlog each
# turn and cuts the busiest address's oldest caller: every rank gets in.
t_churn_on_master_port() {
  local name="another user churns 6000 connections (above the doorway's cap of 4096) at MASTER_PORT from node1 (rank 1's address), reopening each one cut off; ranks 1-2 arrive 2 s after rank 0: PASS, nobody named, the strangers in one note"
  local port; port=$(free_port)
  as_stranger node1 churn 10.250.0.10 "$port" 25 --hold 6000
  MASTER_PORT=$port run srun -N3 -n3 --mn-nccl bash -c \
    "[ \$SLURM_PROCID = 0 ] || sleep 2; exec $PF --timeout 20 --history $OUT/hist-churn"
  stop_stranger
  local strangers; strangers=$(sed -n 's/^note: strangers: \([0-9]* connections\).*/\1/p' "$OUT/last")
  [ $RC -eq 0 ] && has '^PASS' && [ "$(count '^note: strangers: ')" = 1 ] && ! has '^problem: ' &&
    ! grep -q '"kind":"\(fault\|timeout\|disturbed\)"' "$OUT"/hist-churn/*.jsonl ||
    { fail "$name" "rc=$RC strangers=$strangers $(lines '^(FAIL|PASS|disturbed|problem)' | head -3)"; return; }
  pass "$name ($strangers; $(lines '^PASS' | head -1))"
  lines '^note: strangers' | cut -c1-400 | sed 's/^/    /'
}

# The port anyone could predict from squeue's job id (the plugin's port
# before issue 38): another user holds it, for steps 0-3, before the job's
# first step. The plugin places each step's block by its secret, so the
# step's MASTER_PORT is another, and the check passes.
t_port_held_in_advance() {
  local name="MASTER_PORT as squeue's job id predicts it (job id's block, steps 0-3) held by another user before the step starts: the step's port, placed by its secret, differs; PASS"
  rm -f "$OUT/go"
  local j p held=()
  j=$(sbatch --parsable -N3 -n3 -t 2 -o "$OUT/advance.out" --wrap \
    "while [ ! -e $OUT/go ]; do sleep 0.2; done; srun --mn-nccl bash -c 'echo PORT=\$MASTER_PORT; exec $PF --timeout 20'")
  for p in 0 1 2 3; do
    held+=($((20000 + (j % 625) * 16 + p)))
    as_stranger node0 squat 0.0.0.0 "${held[-1]}" 25
  done
  touch "$OUT/go"
  local end=$((SECONDS + 40))
  while squeue -h -j "$j" 2>/dev/null | grep -q . && [ $SECONDS -lt $end ]; do sleep 0.5; done
  stop_stranger
  local got; got=$(sed -n 's/^PORT=//p' "$OUT/advance.out" | sort -u | paste -sd' ')
  cp "$OUT/advance.out" "$OUT/last"
  [ -n "$got" ] && ! grep -qw "$got" <<<"${held[*]}" && has '^PASS' && ! has 'could not listen on MASTER_PORT' ||
    { fail "$name" "job $j held ${held[*]} step port '$got' $(lines '^(FAIL|PASS|mn-preflight)' | head -3)"; return; }
  pass "$name (job $j: held ${held[*]}; the step's port $got)"
}

# Where strangers held connections to the data ports while the pair tests
# ran, a note says so (one line for them all; or, for a node they made
# look slow, that it was not judged): never is a node then named slow.
t_flood_on_data_ports() {
  local name="idle connections to every data port as it opens (read from /proc/net/tcp, as any user can): the check still passes, nobody named; a note on the strangers at the data ports names their address, and no node slow"
  local port; port=$(free_port)
  as_stranger node1 dataflood 10.250.0.11 25 --skip 6818 --most 300
  sleep 0.3
  MASTER_PORT=$port run srun -N3 -n3 --mn-nccl bash -c "exec $PF --timeout 20"
  stop_stranger
  local ports; ports=$(grep -c '^STRANGER holds connections to port' "$OUT/stranger.log")
  local seen; seen=$(count '^note: (strangers at the data ports: |node[0-9]+: .* while strangers held connections to the data ports ).*10\.250\.0\.11')
  local unjudged; unjudged=$(count '^note: node[0-9]+: .* while strangers held connections to the data ports .*: not judged;')
  local slow; slow=$(lines '^node[0-9]+ ' | grep -c ' slow' || true)
  [ $RC -eq 0 ] && has '^PASS' && [ "$ports" -ge 2 ] && { [ "$seen" = 0 ] || { [ "$slow" = 0 ] && ! has '^problem: '; }; } ||
    { fail "$name" "rc=$RC ports flooded=$ports stranger notes=$seen not judged=$unjudged named slow=$slow"; return; }
  pass "$name ($ports ports held; notes on strangers at data ports: $seen, of them nodes not judged: $unjudged)"
  lines '^note: .*strangers' | cut -c1-400 | sed 's/^/    /'
}

# Node doors (the speakers' abstract sockets, open above 1,024 ranks; here
# from 2 ranks by the test hook): their names show in /proc/net/unix once
# bound, so another user on node1 and node2 holds connections to them
# (one byte each, reopened once cut off) before the node's second rank
# comes. The speakers admit their own ranks all the same: PASS, nobody named.
t_flood_on_node_doors() {
  local name="connections held at the node doors (abstract sockets read from /proc/net/unix, as any user can) on node1 and node2: the check still passes, nobody named"
  as_stranger node1 doorflood 25 --most 300
  as_stranger node2 doorflood 25 --most 300
  sleep 0.3
  # Each node's second rank comes 2 s late: its door is open meanwhile.
  MN_PREFLIGHT_GATHER_ABOVE=1 run srun -N3 --ntasks-per-node=2 --mn-nccl bash -c \
    "if [ \$SLURM_LOCALID = 1 ]; then sleep 2; fi; exec $PF --timeout 20"
  stop_stranger
  local doors; doors=$(grep -c '^STRANGER holds connections to door' "$OUT/stranger.log")
  [ $RC -eq 0 ] && has '^PASS' && ! has '^problem: ' && [ "$doors" -ge 1 ] ||
    { fail "$name" "rc=$RC doors held=$doors"; return; }
  pass "$name ($doors doors held)"
  lines '^note: .*strangers' | cut -c1-400 | sed 's/^/    /'
}

# The other side of it: node1 really slow (its link throttled with tc tbf,
# as test_preflight.sh's t_slow_node, where it is named) while a stranger
# holds connections to every data port it can find, new ones included.
# Its first pairs were disturbed; its retests run on ports their partners
# open for each and close once node1 came (lib/check/retest.h), so the
# stranger cannot reach them: node1 is named slow on them, nobody else,
# and a note still names the stranger's address.
t_slow_node_held_by_strangers() {
  local name="node1's link slowed (tc tbf) while a stranger holds every data port it finds: FAIL, exit 1, node1 named slow on retests on fresh ports, node0 and node2 not blamed, the strangers from 10.250.0.11 noted"
  local port; port=$(free_port)
  tc qdisc add dev mnv1 root tbf rate 50mbit burst 32kbit latency 100ms
  ip netns exec node1 tc qdisc add dev eth0 root tbf rate 50mbit burst 32kbit latency 100ms
  as_stranger node1 dataflood 10.250.0.11 40 --skip 6818 --most 300
  # and at the partners' nodes, where the retests' fresh ports open
  as_stranger node0 dataflood 10.250.0.10 40 --skip 6818 --most 300
  as_stranger node2 dataflood 10.250.0.12 40 --skip 6818 --most 300
  MASTER_PORT=$port run srun -N3 -n3 --mn-nccl bash -c "exec $PF --history $OUT/hist-slow"
  stop_stranger
  tc_off
  local held; held=$(grep -c '^STRANGER holds connections to port' "$OUT/stranger.log")
  local noted; noted=$(count '^note: (strangers at the data ports: |node[0-9]+: ).*10\.250\.0\.11')
  local kind; kind=$(sed -n 's/.*"node":"node1".*"kind":"\([a-z]*\)".*/\1/p' "$OUT"/hist-slow/*.jsonl 2>/dev/null | paste -sd' ')
  [ $RC -eq 1 ] && has '^FAIL' && lines '^node1 ' | grep -q 'slow: .*confirmed by' && has '^problem: node1: slow' &&
    ! has '^problem: node[02]' && lines '^node0 ' | grep -q ' ok$' && lines '^node2 ' | grep -q ' ok$' &&
    [ "$held" -ge 2 ] && [ "$noted" -ge 1 ] && ! has 'not judged' && [ "$kind" = slow ] ||
    { fail "$name" "rc=$RC ports held=$held strangers noted=$noted node1's history kind=$kind"; return; }
  pass "$name ($held ports held)"
  lines '^note: .*strangers' | cut -c1-400 | sed 's/^/    /'
}

t_disturbed_check() {
  local name="strangers at MASTER_PORT while a rank never comes: FAIL (time-out, exit 3) 'disturbed by strangers', their address named, no node's history line a failure, no drain candidate"
  local port; port=$(free_port)
  as_stranger node1 flood 10.250.0.10 "$port" 15 --idle 50 --rate 5
  MASTER_PORT=$port run srun -N3 -n3 --mn-nccl bash -c \
    "[ \$SLURM_PROCID = 2 ] && exit 0; exec $PF --timeout 6 --history $OUT/hist-dist"
  local rc=$RC disturbed; disturbed=$(count '^disturbed: .*connections from 10\.250\.0\.11 ')
  local said; said=$(count '^FAIL .*disturbed by strangers: no node is to blame')
  stop_stranger
  local kinds; kinds=$(sed -n 's/.*"kind":"\([a-z]*\)".*/\1/p' "$OUT"/hist-dist/*.jsonl 2>/dev/null | sort | uniq -c | paste -sd' ')
  run "$PF" history "$OUT/hist-dist" --drain 1/1
  [ $rc -eq 3 ] && [ "$disturbed" = 1 ] && [ "$said" = 1 ] && [ -n "$kinds" ] &&
    ! grep -Eq 'fault|timeout|slow' <<<"$kinds" && has 'drain candidates .*: none$' ||
    { fail "$name" "rc=$rc disturbed=$disturbed said=$said kinds=$kinds"; return; }
  pass "$name ($kinds)"
}

run_checks
