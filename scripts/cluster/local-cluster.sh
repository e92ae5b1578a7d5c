#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real multi-node Slurm on one machine: slurmctld plus one slurmd per node,
# each node in its own network namespace (own hostname, eth0, routes) joined
# to a bridge. Every node also carries the traps of real clusters: its own
# name resolves to 127.0.1.1 (Debian's /etc/hosts default) and a docker0
# holds 172.17.0.1 on every node.
#
#   scripts/cluster/local-cluster.sh start     build nothing; start munge, slurmctld, slurmd
#   scripts/cluster/local-cluster.sh stop      stop what start started (by pid) and remove namespaces
#   scripts/cluster/local-cluster.sh status    sinfo
#   scripts/cluster/local-cluster.sh env       print the exports a client shell needs
#   scripts/cluster/local-cluster.sh plugstack [required|optional] [ARGS...]
#                                      rewrite plugstack.conf for the built plugin
#
# Settings (environment): MN_CLUSTER_DIR (default /tmp/mn-cluster),
# MN_CLUSTER_NODES (default 3), MN_CLUSTER_CPUS (per node, default 8), MN_PLUGIN (default: the build's
# spank/.libs/mn_nccl.so), MN_CLUSTER_SELF_LOOPBACK (1: own name -> 127.0.1.1),
# MN_SLURMD_PRELOAD (a library preloaded into slurmd and so slurmstepd, e.g.
# the ASan and UBSan runtimes for a sanitized plugin; ASAN_OPTIONS, or
# MN_SLURMD_ASAN_OPTIONS when set, and UBSAN_OPTIONS go with it).
# MN_PLUGSTACK=FILE (plugstack.conf includes FILE, e.g. an installed package's
# /etc/slurm/plugstack.conf.d/zz-mn_nccl.conf, instead of naming the build's plugin).
# MN_CLUSTER_CGROUP=devices: task/cgroup with ConstrainDevices=yes (device
# cgroups on the fake GPUs, cgroup v1 only: see cgroup_devices_usable).
set -euo pipefail
# The callers hold /tmp/mn-cluster.lock (and release-matrix its root's lock)
# on fds 9 and 8: daemons started here must not inherit them, or a caller
# killed before its stop leaves the lock held by munged for good.
exec 8>&- 9>&-

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
source "$here/slurm-conf.sh"
DIR=${MN_CLUSTER_DIR:-/tmp/mn-cluster}
NODES=${MN_CLUSTER_NODES:-3}
PLUGIN=${MN_PLUGIN:-$top/spank/.libs/mn_nccl.so}
SELF_LOOPBACK=${MN_CLUSTER_SELF_LOOPBACK:-1}
NET=10.250.0
BRIDGE=mnbr0
CTL_ADDR=$NET.1

# Names on the cluster come from its hosts files only: a nameserver of the
# machine that does not know 10.250.0.x would cost each reverse lookup
# (slurmd makes them from 24.11 on) a 10 s resolver time-out.
NO_DNS="[ -e /etc/resolv.conf ] && mount --bind '$DIR/hosts/resolv.conf' /etc/resolv.conf"

