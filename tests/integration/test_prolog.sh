#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The prolog an operator pastes (scripts/slurm/mn-nccl-prolog, issue 36)
# as slurm.conf's Prolog on the local cluster's fake GPUs (gres gpu:4 per
# node, no driver): two jobs on one node, each prolog given its own GPUs
# only; a failing check drains with a reason that starts with
# "mn-preflight:"; a passing one resumes only such a reason; a
# configuration error drains nothing. Also the prolog's time per job start.
source "$(dirname "$0")/lib.sh"
DRAINS_EXPECTED=1
T=$(mktemp -d /tmp/mn-prolog.XXXXXX)
chmod 755 "$T"
sed -e "s|@bindir[@]|$TOP/helper|g" -e "s|@libexecdir[@]|$T|g" \
  "$TOP/scripts/slurm/mn-nccl-prolog.in" >"$T/mn-nccl-prolog"
chmod 755 "$T/mn-nccl-prolog"
# slurm.conf's Prolog: this wrapper keeps what slurmd gave (environment,
# exit, time) and runs the shipped script. $T/fake-cuda: the check sees a
# driver whose GPUs fail (a broken node) and an NCCL (a stub: Debian's
# roots have none). $T/args: extra options.
cat >"$T/prolog" <<EOW
#!/bin/sh
t0=\$(date +%s%N)
env >"$T/env.\$SLURM_JOB_ID"
export SLURM_CONF=$SLURM_CONF
[ -e "$T/fake-cuda" ] && export LD_LIBRARY_PATH=$TOP/tests/fixtures/cuda-2gpus MN_PREFLIGHT_LIBNCCL=$TOP/tests/fixtures/nccl-entry-points/libnccl.so.2
[ -e "$T/args" ] && export MN_PREFLIGHT_ARGS="\$(cat "$T/args")"
"$T/mn-nccl-prolog" 2>"$T/err.\$SLURM_JOB_ID"
rc=\$?
echo "\$SLURM_JOB_ID \$rc \$(( (\$(date +%s%N) - t0) / 1000000 )) \$SLURMD_NODENAME" >>"$T/runs"
exit \$rc
EOW
chmod 755 "$T/prolog"
# The script reads settings from /etc/default/mn-nccl-prolog; one there would change what is tested.
[ -e /etc/default/mn-nccl-prolog ] && echo "# note: /etc/default/mn-nccl-prolog exists and is read"

cp "$SLURM_CONF" "$T/slurm.conf.orig"
echo "Prolog=$T/prolog" >>"$SLURM_CONF"
scontrol reconfigure >/dev/null 2>&1
cleanup() {
  scancel --quiet --name=mn-prolog-hold 2>/dev/null
  cp "$T/slurm.conf.orig" "$SLURM_CONF"
  scontrol reconfigure >/dev/null 2>&1
  for n in node0 node1 node2; do
    case $(sinfo -h -n $n -o %T) in *drain*) scontrol update nodename=$n state=resume ;; esac
  done
  rm -rf "$T"
}
trap cleanup EXIT
# Each slurmd takes the new Prolog on its own time: a job on each node
# until its prolog has run there (seen: the first job on node2 2 s after
# the reconfigure ran without it).
for n in node0 node1 node2; do
  for _ in $(seq 1 20); do
    srun -w $n -t 1 true >/dev/null 2>&1
    grep -qs " $n\$" "$T/runs" && break
    sleep 0.5
  done
  grep -qs " $n\$" "$T/runs" || echo "# note: $n ran no prolog after the reconfigure"
done

envvar() { sed -n "s/^$2=//p" "$T/env.$1" 2>/dev/null; }
reason() { sinfo -h -n "$1" -o %E; }
state() { sinfo -h -n "$1" -o %T; }
wait_for() { # wait_for SECONDS CMD...: until CMD succeeds
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.5; done
}

