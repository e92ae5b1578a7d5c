#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# srun --mn-nccl=auto apptainer exec IMG ... with the real Apptainer (Debian
# unstable's 1.4) on the local multi-node Slurm. The user adds nothing but
# --mn-nccl=auto: the program in the container must get the plugin's values
# through the APPTAINERENV_ copies (lib/plan/step_plan.cc), also under
# --cleanenv and over the image's own %environment, which sets
# MASTER_ADDR=wrong.invalid and MASTER_PORT=1; torchrun once per task in
# the container is refused as it is bare; the inline check (--mn-preflight,
# Slurm 23.11+) says it tested the node's NCCL, not the image's.
#
# The image is a sandbox directory built here in seconds, nothing
# downloaded: `apptainer build --sandbox` of a definition with nothing but
# that %environment (Bootstrap: scratch: Apptainer's own /.singularity.d),
# then this root's own /usr as hard links (cp -al, same file system) and a
# copy of /etc with a marker only the image has.
#
# Apptainer needs a real root: in a chroot it stops with "Running inside a
# weak chrooted environment, prefer pivot_root instead of chroot" (it joins
# its container's mount namespace, whose root is the machine's /, not the
# chroot's), so release-matrix.sh enters its roots with pivot_root. Where
# the bounding set lacks CAP_SYS_RESOURCE (this CI machine's container),
# root's apptainer asks for it anyway and stops ("Requesting capability set
# ... while permitted capability set is ..."): the test drops it
# (APPTAINER_DROP_CAPS), as such a site would in apptainer.conf.
#
# Where apptainer is not packaged (Debian 12 and 13) the file says so and
# counts nothing: a skip is not a pass.
if ! command -v apptainer >/dev/null 2>&1; then
  echo "# skipped: apptainer: not packaged in this release (Debian unstable has it)"
  echo "integration: 0 passed, 0 failed"
  exit 0
fi
source "$(dirname "$0")/lib.sh"

PF=$TOP/helper/mn-preflight
IMG=${MN_APPTAINER_DIR:-/var/tmp/mn-apptainer}/img
MARKER=/etc/mn-nccl-image   # only the image has it
# The fake torchrun in the image leaves this behind if it ever starts.
LAUNCHED=$OUT/torchrun-launched

note() { echo "    # $*"; }

make_image() {
  case "$IMG" in /?*/img) ;; *) echo "bad image path '$IMG'" >&2; return 1 ;; esac
  rm -rf --one-file-system "$IMG" "$IMG.def"
  mkdir -p "$(dirname "$IMG")" || return 1
  printf '%s\n' 'Bootstrap: scratch' '%environment' '    # wrong on purpose: the plugin'"'"'s values must win' \
    '    export MASTER_ADDR=wrong.invalid' '    export MASTER_PORT=1' >"$IMG.def"
  apptainer build --sandbox "$IMG" "$IMG.def" >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; return 1; }
  grep -q 'MASTER_ADDR=wrong.invalid' "$IMG/.singularity.d/env/90-environment.sh" || return 1
  cp -al /usr "$IMG/usr" && cp -an /etc/. "$IMG/etc/" || return 1
  local d
  for d in bin sbin lib lib32 lib64 libx32; do
    if [ -L "/$d" ]; then cp -a "/$d" "$IMG/"; elif [ -d "/$d" ]; then cp -al "/$d" "$IMG/"; fi
  done
  mkdir -p "$IMG/opt/mn" "$IMG/run" || return 1
  echo "mn-nccl apptainer test image" >"$IMG$MARKER"
  printf '#!/bin/sh\ntouch %s\necho TORCHRUN STARTED\n' "$LAUNCHED" >"$IMG/opt/mn/torchrun"
  chmod 755 "$IMG/opt/mn/torchrun"
}

