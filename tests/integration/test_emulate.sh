#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --mn-nccl-emulate-nodes=K (alias --mn-emulate-nodes, env MN_NCCL_EMULATE_NODES) on the local cluster: Slurm's own variables of the
# emulated layout in every task (task and node mode), the real ones under
# MN_REAL_*, a framework reading them as Lightning does over a real gloo
# all-reduce, Slurm's commands inside an emulated step, and nothing of
# Slurm's touched without the option.
source "$(dirname "$0")/lib.sh"

plugstack required
VIEW=$TOP/tests/integration/slurm_view.py

# One line per task: Slurm's variables that emulation may change, and a few
# real copies.
SLURM_DUMP='echo "SV PROCID=$SLURM_PROCID NODEID=$SLURM_NODEID LOCALID=$SLURM_LOCALID NNODES=$SLURM_NNODES JOB_NUM_NODES=$SLURM_JOB_NUM_NODES STEP_NUM_NODES=$SLURM_STEP_NUM_NODES NTASKS=$SLURM_NTASKS NTASKS_PER_NODE=${SLURM_NTASKS_PER_NODE-unset} TASKS_PER_NODE=$SLURM_TASKS_PER_NODE STEP_TASKS_PER_NODE=$SLURM_STEP_TASKS_PER_NODE NODELIST=$SLURM_NODELIST JOB_NODELIST=$SLURM_JOB_NODELIST STEP_NODELIST=$SLURM_STEP_NODELIST NODENAME=$SLURMD_NODENAME TOPOLOGY_ADDR=$SLURM_TOPOLOGY_ADDR GTIDS=$SLURM_GTIDS GPUS_ON_NODE=${SLURM_GPUS_ON_NODE-unset} STEP_GPUS=${SLURM_STEP_GPUS-unset} ORDINAL=${GPU_DEVICE_ORDINAL-unset} CVD=${CUDA_VISIBLE_DEVICES-unset} CPUS_ON_NODE=$SLURM_CPUS_ON_NODE JOB_CPUS_PER_NODE=$SLURM_JOB_CPUS_PER_NODE NODE_RANK=${NODE_RANK-} LOCAL_RANK=${LOCAL_RANK-} RANK=${RANK-} PET_NODE_RANK=${PET_NODE_RANK-} REAL_NODEID=${MN_REAL_SLURM_NODEID-none} REAL_LOCALID=${MN_REAL_SLURM_LOCALID-none} REAL_NODENAME=${MN_REAL_SLURMD_NODENAME-none} REAL_NNODES=${MN_REAL_SLURM_NNODES-none} REAL_NTASKS_PER_NODE=${MN_REAL_SLURM_NTASKS_PER_NODE-none} MARKER=${MN_EMULATED_NODES-none} END"'

# view NAME...: "v1/v2/..." per SV line, sorted by PROCID, lines joined by spaces.
view() {
  lines '^SV ' | sort -t= -k2 -n | while read -r l; do
    local out="" n
    for n in "$@"; do out="$out${out:+/}$(field "$n" "$l")"; done
    echo "$out"
  done | paste -sd' '
}

