#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What this Slurm release does with a failing required SPANK plugin, held to
# the table in mn_nccl(8) ("FAILING HOOKS BY RELEASE"): a throw-away probe
# plugin (spank_fail_probe.c) fails one hook, and we record srun's exit code,
# whether the task ran and whether the node was drained. mn_nccl relies on
# this table: it never fails a remote init or user_init hook (it keeps the
# error for task_init), and on 25.11+ it declares its init failures the
# job's, never the node's.
source "$(dirname "$0")/lib.sh"
DRAINS_EXPECTED=1  # some checks drain node0 on purpose (and resume it)

series=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-f]\{2\}\)\([0-9a-f]\{2\}\).*/\1 \2/p' /usr/include/slurm/slurm_version.h)
read -r major minor <<<"$series"
major=$((16#$major)); minor=$((16#$minor))
PROBE=$OUT/spank_fail_probe.so
cc -shared -fPIC -o "$PROBE" "$HERE/spank_fail_probe.c" 2>"$OUT/cc.log" ||
  { echo "not ok - spank_fail_probe.c does not build"; cat "$OUT/cc.log"; exit 1; }

# The plugstack line's kind: required, or optional (the package's line).
LINE=required
probe() { MN_PLUGIN=$PROBE bash "$TOP/scripts/cluster/local-cluster.sh" plugstack $LINE "$@" >/dev/null; }
settled_state() { settled_states -n node0; }

# observe HOOK CONTEXT [MODE]: "rc=N ran=yes|no state=STATE"
observe() {
  probe "$@"
  rm -f "$OUT/ran"
  run srun -N1 -w node0 touch "$OUT/ran"
  sleep 1
  local state; state=$(settled_state)
  echo "rc=$([ $RC -eq 0 ] && echo 0 || echo fail) ran=$([ -e "$OUT/ran" ] && echo yes || echo no) state=${state%%[*~#]*}"
  case "$state" in drain* | down*) scontrol update nodename=node0 state=resume >/dev/null 2>&1 ;; esac
}

# observe_batch HOOK CONTEXT [MODE]: the same hook failing in a batch job's
# own step: "state=STATE job=FAILED|REQUEUED|..."
observe_batch() {
  probe "$@"
  local j state job=? i
  j=$(sbatch --parsable -w node0 -o /dev/null --wrap 'srun true' 2>/dev/null)
  for i in $(seq 1 20); do
    sleep 1
    job=$(scontrol show job "$j" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p;s/^Restarts=\([1-9]\)/REQUEUED/p' | tail -1)
    case "$job" in FAILED | COMPLETED | REQUEUED | CANCELLED | NODE_FAIL) break ;; esac
  done
  state=$(settled_state)
  scancel "$j" 2>/dev/null
  echo "state=${state%%[*~#]*} job=$job"
  case "$state" in drain* | down*) scontrol update nodename=node0 state=resume >/dev/null 2>&1 ;; esac
  sleep 1
}

# expect [--batch] [--optional] HOOK CONTEXT [MODE] WHAT: the release's
# documented outcome
expect() {
  local how=observe where="srun"
  [ "$1" = --batch ] && { how=observe_batch; where="a batch job"; shift; }
  LINE=required
  [ "$1" = --optional ] && { LINE=optional; shift; }
  local want=${*: -1} args=("${@:1:$#-1}")
  local got; got=$($how "${args[@]}")
  local name="Slurm $major.$(printf %02d $minor): a failing ${args[*]} ($LINE plugstack line) under $where gives $want"
  [ "$got" = "$want" ] && pass "$name" || fail "$name" "saw $got"
  LINE=required
}

if [ "$major" -lt 23 ] || { [ "$major" -eq 23 ] && [ "$minor" -lt 11 ]; }; then
  # 22.05: a failing remote init or user_init stops the tasks silently
  # (srun exits 0); only task_init failures reach srun's exit code.
  expect init remote "rc=0 ran=no state=idle"
  expect user_init remote "rc=0 ran=no state=idle"
  expect task_init remote "rc=fail ran=no state=idle"
  expect --batch init remote "state=drained job=COMPLETED"
