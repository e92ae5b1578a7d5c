#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# srun --mn-nccl-preflight (and its alias --mn-preflight) on the real local Slurm (CPU path). Which parts run
# depends on the release: before 23.11 (no spank_prepend_task_argv) every
# form is refused and the program never starts; from 23.11 the check runs
# in each task and the program starts only on PASS. Either way, with a
# `required` or an `optional` plugstack line: a step that asked for the
# check runs it or does not start. The helper's own `check --exec` mode,
# which the plugin puts in front of each task, is tested on every release.
source "$(dirname "$0")/lib.sh"
PF=$TOP/helper/mn-preflight
plugstack required "preflight=$PF"

slurm_release_facts
echo "# Slurm $ver: $([ $inline = 1 ] && echo 'inline check (spank_prepend_task_argv)' || echo 'no spank_prepend_task_argv: refusal')"

slow_off() {
  tc qdisc del dev mnv1 root 2>/dev/null
  ip netns exec node1 tc qdisc del dev eth0 root 2>/dev/null
  return 0
}
slow_node1() {
  tc qdisc add dev mnv1 root tbf rate 20mbit burst 32kbit latency 100ms
  ip netns exec node1 tc qdisc add dev eth0 root tbf rate 20mbit burst 32kbit latency 100ms
}
trap slow_off EXIT

# The PASS cases skip the pair tests: on this shared 2-core machine their
# timings are noisy enough to name a healthy node slow now and then (the
# check's judgement, tested in test_preflight.sh), which is not what these
# tests are about.

# Each task's environment, one "ENV RANK NAME=VALUE" line per variable;
# values that differ between any two steps (ids, the per-srun secret and
# the watch port it places, pids) are masked, their names kept. Both runs give MASTER_PORT (the
# plugin keeps a user's), so the program's port is compared too: the
# check's own port must never reach it. Also the task's pid against
# the one Slurm recorded for it.
VOLATILE='SLURM_JOB_ID|SLURM_JOBID|SLURM_STEP_ID|SLURM_STEPID|SLURM_TASK_PID|SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT|SLURM_JOB_START_TIME|SLURM_JOB_END_TIME|SLURM_JOB_SLUID|SLURM_JOB_NAME|PET_RDZV_ID|MN_NCCL_STEP_SECRET|MN_NCCL_WATCH_PORT|TMPDIR|SLURM_SPANK_JOB_ID|_'
ENV_PROG="echo \"PIDS \$SLURM_PROCID task=\$SLURM_TASK_PID self=\$\$\"; env | LC_ALL=C sort | sed -E 's/^($VOLATILE)=.*/\\1=*/; s/^/ENV '\$SLURM_PROCID' /'"

env_of() { lines '^ENV ' | LC_ALL=C sort; }

# --- every release: the helper's check --exec -------------------------------

t_exec_pass_same_env() {
  local name="check --exec: PASS, then the program in the task's own pid with exactly the environment it has without the check"
  run env MASTER_PORT=29555 srun -N3 -n3 --mn-nccl=auto bash -c "$ENV_PROG"
  [ $RC -eq 0 ] || { fail "$name" "plain step rc=$RC"; return; }
  local plain; plain=$(env_of)
  run env MASTER_PORT=29555 srun -N3 -n3 --mn-nccl=auto "$PF" check --exec --port 29876 --timeout 20 --no-pairs -- bash -c "$ENV_PROG"
  local checked; checked=$(env_of)
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(count '^ENV ')" -gt 60 ] && [ "$(count '^ENV [0-9]+ MASTER_PORT=29555$')" = 3 ] ||
    { fail "$name" "rc=$RC PASS lines $(count '^PASS')"; return; }
  local d; d=$(diff <(echo "$plain") <(echo "$checked"))
  [ -z "$d" ] || { fail "$name" "environments differ:" "$d"; return; }
  local badpid; badpid=$(lines '^PIDS ' | awk '{split($3,a,"=");split($4,b,"="); if (a[2]!=b[2]) print}')
  [ "$(count '^PIDS ')" = 3 ] && [ -z "$badpid" ] || { fail "$name" "pid differs: $badpid"; return; }
  pass "$name"
}