node_name() { echo "node$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }

die() { echo "local-cluster: $*" >&2; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (namespaces, mknod, slurmd)"; }

# The fake GPUs: character devices of NVIDIA's major (195) with their own
# minors, which no driver serves here. Device cgroups allow or deny by
# major:minor, so each needs its own number (and not /dev/null's).
make_fake_gpus() {
  local g
  for g in 0 1 2 3; do
    if [ "$(stat -c '%t:%T' "$DIR/gpu/nvidia$g" 2>/dev/null)" != "c3:$(printf %x $g)" ]; then
      rm -f "$DIR/gpu/nvidia$g"
      mknod -m 0666 "$DIR/gpu/nvidia$g" c 195 "$g"
    fi
  done
}

# Slurm 22.05's cgroup/v1 needs the devices controller mounted on its own
# (hybrid or v1 hosts); a pure cgroup v2 host would need Slurm's eBPF device
# programs, which cgroup/v2 loads only on a cgroup2 root it may write.
cgroup_devices_usable() {
  [ -f /sys/fs/cgroup/devices/devices.allow ] && [ -w /sys/fs/cgroup/devices ]
}

write_conf() {
  mkdir -p "$DIR"/{state,spool,log,gpu,hosts,run}
  make_fake_gpus
  local task_plugin=task/none
  if [ "${MN_CLUSTER_CGROUP:-}" = devices ]; then
    cgroup_devices_usable || die "MN_CLUSTER_CGROUP=devices: no writable cgroup v1 devices controller at /sys/fs/cgroup/devices"
    task_plugin=task/cgroup
    printf 'CgroupPlugin=cgroup/v1\nConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=yes\n' >"$DIR/cgroup.conf"
  else
    rm -f "$DIR/cgroup.conf"
  fi
  {
    echo "ClusterName=mnlocal"
    echo "SlurmctldHost=ctl($CTL_ADDR)"
    slurm_conf_common "$DIR" "$task_plugin"
    printf 'SlurmdDebug=info\nSlurmctldTimeout=30\nSlurmdTimeout=60\n'
  } >"$DIR/slurm.conf"
  # NodeAddr per node: the names resolve differently on each node.
  local i
  for ((i = 0; i < NODES; i++)); do
    echo "NodeName=$(node_name $i) NodeAddr=$(node_addr $i) CPUs=${MN_CLUSTER_CPUS:-8} RealMemory=1000 Gres=gpu:4 State=UNKNOWN"
  done >>"$DIR/slurm.conf"
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >>"$DIR/slurm.conf"
  cat >"$DIR/gres.conf" <<EOF
AutoDetect=off
Name=gpu File=$DIR/gpu/nvidia[0-3]
EOF
  # A plugstack.conf from another checkout would load a stale plugin.
  if [ -n "${MN_PLUGSTACK:-}" ]; then
    [ -f "$MN_PLUGSTACK" ] || die "MN_PLUGSTACK=$MN_PLUGSTACK: no such file"
    echo "include $MN_PLUGSTACK" >"$DIR/plugstack.conf"
  else
    # The plugin's path as the line's own word: /x/main/... is inside /y/x/main/...
    awk -v p="$PLUGIN" '$2 == p {found = 1} END {exit !found}' "$DIR/plugstack.conf" 2>/dev/null ||
      write_plugstack required
  fi
  # One hosts file per node: its own name on 127.0.1.1 (when asked), the
  # others on their real addresses, as on a Debian cluster. The submit host
  # (this machine, where srun runs) is reached on the bridge: from 24.11 on
  # slurmctld resolves srun's host name to answer it, retrying for 10 s.
  local submit
  submit=$(hostname)
  for ((i = 0; i < NODES; i++)); do
    {
      echo "127.0.0.1 localhost"
      [ "$SELF_LOOPBACK" = 1 ] && echo "127.0.1.1 $(node_name $i)"
      echo "$CTL_ADDR ctl $submit"
      local j
      for ((j = 0; j < NODES; j++)); do
        if [ $j -ne $i ] || [ "$SELF_LOOPBACK" != 1 ]; then
          echo "$(node_addr $j) $(node_name $j)"
        fi
      done
    } >"$DIR/hosts/$(node_name $i)"
  done
  {
    echo "127.0.0.1 localhost"
    echo "$CTL_ADDR ctl $submit"
    for ((i = 0; i < NODES; i++)); do echo "$(node_addr $i) $(node_name $i)"; done
  } >"$DIR/hosts/ctl"
  echo "# mn-nccl local cluster: no nameserver, names from /etc/hosts" >"$DIR/hosts/resolv.conf"
}

# MN_PLUGSTACK_BEFORE, MN_PLUGSTACK_AFTER: lines put before and after the
# plugin's (another SPANK plugin, e.g. pyxis; SPANK calls them in file order).
write_plugstack() {
  local kind=${1:-required}
  shift || true
  [ -f "$PLUGIN" ] || die "plugin $PLUGIN not built (run make first)"
  mkdir -p "$DIR"
  {
    [ -z "${MN_PLUGSTACK_BEFORE:-}" ] || printf '%s\n' "$MN_PLUGSTACK_BEFORE"
    # A test rig: its steps name fixture trees (MN_NCCL_SYSFS_ROOT), which
    # mn_nccl reads only with user_sysfs_root=yes (MN_USER_SYSFS_ROOT=no:
    # without); other plugins (test_spank_failures' probe) get their own words.
    local open_sysfs=""
    [ "$(basename "$PLUGIN")" != mn_nccl.so ] || open_sysfs="user_sysfs_root=${MN_USER_SYSFS_ROOT:-yes}"
    echo "$kind $PLUGIN $* $open_sysfs"
    [ -z "${MN_PLUGSTACK_AFTER:-}" ] || printf '%s\n' "$MN_PLUGSTACK_AFTER"
  } >"$DIR/plugstack.conf"
}

net_up() {
  ip link show $BRIDGE >/dev/null 2>&1 || {
    ip link add $BRIDGE type bridge
    ip addr add $CTL_ADDR/24 dev $BRIDGE
    ip link set $BRIDGE up
  }
  local i n
  for ((i = 0; i < NODES; i++)); do
    n=$(node_name $i)
    ip netns list | grep -qw "^$n" && continue
    ip netns add "$n"
    ip link add "mnv$i" type veth peer name "mnp$i"
    ip link set "mnp$i" netns "$n"
    ip link set "mnv$i" master $BRIDGE up
    ip netns exec "$n" ip link set "mnp$i" name eth0
    ip netns exec "$n" ip addr add "$(node_addr $i)/24" dev eth0
    ip netns exec "$n" ip link set eth0 up
    ip netns exec "$n" ip link set lo up
    ip netns exec "$n" ip route add default via $CTL_ADDR
    # The decoy every real GPU node has: docker0 with the same address everywhere.
    ip netns exec "$n" ip link add docker0 type veth peer name dkpeer
    ip netns exec "$n" ip addr add 172.17.0.1/16 dev docker0
    ip netns exec "$n" ip link set docker0 up
    ip netns exec "$n" ip link set dkpeer up
  done
}

net_down() {
  local n
  # Every node namespace there is, not only this start's MN_CLUSTER_NODES:
  # one left by a larger cluster would be skipped by net_up, its veth on no
  # bridge, and its slurmd would never reach slurmctld.
  for n in $(ip netns list | awk '$1 ~ /^node[0-9]+$/ {print $1}'); do
    ip netns del "$n" 2>/dev/null || true
    ip link del "mnv${n#node}" 2>/dev/null || true
  done
  ip link del $BRIDGE 2>/dev/null || true
}

# SIGTERM, 5 s, then SIGKILL, and wait until it is gone.
stop_pid() {
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}
stop_pidfile() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  [ -z "$pid" ] || stop_pid "$pid"
  rm -f "$f"
}

# slurmctld runs on this machine's own network, on Slurm's default port.
CTL_PORT=6817
# What start runs is the signature of a local cluster's slurmctld (a site's
# runs without -i); a root's cluster (release-matrix.sh) has the same.
CTL_SIGNATURE="slurmctld -i -f "
ctl_port_pids() {
  { ss -ltnpH "sport = :$CTL_PORT" 2>/dev/null || true; } | { grep -o 'pid=[0-9]*' || true; } | cut -d= -f2 | sort -u
}
cmdline_of() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }
# This cluster's slurmctld when no pid file names it (one named another):
# same command line, same root.
stop_own_ctl() {
  local pid
  for pid in $(ctl_port_pids); do
    [ "$(cmdline_of "$pid")" = "$CTL_SIGNATURE$DIR/slurm.conf " ] || continue
    [ "$(stat -L -c %d:%i "/proc/$pid/root/" 2>/dev/null)" = "$(stat -c %d:%i /)" ] || continue
    stop_pid "$pid"
  done
}
# A local cluster's slurmctld that no pid file names any more still holds
# the port (CI once saw every later cluster fail to bind it; how it was
# left is not known). Whoever starts holds /tmp/mn-cluster.lock, so any
# such one is left behind: stopped by its pid, and named. Anything else on
# the port is named with the fix, and start gives up.
free_ctl_port() {
  local pid cmd
  for _ in $(seq 10); do
    pid=$(ctl_port_pids | head -1)
    [ -n "$pid" ] || return 0
    cmd=$(cmdline_of "$pid") || continue
    case "$cmd" in
      "$CTL_SIGNATURE"*) ;;
      *) die "port $CTL_PORT, slurmctld's, is held by pid $pid ($cmd): stop it, or run the local cluster on a machine without another slurmctld" ;;
    esac
    echo "local-cluster: a local cluster's slurmctld left behind holds port $CTL_PORT: pid $pid ($cmd, its root $(readlink "/proc/$pid/root" 2>/dev/null)); stopping it" >&2
    stop_pid "$pid"
  done
  die "port $CTL_PORT is still held by pid $pid ($cmd) after SIGTERM and SIGKILL"
}