elif [ "$major" -lt 25 ] || { [ "$major" -eq 25 ] && [ "$minor" -lt 11 ]; }; then
  # 23.11 and 24.11: every remote failure reaches srun's exit code ("task 0
  # launch failed: Plugin initialization failed" for init, "Slurmd could
  # not execve job" for user_init); no node drained by an srun step; a
  # batch step's failing init drains the node and requeues the job.
  expect init remote "rc=fail ran=no state=idle"
  expect user_init remote "rc=fail ran=no state=idle"
  expect task_init remote "rc=fail ran=no state=idle"
  expect --batch init remote "state=drained job=REQUEUED"
else
  # 26.05: srun says "Spank plugin failure, node failed" (or "job failed"
  # with ESPANK_JOB_FAILURE) but drains nothing; in a batch job's own step
  # a failing init drains the node and requeues the job unless the plugin
  # declares slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE.
  expect init remote "rc=fail ran=no state=idle"
  expect init remote job "rc=fail ran=no state=idle"
  expect user_init remote "rc=fail ran=no state=idle"
  expect task_init remote "rc=fail ran=no state=idle"
  expect --batch init remote "state=drained job=REQUEUED"
  expect --batch init remote job "state=idle job=FAILED"
  name="mn_nccl.so built for $major.$(printf %02d $minor) exports slurm_spank_init_failure_mode (job failures, never the node's)"
  if nm -D --defined-only "$TOP/spank/.libs/mn_nccl.so" | grep -qw slurm_spank_init_failure_mode; then pass "$name"; else fail "$name"; fi
fi
expect init local "rc=fail ran=no state=idle"
# An optional plugin's failing hook is ignored on every release (Slurm's
# _do_call_stack), in srun and in slurmstepd alike: the task runs. This is
# why mn_nccl refuses --mn-preflight in srun's option callback and ends the
# task itself in task_init (tests/integration/test_inline.sh).
expect --optional init local "rc=0 ran=yes state=idle"
expect --optional init remote "rc=0 ran=yes state=idle"
expect --optional user_init remote "rc=0 ran=yes state=idle"
expect --optional task_init remote "rc=0 ran=yes state=idle"

# mn_nccl itself: a user's mistake that only the node can see (--mn-nccl=ib
# where there is no InfiniBand) fails that step of the batch job, never the
# node.
plugstack required
j=$(sbatch --parsable -w node0 -o "$OUT/batch.out" --wrap 'srun --mn-nccl=ib true; echo "srun rc=$?"' 2>/dev/null)
for i in $(seq 1 20); do
  sleep 1
  st=$(scontrol show job "$j" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p')
  case "$st" in COMPLETED | FAILED | CANCELLED) break ;; esac
done
state=$(settled_state)
name="--mn-nccl=ib without InfiniBand in a batch job: its srun fails saying so, node0 stays ${state:-?} (never drained)"
if grep -q 'InfiniBand' "$OUT/batch.out" 2>/dev/null && grep -q 'srun rc=[1-9]' "$OUT/batch.out" &&
  [ "${state%%[*~#]*}" = idle ]; then
  pass "$name"
else
  fail "$name" "job $j: ${st:-?}, node0 ${state:-?}" "$(cat "$OUT/batch.out" 2>/dev/null)"
fi

# The same mistake under an optional line, which Slurm would let run with
# the task_init failure ignored: mn_nccl ends the task itself (exit 2)
# before the program starts, and the node stays up.
plugstack optional
rm -f "$OUT/ran"
run srun -N1 -w node0 --mn-nccl=ib touch "$OUT/ran"
state=$(settled_state)
name="--mn-nccl=ib without InfiniBand, optional plugstack line: the task ends before the program (exit 2), node0 stays ${state:-?}"
if [ $RC -ne 0 ] && [ ! -e "$OUT/ran" ] && has 'InfiniBand' && has 'Exited with exit code 2' && [ "${state%%[*~#]*}" = idle ]; then
  pass "$name"
else
  fail "$name" "rc=$RC ran=$([ -e "$OUT/ran" ] && echo yes || echo no)"
fi
plugstack required
summary