t_task_mode_one_node_into_two() {
  local name="K=2, task mode, 1 node x 4 tasks, gpu:4: 2 emulated nodes of 2 tasks in every Slurm variable"
  run srun -N1 -n4 -w node1 --gres=gpu:4 --mn-nccl --mn-emulate-nodes=2 bash -c "$SLURM_DUMP"
  local ids names lists gpus cpus
  ids=$(view PROCID NODEID LOCALID NODE_RANK LOCAL_RANK RANK GTIDS)
  names=$(view NODENAME TOPOLOGY_ADDR REAL_NODENAME REAL_NODEID REAL_LOCALID)
  lists=$(view NNODES JOB_NUM_NODES STEP_NUM_NODES NTASKS NTASKS_PER_NODE TASKS_PER_NODE STEP_TASKS_PER_NODE NODELIST JOB_NODELIST STEP_NODELIST REAL_NNODES REAL_NTASKS_PER_NODE MARKER | tr ' ' '\n' | sort -u)
  gpus=$(view GPUS_ON_NODE STEP_GPUS ORDINAL CVD)
  cpus=$(view CPUS_ON_NODE JOB_CPUS_PER_NODE | tr ' ' '\n' | sort -u)
  [ $RC -eq 0 ] &&
    [ "$ids" = "0/0/0/0/0/0/0,1 1/0/1/0/1/1/0,1 2/1/0/1/0/2/2,3 3/1/1/1/1/3/2,3" ] &&
    [ "$names" = "node1/node1/node1/0/0 node1/node1/node1/0/1 node1-e1/node1-e1/node1/0/2 node1-e1/node1-e1/node1/0/3" ] &&
    [ "$lists" = "2/2/2/4/2/2(x2)/2(x2)/node1,node1-e1/node1,node1-e1/node1,node1-e1/1/none/2" ] &&
    [ "$gpus" = "2/0,1/0,1/0,1 2/0,1/0,1/0,1 2/2,3/2,3/2,3 2/2,3/2,3/2,3" ] &&
    [ "$cpus" = "2/2(x2)" ] ||
    { fail "$name" "rc=$RC" "ids=$ids" "names=$names" "lists=$lists" "gpus=$gpus" "cpus=$cpus"; return; }
  pass "$name"
}

t_task_mode_two_nodes_into_four() {
  local name="K=2 (MN_NCCL_EMULATE_NODES), task mode, 2 nodes x 2 (--ntasks-per-node=2): 4 emulated nodes of 1 task, Slurm's own --ntasks-per-node kept under MN_REAL_"
  MN_NCCL_EMULATE_NODES=2 run srun -N2 -w node0,node2 --ntasks-per-node=2 --mn-nccl bash -c "$SLURM_DUMP"
  local ids lists
  ids=$(view PROCID NODEID LOCALID NODE_RANK NODENAME REAL_NODEID REAL_NODENAME GTIDS)
  lists=$(view NNODES JOB_NUM_NODES NTASKS_PER_NODE TASKS_PER_NODE NODELIST JOB_NODELIST REAL_NTASKS_PER_NODE | tr ' ' '\n' | sort -u)
  [ $RC -eq 0 ] &&
    [ "$ids" = "0/0/0/0/node0/0/node0/0 1/1/0/1/node0-e1/0/node0/1 2/2/0/2/node2/1/node2/2 3/3/0/3/node2-e1/1/node2/3" ] &&
    [ "$lists" = "4/4/1/1(x4)/node0,node0-e1,node2,node2-e1/node0,node0-e1,node2,node2-e1/2" ] ||
    { fail "$name" "rc=$RC" "ids=$ids" "lists=$lists"; return; }
  pass "$name"
}

t_node_mode() {
  local name="K=2, node mode (one launcher per emulated node): SLURM_NODEID = PET_NODE_RANK, SLURM_LOCALID 0, 1 task per node"
  run srun -N1 -w node2 --ntasks-per-node=2 --gres=gpu:4 --mn-nccl --mn-nccl-launch=node --mn-nccl-emulate-nodes=2 bash -c "$SLURM_DUMP"
  local got
  got=$(view PROCID NODEID PET_NODE_RANK LOCALID NTASKS_PER_NODE TASKS_PER_NODE NODENAME GPUS_ON_NODE CVD GTIDS)
  [ $RC -eq 0 ] && [ "$got" = "0/0/0/0/1/1(x2)/node2/2/0,1/0 1/1/1/0/1/1(x2)/node2-e1/2/2,3/1" ] ||
    { fail "$name" "rc=$RC got=$got"; return; }
  pass "$name"
}

# Slurm's own variables of a step, without those that differ between any
# two steps (ids, ports, pids).
slurm_own() {
  lines '^(SLURM|SLURMD|GPU_DEVICE_ORDINAL|CUDA_VISIBLE_DEVICES|MN_REAL|MN_EMULATED)' |
    grep -vE '^SLURM_(JOB_?ID|STEP_?ID|TASK_PID|SRUN_COMM_PORT|STEP_LAUNCHER_PORT|JOB_NAME|JOB_START_TIME|JOB_END_TIME|JOB_SLUID)=' | sort
}