client_env() {
  echo "export SLURM_CONF=$DIR/slurm.conf"
}

start() {
  need_root
  command -v slurmctld >/dev/null || die "slurmctld missing: run scripts/install-deps.sh"
  stop_quiet
  write_conf
  net_up
  submit_hosts_add
  # munge with a key and socket of our own
  if [ ! -f "$DIR/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$DIR/munge.key"
  fi
  mkdir -p "$DIR/run/munge-seed"
  munged -f --key-file="$DIR/munge.key" -S "$DIR/run/munge.sock" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/run/munge-seed/seed"
  export SLURM_CONF=$DIR/slurm.conf
  rm -rf "$DIR/state"/*
  free_ctl_port
  unshare --uts --mount --propagation private sh -c \
    "hostname ctl; mount --bind '$DIR/hosts/ctl' /etc/hosts; $NO_DNS; exec slurmctld -i -f '$DIR/slurm.conf'"
  local i n preload=
  # slurmstepd inherits slurmd's environment, so a sanitized plugin finds
  # its runtime loaded first.
  [ -z "${MN_SLURMD_PRELOAD:-}" ] ||
    preload="env LD_PRELOAD='$MN_SLURMD_PRELOAD' ASAN_OPTIONS='${MN_SLURMD_ASAN_OPTIONS:-${ASAN_OPTIONS:-}}' UBSAN_OPTIONS='${UBSAN_OPTIONS:-}'"
  for ((i = 0; i < NODES; i++)); do
    n=$(node_name $i)
    mkdir -p "$DIR/spool/$n"
    nsenter --net=/var/run/netns/"$n" unshare --uts --mount --propagation private sh -c \
      "hostname $n; mount --bind '$DIR/hosts/$n' /etc/hosts; $NO_DNS; exec $preload slurmd -f '$DIR/slurm.conf' -N $n"
  done
  # Wait for every node to be idle.
  for _ in $(seq 100); do
    if [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | wc -l)" = "$NODES" ]; then
      echo "local-cluster: $NODES nodes idle ($DIR)"
      return 0
    fi
    sleep 0.3
  done
  sinfo >&2 || true
  tail -20 "$DIR/log/slurmctld.log" >&2 || true
  die "nodes did not become idle; logs in $DIR/log"
}

# The submit host resolves the node names as a cluster's login node does
# (DNS or /etc/hosts): from 24.11 on srun looks each node up before it
# launches, and an unknown name costs a resolver time-out per step. The
# lines carry a marker and go with stop; the file is edited in place
# because containers often bind-mount it.
HOSTS_MARK="# mn-nccl local-cluster"
submit_hosts_add() {
  submit_hosts_remove
  local i lines
  lines="$CTL_ADDR ctl $HOSTS_MARK"
  for ((i = 0; i < NODES; i++)); do lines+=$'\n'"$(node_addr $i) $(node_name $i) $HOSTS_MARK"; done
  printf '%s\n' "$lines" >>/etc/hosts
}
submit_hosts_remove() {
  grep -qF "$HOSTS_MARK" /etc/hosts 2>/dev/null || return 0
  local kept
  kept=$(grep -vF "$HOSTS_MARK" /etc/hosts)
  printf '%s\n' "$kept" >/etc/hosts
}

stop_quiet() {
  local f
  for f in "$DIR"/run/slurmd-*.pid; do stop_pidfile "$f"; done
  stop_pidfile "$DIR/run/slurmctld.pid"
  stop_own_ctl
  stop_pidfile "$DIR/run/munged.pid"
  net_down
  submit_hosts_remove
}

case "${1:-}" in
  start) start ;;
  stop) need_root; stop_quiet; echo "local-cluster: stopped" ;;
  status) SLURM_CONF=$DIR/slurm.conf sinfo ;;
  env) client_env ;;
  plugstack) shift; write_plugstack "$@" ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