# fail_case NAME CMD...: node1 behind a 20 Mbit/s link; the check must
# FAIL, no task may start the program, node1 alone goes into the file.
fail_case() {
  local name=$1 ex=$OUT/exclude; shift
  echo stale >"$ex"
  slow_node1
  run "$@"
  slow_off
  local got; got=$(cat "$ex" 2>/dev/null)
  [ $RC -eq 1 ] && [ "$(count '^FAIL')" = 1 ] && ! has 'PROGRAM STARTED' && [ "$got" = node1 ] &&
    has 'was not started on any node; nodes to exclude: node1 \(written to ' ||
    { fail "$name" "rc=$RC FAIL lines $(count '^FAIL') exclude file '$got'"; return; }
  pass "$name"
}

t_exec_fail_slow_node() {
  fail_case "check --exec, node1 slowed with tc: FAIL once, exit 1, the program never starts, the exclude file says node1" \
    srun -N3 --ntasks-per-node=1 --mn-nccl=auto "$PF" check --exec --port 29876 --exclude-file "$OUT/exclude" -- \
    bash -c 'echo PROGRAM STARTED'
}

t_exec_usage() {
  local name="check --exec without a program, or --port without --exec: usage error, exit 2"
  run srun -N1 -n1 --mn-nccl=auto "$PF" check --exec --timeout 5
  local a=$RC
  run srun -N1 -n1 --mn-nccl=auto "$PF" check --port 5 -- true
  [ $a -eq 2 ] && [ $RC -eq 2 ] && has 'goes with --exec' || { fail "$name" "rc=$a,$RC"; return; }
  pass "$name"
}

# The plugin adds --container when pyxis runs the task (the check then runs
# in the image): what the batch script relies on must have somewhere to go
# there, or the step stops before the check; the site's history directory
# missing there is left out with a note, and the step goes on.
t_exec_container_outputs() {
  local img='pyxis --container-image=img.sqsh'
  local name="check --exec --container, exclude file in a directory the container lacks: exit 2 before the check, one line naming the container and the mount"
  run srun -N2 --ntasks-per-node=1 --mn-nccl=auto "$PF" check --exec --port 29876 --container "$img" \
    --exclude-file /nonexistent-mn/exclude -- bash -c 'echo PROGRAM STARTED'
  [ $RC -ne 0 ] && ! has 'PROGRAM STARTED' && ! has '^(PASS|FAIL)' &&
    [ "$(count 'exclude file /nonexistent-mn/exclude: the task runs in a container \(pyxis --container-image=img.sqsh\).*fix: mount it \(srun --container-mounts=/nonexistent-mn')" = 1 ] ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
  name="check --exec --container --job-comment, no scontrol in the task's PATH: exit 2 before the check, naming exclude-file as the way"
  run srun -N2 --ntasks-per-node=1 --mn-nccl=auto /usr/bin/env PATH=/nonexistent-mn "$PF" check --exec --port 29876 \
    --container "$img" --job-comment -- /bin/echo PROGRAM STARTED
  [ $RC -ne 0 ] && ! has 'PROGRAM STARTED' && has 'job comment: the task runs in a container .*which has no scontrol.*use exclude-file=PATH' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
  name="check --exec --container, the site's history directory not in the container: a note once, PASS, the program starts, nothing written"
  run srun -N2 --ntasks-per-node=1 --mn-nccl=auto "$PF" check --exec --port 29876 --timeout 20 --no-pairs \
    --container "$img" --history /nonexistent-mn/history -- bash -c 'echo PROGRAM STARTED'
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(count '^PROGRAM STARTED')" = 2 ] &&
    [ "$(count 'note: the task runs in a container .*history directory /nonexistent-mn/history is not.*enroot.s mounts.d')" = 1 ] &&
    [ ! -e /nonexistent-mn ] || { fail "$name" "rc=$RC PASS $(count '^PASS')"; return; }
  pass "$name"
}

# --- every release, `required` and `optional` plugstack lines alike -----------
# Slurm ignores a failing hook of an `optional` plugin (the line the package
# installs): a step that asked for the check must still either run it or
# not start. The program below leaves $OUT/ran.RANK where it started.

