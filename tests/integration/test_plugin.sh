#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The mn_nccl plugin on a real multi-node Slurm (scripts/cluster/local-cluster.sh):
# every node resolves its own name to 127.0.1.1 and carries a docker0 with
# 172.17.0.1, as real clusters do.
source "$(dirname "$0")/lib.sh"

MASTER=10.250.0.10   # node0's eth0 in the local cluster
plugstack required

t_task_mode_uneven() {
  local name="task mode, 7 tasks on 3 nodes (block): ranks, local ranks, master, interface"
  run srun -N3 -n7 --mn-nccl=auto bash -c "$ENV_DUMP"
  [ $RC -eq 0 ] || { fail "$name" "srun rc=$RC"; return; }
  local ranks
  ranks=$(distinct RANK | sort -n | paste -sd,)
  [ "$ranks" = "0,1,2,3,4,5,6" ] || { fail "$name" "ranks $ranks"; return; }
  [ "$(distinct WORLD_SIZE)" = 7 ] && [ "$(distinct NNODES)" = 3 ] || { fail "$name" "world/nnodes"; return; }
  [ "$(distinct MASTER_ADDR)" = $MASTER ] || { fail "$name" "MASTER_ADDR $(distinct MASTER_ADDR | paste -sd,)"; return; }
  [ "$(distinct MASTER_PORT | wc -l)" = 1 ] || { fail "$name" "several ports"; return; }
  local port; port=$(distinct MASTER_PORT)
  [ "$port" -ge 20000 ] && [ "$port" -le 29999 ] || { fail "$name" "port $port outside 20000-29999"; return; }
  [ "$(distinct NCCL_SOCKET_IFNAME)" = "=eth0" ] && [ "$(distinct GLOO_SOCKET_IFNAME)" = eth0 ] ||
    { fail "$name" "interfaces $(distinct NCCL_SOCKET_IFNAME | paste -sd,)"; return; }
  # per node: local ranks 0..n-1 and LOCAL_WORLD_SIZE = n, NODE_RANK = node index
  local node n locals lws nr
  for node in node0 node1 node2; do
    n=$(lines "^TASK host=$node " | wc -l)
    locals=$(lines "^TASK host=$node " | while read -r l; do field LOCAL_RANK "$l"; done | sort -n | paste -sd,)
    lws=$(lines "^TASK host=$node " | while read -r l; do field LOCAL_WORLD_SIZE "$l"; done | sort -u)
    nr=$(lines "^TASK host=$node " | while read -r l; do field NODE_RANK "$l"; done | sort -u)
    [ "$locals" = "$(seq -s, 0 $((n - 1)))" ] && [ "$lws" = "$n" ] && [ "$nr" = "${node#node}" ] ||
      { fail "$name" "$node: locals=$locals lws=$lws node_rank=$nr"; return; }
  done
  pass "$name"
}

t_cyclic() {
  local name="task mode, cyclic distribution: RANK is Slurm's task id"
  run srun -N2 -w node[0-1] --ntasks-per-node=2 -m cyclic --mn-nccl bash -c "$ENV_DUMP SLURM_PROCID=\$SLURM_PROCID"
  [ $RC -eq 0 ] || { fail "$name" "srun rc=$RC"; return; }
  local bad
  bad=$(lines '^TASK ' | while read -r l; do [ "$(field RANK "$l")" = "$(field SLURM_PROCID "$l")" ] || echo "$l"; done)
  local node0ranks
  node0ranks=$(lines '^TASK host=node0 ' | while read -r l; do field RANK "$l"; done | sort -n | paste -sd,)
  [ -z "$bad" ] && [ "$node0ranks" = "0,2" ] || { fail "$name" "node0 ranks $node0ranks" "$bad"; return; }
  pass "$name"
}