# explained NAME: the value of NAME= on the plugin's --mn-nccl-explain
# lines (one per node; all must agree).
explained() { lines '^mn_nccl: node[0-9]+ \(node ' | sed -n "s/.*; $1=\([^ ]*\) .*/\1/p" | sort -u; }
in_port_range() { [ -n "$1" ] && [ "$1" -ge 20000 ] && [ "$1" -le 29999 ]; }
got() {
  echo "MASTER_ADDR=$(distinct MASTER_ADDR | paste -sd,) MASTER_PORT=$(distinct MASTER_PORT | paste -sd,) RANK=$(distinct RANK | sort -n | paste -sd,) WORLD_SIZE=$(distinct WORLD_SIZE | paste -sd,) LOCAL_RANK=$(distinct LOCAL_RANK | sort -n | paste -sd,) NCCL_SOCKET_IFNAME=$(distinct NCCL_SOCKET_IFNAME | paste -sd,) GLOO_SOCKET_IFNAME=$(distinct GLOO_SOCKET_IFNAME | paste -sd,)"
}

IN_IMAGE="echo \"IMAGE host=\$(hostname) \$(cat $MARKER 2>&1)\""

# Precondition, and what makes the checks below mean something: without
# the plugin, the image's %environment wins over the host's MASTER_ADDR
# and MASTER_PORT in a real apptainer exec on every node.
t_0_image_environment_wins_without_plugin() {
  local name="precondition: apptainer $(apptainer --version 2>&1 | awk '{print $NF}') runs the sandbox image on 3 nodes (its marker), and without --mn-nccl the image's %environment (MASTER_ADDR=wrong.invalid MASTER_PORT=1) wins over the host's MASTER_ADDR=host.example MASTER_PORT=4242"
  MASTER_ADDR=host.example MASTER_PORT=4242 run srun -N3 --ntasks-per-node=1 apptainer exec "$IMG" bash -c "$IN_IMAGE; $ENV_DUMP"
  note "rc=$RC, the program got $(got)"
  [ $RC -eq 0 ] && [ "$(count "^IMAGE host=node[0-2] mn-nccl apptainer test image")" = 3 ] ||
    { fail "$name" "rc=$RC, $(count '^IMAGE host=node[0-2] mn-nccl apptainer test image') of 3 tasks read $MARKER"; return; }
  [ "$(count '^TASK ')" = 3 ] && [ "$(distinct MASTER_ADDR)" = wrong.invalid ] && [ "$(distinct MASTER_PORT)" = 1 ] ||
    { fail "$name" "the program got $(got)"; return; }
  pass "$name"
}

# env_in_apptainer NAME [APPTAINER OPTIONS...]: 3 nodes x 2 tasks.
env_in_apptainer() {
  local name=$1; shift
  MN_HOST_ONLY=leaked run srun -N3 --ntasks-per-node=2 --mn-nccl=auto --mn-nccl-explain \
    apptainer exec "$@" "$IMG" bash -c "$IN_IMAGE; $ENV_DUMP HOST_ONLY=\${MN_HOST_ONLY-}"
  [ $RC -eq 0 ] || { fail "$name" "srun rc=$RC"; return; }
  local addr port ifname
  addr=$(explained MASTER_ADDR)
  port=$(explained MASTER_PORT)
  ifname=$(explained NCCL_SOCKET_IFNAME)
  [[ "$addr" =~ ^10\.[0-9.]+$ ]] && in_port_range "$port" && [[ "$ifname" == =?* ]] ||
    { fail "$name" "the plugin's explain lines: MASTER_ADDR='$addr' MASTER_PORT='$port' NCCL_SOCKET_IFNAME='$ifname'"; return; }
  note "plugin: MASTER_ADDR=$addr MASTER_PORT=$port NCCL_SOCKET_IFNAME=$ifname; the program got: $(got) HOST_ONLY=$(distinct HOST_ONLY | paste -sd,)"
  [ "$(count "^IMAGE host=node[0-2] mn-nccl apptainer test image")" = 6 ] ||
    { fail "$name" "$(count "^IMAGE host=node[0-2] mn-nccl apptainer test image") of 6 tasks read $MARKER (ran in the container)"; return; }
  [ "$(count '^TASK ')" = 6 ] && [ "$(distinct MASTER_ADDR)" = "$addr" ] && [ "$(distinct MASTER_PORT)" = "$port" ] &&
    [ "$(distinct RANK | sort -n | paste -sd,)" = "0,1,2,3,4,5" ] && [ "$(distinct WORLD_SIZE)" = 6 ] &&
    [ "$(distinct NCCL_SOCKET_IFNAME)" = "$ifname" ] && [ "$(distinct GLOO_SOCKET_IFNAME)" = "${ifname#=}" ] ||
    { fail "$name" "the program got: $(got)"; return; }
  local node locals
  for node in node0 node1 node2; do
    locals=$(lines "^TASK host=$node " | while read -r l; do field LOCAL_RANK "$l"; done | sort -n | paste -sd,)
    [ "$locals" = "0,1" ] || { fail "$name" "$node: LOCAL_RANK $locals"; return; }
  done
  if [ "${1:-}" = --cleanenv ]; then
    [ -z "$(distinct HOST_ONLY)" ] || { fail "$name" "--cleanenv kept the host's MN_HOST_ONLY=$(distinct HOST_ONLY)"; return; }
  else
    [ "$(distinct HOST_ONLY)" = leaked ] || { fail "$name" "the host's MN_HOST_ONLY did not reach the container: '$(distinct HOST_ONLY)'"; return; }
  fi
  pass "$name"
}

