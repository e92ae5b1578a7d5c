#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# By hand (issue 40, item 2): pyxis' --container-unshare=net for real, on
# the local cluster with the container rig (scripts/cluster/containers.sh),
# given an enroot that runs a container in a network namespace of its own
# (ENROOT_UNSHARE_NET: enroot's master from 2026; the vendored 4.1.2 has
# none, so CI cannot run this). ENROOT_SRC is that enroot's source tree,
# built (make FORCE_GLIBC=1 ...); it is installed over /usr/local for the
# run and the rig's own enroot put back at the end.
#   ENROOT_SRC=/tmp/em/enroot-master bash scripts/cluster/unshare-net-check.sh
# Checks, each a line ok / not ok:
#   1. one node, 2 tasks, the torch image: inside, the network is lo alone;
#      the tasks get MASTER_ADDR=127.0.0.1, lo for NCCL's and gloo's
#      sockets, NCCL_IB_DISABLE=1, and a gloo all-reduce over them is right
#   2. two nodes: srun refuses the step before the program starts, naming
#      --container-unshare=net and the fix
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=$(pwd)
src=${ENROOT_SRC:?give ENROOT_SRC, a built enroot source tree with ENROOT_UNSHARE_NET}
rig=${MN_CONTAINERS_DIR:-/var/tmp/mn-containers}
image=$rig/torch.sqsh
args=(FORCE_GLIBC=1 "LDLIBS=-l:libbsd.a -l:libbsd.so.0" prefix=/usr/local sysconfdir=/etc)
[ -f "$image" ] || { echo "unshare-net-check: no $image: run scripts/cluster/containers.sh all first" >&2; exit 2; }
grep -q ENROOT_UNSHARE_NET "$src/src/runtime.sh" 2>/dev/null ||
  { echo "unshare-net-check: $src's enroot has no ENROOT_UNSHARE_NET" >&2; exit 2; }
exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
hook=/etc/enroot/hooks.d/10-cgroups.sh
put_back() {
  local own
  own=$(ls -d "$rig"/src/enroot-* 2>/dev/null | head -1)
  [ -n "$own" ] && make -C "$own" "${args[@]}" install >/dev/null 2>&1
  [ -f "$hook.unshare-net-check" ] && mv "$hook.unshare-net-check" "$hook"
  bash "$top/scripts/cluster/local-cluster.sh" plugstack required >/dev/null 2>&1
  bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1
}
trap put_back EXIT
make -C "$src" "${args[@]}" install >/tmp/unshare-net-enroot.log 2>&1 || { tail /tmp/unshare-net-enroot.log; exit 1; }
echo "# enroot $(enroot version) from $src"
# On a cgroup v1 host (a tmpfs at /sys/fs/cgroup with a directory per
# controller) enroot's cgroups hook mounts each controller at its place
# under /sys/fs/cgroup, which the network namespace's own sysfs lacks:
# "enroot-mount: failed to create directory: .../sys/fs/cgroup/systemd".
# Set aside for the run (enroot's limit there, not the plugin's).
hook=/etc/enroot/hooks.d/10-cgroups.sh
if [ -f "$hook" ] && grep -q ' /sys/fs/cgroup .* - tmpfs ' /proc/self/mountinfo; then
  mv "$hook" "$hook.unshare-net-check"
  echo "# cgroup v1 host: enroot's $hook set aside for the run"
fi
bash scripts/cluster/local-cluster.sh start >/dev/null || exit 1
export SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf
MN_PLUGSTACK_AFTER="required /usr/local/lib/slurm/spank_pyxis.so use_squashfuse=1" \
  bash scripts/cluster/local-cluster.sh plugstack required "preflight=$top/helper/mn-preflight" >/dev/null
ok=0 bad=0
say() { if [ "$1" = 0 ]; then echo "ok - $2"; ok=$((ok + 1)); else echo "not ok - $2"; bad=$((bad + 1)); fi; }

out=$(timeout 180 srun -N1 -n2 -w node1 --container-image="$image" --container-unshare=net --mn-nccl=auto \
  bash -c 'echo "NETS $(ls /sys/class/net | tr "\n" " ")"; echo "ENV $SLURM_PROCID MASTER_ADDR=$MASTER_ADDR NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME=$GLOO_SOCKET_IFNAME NCCL_IB_DISABLE=${NCCL_IB_DISABLE-}"; python3 -c "
import torch, torch.distributed as d
d.init_process_group(\"gloo\"); t = torch.ones(4) * (d.get_rank() + 1); d.all_reduce(t); print(\"SUM\", int(t[0]))"' 2>&1)
rc=$?
echo "$out" | sed 's/^/    | /'
[ $rc -eq 0 ] && [ "$(grep -c '^NETS lo $' <<<"$out")" = 2 ] &&
  [ "$(grep -c '^ENV [01] MASTER_ADDR=127.0.0.1 NCCL_SOCKET_IFNAME==\?lo GLOO_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1$' <<<"$out")" = 2 ] &&
  [ "$(grep -c '^SUM 3$' <<<"$out")" = 2 ]
say $? "one node, --container-unshare=net: lo alone inside; MASTER_ADDR=127.0.0.1, lo, NCCL_IB_DISABLE=1; a gloo all-reduce of 2 ranks right"

out=$(timeout 180 srun -N2 -n2 --container-image="$image" --container-unshare=net --mn-nccl=auto echo PROGRAM STARTED 2>&1)
rc=$?
echo "$out" | sed 's/^/    | /'
[ $rc -ne 0 ] && ! grep -q 'PROGRAM STARTED' <<<"$out" && grep -q -- '--container-unshare=net' <<<"$out"
say $? "two nodes, --container-unshare=net: refused before the program starts, naming the option"
echo "unshare-net-check: $ok passed, $bad failed"
[ $bad -eq 0 ]