t_torch_task_mode() {
  local name="task mode: real PyTorch gloo all-reduce, 5 tasks on 3 nodes, nothing set by hand"
  run srun -N3 -n5 --mn-nccl=auto $PY "$ALLREDUCE"
  [ $RC -eq 0 ] && [ "$(count 'ALLREDUCE .*world=5 .*ok=1')" = 5 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_node_mode_env() {
  local name="node mode: one task per node gets torchrun's PET_*; a wrapper (bash -c) its ranks too, torchrun itself none"
  run srun -N3 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl bash -c "$ENV_DUMP"
  [ $RC -eq 0 ] || { fail "$name" "srun rc=$RC"; return; }
  local job; job=$(distinct JOB)
  [ "$(distinct RANK | paste -sd,)" = "0,1,2" ] && [ "$(distinct WORLD_SIZE)" = 3 ] &&
    [ "$(distinct LOCAL_RANK)" = 0 ] && [ "$(distinct LOCAL_WORLD_SIZE)" = 1 ] &&
    [ "$(distinct PET_NNODES)" = 3 ] && [ "$(distinct PET_NPROC_PER_NODE)" = 2 ] &&
    [ "$(distinct GPUS_PER_NODE)" = 2 ] && [ "$(distinct NPROC_PER_NODE)" = 2 ] &&
    [ "$(distinct PET_NODE_RANK | paste -sd,)" = "0,1,2" ] &&
    [ "$(distinct PET_MASTER_ADDR)" = $MASTER ] && [ "$(distinct PET_MASTER_PORT)" = "$(distinct MASTER_PORT)" ] &&
    [ "$(distinct PET_RDZV_ID)" = "$job" ] || { fail "$name"; return; }
  # torchrun named directly: node mode alone (its workers get their ranks from it).
  mkdir -p "$OUT/bin"
  printf '#!/bin/sh\n%s\n' "$ENV_DUMP" >"$OUT/bin/torchrun"
  chmod +x "$OUT/bin/torchrun"
  run srun -N3 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl "$OUT/bin/torchrun" train.py
  [ $RC -eq 0 ] && [ "$(distinct RANK)" = "" ] && [ "$(distinct WORLD_SIZE)" = "" ] &&
    [ "$(distinct PET_NODE_RANK | paste -sd,)" = "0,1,2" ] || { fail "$name" "torchrun: rc=$RC RANK=$(distinct RANK)"; return; }
  pass "$name"
}

t_one_task_per_node_plain_program() {
  local name="one task per node: plain python (env://), a wrapper that starts torchrun, Lightning's Slurm reading, emulated nodes of one task: every rank right"
  run srun -N3 --ntasks-per-node=1 --mn-nccl=auto --mn-nccl-explain $PY "$ALLREDUCE"
  local plain=$RC ok_plain; ok_plain=$(count 'ALLREDUCE .*world=3 .*local_rank=0 .*ok=1')
  local said; said=$(count "launch=node \(one task on every node; '$PY' is not a per-node launcher, so RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE are set too")
  run srun -N3 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl=auto bash -c "exec torchrun $ALLREDUCE"
  local wrap=$RC ok_wrap; ok_wrap=$(count 'ALLREDUCE .*world=6 .*ok=1')
  run srun -N3 --ntasks-per-node=1 --mn-nccl=auto $PY "$TOP/tests/integration/slurm_view.py" 1 3
  local view=$RC ok_view; ok_view=$(count '^SLURMVIEW .* nodes=3 .* ok=1')
  run srun -N1 -w node1 -n2 --mn-nccl=auto --mn-emulate-nodes=2 $PY "$ALLREDUCE"
  local emu=$RC ok_emu; ok_emu=$(count 'ALLREDUCE .*world=2 .*local_rank=0 .*node_rank=[01] .*ok=1')
  [ $plain -eq 0 ] && [ "$ok_plain" = 3 ] && [ "$said" = 3 ] && [ $wrap -eq 0 ] && [ "$ok_wrap" = 6 ] &&
    [ $view -eq 0 ] && [ "$ok_view" = 3 ] && [ $emu -eq 0 ] && [ "$ok_emu" = 2 ] ||
    { fail "$name" "plain rc=$plain ok=$ok_plain explained=$said; wrapper rc=$wrap ok=$ok_wrap; lightning view rc=$view ok=$ok_view; emulated rc=$emu ok=$ok_emu"; return; }
  pass "$name"
}

t_node_mode_no_gpus() {
  local name="node mode without GPUs: one process per node"
  run srun -N2 --ntasks-per-node=1 --mn-nccl bash -c "$ENV_DUMP"
  [ $RC -eq 0 ] && [ "$(distinct PET_NPROC_PER_NODE)" = 1 ] || { fail "$name"; return; }
  pass "$name"
}

t_torchrun() {
  local name="node mode: real torchrun with no arguments but the script, 3 nodes x 2 GPUs"
  run srun -N3 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl=auto torchrun "$ALLREDUCE"
  [ $RC -eq 0 ] && [ "$(count 'ALLREDUCE .*world=6 .*ok=1')" = 6 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_concurrent_steps() {
  local name="two steps of one job at once on the same nodes: different ports, both all-reduces pass"
  run salloc -N2 -n4 bash -c "
    srun --overlap -N2 -n2 --mn-nccl --mn-nccl-launch=task bash -c '$ENV_DUMP; $PY $ALLREDUCE' &
    srun --overlap -N2 -n2 --mn-nccl --mn-nccl-launch=task bash -c '$ENV_DUMP; $PY $ALLREDUCE' &
    wait"
  local ports; ports=$(distinct MASTER_PORT | wc -l)
  [ "$(count 'ALLREDUCE .*world=2 .*ok=1')" = 4 ] && [ "$ports" = 2 ] ||
    { fail "$name" "ports=$ports rc=$RC"; return; }
  pass "$name"
}

t_user_values_kept() {
  local name="a user's own MASTER_PORT and MASTER_ADDR are kept, and torch meets there"
  MASTER_PORT=23456 MASTER_ADDR=node0 run srun -N2 -n2 --mn-nccl --mn-nccl-launch=task bash -c "$ENV_DUMP; $PY $ALLREDUCE"
  [ $RC -eq 0 ] && [ "$(distinct MASTER_PORT)" = 23456 ] && [ "$(distinct MASTER_ADDR)" = node0 ] &&
    [ "$(count 'ALLREDUCE .*ok=1')" = 2 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_force() {
  local name="force=yes in plugstack.conf (a boolean word) overrides the user's MASTER_PORT"
  plugstack required force=yes
  local stack; stack=$(cat "$CLUSTER_DIR/plugstack.conf")
  # The user's port below the plugin's range (20000 up): one the plugin
  # derives can never be it.
  MASTER_PORT=12345 run srun -N2 -n2 --mn-nccl bash -c "$ENV_DUMP"
  plugstack required
  # Each node's own: a node that kept 12345 read plugstack.conf without
  # force (one CI run saw node0 keep it; the ports by node tell more).
  local ports; ports=$(lines '^TASK ' | sed -n 's/.*host=\([^ ]*\) .* MASTER_PORT=\([^ ]*\).*/\1:\2/p' | sort | tr '\n' ' ')
  [ $RC -eq 0 ] && [ "$(distinct MASTER_PORT)" != 12345 ] && [ -n "$(distinct MASTER_PORT)" ] ||
    { fail "$name" "rc=$RC ports by node: $ports" "plugstack.conf was: $stack"; return; }
  pass "$name"
}

t_off_by_default() {
  local name="without the option (site default off) nothing is set; --mn-nccl=off wins over default=auto"
  run srun -N2 -n2 bash -c "$ENV_DUMP"
  [ $RC -eq 0 ] && [ "$(distinct MASTER_ADDR)" = "" ] && [ "$(distinct RANK)" = "" ] || { fail "$name" "default off"; return; }
  plugstack required default=auto
  run srun -N2 -n2 bash -c "$ENV_DUMP"
  local with_default; with_default=$(distinct MASTER_ADDR)
  run srun -N2 -n2 --mn-nccl=off bash -c "$ENV_DUMP"
  local with_off; with_off=$(distinct MASTER_ADDR)
  plugstack required
  [ "$with_default" = $MASTER ] && [ "$with_off" = "" ] || { fail "$name" "default=auto gave '$with_default', off gave '$with_off'"; return; }
  pass "$name"
}

t_env_form() {
  local name="MN_NCCL=auto in the environment works like --mn-nccl; the command line wins"
  MN_NCCL=auto run srun -N2 -n2 bash -c "$ENV_DUMP"
  local from_env; from_env=$(distinct MASTER_ADDR)
  MN_NCCL=auto run srun -N2 -n2 --mn-nccl=off bash -c "$ENV_DUMP"
  local off; off=$(distinct MASTER_ADDR)
  [ "$from_env" = $MASTER ] && [ "$off" = "" ] || { fail "$name" "env gave '$from_env', off gave '$off'"; return; }
  pass "$name"
}

t_env_forms() {
  local name="MN_NCCL_LAUNCH, MN_NCCL_EXPLAIN (any boolean word), MN_NCCL_EMULATE_NODES: each works like its option, the command line wins, a bad value names the variable"
  rm -f "$OUT/launched"
  MN_NCCL_LAUNCH=node run srun -N2 -n4 --mn-nccl touch "$OUT/launched"
  local launch_env=$RC; has "needs exactly one task per node" || launch_env=ok
  MN_NCCL_LAUNCH=node run srun -N2 -n4 --mn-nccl --mn-nccl-launch=task bash -c "$ENV_DUMP"
  local launch_cl=$RC ranks; ranks=$(distinct RANK | paste -sd,)
  MN_NCCL_EXPLAIN=Yes run srun -N2 -n2 --mn-nccl true
  local explained; explained=$(count '^mn_nccl: node[0-1] \(node [0-1] of 2\): mode=auto')
  MN_NCCL_EXPLAIN=off run srun -N2 -n2 --mn-nccl --mn-nccl-explain true
  local explained_cl; explained_cl=$(count '^mn_nccl: node[0-1] \(node [0-1] of 2\): mode=auto')
  MN_NCCL_EXPLAIN=0 run srun -N2 -n2 --mn-nccl true
  local quiet; quiet=$(count 'mode=auto')
  MN_NCCL_EXPLAIN=maybe run srun -N1 --mn-nccl touch "$OUT/launched"
  local bad_bool=$RC; has "MN_NCCL_EXPLAIN='maybe' is not a yes or no; use 1/0, yes/no, true/false or on/off" || bad_bool=ok
  MN_NCCL_EMULATE_NODES=2 run srun -N1 -n4 -w node1 --gres=gpu:4 --mn-nccl bash -c "$ENV_DUMP"
  local emu=$RC hostids; hostids=$(distinct NCCL_HOSTID | paste -sd,)
  MN_NCCL_EMULATE_NODES=2 run srun -N1 -n2 -w node1 --mn-nccl --mn-nccl-emulate-nodes=1 bash -c "$ENV_DUMP"
  local emu_cl=$RC one_node; one_node=$(distinct NNODES)
  MN_NCCL_EMULATE_NODES=x run srun -N1 --mn-nccl touch "$OUT/launched"
  local bad_emu=$RC; has "MN_NCCL_EMULATE_NODES='x' is not valid" || bad_emu=ok
  MN_NCCL_EMULATE_NODES=2 run srun -N1 touch "$OUT/launched"
  local emu_off=$RC; has "MN_NCCL_EMULATE_NODES needs mn_nccl on; add --mn-nccl=auto \(or MN_NCCL=auto\), or unset MN_NCCL_EMULATE_NODES" || emu_off=ok
  [ "$launch_env" != 0 ] && [ "$launch_env" != ok ] && [ $launch_cl -eq 0 ] && [ "$ranks" = "0,1,2,3" ] &&
    [ "$explained" = 2 ] && [ "$explained_cl" = 2 ] && [ "$quiet" = 0 ] && [ "$bad_bool" != 0 ] && [ "$bad_bool" != ok ] &&
    [ $emu -eq 0 ] && [ "$hostids" = "node1-emu0,node1-emu1" ] && [ $emu_cl -eq 0 ] && [ "$one_node" = 1 ] &&
    [ "$bad_emu" != 0 ] && [ "$bad_emu" != ok ] && [ "$emu_off" != 0 ] && [ "$emu_off" != ok ] && [ ! -e "$OUT/launched" ] ||
    { fail "$name" "launch env=$launch_env cl=$launch_cl ranks=$ranks; explain env=$explained cl=$explained_cl quiet=$quiet bad=$bad_bool; emulate env=$emu hostids=$hostids cl=$emu_cl nnodes=$one_node bad=$bad_emu off=$emu_off; launched=$([ -e "$OUT/launched" ] && echo yes)"; return; }
  pass "$name"
}

t_batch_step_untouched() {
  local name="sbatch --mn-nccl: the batch step is untouched, its srun steps are set up"
  local out=$OUT/batch.out
  run sbatch --wait -N2 -n4 --mn-nccl=auto -o "$out" --wrap \
    "echo BATCH MASTER_ADDR=\${MASTER_ADDR:-unset} RANK=\${RANK:-unset}; srun -n4 bash -c '$ENV_DUMP'"
  cp "$out" "$OUT/last" 2>/dev/null
  has '^BATCH MASTER_ADDR=unset RANK=unset' && [ "$(distinct MASTER_ADDR)" = $MASTER ] &&
    [ "$(distinct RANK | paste -sd,)" = "0,1,2,3" ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_explain() {
  local name="--mn-nccl-explain: one line per node with the values and why; node0 saw 127.0.1.1"
  run srun -N3 -n6 --mn-nccl --mn-nccl-explain true
  [ $RC -eq 0 ] && [ "$(count '^mn_nccl: node[0-2] \(node [0-2] of 3\): mode=auto')" = 3 ] &&
    has "node0 .*resolves here to 127.0.1.1" && has "MASTER_ADDR=$MASTER" && ! has 'docker0|172\.17\.' ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_bad_mode() {
  local name="bad --mn-nccl value: srun fails before launch, naming the option and the valid values"
  rm -f "$OUT/launched"
  run srun -N1 --mn-nccl=fast touch "$OUT/launched"
  [ $RC -ne 0 ] && [ ! -e "$OUT/launched" ] && has "--mn-nccl='fast' is not a valid mode; use one of auto, ib, roce, socket, off" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_bad_env_mode() {
  local name="bad MN_NCCL value: srun fails before launch, naming MN_NCCL"
  rm -f "$OUT/launched"
  MN_NCCL=yes run srun -N1 touch "$OUT/launched"
  [ $RC -ne 0 ] && [ ! -e "$OUT/launched" ] && has "MN_NCCL='yes' is not a valid mode" || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_bad_launch() {
  local name="bad --mn-nccl-launch value and node launch with several tasks per node fail before launch"
  rm -f "$OUT/launched"
  run srun -N1 --mn-nccl --mn-nccl-launch=nodes touch "$OUT/launched"
  local rc1=$RC; has "--mn-nccl-launch='nodes' is not valid" || { fail "$name" "no message for bad value"; return; }
  run srun -N2 -n4 --mn-nccl --mn-nccl-launch=node touch "$OUT/launched"
  [ $rc1 -ne 0 ] && [ $RC -ne 0 ] && [ ! -e "$OUT/launched" ] && has "needs exactly one task per node, the step has 4 tasks on 2 nodes; add --ntasks-per-node=1" ||
    { fail "$name" "rc=$rc1/$RC"; return; }
  pass "$name"
}

t_torchrun_per_task() {
  local name="torchrun started once per task: the step fails with the counts to use, torchrun never runs"
  mkdir -p "$OUT/bin"
  printf '#!/bin/sh\ntouch %s/launched\n' "$OUT" >"$OUT/bin/torchrun"
  chmod +x "$OUT/bin/torchrun"
  rm -f "$OUT/launched"
  run srun -N2 -n4 --mn-nccl "$OUT/bin/torchrun" train.py
  [ $RC -ne 0 ] && [ ! -e "$OUT/launched" ] &&
    has "torchrun would start 4 times on 2 nodes, but it is a per-node launcher; run it with srun --ntasks=2 --ntasks-per-node=1" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_bad_plugstack() {
  local name="bad plugstack.conf arguments: in slurmd's log by name (not on the user's srun, but with --mn-nccl-explain, once), defaults used, the job runs"
  local log=$CLUSTER_DIR/log/slurmd-node0.log
  local before; before=$(wc -l <"$log")
  plugstack required prot_range=1-2 port_range=99-1 default=maybe force=2
  run srun -N2 -n2 --mn-nccl bash -c "$ENV_DUMP"
  local rc=$RC port; port=$(distinct MASTER_PORT)
  local on_srun; on_srun=$(count "plugstack.conf")
  sleep 1
  tail -n +$((before + 1)) "$log" >"$OUT/slurmd.log"
  local logged=""
  grep -q "mn_nccl: node0: plugstack.conf: unknown argument 'prot_range=1-2'" "$OUT/slurmd.log" &&
    grep -q "port_range='99-1'" "$OUT/slurmd.log" && grep -q "default='maybe'" "$OUT/slurmd.log" &&
    grep -q "force='2' is not a yes or no" "$OUT/slurmd.log" && logged=yes
  run srun -N2 -n2 --mn-nccl --mn-nccl-explain true
  local explained; explained=$(count "^mn_nccl: node0: the site's plugstack.conf: unknown argument 'prot_range=1-2'")
  plugstack required
  [ $rc -eq 0 ] && [ "$on_srun" = 0 ] && [ "$logged" = yes ] && [ "$explained" = 1 ] &&
    [ "$port" -ge 20000 ] && [ "$port" -le 29999 ] ||
    { fail "$name" "rc=$rc port=$port on srun=$on_srun logged=$logged explain=$explained" "$(head -5 "$OUT/slurmd.log")"; return; }
  pass "$name"
}

t_unresolvable_node0() {
  local name="node1 cannot resolve node0: the step fails with the node, the name and the fix (srun exit != 0)"
  local hosts=$CLUSTER_DIR/hosts/node1 saved
  saved=$(cat "$hosts")
  grep -v ' node0$' <<<"$saved" >"$hosts"   # in place: the bind mount keeps the inode
  run srun -N2 -n2 --mn-nccl true
  printf '%s\n' "$saved" >"$hosts"
  [ $RC -ne 0 ] && has "mn_nccl: node1: cannot resolve node 0's name 'node0'" && has "or set MASTER_ADDR" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_forced_ib_without_ib() {
  local name="--mn-nccl=ib on nodes without InfiniBand: the tasks fail saying what the node has"
  run srun -N2 -n2 --mn-nccl=ib true
  [ $RC -ne 0 ] && has "mn_nccl: node0: --mn-nccl=ib: this node has no ACTIVE InfiniBand port \(it has: no RDMA ports at all\)" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_socket_path() {
  local name="auto on the namespace cluster (no RDMA): NCCL_IB_DISABLE=1 and the socket interface eth0 on every node"
  run srun -N3 -n6 --mn-nccl bash -c "$ENV_DUMP"
  [ $RC -eq 0 ] && [ "$(distinct NCCL_IB_DISABLE)" = 1 ] && [ "$(distinct NCCL_SOCKET_IFNAME)" = "=eth0" ] &&
    [ "$(distinct NCCL_IB_HCA)" = "" ] && [ "$(lines '^TASK ' | wc -l)" = 6 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_fabric_fixtures() {
  local name="fabric from sysfs fixtures (MN_NCCL_SYSFS_ROOT): DGX H100 -> 8 NDR HCAs, RoCE -> GID index 3"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N2 -n4 --mn-nccl bash -c "$ENV_DUMP"
  local dgx; dgx=$(distinct NCCL_IB_HCA)
  local ifname; ifname=$(distinct NCCL_SOCKET_IFNAME)
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/roce-only run srun -N2 -n4 --mn-nccl bash -c "$ENV_DUMP"
  local roce; roce="$(distinct NCCL_IB_HCA) $(distinct NCCL_IB_GID_INDEX)"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/roce-mixed-gid run srun -N1 -n2 --mn-nccl bash -c "$ENV_DUMP"
  [ "$dgx" = "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1" ] && [ "$ifname" = "=eth0" ] &&
    [ "$roce" = "=mlx5_0:1,mlx5_1:1 3" ] && has "mn_nccl: node0: warning: the chosen RoCE ports have their RoCE v2 IPv4 GID at different indexes" ||
    { fail "$name" "dgx=$dgx roce=$roce ifname=$ifname"; return; }
  pass "$name"
}

t_fabric_gcp_a3() {
  local name="Google A3 fixtures: the plugin's NIC variables from the gVNICs, NCCL's sockets on the control NIC, no NCCL_IB_*; a site's wrong value kept and named"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  local dump='echo "A3 ${NCCL_SOCKET_IFNAME-} ${NCCL_GPUDIRECTTCPX_SOCKET_IFNAME-} ${NCCL_GPUDIRECTTCPX_CTRL_DEV-} ${NCCL_FASTRAK_IFNAME-} ${NCCL_FASTRAK_CTRL_DEV-} ${NCCL_IB_DISABLE-unset}${NCCL_IB_HCA-}"'
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/a3-high run srun -N2 -n2 --mn-nccl bash -c "$dump"
  local high; high=$(lines '^A3 ' | sort -u)
  # The namespace cluster routes MASTER_ADDR through eth0; the A3 Mega tree's control NIC is enp0s12.
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/a3-mega run srun -N2 -n2 --mn-nccl bash -c "$dump"
  local mega; mega=$(lines '^A3 ' | sort -u)
  local moved; moved=$(count 'warning: MASTER_ADDR [0-9.]+ is reached through eth0, not the control NIC enp0s12')
  NCCL_SOCKET_IFNAME=eth1 MN_NCCL_SYSFS_ROOT=$OUT/sysfs/a3-high run srun -N1 -n1 --mn-nccl bash -c "$dump"
  local kept; kept=$(lines '^A3 ' | sort -u)
  [ "$high" = "A3 =eth0 eth1,eth2,eth3,eth4 eth0   unset" ] &&
    [ "$mega" = "A3 =enp0s12   enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0 enp0s12 unset" ] &&
    [ "$moved" = 2 ] && [ "$kept" = "A3 eth1 eth1,eth2,eth3,eth4 eth0   unset" ] &&
    has "warning: NCCL_SOCKET_IFNAME=eth1 is set, but this node's control NIC is eth0" ||
    { fail "$name" "high=$high mega=$mega moved=$moved kept=$kept"; return; }
  pass "$name"
}

t_discover_in_task() {
  local name="mn-preflight discover --json in a task: socket fabric, eth0, and the DGX fixture's 8 HCAs"
  run srun -N2 -n2 --mn-nccl --mn-nccl-launch=task "$TOP/helper/mn-preflight" discover --json
  local here
  here=$($PY -c 'import json,sys
objs=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(len(objs), sorted(set(o["env"]["NCCL_SOCKET_IFNAME"]+"/"+o["env"]["NCCL_IB_DISABLE"]+"/"+o["fabric"] for o in objs)))' "$OUT/last" 2>&1)
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N1 -n1 --mn-nccl "$TOP/helper/mn-preflight" discover
  [ "$here" = "2 ['=eth0/1/socket']" ] && has '^  NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1$' &&
    has '^  NCCL_SOCKET_IFNAME==eth0$' && has 'mlx5_8:1 .* no +RoCE, while InfiniBand ports are ACTIVE' ||
    { fail "$name" "json: $here"; return; }
  pass "$name"
}

t_locality() {
  local name="GPU to HCA locality (hwloc XML fixture): in --mn-nccl-explain and discover; across-socket GPUs warned"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N2 -n2 --mn-nccl --mn-nccl-explain true
  local explain_dgx; explain_dgx=$(count 'locality: GPU0>mlx5_0 \(PIX: same PCIe switch\), .*GPU7>mlx5_7 \(PIX: same PCIe switch\)$')
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/roce-only run srun -N1 -n1 --mn-nccl --mn-nccl-explain true
  local warned; warned=$(count 'mn_nccl: node0: warning: GPU1 \(0000:82:00.0\) reaches its nearest HCA mlx5_1 only across sockets')
  # Without --mn-nccl-explain, no topology is loaded and nothing is said.
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/roce-only run srun -N1 -n1 --mn-nccl true
  local quiet; quiet=$(count 'across sockets')
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/roce-only run srun -N1 -n1 --mn-nccl "$TOP/helper/mn-preflight" discover
  [ "$explain_dgx" = 2 ] && [ "$warned" = 1 ] && [ "$quiet" = 0 ] &&
    has '^  GPU1 +0000:82:00.0 +mlx5_1 +SYS: across NUMA nodes$' ||
    { fail "$name" "explain_dgx=$explain_dgx warned=$warned quiet=$quiet"; return; }
  pass "$name"
}

t_emulate_task_env() {
  local name="--mn-emulate-nodes=2, task mode: one node with 4 GPUs becomes 2 nodes of 2 tasks and 2 GPUs each"
  run srun -N1 -n4 -w node1 --gres=gpu:4 --mn-nccl --mn-emulate-nodes=2 bash -c "$ENV_DUMP"
  local got; got=$(lines '^TASK ' | while read -r l; do
    echo "$(field RANK "$l")/$(field NODE_RANK "$l")/$(field LOCAL_RANK "$l")/$(field LOCAL_WORLD_SIZE "$l")/$(field NNODES "$l")/$(field CUDA_VISIBLE_DEVICES "$l")/$(field NCCL_HOSTID "$l")"
  done | sort | paste -sd' ')
  [ $RC -eq 0 ] && [ "$got" = "0/0/0/2/2/0,1/node1-emu0 1/0/1/2/2/0,1/node1-emu0 2/1/0/2/2/2,3/node1-emu1 3/1/1/2/2/2,3/node1-emu1" ] &&
    [ "$(distinct MASTER_ADDR)" = 10.250.0.11 ] && [ "$(distinct WORLD_SIZE)" = 4 ] ||
    { fail "$name" "rc=$RC got=$got"; return; }
  pass "$name"
}

t_emulate_gloo() {
  local name="--mn-emulate-nodes=2: real gloo all-reduce across emulated nodes (1 node x 2, and 2 nodes x 2)"
  run srun -N1 -n4 --mn-nccl --mn-nccl-emulate-nodes=2 $PY "$ALLREDUCE"
  local one; one=$(count 'ALLREDUCE .*world=4 .*node_rank=[01] .*ok=1')
  run srun -N2 --ntasks-per-node=2 --mn-nccl --mn-emulate-nodes=2 $PY "$ALLREDUCE"
  local two; two=$(count 'ALLREDUCE .*world=4 .*node_rank=[0-3] .*ok=1')
  local ranks; ranks=$(lines '^ALLREDUCE' | sed -n 's/.*node_rank=\([0-9]\).*/\1/p' | sort -u | paste -sd,)
  [ "$one" = 4 ] && [ "$two" = 4 ] && [ "$ranks" = "0,1,2,3" ] && [ $RC -eq 0 ] ||
    { fail "$name" "one=$one two=$two ranks=$ranks rc=$RC"; return; }
  pass "$name"
}

t_emulate_torchrun() {
  local name="--mn-emulate-nodes=2, node mode: 2 torchrun launchers on one node, 2 GPUs each, 4 ranks"
  run srun -N1 --ntasks-per-node=2 --gres=gpu:4 --mn-nccl --mn-emulate-nodes=2 torchrun "$ALLREDUCE"
  [ $RC -eq 0 ] && [ "$(count 'ALLREDUCE .*world=4 .*ok=1')" = 4 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_emulate_bad() {
  local name="--mn-emulate-nodes: K=0, no --mn-nccl, 3 tasks or 3 GPUs for K=2: refused, what would divide named"
  rm -f "$OUT/launched"
  run srun -N1 --mn-nccl --mn-emulate-nodes=0 touch "$OUT/launched"
  local k0=$RC; has "--mn-emulate-nodes='0' is not valid; give a whole number K >= 1" || k0=ok
  run srun -N1 --mn-emulate-nodes=2 touch "$OUT/launched"
  local off=$RC; has "--mn-emulate-nodes needs mn_nccl on; add --mn-nccl=auto" || off=ok
  run srun -N1 -n3 --mn-nccl --mn-emulate-nodes=2 touch "$OUT/launched"
  local tasks=$RC; has "node 0 of the step runs 3 tasks; use --ntasks-per-node=4 \(a multiple of 2\) or 2" || tasks=ok
  run srun -N1 -w node0 -n2 --gres=gpu:3 --mn-nccl --mn-emulate-nodes=2 touch "$OUT/launched"
  local gpus=$RC; has "the step has 3 GPUs on node0; ask for a multiple of 2 GPUs per node \(e.g. --gres=gpu:2\)" || gpus=ok
  [ "$k0" != 0 ] && [ "$k0" != ok ] && [ "$off" != 0 ] && [ "$off" != ok ] && [ "$tasks" != 0 ] && [ "$tasks" != ok ] &&
    [ "$gpus" != 0 ] && [ "$gpus" != ok ] && [ ! -e "$OUT/launched" ] ||
    { fail "$name" "k0=$k0 off=$off tasks=$tasks gpus=$gpus launched=$([ -e "$OUT/launched" ] && echo yes)"; return; }
  pass "$name"
}

t_help() {
  local name="srun --help lists the options, each with its environment form, and the older spellings as aliases"
  run srun --help
  has "--mn-nccl=\[MODE\]" && has "--mn-nccl-launch=task\|node" && has "--mn-nccl-explain" &&
    has "--mn-nccl-emulate-nodes=K" && has "--mn-nccl-preflight=\[OPTIONS\]" &&
    has "--mn-emulate-nodes=K +Alias of --mn-nccl-emulate-nodes\.$" && has "--mn-preflight=\[OPTIONS\]" &&
    has "^ +Alias of --mn-nccl-preflight\.$" &&
    has "Env form: MN_NCCL_LAUNCH" && has "Env form: MN_NCCL_EXPLAIN=1" && has "Env form: MN_NCCL_EMULATE_NODES=K" || { fail "$name"; return; }
  pass "$name"
}

run_checks
