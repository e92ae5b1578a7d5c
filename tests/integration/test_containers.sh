#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# srun --container-image with the real pyxis 0.24.0 and enroot 4.1.2
# (scripts/cluster/containers.sh builds them from ../shared/vendor, with
# enroot's extra 50-slurm-pytorch.sh hook as DGX-style sites have it, and a
# bookworm image with python3-torch and PYTORCH_VERSION in its ENV) on the
# local multi-node Slurm, pyxis listed after and before mn_nccl in
# plugstack.conf. The user adds nothing but --mn-nccl=auto: the program in
# the container must get the plugin's values, not the image's or enroot's
# hook's (MASTER_ADDR=node0, the first node's name, which resolves to
# 127.0.1.1 on node0; MASTER_PORT=61000+job%4536, the same for every step).
# The check in a container (g-i): mn-preflight in an image of glibc and
# bash alone (containers.sh base), as a step of its own on every release,
# and from Slurm 23.11 through srun --mn-preflight (pyxis before and after
# mn_nccl; the release roots build only this image, not the torch one).
# Without the rig (no vendor archives, not built) the file says why and how
# to get it, and counts nothing: a skip is not a pass.
source "$(dirname "$0")/lib.sh"

RIG=$TOP/scripts/cluster/containers.sh
IMAGE=${MN_CONTAINERS_DIR:-/var/tmp/mn-containers}/torch.sqsh
BASE=${MN_CONTAINERS_DIR:-/var/tmp/mn-containers}/base.sqsh
PF=$TOP/helper/mn-preflight
PYXIS_LINE="required /usr/local/lib/slurm/spank_pyxis.so use_squashfuse=1"
MARKER=/etc/mn-nccl-image   # only the image has it
# (read with its errors dropped: in the sanitizer run srun hands the tasks
# LD_PRELOAD of the host's ASan runtimes, absent in the image, and ld.so's
# complaint would land in the captured text)

# scripts/test.sh may still be building the rig beside the other tests.
rig=$(bash "$RIG" status --wait "${MN_CONTAINERS_WAIT:-1800}")
base_rig=$(bash "$RIG" status --image base)
case "$rig $base_rig" in
  failed*)
    fail "the container rig (enroot, pyxis, the images) builds: scripts/cluster/containers.sh" "$rig"
    summary
    exit 1
    ;;
esac
torch=0 base=0
case "$rig" in ready*) torch=1 ;; *) echo "# skipped: containers a-e (the torch image): $rig" ;; esac
case "$base_rig" in ready*) base=1 ;; *) echo "# skipped: containers g-i (the base image): $base_rig" ;; esac
# The sanitizer build of mn-preflight needs its runtimes (libasan), which
# an image of glibc alone lacks: g-i prove the release build only.
if [ $base = 1 ] && readelf -d "$PF" 2>/dev/null | grep -q 'Shared library: \[lib[a-z]*san\.so'; then
  base=0
  echo "# skipped: containers g-i: this mn-preflight is the sanitizer build (needs libasan, not in a glibc-only image)"
fi
[ $torch = 1 ] || [ $base = 1 ] || { summary; exit 0; }

