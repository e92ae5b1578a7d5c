#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real Slurm on a GPU machine without Slurm (the device tool's machines):
# Debian 12's Slurm from .device/slurm (scripts/cluster/fetch-slurm-bundle.sh), the
# plugin from this tree, slurmd per emulated node on loopback ports.
#   scripts/cluster/gpu-cluster.sh start|stop
# Nodes: n0 and n1 with half of the GPUs each, big with all of them. A task
# prolog maps n1's GPU indices to its own physical GPUs: without device
# cgroups Slurm numbers each node's GPUs from 0, and n0 and n1 would share.
# MN_GPU_CLUSTER_CPU_NODES=K adds K nodes without GPUs, c0..c(K-1), in
# partition cpu (the control plane's benchmark: scripts/bench/bench-control-plane.sh),
# of MN_GPU_CLUSTER_CPU_NODE_CPUS CPUs each (default 16; Slurm's CPUs, not
# this machine's: SlurmdParameters=config_overrides).
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
source scripts/cluster/slurm-conf.sh
# MN_SLURM_BUNDLE: another release's bundle (fetch-slurm-bundle.sh trixie:
# .device/slurm-trixie, with MN_PLUGIN=.device/build-trixie/mn_nccl.so).
source scripts/cluster/slurm-bundle-env.sh
PLUGIN=${MN_PLUGIN:-$TOP/spank/.libs/mn_nccl.so}
DIR=${MN_GPU_CLUSTER_DIR:-/tmp/mn-gpu-cluster}

stop() {
  for f in "$DIR"/run/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f"); kill "$pid" 2>/dev/null || true
  done
  sleep 1
}