RAN_PROG="touch $OUT/ran.\$SLURM_PROCID"
started() { ls "$OUT" | grep -c '^ran\.' || true; }

# The newest job slurmctld knows (ended ones stay listed for MinJobAge,
# 300 s): a refused srun must not have added one. Asked of slurmctld, not
# by a job of its own, which could itself fail (under ASan) and shift ids.
last_job() { scontrol -o show jobs 2>/dev/null | sed -n 's/^JobId=\([0-9]*\) .*/\1/p' | sort -n | tail -1; }

# never_starts LINE WHAT PATTERN [nojob] CMD...: CMD fails, prints PATTERN,
# and starts the program in no task; with nojob, no job was created either.
never_starts() {
  local line=$1 what=$2 pat=$3 nojob=0; shift 3
  [ "$1" = nojob ] && { nojob=1; shift; }
  local name="$line line, $what: the program never starts, the refusal says why and what to do"
  local before after=""
  [ $nojob = 1 ] && before=$(last_job)
  rm -f "$OUT"/ran.*
  run "$@"
  local ran; ran=$(started)
  [ $nojob = 1 ] && after=$(last_job)
  if [ $RC -ne 0 ] && [ "$ran" = 0 ] && has "$pat" && { [ $nojob = 0 ] || [ "${after:-0}" = "${before:-0}" ]; }; then
    pass "$name"
  else
    fail "$name" "rc=$RC, the program started in $ran tasks, /$pat/ $(has "$pat" && echo shown || echo missing)" \
      "newest job id before=${before:-none} after=${after:-none} (want the same when nojob)"
  fi
}

# runs_unchecked LINE WHAT CMD...: the check is off, the program runs in 2 tasks.
runs_unchecked() {
  local line=$1 what=$2; shift 2
  local name="$line line, $what: no check, the program runs"
  rm -f "$OUT"/ran.*
  run "$@"
  [ $RC -eq 0 ] && [ "$(started)" = 2 ] && ! has '^PASS' || { fail "$name" "rc=$RC started=$(started)"; return; }
  pass "$name"
}

# Before 23.11 (no spank_prepend_task_argv) every form is refused. The
# option form in srun's option callback, the one failure srun obeys for an
# optional plugin too: no job is created. The environment form (and a
# required line) in srun's init_post_opt; with an optional line srun goes
# on, and each task ends in task_init (exit 2) before the program starts.
refused_without_prepend() {
  local line=$1 env_job=nojob
  [ "$line" = optional ] && env_job=""
  local release="needs Slurm 23.11 or newer \(spank_prepend_task_argv\); this is Slurm ${major}\\.0?${minor}"
  never_starts "$line" "Slurm $ver, --mn-nccl-preflight" "--mn-nccl-preflight $release" nojob \
    srun -N2 --mn-nccl=auto --mn-nccl-preflight bash -c "$RAN_PROG"
  never_starts "$line" "Slurm $ver, --mn-preflight (the alias)" "--mn-preflight $release" nojob \
    srun -N2 --mn-nccl=auto --mn-preflight bash -c "$RAN_PROG"
  has 'srun --mn-nccl=auto mn-preflight \|\| exit 1' && has 'srun --mn-nccl=auto python train.py' ||
    fail "$line line, Slurm $ver: the refusal names the two-line sbatch alternative"
  local v
  for v in 1 on timeout=5; do
    never_starts "$line" "Slurm $ver, MN_NCCL_PREFLIGHT=$v" "MN_NCCL_PREFLIGHT $release" $env_job \
      env MN_NCCL_PREFLIGHT=$v srun -N2 --mn-nccl=auto bash -c "$RAN_PROG"
  done
  has 'MN_NCCL_PREFLIGHT=off to run without the check' ||
    fail "$line line, Slurm $ver: the environment form's refusal names MN_NCCL_PREFLIGHT=off"
  if [ "$line" = optional ]; then
    has 'task [01]: Exited with exit code 2' || fail "$line line: srun reports the tasks' exit code 2"
  fi
  never_starts "$line" "Slurm $ver, sbatch --mn-preflight" "--mn-preflight $release" nojob \
    sbatch --wait -N2 -o /dev/null --mn-preflight --wrap "srun --mn-nccl=auto bash -c '$RAN_PROG'"
}