ver=$(srun --version | awk '{print $2}')
major=${ver%%.*}
minor=${ver#*.}
minor=$((10#${minor%%.*}))
inline=0
if [ "$major" -gt 23 ] || { [ "$major" -eq 23 ] && [ "$minor" -ge 11 ]; }; then inline=1; fi

# mn-preflight in every container, as the package's enroot mounts.d entry
# does for its installed path: here the build's.
MOUNTS=/etc/enroot/mounts.d/60-mn-nccl-test.fstab
mount_preflight() { echo "$PF $PF none x-create=file,bind,ro,nosuid,nodev,private" >"$MOUNTS"; }
# Whatever happens below, the other tests get the plain plugstack back.
trap 'plugstack required; rm -f "$MOUNTS"' EXIT

# pyxis_order after|before [required|optional]: plugstack.conf with pyxis'
# line after or before mn_nccl's (SPANK calls each callback in file order),
# mn_nccl's line required (default) or optional, as the package installs it.
pyxis_order() {
  local line=${2:-required}
  # preflight=: --mn-preflight's check is this build's (i).
  if [ "$1" = after ]; then
    MN_PLUGSTACK_AFTER=$PYXIS_LINE plugstack "$line" "preflight=$PF"
  else
    MN_PLUGSTACK_BEFORE=$PYXIS_LINE plugstack "$line" "preflight=$PF"
  fi
  local want=2
  [ "$1" = after ] || want=1
  [ "$(grep -n spank_pyxis "$CLUSTER_DIR/plugstack.conf" | cut -d: -f1)" = $want ] ||
    { echo "plugstack.conf is not what pyxis_order $1 wrote" >&2; return 1; }
}

note() { echo "    # $*"; }

# explained NAME: the value of NAME= on the plugin's --mn-nccl-explain lines
# (one per node; all must agree).
explained() { lines '^mn_nccl: node[0-9]+ \(node ' | sed -n "s/.*; $1=\([^ ]*\) .*/\1/p" | sort -u; }

# enroot's pytorch hook's MASTER_PORT for a JOB field (job.step): per job.
hook_port() { echo $((${1%%.*} % 4536 + 61000)); }

in_port_range() { [ -n "$1" ] && [ "$1" -ge 20000 ] && [ "$1" -le 29999 ]; }

# The one check of a and b: 3 nodes x 2 tasks in the container.
env_in_container() {
  local order=$1
  local name="pyxis $order mn_nccl in plugstack.conf, nothing but --container-image and --mn-nccl=auto: 6 of 6 tasks ran in the container (its marker) with the plugin's MASTER_ADDR (node0's 10.x from --mn-nccl-explain, not node0), its MASTER_PORT, RANK 0-5, WORLD_SIZE 6, LOCAL_RANK 0/1 per node, NCCL_SOCKET_IFNAME"
  # Listed before, pyxis imports the hook's values first and the plugin
  # replaces them (and says so under --mn-nccl-explain); listed after, the
  # hook never writes them (PYXIS_CONTAINER_ENV hands it the plugin's).
  [ "$order" = after ] || name+="; the hook's MASTER_ADDR=node0 and MASTER_PORT=61000+job%4536 were there and replaced"
  pyxis_order "$order" || { fail "$name" "plugstack.conf not written"; return; }
  run srun -N3 --ntasks-per-node=2 --container-image="$IMAGE" --mn-nccl=auto --mn-nccl-explain \
    bash -c "echo \"IMAGE host=\$(hostname) \$(cat $MARKER 2>/dev/null || echo no marker)\"; $ENV_DUMP"
  [ $RC -eq 0 ] || { fail "$name" "srun rc=$RC"; return; }
  local addr port ifname
  addr=$(explained MASTER_ADDR)
  port=$(explained MASTER_PORT)
  ifname=$(explained NCCL_SOCKET_IFNAME)
  # NCCL_SOCKET_IFNAME's value is "=eth0" (NCCL's exact-name form).
  [[ "$addr" =~ ^10\.[0-9.]+$ ]] && in_port_range "$port" && [[ "$ifname" == =?* ]] ||
    { fail "$name" "the plugin's explain lines: MASTER_ADDR='$addr' MASTER_PORT='$port' NCCL_SOCKET_IFNAME='$ifname'"; return; }
  local got
  got="MASTER_ADDR=$(distinct MASTER_ADDR | paste -sd,) MASTER_PORT=$(distinct MASTER_PORT | paste -sd,) RANK=$(distinct RANK | sort -n | paste -sd,) WORLD_SIZE=$(distinct WORLD_SIZE | paste -sd,) LOCAL_RANK=$(distinct LOCAL_RANK | sort -n | paste -sd,) NCCL_SOCKET_IFNAME=$(distinct NCCL_SOCKET_IFNAME | paste -sd,) GLOO_SOCKET_IFNAME=$(distinct GLOO_SOCKET_IFNAME | paste -sd,)"
  local replaced
  replaced=$(lines 'replaced what was set after srun' | head -1)
  note "plugin: MASTER_ADDR=$addr MASTER_PORT=$port NCCL_SOCKET_IFNAME=$ifname; the program got: $got"
  [ -z "$replaced" ] || note "$replaced"
  [ "$(count "^IMAGE host=node[0-2] mn-nccl test image")" = 6 ] ||
    { fail "$name" "$(count "^IMAGE host=node[0-2] mn-nccl test image") of 6 tasks read $MARKER (ran in the container)"; return; }
  [ "$(count '^TASK ')" = 6 ] && [ "$(distinct MASTER_ADDR)" = "$addr" ] && [ "$(distinct MASTER_PORT)" = "$port" ] &&
    [ "$(distinct RANK | sort -n | paste -sd,)" = "0,1,2,3,4,5" ] && [ "$(distinct WORLD_SIZE)" = 6 ] &&
    [ "$(distinct NCCL_SOCKET_IFNAME)" = "$ifname" ] && [ "$(distinct GLOO_SOCKET_IFNAME)" = "${ifname#=}" ] ||
    { fail "$name" "the program got: $got"; return; }
  if [ "$order" = before ]; then
    local job; job=$(distinct JOB | head -1)
    [ "$(lines 'replaced what was set after srun' | grep " MASTER_ADDR=node0[ ;]" | grep -c " MASTER_PORT=$(hook_port "$job")[ ;]")" = 3 ] ||
      { fail "$name" "no node said it replaced the hook's MASTER_ADDR=node0 MASTER_PORT=$(hook_port "$job")"; return; }
  fi
  local node locals
  for node in node0 node1 node2; do
    locals=$(lines "^TASK host=$node " | while read -r l; do field LOCAL_RANK "$l"; done | sort -n | paste -sd,)
    [ "$locals" = "0,1" ] || { fail "$name" "$node: LOCAL_RANK $locals"; return; }
  done
  pass "$name"
}

t_a_env_pyxis_after() { [ $torch = 1 ] || return 0; env_in_container after; }
t_b_env_pyxis_before() { [ $torch = 1 ] || return 0; env_in_container before; }

# c: a real gloo all-reduce in the container (env:// rendezvous from the
# plugin's values only), in both orders. The program goes in as python3 -c:
# no mount, no flag.
allreduce_in_container() {
  local order=$1
  local name="pyxis $order mn_nccl: torch (Debian 12's 1.13) gloo all-reduce (env://) in the container, 3 nodes x 2 tasks, nothing but --container-image and --mn-nccl=auto: right sum on 6 of 6 ranks, met at node0's 10.x and the plugin's port"
  pyxis_order "$order" || { fail "$name" "plugstack.conf not written"; return; }
  run srun -N3 --ntasks-per-node=2 --container-image="$IMAGE" --mn-nccl=auto python3 -c "$(cat "$ALLREDUCE")"
  local ok masters
  ok=$(count 'ALLREDUCE .*world=6 .*sum=21 .*ok=1')
  masters=$(lines '^ALLREDUCE ' | sed -n 's/.* master=\([^ ]*\) .*/\1/p' | sort -u | paste -sd,)
  note "rc=$RC, $ok of 6 ranks right, met at $masters"
  [ $RC -eq 0 ] && [ "$ok" = 6 ] && [[ "$masters" =~ ^10\.[0-9.]+:[0-9]+$ ]] && in_port_range "${masters##*:}" ||
    { fail "$name" "rc=$RC ok=$ok master=$masters"; return; }
  pass "$name"
}

t_c_allreduce_pyxis_after() { [ $torch = 1 ] || return 0; allreduce_in_container after; }
t_c_allreduce_pyxis_before() { [ $torch = 1 ] || return 0; allreduce_in_container before; }

# d: two container steps of one job at the same time.
t_d_concurrent_container_steps() {
  [ $torch = 1 ] || return 0
  local name="two container steps of one job at once (pyxis after mn_nccl): each its own plugin port (enroot's hook would give both 61000+job%4536), both at node0's 10.x"
  pyxis_order after || { fail "$name" "plugstack.conf not written"; return; }
  run salloc -N2 -n4 bash -c "
    srun --overlap -N2 -n2 --container-image=$IMAGE --mn-nccl=auto bash -c '$ENV_DUMP' &
    srun --overlap -N2 -n2 --container-image=$IMAGE --mn-nccl=auto bash -c '$ENV_DUMP' &
    wait"
  local steps ports addr job bad="" p
  steps=$(distinct JOB | paste -sd,)
  ports=$(distinct MASTER_PORT | paste -sd,)
  addr=$(distinct MASTER_ADDR | paste -sd,)
  note "rc=$RC steps $steps: MASTER_PORT $ports, MASTER_ADDR $addr"
  [ $RC -eq 0 ] && [ "$(count '^TASK ')" = 4 ] && [ "$(distinct JOB | wc -l)" = 2 ] ||
    { fail "$name" "rc=$RC, $(count '^TASK ') task lines, steps $steps"; return; }
  for job in $(distinct JOB); do
    p=$(lines "^TASK .* JOB=$job\$" | while read -r l; do field MASTER_PORT "$l"; done | sort -u)
    [ "$(wc -l <<<"$p")" = 1 ] && in_port_range "$p" && [ "$p" != "$(hook_port "$job")" ] || bad+=" step $job: ports '$p'"
  done
  [ -z "$bad" ] && [ "$(distinct MASTER_PORT | wc -l)" = 2 ] && [[ "$addr" =~ ^10\.[0-9.]+$ ]] ||
    { fail "$name" "ports $ports, addr $addr$bad"; return; }
  pass "$name"
}

# e: the user's own --container-env (HF_TOKEN) replaces the plugin's
# PYXIS_CONTAINER_ENV. Where pyxis runs after mn_nccl (listed after it),
# nothing can keep the plugin's values from the image and enroot's hook:
# the plugin says so. Listed before, the plugin runs last and wins.
t_e_user_container_env_pyxis_after() {
  [ $torch = 1 ] || return 0
  local name="pyxis after mn_nccl, the user's --container-env=HF_TOKEN: the plugin warns on stderr (names MASTER_ADDR, MASTER_PORT and the fix), and the program gets enroot's pytorch hook's MASTER_ADDR=node0 and MASTER_PORT=61000+job%4536, the plugin's NCCL_SOCKET_IFNAME"
  pyxis_order after || { fail "$name" "plugstack.conf not written"; return; }
  HF_TOKEN=hf_dummy run srun -N3 --ntasks-per-node=2 --container-image="$IMAGE" --container-env=HF_TOKEN --mn-nccl=auto \
    bash -c "$ENV_DUMP HF_TOKEN=\${HF_TOKEN-}"
  local warn job
  warn=$(lines 'warning: pyxis runs after mn_nccl here and --container-env=HF_TOKEN leaves out ' | head -1)
  job=$(distinct JOB | head -1)
  note "the program got MASTER_ADDR=$(distinct MASTER_ADDR | paste -sd,) MASTER_PORT=$(distinct MASTER_PORT | paste -sd,) (hook: $(hook_port "${job:-0}")) NCCL_SOCKET_IFNAME=$(distinct NCCL_SOCKET_IFNAME | paste -sd,) RANK=$(distinct RANK | sort -n | paste -sd,) HF_TOKEN=$(distinct HF_TOKEN | paste -sd,)"
  note "stderr: ${warn:-no warning}"
  [ $RC -eq 0 ] && [ "$(count '^TASK ')" = 6 ] || { fail "$name" "srun rc=$RC"; return; }
  [[ "$warn" == *MASTER_ADDR* && "$warn" == *MASTER_PORT* && "$warn" == *"fix: add them (--container-env=HF_TOKEN,"*MASTER_ADDR* ]] ||
    { fail "$name" "no warning naming MASTER_ADDR, MASTER_PORT and the fix: '$warn'"; return; }
  [ "$(distinct MASTER_ADDR)" = node0 ] && [ "$(distinct MASTER_PORT)" = "$(hook_port "$job")" ] &&
    [ "$(distinct NCCL_SOCKET_IFNAME)" = "=eth0" ] && [ "$(distinct HF_TOKEN)" = hf_dummy ] ||
    { fail "$name" "the program got other values than described (see the note above)"; return; }
  pass "$name"
}

t_e_user_container_env_pyxis_before() {
  [ $torch = 1 ] || return 0
  local name="pyxis before mn_nccl, the user's --container-env=HF_TOKEN: no warning, the plugin (running after pyxis' import) replaces the hook's values: MASTER_ADDR node0's 10.x, its own port"
  pyxis_order before || { fail "$name" "plugstack.conf not written"; return; }
  HF_TOKEN=hf_dummy run srun -N3 --ntasks-per-node=2 --container-image="$IMAGE" --container-env=HF_TOKEN --mn-nccl=auto \
    bash -c "$ENV_DUMP HF_TOKEN=\${HF_TOKEN-}"
  local job addr port
  job=$(distinct JOB | head -1)
  addr=$(distinct MASTER_ADDR | paste -sd,)
  port=$(distinct MASTER_PORT | paste -sd,)
  note "the program got MASTER_ADDR=$addr MASTER_PORT=$port (hook: $(hook_port "${job:-0}")) RANK=$(distinct RANK | sort -n | paste -sd,) HF_TOKEN=$(distinct HF_TOKEN | paste -sd,)"
  [ $RC -eq 0 ] && [ "$(count '^TASK ')" = 6 ] || { fail "$name" "srun rc=$RC"; return; }
  ! has 'warning: pyxis runs after mn_nccl' && [[ "$addr" =~ ^10\.[0-9.]+$ ]] && in_port_range "$port" &&
    [ "$(distinct RANK | sort -n | paste -sd,)" = "0,1,2,3,4,5" ] && [ "$(distinct HF_TOKEN)" = hf_dummy ] ||
    { fail "$name" "MASTER_ADDR=$addr MASTER_PORT=$port"; return; }
  pass "$name"
}

# g: the check as a step of its own in an image of glibc and bash alone
# (any release): PASS on 3 nodes, and it ran there (the image's marker,
# read by the same task right after).
t_g_check_in_base_image() {
  [ $base = 1 ] || return 0
  local name="mn-preflight as a step in an image with glibc alone (mounted in as enroot's mounts.d does), 3 nodes x 2 tasks: PASS, every task in the container"
  pyxis_order after || { fail "$name" "plugstack.conf not written"; return; }
  mount_preflight
  run srun -N3 --ntasks-per-node=2 --container-image="$BASE" --mn-nccl=auto \
    bash -c "$PF --no-pairs --timeout 30; echo \"IMAGE \$? \$(cat $MARKER 2>/dev/null || echo no marker)\""
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(count '^IMAGE 0 mn-nccl base image: ')" = 6 ] ||
    { fail "$name" "rc=$RC PASS $(count '^PASS'), $(count '^IMAGE 0 mn-nccl base image') of 6 in the image"; return; }
  pass "$name"
}

# h: check --exec --container in the container (what --mn-preflight runs
# there): a host directory the image lacks stops it before the check, and
# the words name the container: the paths were looked at inside it.
t_h_exec_outputs_in_container() {
  [ $base = 1 ] || return 0
  local name="check --exec in the container, exclude file in a host directory the image lacks: exit 2 before the check, naming the container and --container-mounts"
  pyxis_order after || { fail "$name" "plugstack.conf not written"; return; }
  mount_preflight
  [ -d "$OUT" ] || { fail "$name" "no $OUT on the host"; return; }
  run srun -N2 --ntasks-per-node=1 --container-image="$BASE" --mn-nccl=auto "$PF" check --exec --port 29876 \
    --container "pyxis --container-image=$BASE" --exclude-file "$OUT/exclude" -- bash -c 'echo PROGRAM STARTED'
  [ $RC -ne 0 ] && ! has 'PROGRAM STARTED' && ! has '^(PASS|FAIL)' &&
    has "exclude file $OUT/exclude: the task runs in a container \(pyxis --container-image=$BASE\).*--container-mounts=$OUT" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# i (Slurm 23.11 onwards): srun --mn-preflight --container-image, nothing
# else: the check runs in the container, then the program, in both orders;
# its outputs are the container's; without mn-preflight in the container
# (pyxis first) every task is refused, naming the container. mn_nccl's line
# is `optional`, as the package installs it: Slurm ignores a failing hook
# of such a plugin, and the refusal must still hold.
inline_in_container() {
  local order=$1
  local name="pyxis $order mn_nccl, srun --mn-preflight=no-pairs --container-image=BASE --mn-nccl=auto: the check PASSes in the container, then the program there on 3 of 3 nodes"
  pyxis_order "$order" optional || { fail "$name" "plugstack.conf not written"; return; }
  mount_preflight
  run srun -N3 --ntasks-per-node=1 --container-image="$BASE" --mn-nccl=auto --mn-preflight=no-pairs \
    bash -c "echo \"PROGRAM \$(cat $MARKER 2>/dev/null || echo no marker)\""
  [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(count '^PROGRAM mn-nccl base image: ')" = 3 ] ||
    { fail "$name" "rc=$RC PASS $(count '^PASS') PROGRAM in the image $(count '^PROGRAM mn-nccl base image: ')"; return; }
  pass "$name"
  name="pyxis $order mn_nccl, --mn-preflight=exclude-file=F, F's directory only on the host: refused before the check, naming the container"
  run srun -N2 --ntasks-per-node=1 --container-image="$BASE" --mn-nccl=auto "--mn-preflight=no-pairs,exclude-file=$OUT/exclude" \
    bash -c 'echo PROGRAM STARTED'
  [ $RC -ne 0 ] && ! has 'PROGRAM STARTED' && has "the task runs in a container \(pyxis --container-image=$BASE\)" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}
t_i_inline_pyxis_after() { [ $base = 1 ] && [ $inline = 1 ] || return 0; inline_in_container after; }
t_i_inline_pyxis_before() { [ $base = 1 ] && [ $inline = 1 ] || return 0; inline_in_container before; }

t_i_inline_not_in_container() {
  [ $base = 1 ] && [ $inline = 1 ] || return 0
  local name="pyxis before mn_nccl, --mn-preflight, mn-preflight not mounted into the container: every task refused before the program, naming pyxis and the mounts.d fix"
  pyxis_order before optional || { fail "$name" "plugstack.conf not written"; return; }
  rm -f "$MOUNTS"
  run srun -N2 --ntasks-per-node=1 --container-image="$BASE" --mn-nccl=auto --mn-preflight=no-pairs bash -c 'echo PROGRAM STARTED'
  [ $RC -ne 0 ] && ! has 'PROGRAM STARTED' && has "is not in the container \(pyxis\).*50-mn-preflight.fstab" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_i_inline_not_mounted_pyxis_after() {
  [ $base = 1 ] && [ $inline = 1 ] || return 0
  local name="pyxis after mn_nccl, --mn-preflight, no mounts.d line for mn-preflight: the plugin warns (it cannot see into the image), naming the mounts.d file and --container-mounts; the image lacks it, so no task starts the program"
  pyxis_order after optional || { fail "$name" "plugstack.conf not written"; return; }
  rm -f "$MOUNTS"
  run srun -N2 --ntasks-per-node=1 --container-image="$BASE" --mn-nccl=auto --mn-preflight=no-pairs bash -c 'echo PROGRAM STARTED'
  [ $RC -ne 0 ] && ! has 'PROGRAM STARTED' &&
    [ "$(count "warning: --mn-preflight: pyxis runs after mn_nccl here and enroot's mounts.d does not mount $PF.*50-mn-preflight.fstab.*--container-mounts=$PF")" = 2 ] ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# The marker must not be on the host, or "ran in the container" proves nothing.
if [ -e "$MARKER" ]; then
  fail "precondition: $MARKER exists only in the image" "the host has $MARKER too"
fi
run_checks