start() {
  [ -x "$B/usr/sbin/slurmd-wlm" ] || { echo "gpu-cluster: $B missing: run scripts/cluster/fetch-slurm-bundle.sh here and carry .device" >&2; exit 2; }
  [ -f "$PLUGIN" ] || { echo "gpu-cluster: $PLUGIN missing: build first (carry spank/.libs)" >&2; exit 2; }
  local ngpu half host addr cpu_nodes=${MN_GPU_CLUSTER_CPU_NODES:-0} nodes
  ngpu=$(nvidia-smi -L | grep -c '^GPU')
  half=$((ngpu / 2))
  # One GPU: n0 and n1 share it, as two hosts to NCCL (NCCL_HOSTID per
  # node, else NCCL refuses two ranks on one GPU); n1's indices need no shift.
  shift_by=$half shared=0
  [ "$ngpu" -ge 1 ] || { echo "gpu-cluster: no GPU found" >&2; exit 2; }
  [ "$half" -ge 1 ] || { half=1 shift_by=0 shared=1; }
  host=$(hostname)
  # The node names must resolve to an address the plugin can use (not
  # loopback): this machine's first non-loopback IPv4.
  addr=$(hostname -I 2>/dev/null | awk '{print $1}')
  [ -n "$addr" ] || addr=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.255.255.1", 1)); print(s.getsockname()[0])' 2>/dev/null || true)
  [ -n "$addr" ] || { echo "gpu-cluster: no non-loopback IPv4 address here" >&2; exit 2; }
  grep -q " n0 n1 big" /etc/hosts || echo "$addr n0 n1 big" >>/etc/hosts
  for ((i = 0; i < cpu_nodes; i++)); do grep -qw "c$i" /etc/hosts || echo "$addr c$i" >>/etc/hosts; done
  for d in slurmd slurmctld slurmstepd; do ln -sf "$B/usr/sbin/$d-wlm" /usr/sbin/$d; done
  mkdir -p "$DIR"/{run,log,state,spool} /sys/fs/cgroup/system.slice 2>/dev/null || mkdir -p "$DIR"/{run,log,state,spool}
  chmod 0755 "$DIR" "$DIR/run"
  [ -f "$DIR/munge.key" ] || { head -c 1024 /dev/urandom >"$DIR/munge.key"; chmod 0400 "$DIR/munge.key"; }
  mkdir -p "$DIR/run/seed"
  "$B/usr/sbin/munged" -f --key-file="$DIR/munge.key" -S "$DIR/run/munge.sock" --pid-file="$DIR/run/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/run/seed/seed"
  {
    echo "ClusterName=mngpu"
    echo "SlurmctldHost=$host"
    slurm_conf_common "$DIR"
    cat <<CONF
SlurmctldPort=16817
PluginDir=$B/usr/lib/x86_64-linux-gnu/slurm-wlm
TaskProlog=$DIR/task-prolog.sh
NodeName=n0 NodeHostname=$host NodeAddr=127.0.0.1 Port=17001 CPUs=16 RealMemory=1000 Gres=gpu:$half State=UNKNOWN
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=17002 CPUs=16 RealMemory=1000 Gres=gpu:$half State=UNKNOWN
NodeName=big NodeHostname=$host NodeAddr=127.0.0.1 Port=17003 CPUs=16 RealMemory=1000 Gres=gpu:$ngpu State=UNKNOWN
PartitionName=gpu Nodes=n0,n1,big Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
    if [ "$cpu_nodes" -gt 0 ]; then
      echo "NodeName=c[0-$((cpu_nodes - 1))] NodeHostname=$host NodeAddr=127.0.0.1 Port=[17101-$((17100 + cpu_nodes))] CPUs=${MN_GPU_CLUSTER_CPU_NODE_CPUS:-16} RealMemory=1000 State=UNKNOWN"
      echo "PartitionName=cpu Nodes=c[0-$((cpu_nodes - 1))] MaxTime=INFINITE State=UP OverSubscribe=YES"
    fi
  } >"$DIR/slurm.conf"
  {
    echo "AutoDetect=off"
    echo "NodeName=n0 Name=gpu File=/dev/nvidia[0-$((half - 1))]"
    echo "NodeName=n1 Name=gpu File=/dev/nvidia[$shift_by-$((shift_by + half - 1))]"
    echo "NodeName=big Name=gpu File=/dev/nvidia[0-$((ngpu - 1))]"
  } | sed 's/\[\([0-9]*\)-\1\]/\1/' >"$DIR/gres.conf"
  printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n' >"$DIR/cgroup.conf"
  cat >"$DIR/task-prolog.sh" <<PROLOG
#!/bin/sh
# n1's GPU 0 is physical GPU $shift_by: shift the indices Slurm gave.
if [ "\$SLURMD_NODENAME" = n1 ] && [ -n "\$CUDA_VISIBLE_DEVICES" ] && [ $shift_by -gt 0 ]; then
  echo "export CUDA_VISIBLE_DEVICES=\$(echo "\$CUDA_VISIBLE_DEVICES" | awk -F, -v o=$shift_by '{for(i=1;i<=NF;i++) printf "%s%d", (i>1?",":""), \$i+o}')"
fi
if [ $shared = 1 ] && [ -z "\$NCCL_HOSTID" ]; then echo "export NCCL_HOSTID=\$SLURMD_NODENAME"; fi
PROLOG
  chmod +x "$DIR/task-prolog.sh"
  echo "required $PLUGIN default=off ${MN_PLUGSTACK_ARGS:-}" >"$DIR/plugstack.conf"
  slurmctld -i -f "$DIR/slurm.conf"
  nodes="n0 n1 big"
  for ((i = 0; i < cpu_nodes; i++)); do nodes+=" c$i"; done
  for n in $nodes; do mkdir -p "$DIR/spool/$n"; slurmd -f "$DIR/slurm.conf" -N $n; done
  for _ in $(seq 120); do
    [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" = $((3 + cpu_nodes)) ] && { echo "gpu-cluster: n0 n1 (gpu:$half each), big (gpu:$ngpu) and $cpu_nodes nodes without GPUs idle; nodes at $addr"; return 0; }
    sleep 0.5
  done
  sinfo -N || true
  tail -n 20 "$DIR"/log/*.log
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: scripts/cluster/gpu-cluster.sh start|stop" >&2; exit 2 ;;
esac