# Job A holds one GPU of node0; job B, on the same node, asks for two.
t_two_jobs_one_node() {
  local a b
  a=$(sbatch --parsable -J mn-prolog-hold -w node0 --gres=gpu:1 -o /dev/null --wrap 'sleep 60')
  wait_for 15 test -e "$T/env.$a" || { fail "job A's prolog ran" "no $T/env.$a"; return; }
  run srun -w node0 --gres=gpu:2 -t 1 bash -c 'echo JOB=$SLURM_JOB_ID'
  b=$(sed -n 's/^JOB=//p' "$OUT/last")
  # Once in a full run B's environment file was not there yet when read.
  wait_for 15 test -s "$T/env.$b" || echo "# note: job $b's prolog wrote no environment file in 15 s"
  local ga gb
  ga=$(envvar "$a" SLURM_JOB_GPUS); gb=$(envvar "$b" SLURM_JOB_GPUS)
  echo "# slurmd $(sinfo -V | awk '{print $2}') prolog: job A $a SLURM_JOB_GPUS=$ga CUDA_VISIBLE_DEVICES=$(envvar "$a" CUDA_VISIBLE_DEVICES) GPU_DEVICE_ORDINAL=$(envvar "$a" GPU_DEVICE_ORDINAL); job B $b SLURM_JOB_GPUS=$gb CUDA_VISIBLE_DEVICES=$(envvar "$b" CUDA_VISIBLE_DEVICES)"
  if [ "$RC" -eq 0 ] && [ -n "$ga" ] && [ -n "$gb" ] && ! grep -qx "$ga" <(tr , '\n' <<<"$gb"); then
    pass "two jobs on node0: slurmd gives each prolog its own GPUs (A: $ga, B: $gb), and B's prolog passed"
  else
    fail "two jobs on node0: each prolog its own GPUs" "rc=$RC A=$ga B=$gb"
  fi
  # B's prolog as slurmd ran it: the check names B's GPUs and none of A's.
  local json
  json=$(env -i $(grep -s -E '^(SLURM_JOB_ID|SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|PATH)=' "$T/env.$b") \
    "$TOP/helper/mn-preflight" --prolog --json 2>&1)
  if grep -q "\"gpu_scope\":\"job $b's GPUs $gb (SLURM_JOB_GPUS)\"" <<<"$json" &&
    ! grep -q "\"job_gpus\":\[[^]]*\"$ga\"" <<<"$json"; then
    pass "job B's prolog checks job $b's GPUs $gb only, never A's GPU $ga"
  else
    fail "job B's prolog checks B's GPUs only" "$json"
  fi
  # A job without GPUs on the same node: none of the node's.
  run srun -w node0 -t 1 bash -c 'echo JOB=$SLURM_JOB_ID'
  local c
  c=$(sed -n 's/^JOB=//p' "$OUT/last")
  wait_for 15 test -s "$T/env.$c" || echo "# note: job $c's prolog wrote no environment file in 15 s"
  json=$(env -i $(grep -s -E '^(SLURM_JOB_ID|SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|PATH)=' "$T/env.$c") \
    "$TOP/helper/mn-preflight" --prolog --json 2>&1)
  grep -q "\"gpu_scope\":\"job $c has no GPU on this node\"" <<<"$json" &&
    pass "a job without GPUs beside them: its prolog checks no GPU" ||
    fail "a job without GPUs: its prolog checks no GPU" "$json"
  scancel "$a"
  # Read once: right after scancel the state passes through "completing".
  local s
  s=$(state node0)
  [ -n "$s" ] && [[ $s != *drain* ]] &&
    pass "node0 never drained by the second job's prolog ($s)" ||
    fail "node0 never drained by the second job's prolog" "$s: $(reason node0)"
}

# A broken node (its GPUs fail): the prolog drains it under its own name.
t_failure_drains_with_own_reason() {
  [ -f "$TOP/tests/fixtures/cuda-2gpus/libcuda.so.1" ] && [ -f "$TOP/tests/fixtures/nccl-entry-points/libnccl.so.2" ] ||
    { fail "a failing prolog drains node1" "the stub CUDA and NCCL are not built (make check or make fixtures builds them)"; return; }
  touch "$T/fake-cuda"
  local j
  j=$(sbatch --parsable --no-requeue -w node1 --gres=gpu:1 -o /dev/null --wrap true)
  wait_for 20 bash -c "sinfo -h -n node1 -o %T | grep -q drain"
  rm -f "$T/fake-cuda"
  local r
  r=$(reason node1)
  if [[ $(state node1) == *drain* && $r == "mn-preflight: GPU0 "* ]]; then
    pass "a failing prolog drains node1: '$r'"
  else
    fail "a failing prolog drains node1 with a reason starting mn-preflight:" "state $(state node1) reason '$r'" "$(cat "$T/err.$j" 2>/dev/null)"
  fi
  scancel "$j" 2>/dev/null
  # The same script as HealthCheckProgram (no job): healthy now, it resumes its own drain.
  env -i PATH=/usr/bin:/bin SLURM_CONF="$SLURM_CONF" SLURMD_NODENAME=node1 "$T/mn-nccl-prolog" 2>"$T/hc.err"
  local rc=$?
  if [ $rc -eq 0 ] && wait_for 5 bash -c "! sinfo -h -n node1 -o %T | grep -q drain"; then
    pass "run again healthy (as HealthCheckProgram), it resumes node1 ($(state node1))"
  else
    fail "run again healthy, it resumes node1" "rc=$rc state $(state node1) reason '$(reason node1)'" "$(cat "$T/hc.err")"
  fi
}

# Another reason (an admin's, another tool's) is never lifted.
t_foreign_reason_kept() {
  scontrol update nodename=node2 state=drain reason="admin: new DIMM"
  env -i PATH=/usr/bin:/bin SLURM_CONF="$SLURM_CONF" SLURMD_NODENAME=node2 "$T/mn-nccl-prolog" 2>/dev/null
  local rc=$? r
  r=$(reason node2)
  [ $rc -eq 0 ] && [[ $(state node2) == *drain* ]] && [ "$r" = "admin: new DIMM" ] &&
    pass "a passing check leaves an admin's drain alone ('$r')" ||
    fail "a passing check leaves an admin's drain alone" "rc=$rc state $(state node2) reason '$r'"
  scontrol update nodename=node2 state=resume
}

# A configuration error (mn-preflight exits 2) is not the node's fault.
t_configuration_error_drains_nothing() {
  echo "--no-such-option" >"$T/args"
  run srun -w node2 -t 1 true
  rm -f "$T/args"
  local last
  last=$(tail -1 "$T/runs")
  [ "$RC" -eq 0 ] && [[ $(state node2) != *drain* ]] && [ "$(awk '{print $2}' <<<"$last")" = 0 ] &&
    pass "mn-preflight exiting 2 (a bad option) drains nothing and the job runs" ||
    fail "a configuration error drains nothing" "rc=$RC state $(state node2) run '$last'"
}

# The prolog's time per job start, as slurmd ran it (wrapper included).
t_x_time_per_job_start() {
  local ms
  ms=$(awk '$2 == 0 {print $3}' "$T/runs" | sort -n | tr '\n' ' ')
  [ -n "$ms" ] && pass "prolog time per job start (ms, passing runs, sorted): $ms" ||
    fail "prolog times recorded" "$(cat "$T/runs")"
}

run_checks