# From 23.11 the check runs (PASS) under either line; what cannot run it
# stops every task before the program.
refused_with_prepend() {
  local line=$1
  never_starts "$line" "MN_NCCL_PREFLIGHT=yes without mn_nccl" 'MN_NCCL_PREFLIGHT needs mn_nccl on.*add --mn-nccl=auto' \
    env MN_NCCL_PREFLIGHT=yes srun -N2 bash -c "$RAN_PROG"
  plugstack "$line" "preflight=/nonexistent/mn-preflight"
  never_starts "$line" "--mn-preflight, mn-preflight not installed on the nodes" \
    '--mn-preflight: /nonexistent/mn-preflight is not an executable here.*install mn-preflight on every node' \
    srun -N2 --mn-nccl=auto --mn-preflight bash -c "$RAN_PROG"
  plugstack "$line" "preflight=$PF"
  local name="$line line, MN_NCCL_PREFLIGHT=1: the check with its defaults (PASS), then the program"
  rm -f "$OUT"/ran.*
  run env MN_NCCL_PREFLIGHT=1 srun -N2 --mn-nccl=auto bash -c "$RAN_PROG"
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(started)" = 2 ] || { fail "$name" "rc=$RC started=$(started)"; return; }
  pass "$name"
  name="$line line, --mn-nccl-preflight=no-pairs: PASS, then the program"
  rm -f "$OUT"/ran.*
  run srun -N2 --mn-nccl=auto --mn-nccl-preflight=no-pairs bash -c "$RAN_PROG"
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(started)" = 2 ] || { fail "$name" "rc=$RC started=$(started)"; return; }
  pass "$name"
}

t_asked_for_means_checked() {
  local line
  for line in required optional; do
    plugstack "$line" "preflight=$PF"
    if [ $inline = 1 ]; then refused_with_prepend "$line"; else refused_without_prepend "$line"; fi
    never_starts "$line" "--mn-preflight=timeout=0 (srun's option callback)" \
      "'timeout=0' is not valid; give timeout=S: seconds, from 1 to 600, e.g. timeout=30" nojob \
      srun -N2 --mn-nccl=auto --mn-preflight=timeout=0 bash -c "$RAN_PROG"
    never_starts "$line" "MN_NCCL_PREFLIGHT=timout=3" "MN_NCCL_PREFLIGHT: unknown option 'timout=3'; known: cpu, gpu, timeout=S" \
      env MN_NCCL_PREFLIGHT=timout=3 srun -N2 --mn-nccl=auto bash -c "$RAN_PROG"
    local v
    for v in 0 off No FALSE; do
      runs_unchecked "$line" "MN_NCCL_PREFLIGHT=$v" env MN_NCCL_PREFLIGHT=$v srun -N2 --mn-nccl=auto bash -c "$RAN_PROG"
    done
    runs_unchecked "$line" "MN_NCCL_PREFLIGHT=1 with --mn-preflight=off (the option wins)" \
      env MN_NCCL_PREFLIGHT=1 srun -N2 --mn-nccl=auto --mn-preflight=off bash -c "$RAN_PROG"
    runs_unchecked "$line" "MN_NCCL_PREFLIGHT=yes with --mn-nccl-preflight=No (the option wins)" \
      env MN_NCCL_PREFLIGHT=yes srun -N2 --mn-nccl=auto --mn-nccl-preflight=No bash -c "$RAN_PROG"
  done
  plugstack required "preflight=$PF"
  local state; state=$(settled_states | tr '\n' ' ')
  [ "$state" = "idle " ] && pass "after every refusal, every node is idle (none drained)" ||
    fail "after every refusal, every node is idle (none drained)" "sinfo: $state"
}

# --- 23.11 and newer: the check inside the training step ----------------------

