#!/usr/bin/env bash
# srun --mn-preflight on the real local Slurm (CPU path). Which parts run
# depends on the release: before 24.11 (no spank_prepend_task_argv) srun
# must refuse the option before anything is allocated; from 24.11 the check
# runs in each task and the program starts only on PASS. The helper's own
# `check --exec` mode, which the plugin puts in front of each task, is
# tested on every release.
source "$(dirname "$0")/lib.sh"
PF=$TOP/helper/mn-preflight
plugstack required "preflight=$PF"

ver=$(srun --version | awk '{print $2}')
major=${ver%%.*}
minor=${ver#*.}
minor=${minor%%.*}
minor=$((10#$minor))
if [ "$major" -gt 24 ] || { [ "$major" -eq 24 ] && [ "$minor" -ge 11 ]; }; then inline=1; else inline=0; fi
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
# values that differ between any two steps (ids, the per-srun secret,
# pids) are masked, their names kept. Both runs give MASTER_PORT (the
# plugin keeps a user's), so the program's port is compared too: the
# check's own port must never reach it. Also the task's pid against
# the one Slurm recorded for it.
VOLATILE='SLURM_JOB_ID|SLURM_JOBID|SLURM_STEP_ID|SLURM_STEPID|SLURM_TASK_PID|SLURM_SRUN_COMM_PORT|SLURM_STEP_LAUNCHER_PORT|SLURM_JOB_START_TIME|SLURM_JOB_END_TIME|SLURM_JOB_SLUID|SLURM_JOB_NAME|PET_RDZV_ID|MN_NCCL_STEP_SECRET|TMPDIR|SLURM_SPANK_JOB_ID|_'
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
  [ $a -eq 2 ] && [ $RC -eq 2 ] && has 'go with --exec' || { fail "$name" "rc=$a,$RC"; return; }
  pass "$name"
}

# --- before 24.11: refused in srun, before anything runs ----------------------

# The id a fresh job gets now: a refused srun must not have used one.
last_job() { srun -N1 -n1 bash -c 'echo JOBID=$SLURM_JOB_ID' 2>/dev/null | sed -n 's/^JOBID=//p'; }

t_refused_without_prepend() {
  [ $inline = 0 ] || return 0
  local name="Slurm $ver: --mn-preflight and MN_NCCL_PREFLIGHT refused in srun, naming 24.11 and the two-line sbatch alternative; no job is created"
  local before after
  before=$(last_job)
  run srun -N2 --mn-nccl=auto --mn-preflight bash -c 'echo PROGRAM STARTED'
  local a=$RC
  local msg_ok=1
  has 'needs Slurm 24.11 or newer' && has "this is Slurm ${major}\\.0?${minor}" && has 'srun --mn-nccl=auto mn-preflight \|\| exit 1' &&
    has 'srun --mn-nccl=auto python train.py' && ! has 'PROGRAM STARTED' || msg_ok=0
  run env MN_NCCL_PREFLIGHT=timeout=5 srun -N2 --mn-nccl=auto bash -c 'echo PROGRAM STARTED'
  local b=$RC
  has 'MN_NCCL_PREFLIGHT\) needs Slurm 24.11' && ! has 'PROGRAM STARTED' || msg_ok=0
  after=$(last_job)
  [ $a -ne 0 ] && [ $b -ne 0 ] && [ $msg_ok = 1 ] && [ -n "$before" ] && [ "$after" = $((before + 1)) ] ||
    { fail "$name" "rc=$a,$b message ok=$msg_ok job ids before=$before after=$after (want consecutive)"; return; }
  pass "$name"
}

t_off_is_no_check() {
  local name="MN_NCCL_PREFLIGHT=off: no check, the program runs (every release)"
  run env MN_NCCL_PREFLIGHT=off srun -N2 --mn-nccl=auto bash -c 'echo PROGRAM STARTED'
  [ $RC -eq 0 ] && [ "$(count 'PROGRAM STARTED')" = 2 ] && ! has '^PASS' || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_bad_value_refused() {
  local name="--mn-preflight=timeout=0 and an unknown option: srun refuses before launch, naming the option and the fix"
  run srun -N1 --mn-nccl=auto --mn-preflight=timeout=0 bash -c 'echo PROGRAM STARTED'
  local a=$RC
  has "'timeout=0' is not valid; give timeout=S: seconds, from 1 to 600, e.g. timeout=30" || a=0
  run env MN_NCCL_PREFLIGHT=timout=3 srun -N1 --mn-nccl=auto bash -c 'echo PROGRAM STARTED'
  [ $a -ne 0 ] && [ $RC -ne 0 ] && has "MN_NCCL_PREFLIGHT: unknown option 'timout=3'" && ! has 'PROGRAM STARTED' ||
    { fail "$name" "rc=$a,$RC"; return; }
  pass "$name"
}

# --- 24.11 and newer: the check inside the training step ----------------------

t_inline_pass_same_env() {
  [ $inline = 1 ] || return 0
  local name="--mn-preflight: PASS printed once, then the program in every task with its normal environment and pid"
  run env MASTER_PORT=29555 srun -N3 -n5 --mn-nccl=auto bash -c "$ENV_PROG"
  [ $RC -eq 0 ] || { fail "$name" "plain step rc=$RC"; return; }
  local plain; plain=$(env_of)
  run env MASTER_PORT=29555 srun -N3 -n5 --mn-nccl=auto --mn-preflight=timeout=20,no-pairs bash -c "$ENV_PROG"
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