t_a_env_over_image_environment() {
  env_in_apptainer "apptainer exec IMG, nothing but --mn-nccl=auto, 3 nodes x 2 tasks: 6 of 6 tasks in the container (its marker) got the plugin's MASTER_ADDR (node0's 10.x from --mn-nccl-explain) and MASTER_PORT over the image's %environment (wrong.invalid, 1), RANK 0-5, WORLD_SIZE 6, LOCAL_RANK 0/1 per node, NCCL_SOCKET_IFNAME"
}

t_b_env_cleanenv() {
  env_in_apptainer "apptainer exec --cleanenv IMG, nothing but --mn-nccl=auto: the host's own variables are gone (MN_HOST_ONLY), the plugin's MASTER_ADDR, MASTER_PORT, RANK 0-5, WORLD_SIZE 6, LOCAL_RANK, NCCL_SOCKET_IFNAME are there, over the image's %environment" --cleanenv
}

t_c_allreduce_in_apptainer() {
  local name="torch gloo all-reduce (env://) in apptainer exec IMG, 3 nodes x 2 tasks, nothing but --mn-nccl=auto: right sum on 6 of 6 ranks, met at node0's 10.x and the plugin's port (the image says wrong.invalid:1)"
  run srun -N3 --ntasks-per-node=2 --mn-nccl=auto apptainer exec "$IMG" python3 -c "$(cat "$ALLREDUCE")"
  local ok masters
  ok=$(count 'ALLREDUCE .*world=6 .*sum=21 .*ok=1')
  masters=$(lines '^ALLREDUCE ' | sed -n 's/.* master=\([^ ]*\) .*/\1/p' | sort -u | paste -sd,)
  note "rc=$RC, $ok of 6 ranks right, met at $masters; torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  [ $RC -eq 0 ] && [ "$ok" = 6 ] && [[ "$masters" =~ ^10\.[0-9.]+:[0-9]+$ ]] && in_port_range "${masters##*:}" ||
    { fail "$name" "rc=$RC ok=$ok master=$masters"; return; }
  pass "$name"
}

t_d_torchrun_per_task_refused() {
  local name="torchrun started once per task inside apptainer (srun -N2 --ntasks-per-node=2 --mn-nccl=auto apptainer exec IMG torchrun): refused with the same launcher message as bare torchrun, torchrun never starts (it does without --mn-nccl)"
  local msg="torchrun would start 4 times on 2 nodes, but it is a per-node launcher; run it with srun --ntasks=2 --ntasks-per-node=1"
  # Without the plugin the image's torchrun starts and leaves its mark:
  # the refusal below is what keeps it from starting.
  rm -f "$LAUNCHED"
  run srun -N1 -n1 apptainer exec "$IMG" /opt/mn/torchrun train.py
  [ $RC -eq 0 ] && [ -e "$LAUNCHED" ] || { fail "$name" "without --mn-nccl the image's torchrun did not start (rc=$RC)"; return; }
  mkdir -p "$OUT/bin"
  printf '#!/bin/sh\ntouch %s\n' "$LAUNCHED" >"$OUT/bin/torchrun"
  chmod +x "$OUT/bin/torchrun"
  rm -f "$LAUNCHED"
  run srun -N2 --ntasks-per-node=2 --mn-nccl=auto "$OUT/bin/torchrun" train.py
  local bare_rc=$RC bare; bare=$(lines "$msg" | head -1)
  [ $bare_rc -ne 0 ] && [ -n "$bare" ] && [ ! -e "$LAUNCHED" ] || { fail "$name" "bare torchrun: rc=$bare_rc, message '$bare'"; return; }
  run srun -N2 --ntasks-per-node=2 --mn-nccl=auto apptainer exec "$IMG" /opt/mn/torchrun train.py
  local in; in=$(lines "$msg" | head -1)
  note "bare: rc=$bare_rc '$bare'"
  note "apptainer: rc=$RC '$in', torchrun started: $([ -e "$LAUNCHED" ] && echo yes || echo no)"
  [ $RC -ne 0 ] && [ ! -e "$LAUNCHED" ] && ! has 'TORCHRUN STARTED' && [ -n "$in" ] && [ "torchrun would${in#*torchrun would}" = "torchrun would${bare#*torchrun would}" ] ||
    { fail "$name" "rc=$RC, message '$in', launched: $([ -e "$LAUNCHED" ] && echo yes || echo no)"; return; }
  pass "$name"
}

ver=$(srun --version | awk '{print $2}')
major=${ver%%.*}
minor=${ver#*.}
minor=$((10#${minor%%.*}))
if [ "$major" -gt 23 ] || { [ "$major" -eq 23 ] && [ "$minor" -ge 11 ]; }; then
  # The pair tests are off (no-pairs): on this shared machine their
  # timings are noisy, and this check is about the note, not the verdict.
  t_e_preflight_note() {
    local name="srun --mn-nccl=auto --mn-preflight apptainer exec IMG (Slurm $ver): PASS, mn-preflight's note once (it tested the node's NCCL and libraries, not the image's, and how to test the image's), then the program in the container on both nodes"
    plugstack required "preflight=$PF"
    run srun -N2 --mn-nccl=auto --mn-preflight=no-pairs apptainer exec "$IMG" bash -c "$IN_IMAGE"
    plugstack required
    local n
    n=$(lines "mn-preflight: note: the program runs in apptainer \($IMG\); this check runs before it, on the node: it tests the node's NCCL and libraries, not the image's; to test the image's, run the check in it as a step of its own: srun --mn-nccl=auto apptainer exec --nv $IMG mn-preflight")
    note "rc=$RC, PASS lines $(count '^PASS'), $(count '^IMAGE host=node[01] mn-nccl apptainer test image') of 2 tasks in the image; note: ${n:-none}"
    [ $RC -eq 0 ] && [ "$(count '^PASS')" = 1 ] && [ "$(wc -l <<<"$n")" = 1 ] && [ -n "$n" ] &&
      [ "$(count '^IMAGE host=node[01] mn-nccl apptainer test image')" = 2 ] ||
      { fail "$name" "rc=$RC"; return; }
    pass "$name"
  }
else
  echo "# Slurm $ver: no inline check (spank_prepend_task_argv, 23.11): the --mn-preflight note is not tested"
fi

trap 'plugstack required' EXIT
plugstack required
bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
if [ $(((0x${bnd:-0} >> 24) & 1)) = 0 ]; then
  export APPTAINER_DROP_CAPS=CAP_SYS_RESOURCE
  echo "# the bounding set ($bnd) lacks CAP_SYS_RESOURCE: APPTAINER_DROP_CAPS=CAP_SYS_RESOURCE"
fi
if [ -e "$MARKER" ]; then
  fail "precondition: $MARKER exists only in the image" "the host has $MARKER too"
fi
if ! make_image; then
  fail "the sandbox image is built in $IMG (cp -al /usr, cp -a /etc)"
  summary
  exit 1
fi
run_checks