t_inline_pass_same_env() {
  [ $inline = 1 ] || return 0
  local name="--mn-nccl-preflight: PASS printed once, then the program in every task with its normal environment and pid"
  run env MASTER_PORT=29555 srun -N3 -n5 --mn-nccl=auto bash -c "$ENV_PROG"
  [ $RC -eq 0 ] || { fail "$name" "plain step rc=$RC"; return; }
  local plain; plain=$(env_of)
  run env MASTER_PORT=29555 srun -N3 -n5 --mn-nccl=auto --mn-nccl-preflight=timeout=20,no-pairs bash -c "$ENV_PROG"
  local checked; checked=$(env_of)
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && has 'all-reduce \(cpu, TCP ring on eth0\): 5 ranks' &&
    [ "$(count '^PIDS ')" = 5 ] && [ "$(count '^ENV [0-9]+ MASTER_PORT=29555$')" = 5 ] || { fail "$name" "rc=$RC PASS lines $(count '^PASS')"; return; }
  local d; d=$(diff <(echo "$plain") <(echo "$checked"))
  [ -z "$d" ] || { fail "$name" "environments differ:" "$d"; return; }
  local badpid; badpid=$(lines '^PIDS ' | awk '{split($3,a,"=");split($4,b,"="); if (a[2]!=b[2]) print}')
  [ -z "$badpid" ] || { fail "$name" "pid differs: $badpid"; return; }
  pass "$name"
}

t_inline_torch() {
  [ $inline = 1 ] || return 0
  local name="MN_NCCL_PREFLIGHT=no-pairs: the check, then a real PyTorch gloo all-reduce on 4 tasks of 2 nodes (its MASTER_PORT untouched)"
  run env MN_NCCL_PREFLIGHT=no-pairs srun -N2 -n4 --mn-nccl=auto $PY "$ALLREDUCE"
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(count 'ALLREDUCE .*world=4 .*ok=1')" = 4 ] ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_inline_fail_slow_node() {
  [ $inline = 1 ] || return 0
  fail_case "--mn-preflight=exclude-file=F, node1 slowed with tc: FAIL once, exit 1, the program never starts, F says node1" \
    srun -N3 --ntasks-per-node=1 --mn-nccl=auto "--mn-preflight=exclude-file=$OUT/exclude" bash -c 'echo PROGRAM STARTED'
}

t_inline_job_comment() {
  [ $inline = 1 ] || return 0
  local name="--mn-preflight=comment, node1 slowed: the job's comment says mn-preflight exclude=node1"
  local jn=mn-inline-comment-$$
  slow_node1
  run srun -J "$jn" -N3 --ntasks-per-node=1 --mn-nccl=auto --mn-preflight=comment bash -c 'echo PROGRAM STARTED'
  slow_off
  local c; c=$(scontrol show job -o 2>/dev/null | grep "JobName=$jn " | grep -o 'Comment=mn-preflight [^ ]*')
  [ $RC -eq 1 ] && ! has 'PROGRAM STARTED' && has 'nodes to exclude: node1 \(in the job.s comment\)' &&
    [ "$c" = "Comment=mn-preflight exclude=node1" ] ||
    { fail "$name" "rc=$RC comment '$c'"; return; }
  pass "$name"
}

t_inline_needs_mn_nccl() {
  [ $inline = 1 ] || return 0
  local name="--mn-preflight with mn_nccl off: refused in srun, naming --mn-nccl=auto"
  run srun -N1 --mn-preflight bash -c 'echo PROGRAM STARTED'
  [ $RC -ne 0 ] && has 'needs mn_nccl on' && ! has 'PROGRAM STARTED' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_inline_retry_script() {
  [ $inline = 1 ] || return 0
  local name="scripts/jobs/retry-job.sbatch: node1 slowed, the check fails, the retry runs on node0 and node2 of the same allocation"
  local log=$OUT/retry.log
  slow_node1
  MN_RETRY_PROGRAM='echo PROGRAM on $(hostname)' MN_RETRY_DIR=$OUT \
    run sbatch --wait -N3 -o "$log" "$TOP/scripts/jobs/retry-job.sbatch"
  slow_off
  cp "$log" "$OUT/last" 2>/dev/null
  [ $RC -eq 0 ] && has "retrying without node1 on 2 nodes" && [ "$(count '^PROGRAM on node[02]$')" = 2 ] && ! has '^PROGRAM on node1' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

run_checks