t_untouched_without_emulation() {
  local name="Slurm's own variables: the same with no plugin, the plugin unasked and --mn-nccl without emulation; under emulation MN_REAL_* give back exactly Slurm's"
  local cmd='if [ $SLURM_PROCID = 1 ]; then env; fi'
  # No plugin in plugstack.conf at all (srun and slurmstepd read it afresh).
  : >"$CLUSTER_DIR/plugstack.conf"
  run srun -N1 -n2 -w node1 --gres=gpu:4 bash -c "$cmd"; local rcn=$RC
  local none; none=$(slurm_own)
  run srun -N1 --mn-nccl true; local unknown=$RC   # proof that no plugin was loaded
  plugstack required
  run srun -N1 -n2 -w node1 --gres=gpu:4 bash -c "$cmd"; local rc0=$RC
  local plain; plain=$(slurm_own)
  run srun -N1 -n2 -w node1 --gres=gpu:4 --mn-nccl bash -c "$cmd"; local rc1=$RC
  local with_plugin; with_plugin=$(slurm_own)
  # The emulated task's environment with the real values put back as srun
  # inside the step does it.
  local restore='had=${MN_REAL_SLURM_NTASKS_PER_NODE+x}; for v in $(env | sed -n "s/^MN_REAL_\([A-Z_]*\)=.*/\1/p"); do r=MN_REAL_$v; export $v="${!r}"; unset $r; done; [ -z "$had" ] && unset SLURM_NTASKS_PER_NODE; unset MN_EMULATED_NODES'
  run srun -N1 -n2 -w node1 --gres=gpu:4 --mn-nccl --mn-emulate-nodes=2 bash -c "if [ \$SLURM_PROCID = 1 ]; then $restore; env; fi"; local rc2=$RC
  local restored; restored=$(slurm_own | grep -v '^CUDA_VISIBLE_DEVICES=')
  local n; n=$(grep -c . <<<"$plain")
  [ $rcn -eq 0 ] && [ $unknown -ne 0 ] && [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$n" -ge 30 ] &&
    [ "$none" = "$plain" ] && [ "$plain" = "$with_plugin" ] &&
    [ "$restored" = "$(grep -v '^CUDA_VISIBLE_DEVICES=' <<<"$plain")" ] ||
    { fail "$name" "rc=$rcn/$rc0/$rc1/$rc2 unknown-option=$unknown n=$n" "$(diff <(echo "$none") <(echo "$plain") | head -5)" \
        "$(diff <(echo "$plain") <(echo "$with_plugin") | head -5)" \
        "$(diff <(grep -v '^CUDA_VISIBLE_DEVICES=' <<<"$plain") <(echo "$restored") | head -5)"; return; }
  pass "$name ($n variables compared)"
}

t_lightning_view_gloo() {
  local name="Lightning's reading of Slurm's variables agrees with the emulated layout, over a real gloo all-reduce (1x4 -> 2x2, 1x4 -> 4x1, 2x4 -> 4x2, 2x2 -> 4x1)"
  local results="" spec
  for spec in "-N1 -n4 2 2 2" "-N1 -n4 4 1 4" "-N2 --ntasks-per-node=4 2 2 4" "-N2 --ntasks-per-node=2 2 1 4"; do
    set -- $spec
    local k=${*: -3:1} dev=${*: -2:1} nodes=${*: -1}
    run srun "${@:1:$(($# - 3))}" --mn-nccl --mn-emulate-nodes="$k" $PY "$VIEW" "$dev" "$nodes"
    local ok; ok=$(count "^SLURMVIEW .* nodes=$nodes .* ok=1")
    local tasks=$((dev * nodes))
    results="$results ${spec// /_}:rc=$RC,ok=$ok/$tasks"
    [ $RC -eq 0 ] && [ "$ok" = "$tasks" ] || { fail "$name" "$spec: rc=$RC ok=$ok of $tasks"; return; }
  done
  pass "$name"
}

t_lightning_refuses_without_emulated_view() {
  # The check is not vacuous: the same script on Slurm's real variables of
  # an emulated-sized request fails as Lightning did before.
  local name="control: without the emulated view, Lightning's checks fail (SLURM_NTASKS_PER_NODE missing / wrong node count)"
  run srun -N1 -n4 --mn-nccl $PY "$VIEW" 2 2
  [ $RC -ne 0 ] && has "without SLURM_NTASKS_PER_NODE \(Lightning refuses\)" && has "SLURM_NNODES=1 != num_nodes=2" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_slurm_commands_inside() {
  local name="inside an emulated step: srun of a sub-step and sbatch get the real layout, scontrol works, sacct answers as outside"
  local inner='echo "SUB node=$SLURMD_NODENAME nnodes=$SLURM_NNODES tpn=${SLURM_NTASKS_PER_NODE-unset} real=${MN_REAL_SLURM_NODEID-none} marker=${MN_EMULATED_NODES-none}"'
  local outer="if [ \$SLURM_PROCID = 2 ]; then
    srun --overlap -n2 bash -c '$inner'; echo SUBRC=\$?
    echo HOSTNAMES=\$(scontrol show hostnames \$SLURM_JOB_NODELIST | paste -sd,)
    scontrol show node \$SLURMD_NODENAME >/dev/null 2>&1; echo EMUNODE=\$?
    echo REALNODE=\$(scontrol show node \$MN_REAL_SLURMD_NODENAME | grep -o 'NodeName=[^ ]*')
    echo JOB=\$(scontrol show job \$SLURM_JOB_ID | grep -o 'NumNodes=[^ ]*' | head -1)
    echo SACCT=\$(sacct -n 2>&1 | head -1)
    sbatch --wait -Q -o $OUT/batch.out --wrap 'echo BATCH nnodes=\$SLURM_NNODES tpn=\${SLURM_NTASKS_PER_NODE-unset} real=\${MN_REAL_SLURM_NODEID-none} marker=\${MN_EMULATED_NODES-none} node=\$SLURMD_NODENAME'; echo BATCHRC=\$?
  fi"
  local outside; outside=$(sacct -n 2>&1 | head -1)
  run srun -N1 -n4 -w node1 --mn-nccl --mn-emulate-nodes=2 bash -c "$outer"
  local subs; subs=$(lines '^SUB ' | sort -u)
  local batch; batch=$(cat "$OUT/batch.out" 2>/dev/null)
  [ $RC -eq 0 ] && [ "$subs" = "SUB node=node1 nnodes=1 tpn=unset real=none marker=none" ] &&
    [ "$(count '^SUB ')" = 2 ] && has '^SUBRC=0' && has '^HOSTNAMES=node1,node1-e1$' && has '^EMUNODE=1' &&
    has '^REALNODE=NodeName=node1$' && has '^JOB=NumNodes=1$' && has "^SACCT=$outside\$" && has '^BATCHRC=0' &&
    [[ "$batch" =~ ^BATCH\ nnodes=1\ tpn=unset\ real=none\ marker=none\ node=node[0-2]$ ]] && ! has "conflicts with allocated node count" ||
    { fail "$name" "rc=$RC subs=$subs batch=$batch"; return; }
  pass "$name"
}

t_substep_needs_real_values() {
  # Why srun gets the real values back: srun checks SLURM_JOB_NUM_NODES
  # against the job and reads SLURM_NNODES and SLURM_NTASKS_PER_NODE as its
  # options; the emulated counts name nodes the job does not have.
  local name="control: srun inside the step without the plugin's restore asks for the emulated node count"
  run srun -N1 -n4 -w node1 --mn-nccl --mn-emulate-nodes=2 bash -c \
    'if [ $SLURM_PROCID = 0 ]; then env -u MN_EMULATED_NODES srun --overlap -n2 true; echo SUBRC=$?; fi'
  has "SLURM_JOB_NUM_NODES environment variable conflicts with allocated node count \(2 != 1\)" ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

run_checks
