# SPDX-License-Identifier: Apache-2.0
# Shared by the integration tests: a real Slurm from scripts/cluster/local-cluster.sh.
# Each check prints "ok - NAME" or "not ok - NAME" with what was seen.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
CLUSTER_DIR=${MN_CLUSTER_DIR:-/tmp/mn-cluster}
export SLURM_CONF=$CLUSTER_DIR/slurm.conf
PY=/usr/bin/python3          # Debian's python3 has python3-torch
ALLREDUCE=$TOP/scripts/torch/allreduce.py
# Workarounds for Debian's torch builds (not the plugin's business).
source "$TOP/scripts/torch/debian-torch.sh"
PASSED=0
FAILED=0
OUT=$(mktemp -d /tmp/mn-it.XXXXXX)

pass() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
fail() {
  FAILED=$((FAILED + 1))
  echo "not ok - $1"
  shift
  [ $# -gt 0 ] && printf '    %s\n' "$@"
  # The verdict's own lines first: a CI log shows a failure's first lines.
  [ -f "$OUT/last" ] && grep -E '^(problem: |FAIL|srun: error|.*mn-preflight: error)' "$OUT/last" | head -6 | sed 's/^/    ! /'
  [ -f "$OUT/last" ] && sed 's/^/    | /' "$OUT/last" | head -15
  return 0
}

# run CMD...: runs with a time limit; stdout+stderr in $OUT/last, rc in $RC.
# Under the sanitizer run, a command during which a child of slurmstepd
# hung in the ASan runtime's fork deadlock (scripts/test/asan-fork-watch.sh
# killed it; not this project's code) runs again, up to 3 times in all.
run() {
  local before
  before=$(fork_deadlocks)
  local tries=1
  timeout 120 "$@" >"$OUT/last" 2>&1
  RC=$?
  while [ $tries -lt 3 ] && fork_deadlock_since "$before"; do
    before=$(fork_deadlocks)
    tries=$((tries + 1))
    timeout 120 "$@" >"$OUT/last" 2>&1
    RC=$?
  done
  no_drained_node "$@"
}

# How many fork deadlocks the watcher has killed so far (0 outside the
# sanitizer run), and whether one came since BEFORE (then saying so).
fork_deadlocks() {
  [ -n "${MN_FORK_DEADLOCKS:-}" ] || { echo 0; return; }
  wc -l <"$MN_FORK_DEADLOCKS" 2>/dev/null || echo 0
}
fork_deadlock_since() {
  [ "$(fork_deadlocks)" -gt "$1" ] || return 1
  echo "    (the ASan runtime's fork deadlock hit this command: run again)" >&2
}

# A node that a command left drained fails that command's test here, and is
# resumed: the tests after it would otherwise each wait out their 120 s.
# Files that drain nodes on purpose (Slurm's own rules) set DRAINS_EXPECTED=1.
no_drained_node() {
  [ "${DRAINS_EXPECTED:-0}" = 1 ] && return 0
  local bad n
  bad=$(timeout 20 sinfo -h -N -t drain -o '%N: %E' 2>/dev/null | sort -u)
  [ -z "$bad" ] && return 0
  fail "a node was drained after: ${*:1:6}" "$bad"
  for n in $(cut -d: -f1 <<<"$bad"); do
    timeout 20 scontrol update nodename="$n" state=resume >/dev/null 2>&1
  done
}

# Node states (sinfo's %T, one line per state; -n NODES for some) once
# their last step has left them: a node is "completing" for a moment after
# a step ends (seconds on a busy machine: seen in CI), which says nothing
# about a drain.
settled_states() {
  local s
  for _ in $(seq 40); do
    s=$(timeout 20 sinfo -h "$@" -o '%T' 2>/dev/null | sort -u)
    [[ -n "$s" && "$s" != *comp* ]] && break
    sleep 0.5
  done
  echo "$s"
}

# Lines of the last output that match a pattern.
lines() { grep -E "$1" "$OUT/last" || true; }
count() { grep -cE "$1" "$OUT/last" || true; }
has() { grep -qE -- "$1" "$OUT/last"; }

plugstack() { bash "$TOP/scripts/cluster/local-cluster.sh" plugstack "$@" >/dev/null; }

# Prints KEY=VALUE of the distributed variables, one task per line.
ENV_DUMP='echo "TASK host=$(hostname) RANK=${RANK-} LOCAL_RANK=${LOCAL_RANK-} WORLD_SIZE=${WORLD_SIZE-} LOCAL_WORLD_SIZE=${LOCAL_WORLD_SIZE-} NODE_RANK=${NODE_RANK-} NNODES=${NNODES-} MASTER_ADDR=${MASTER_ADDR-} MASTER_PORT=${MASTER_PORT-} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME-} GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME-} PET_NNODES=${PET_NNODES-} PET_NPROC_PER_NODE=${PET_NPROC_PER_NODE-} PET_NODE_RANK=${PET_NODE_RANK-} PET_MASTER_ADDR=${PET_MASTER_ADDR-} PET_MASTER_PORT=${PET_MASTER_PORT-} PET_RDZV_ID=${PET_RDZV_ID-} GPUS_PER_NODE=${GPUS_PER_NODE-} NPROC_PER_NODE=${NPROC_PER_NODE-} NCCL_IB_DISABLE=${NCCL_IB_DISABLE-} NCCL_IB_HCA=${NCCL_IB_HCA-} NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX-} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-} NCCL_HOSTID=${NCCL_HOSTID-} JOB=${SLURM_JOB_ID-}.${SLURM_STEP_ID-}"'

# field NAME LINE: the value of NAME= in one TASK line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# distinct NAME: the distinct values of NAME over all TASK lines.
distinct() { lines '^TASK ' | while read -r l; do field "$1" "$l"; done | sort -u; }

if ! timeout 20 sinfo -h >/dev/null 2>&1; then
  echo "not ok - the local cluster answers no sinfo (SLURM_CONF=$SLURM_CONF): start it with scripts/cluster/local-cluster.sh start"
  echo "integration: 0 passed, 1 failed"
  exit 1
fi

summary() {
  rm -rf "$OUT"
  echo "integration: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

# This cluster's Slurm release: ver ("22.05.8"), major, minor, and
# inline=1 from 23.11 on (spank_prepend_task_argv: the plugin can put the
# check or the watch in front of a task), else 0.
slurm_release_facts() {
  ver=$(srun --version | awk '{print $2}')
  major=${ver%%.*}
  minor=${ver#*.}
  minor=${minor%%.*}
  minor=$((10#$minor))
  if [ "$major" -gt 23 ] || { [ "$major" -eq 23 ] && [ "$minor" -ge 11 ]; }; then inline=1; else inline=0; fi
}

# Runs the file's t_* checks (or those MN_IT_ONLY names, or for this file
# alone MN_IT_ONLY_<file>, e.g. MN_IT_ONLY_test_watch), then the summary.
run_checks() {
  local t only
  only=MN_IT_ONLY_$(basename "$0" .sh)
  for t in ${MN_IT_ONLY:-${!only:-$(declare -F | awk '{print $3}' | grep '^t_')}}; do
    "$t"
  done
  summary
}
