#!/usr/bin/env bash
# What this Slurm release does with a failing required SPANK plugin, held to
# the table in mn_nccl(8) ("FAILING HOOKS BY RELEASE"): a throw-away probe
# plugin (spank_fail_probe.c) fails one hook, and we record srun's exit code,
# whether the task ran and whether the node was drained. mn_nccl relies on
# this table: it never fails a remote init or user_init hook (it keeps the
# error for task_init), and on 25.11+ it declares its init failures the
# job's, never the node's.
source "$(dirname "$0")/lib.sh"

series=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-f]\{2\}\)\([0-9a-f]\{2\}\).*/\1 \2/p' /usr/include/slurm/slurm_version.h)
read -r major minor <<<"$series"
major=$((16#$major)); minor=$((16#$minor))
PROBE=$OUT/spank_fail_probe.so
cc -shared -fPIC -o "$PROBE" "$HERE/spank_fail_probe.c" 2>"$OUT/cc.log" ||
  { echo "not ok - spank_fail_probe.c does not build"; cat "$OUT/cc.log"; exit 1; }

probe() { MN_PLUGIN=$PROBE bash "$TOP/scripts/local-cluster.sh" plugstack required "$@" >/dev/null; }
node_state() { sinfo -h -n node0 -o '%T' 2>/dev/null; }

# observe HOOK CONTEXT [MODE]: "rc=N ran=yes|no state=STATE"
observe() {
  probe "$@"
  rm -f "$OUT/ran"
  run srun -N1 -w node0 touch "$OUT/ran"
  sleep 1
  local state; state=$(node_state)
  echo "rc=$([ $RC -eq 0 ] && echo 0 || echo fail) ran=$([ -e "$OUT/ran" ] && echo yes || echo no) state=${state%%[*~#]*}"
  case "$state" in drain* | down*) scontrol update nodename=node0 state=resume >/dev/null 2>&1 ;; esac
}

# expect HOOK CONTEXT [MODE] -- WHAT: the release's documented outcome
expect() {
  local want=${*: -1} args=("${@:1:$#-1}")
  local got; got=$(observe "${args[@]}")
  local name="Slurm $major.$(printf %02d $minor): a failing ${args[*]} gives $want"
  [ "$got" = "$want" ] && pass "$name" || fail "$name" "saw $got"
}

if [ "$major" -lt 25 ] || { [ "$major" -eq 25 ] && [ "$minor" -lt 11 ]; }; then
  # 22.05 and 24.11: a failing remote init or user_init stops the tasks
  # silently (srun exits 0); task_init failures reach srun's exit code.
  expect init remote "rc=0 ran=no state=idle"
  expect user_init remote "rc=0 ran=no state=idle"
  expect task_init remote "rc=fail ran=no state=idle"
else
  # 25.11+ (26.05 here): a failing remote init drains the node unless the
  # plugin sets slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE.
  expect init remote "rc=fail ran=no state=drained"
  expect init remote job "rc=fail ran=no state=idle"
  expect user_init remote "rc=fail ran=no state=idle"
  expect task_init remote "rc=fail ran=no state=idle"
fi
expect init local "rc=fail ran=no state=idle"
plugstack required
summary
