#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPUs however Slurm hands them out (issue 19), on the local cluster's fake
# GPUs (gres gpu:4 per node, $CLUSTER_DIR/gpu/nvidia0-3): for each way of
# asking, every task's CUDA_VISIBLE_DEVICES, LOCAL_RANK and the GPU that
# LOCAL_RANK selects (CUDA's LOCAL_RANK-th visible device), next to what
# Slurm alone gave the same task; the refusals; launchers in node mode; and,
# where the machine has a cgroup v1 devices controller, the same under
# task/cgroup with ConstrainDevices=yes.
source "$(dirname "$0")/lib.sh"

# The plugin asks the fake device files, not /dev, whether a task may open
# a GPU (device cgroups check them like real ones).
export MN_NCCL_DEV_DIR=$CLUSTER_DIR/gpu
GPU_DUMP='sel=none; if [ -n "${CUDA_VISIBLE_DEVICES-}" ] && [ -n "${LOCAL_RANK-}" ]; then sel=$(echo "$CUDA_VISIBLE_DEVICES" | cut -d, -f$((LOCAL_RANK + 1))); fi; echo "GPU host=$(hostname) PROCID=$SLURM_PROCID LOCAL_RANK=${LOCAL_RANK-} CVD=${CUDA_VISIBLE_DEVICES-unset} SEL=${sel:-none} ORDER=${CUDA_DEVICE_ORDER-unset} NPROC=${NPROC_PER_NODE-} OPEN=$(cd '"$CLUSTER_DIR"'/gpu && n=0; for f in nvidia*; do [ -r "$f" ] && [ -w "$f" ] && n=$((n + 1)); done; echo $n) END"'

# gpu_field NAME PROCID FILE: NAME= of that task's GPU line.
gpu_field() { grep "^GPU .* PROCID=$2 " "$3" | head -1 | sed -n "s/.* $1=\([^ ]*\) .*/\1/p"; }

# compare NAME OPTS...: the step without the plugin (what Slurm gives each
# task) and with it; every task must select a GPU that no other task of its
# node selects, Slurm's own when Slurm bound it exactly one, inside a
# CUDA_VISIBLE_DEVICES that holds the step's GPUs of the node.
compare() {
  local name=$1 plain=$OUT/plain with=$OUT/with
  shift
  run srun "$@" bash -c "$GPU_DUMP"; local rc0=$RC
  cp "$OUT/last" "$plain"
  run srun "$@" --mn-nccl bash -c "$GPU_DUMP"; local rc1=$RC
  cp "$OUT/last" "$with"
  local why="" table="" p n
  n=$(grep -c '^GPU ' "$with")
  [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$n" -ge 2 ] || why="rc=$rc0/$rc1 tasks=$n"
  declare -A used=() step=()
  for ((p = 0; p < n; p++)); do
    local host cvd0 cvd sel lr order
    host=$(gpu_field host $p "$with"); cvd0=$(gpu_field CVD $p "$plain"); cvd=$(gpu_field CVD $p "$with")
    sel=$(gpu_field SEL $p "$with"); lr=$(gpu_field LOCAL_RANK $p "$with"); order=$(gpu_field ORDER $p "$with")
    table+="$host task $p: LOCAL_RANK=$lr CUDA_VISIBLE_DEVICES=$cvd (Slurm alone: $cvd0) -> GPU $sel"$'\n'
    [ -n "$host" ] || { why+=" task $p: no line;"; continue; }
    [ "$cvd0" != unset ] && step[$host]="${step[$host]:+${step[$host]},}$cvd0"
    [ "$sel" != none ] || why+=" task $p selects no GPU;"
    [ -z "${used[$host/$sel]:-}" ] || why+=" tasks ${used[$host/$sel]} and $p of $host both select GPU $sel;"
    used[$host/$sel]=$p
    [[ "$cvd0" == *,* ]] || [ "$cvd0" = unset ] || [ "$sel" = "$cvd0" ] || why+=" task $p: Slurm bound GPU $cvd0, LOCAL_RANK selects $sel;"
    [[ "$cvd" != *,* ]] || [ "$order" = PCI_BUS_ID ] || why+=" task $p: CUDA_DEVICE_ORDER=$order;"
  done
  # The plugin's list is the node's step GPUs, reordered.
  for ((p = 0; p < n; p++)); do
    local host cvd want
    host=$(gpu_field host $p "$with"); cvd=$(gpu_field CVD $p "$with")
    [ -n "$host" ] && [ -n "${step[$host]:-}" ] || continue
    want=$(tr , '\n' <<<"${step[$host]}" | sort -u | paste -sd,)
    [ "$(tr , '\n' <<<"$cvd" | sort -u | paste -sd,)" = "$want" ] || why+=" task $p: $cvd is not the step's $want;"
  done
  printf '%s' "$table" | sed 's/^/    /'
  [ -z "$why" ] || { fail "$name" "$why"; return 1; }
  pass "$name"
}

t_gres() { compare "--gres=gpu:2, 2 tasks per node: Slurm's order, LOCAL_RANK selects the node's GPU LOCAL_RANK" -N2 --ntasks-per-node=2 --gres=gpu:2; }
t_gpus_per_node() { compare "--gpus-per-node=2" -N2 --ntasks-per-node=2 --gpus-per-node=2; }
t_gpus_per_task() { compare "--gpus-per-task=1 (the issue): each task's own GPU at LOCAL_RANK, the node's other GPU beside it" -N2 --ntasks-per-node=2 --gpus-per-task=1; }
t_gpu_bind_closest() { compare "--gpu-bind=closest" -N2 --ntasks-per-node=2 --gres=gpu:2 --gpu-bind=closest; }
t_gpu_bind_single() { compare "--gpu-bind=single:1" -N2 --ntasks-per-node=2 --gres=gpu:2 --gpu-bind=single:1; }
t_gpu_bind_map() {
  compare "--gpu-bind=map_gpu:1,0: task 0 selects GPU 1, task 1 GPU 0, both see 1,0" -N1 -w node1 -n2 --gres=gpu:2 --gpu-bind=map_gpu:1,0 || return
  [ "$(gpu_field CVD 0 "$OUT/with")/$(gpu_field CVD 1 "$OUT/with")" = "1,0/1,0" ] || fail "map_gpu:1,0 lists" "$(grep '^GPU' "$OUT/with")"
}
t_gpu_bind_none() {
  # Slurm 22.05 unsets each task's CUDA_VISIBLE_DEVICES under --gpu-bind=none
  # (the step's list is kept by the plugin from before binding).
  compare "--gpus-per-task=1 --gpu-bind=none" -N2 --ntasks-per-node=2 --gpus-per-task=1 --gpu-bind=none
}
t_gpu_bind_mask() { compare "--gpu-bind=mask_gpu:0x3,0xc (two GPUs per task)" -N1 -w node2 -n2 --gres=gpu:4 --gpu-bind=mask_gpu:0x3,0xc; }
t_emulated() {
  local name="--gpus-per-task=1 under --mn-emulate-nodes=2: each emulated node's share, its own GPU at LOCAL_RANK"
  run srun -N1 -w node0 -n4 --gpus-per-task=1 --mn-nccl --mn-emulate-nodes=2 bash -c "$GPU_DUMP"
  local got="" p
  for p in 0 1 2 3; do got+="$(gpu_field LOCAL_RANK $p "$OUT/last"):$(gpu_field CVD $p "$OUT/last"):$(gpu_field SEL $p "$OUT/last") "; done
  echo "    LOCAL_RANK:CUDA_VISIBLE_DEVICES:selected per task: $got"
  [ $RC -eq 0 ] && [ "$got" = "0:0,1:0 1:0,1:1 0:2,3:2 1:2,3:3 " ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# refused NAME MESSAGE OPTS...: the step fails before any task runs, with
# the message once per node.
refused() {
  local name=$1 msg=$2
  shift 2
  rm -f "$OUT/launched"
  run srun "$@" --mn-nccl touch "$OUT/launched"
  [ $RC -ne 0 ] && [ ! -e "$OUT/launched" ] && has "$msg" ||
    { fail "$name" "rc=$RC launched=$([ -e "$OUT/launched" ] && echo yes)"; return; }
  pass "$name"
}

t_refuse_same_gpu() {
  refused "--gpu-bind=map_gpu:0,0: refused, naming both tasks and the GPU" \
    "tasks 0 and 1 of node1 would both use GPU 0 \(--gpu-bind=map_gpu:0,0\); give each task its own GPU: --gpus-per-task=1 or --gpu-bind=single:1" \
    -N1 -w node1 -n2 --gres=gpu:2 --gpu-bind=map_gpu:0,0
}
t_refuse_more_tasks() {
  refused "3 tasks on 2 GPUs: refused on every task" \
    "node2 runs 3 tasks of the step but has 2 GPUs of it \(0,1\): task 2 would have no GPU of its own" \
    -N1 -w node2 -n3 --gres=gpu:2
}
t_refuse_single_2() {
  refused "--gpu-bind=single:2: refused" "--gpu-bind=single:2 puts 2 tasks on each GPU" -N1 -w node0 -n4 --gres=gpu:2 --gpu-bind=single:2
}

t_policy_slurm() {
  local name="MN_NCCL_GPUS=slurm keeps Slurm's per-task CUDA_VISIBLE_DEVICES"
  MN_NCCL_GPUS=slurm run srun -N1 -w node1 -n2 --gpus-per-task=1 --mn-nccl bash -c "$GPU_DUMP"
  [ $RC -eq 0 ] && [ "$(gpu_field CVD 0 "$OUT/last")/$(gpu_field CVD 1 "$OUT/last")" = "0/1" ] ||
    { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

t_no_gpus_no_list() {
  # On a node with GPUs in gres.conf Slurm itself unsets a CUDA_VISIBLE_DEVICES
  # of the user's for a step without GPUs, before the plugin runs; the
  # plugin adds none.
  local name="a step without GPUs: no CUDA_VISIBLE_DEVICES, with or without the plugin"
  CUDA_VISIBLE_DEVICES=3,1 run srun -N1 -w node1 -n2 bash -c "$GPU_DUMP"
  local plain; plain=$(lines '^GPU' | sed 's/PROCID=[0-9]*//' | sort)
  CUDA_VISIBLE_DEVICES=3,1 run srun -N1 -w node1 -n2 --mn-nccl bash -c "$GPU_DUMP"
  [ $RC -eq 0 ] && [ "$(count '^GPU .* CVD=unset .* ORDER=unset ')" = 2 ] &&
    [ "$(lines '^GPU' | sed 's/PROCID=[0-9]*//; s/LOCAL_RANK=[0-9]*/LOCAL_RANK=/' | sort)" = "$(sed 's/LOCAL_RANK=[0-9]*/LOCAL_RANK=/' <<<"$plain")" ] ||
    { fail "$name" "rc=$RC" "plain: $plain"; return; }
  pass "$name"
}

t_node_mode() {
  local name="node mode: NPROC_PER_NODE is the GPUs the node's launcher may use, under each option"
  local spec got="" want="" o
  for spec in "2|--gres=gpu:2" "3|--gpus-per-node=3" "1|--gpus-per-task=1" "2|--gpus-per-task=2" \
    "2|--gres=gpu:2 --gpu-bind=closest" "2|--gpus-per-task=2 --gpu-bind=none"; do
    o=${spec#*|}
    run srun -N2 --ntasks-per-node=1 $o --mn-nccl bash -c "$GPU_DUMP"
    local n0 n1 c0
    n0=$(gpu_field NPROC 0 "$OUT/last"); n1=$(gpu_field NPROC 1 "$OUT/last"); c0=$(gpu_field CVD 0 "$OUT/last")
    echo "    $o: NPROC_PER_NODE=$n0/$n1 CUDA_VISIBLE_DEVICES=$c0 (rc=$RC)"
    got+="$RC:$n0/$n1:$(tr , '\n' <<<"$c0" | grep -c .) "
    want+="0:${spec%%|*}/${spec%%|*}:${spec%%|*} "
  done
  [ "$got" = "$want" ] || { fail "$name" "got  $got" "want $want"; return; }
  pass "$name"
}

t_explain() {
  local name="--mn-nccl-explain: one line per task with the GPU LOCAL_RANK selects"
  run srun -N1 -w node2 -n2 --gpus-per-task=1 --mn-nccl --mn-nccl-explain true
  lines '^mn_nccl: node2 task' | sed 's/^/    /'
  [ $RC -eq 0 ] && has '^mn_nccl: node2 task 1 \(RANK 1\): LOCAL_RANK 1 selects GPU 1; CUDA_VISIBLE_DEVICES=0,1 \(Slurm gave 1\); Slurm bound 1 to this task \(--gpus-per-task=1' &&
    has '^mn_nccl: node2 task 0 \(RANK 0\): LOCAL_RANK 0 selects GPU 0' || { fail "$name" "rc=$RC"; return; }
  run srun -N1 -n2 --mn-nccl --mn-nccl-explain true
  [ $RC -eq 0 ] && [ "$(count '^mn_nccl: node[0-2] task')" = 0 ] || { fail "$name: silent without GPUs" "rc=$RC"; return; }
  pass "$name"
}

t_explain_pci_and_hca() {
  local name="--mn-nccl-explain on a DGX H100 sysfs fixture: each task's GPU with its PCI bus id and nearest HCA"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs" >/dev/null
  local root=$OUT/sysfs/dgx-h100 bus
  # The NVIDIA driver's view of the fixture's GPUs, as sysfs lists it.
  for bus in $(grep -o 'pci_busid="[^"]*" pci_type="0302' "$root/topology.xml" | cut -d'"' -f2); do
    mkdir -p "$root/bus/pci/drivers/nvidia/$bus"
    echo 0x030200 >"$root/bus/pci/drivers/nvidia/$bus/class"
  done
  MN_NCCL_SYSFS_ROOT=$root run srun -N1 -w node1 -n4 --gpus-per-task=1 --mn-nccl --mn-nccl-explain true
  lines '^mn_nccl: node1 task' | sort | sed 's/^/    /'
  [ $RC -eq 0 ] &&
    has '^mn_nccl: node1 task 2 \(RANK 2\): LOCAL_RANK 2 selects GPU 2 \[PCI 0000:3a:00.0, nearest HCA mlx5_2 \(PIX: same PCIe switch\)\]; CUDA_VISIBLE_DEVICES=0,1,2,3 \(Slurm gave 2\)' &&
    [ "$(count '^mn_nccl: node1 task [0-3] .*nearest HCA mlx5_[0-3] ')" = 4 ] || { fail "$name" "rc=$RC"; return; }
  pass "$name"
}

# Stand-ins for the launchers (the refusals come before they would run):
# each prints the variables it would read.
fake_launchers() {
  mkdir -p "$OUT/bin"
  local l
  for l in accelerate deepspeed torchrun; do
    printf '#!/bin/sh\necho "LAUNCHER %s host=$(hostname) PET_NNODES=$PET_NNODES PET_NODE_RANK=$PET_NODE_RANK args=$*"\n' "$l" >"$OUT/bin/$l"
    chmod +x "$OUT/bin/$l"
  done
}

t_launchers() {
  local name="node mode launchers: accelerate alone on each node and deepspeed refused with the fix; torchrun, accelerate --multi_gpu or with several GPUs run once per node"
  fake_launchers
  local bad=""
  run srun -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl "$OUT/bin/accelerate" launch train.py
  [ $RC -ne 0 ] && has "accelerate launch would train alone on each of the 2 nodes \(no --multi_gpu and 1 GPU per node" &&
    has "add --multi_gpu" && [ "$(count '^LAUNCHER')" = 0 ] || bad+=" accelerate-1gpu(rc=$RC)"
  run srun -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl "$OUT/bin/accelerate" launch --multi_gpu train.py
  [ $RC -eq 0 ] && [ "$(count '^LAUNCHER accelerate .* PET_NNODES=2 PET_NODE_RANK=[01] ')" = 2 ] || bad+=" accelerate-multi(rc=$RC)"
  run srun -N2 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl "$OUT/bin/accelerate" launch train.py
  [ $RC -eq 0 ] && [ "$(count '^LAUNCHER accelerate')" = 2 ] || bad+=" accelerate-2gpu(rc=$RC)"
  # A default config that says NO, found through HOME as accelerate does.
  mkdir -p "$OUT/home/.cache/huggingface/accelerate"
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: NO\nnum_processes: 1\n' >"$OUT/home/.cache/huggingface/accelerate/default_config.yaml"
  HOME=$OUT/home run srun -N2 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl "$OUT/bin/accelerate" launch train.py
  [ $RC -ne 0 ] && has "default config .* says distributed_type: NO" || bad+=" accelerate-config(rc=$RC)"
  run srun -N2 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl "$OUT/bin/deepspeed" train.py
  [ $RC -ne 0 ] && has "deepspeed would run each of the 2 nodes on its own" && [ "$(count '^LAUNCHER')" = 0 ] || bad+=" deepspeed(rc=$RC)"
  run srun -N1 -w node0 --ntasks-per-node=1 --gres=gpu:2 --mn-nccl "$OUT/bin/deepspeed" train.py
  [ $RC -eq 0 ] && [ "$(count '^LAUNCHER deepspeed')" = 1 ] || bad+=" deepspeed-one-node(rc=$RC)"
  run srun -N2 --ntasks-per-node=2 --gres=gpu:2 --mn-nccl "$OUT/bin/accelerate" launch --multi_gpu train.py
  [ $RC -ne 0 ] && has "accelerate launch would start 4 times on 2 nodes" || bad+=" accelerate-per-task(rc=$RC)"
  run srun -N2 --ntasks-per-node=1 --gres=gpu:1 --mn-nccl "$OUT/bin/torchrun" train.py
  [ $RC -eq 0 ] && [ "$(count '^LAUNCHER torchrun .* PET_NNODES=2')" = 2 ] || bad+=" torchrun(rc=$RC)"
  [ -z "$bad" ] || { fail "$name" "$bad"; return; }
  pass "$name"
}

# ---- task/cgroup with ConstrainDevices=yes -------------------------------

cluster() { bash "$TOP/scripts/cluster/local-cluster.sh" "$@" >"$OUT/cluster.log" 2>&1; }

t_zz_device_cgroups() {
  local name="ConstrainDevices=yes (task/cgroup)"
  if ! [ -f /sys/fs/cgroup/devices/devices.allow ]; then
    pass "$name: skipped, no cgroup v1 devices controller here ($(stat -fc %T /sys/fs/cgroup))"
    return
  fi
  MN_CLUSTER_CGROUP=devices cluster start || { fail "$name: the cluster with task/cgroup did not start" "$(tail -5 "$OUT/cluster.log")"; return; }
  refused "$name, --gpus-per-task=1: refused with the fix, each task could open only its own GPU" \
    "Slurm's device cgroup lets each task of node1 open only its own GPU \(ConstrainDevices=yes with --gpus-per-task=1.*add --gpu-bind=none" \
    -N1 -w node1 -n2 --gpus-per-task=1
  if compare "$name, --gpus-per-task=1 --gpu-bind=none: every task may open the node's 2 step GPUs" \
    -N2 --ntasks-per-node=2 --gpus-per-task=1 --gpu-bind=none; then
    [ "$(count '^GPU .* OPEN=2 END')" = 4 ] || fail "$name: --gpu-bind=none, openable GPUs"
  fi
  if compare "$name, --gres=gpu:2" -N2 --ntasks-per-node=2 --gres=gpu:2; then
    [ "$(count '^GPU .* OPEN=2 END')" = 4 ] || fail "$name: --gres=gpu:2, openable GPUs"
  fi
  MN_NCCL_GPUS=slurm run srun -N1 -w node1 -n2 --gpus-per-task=1 --mn-nccl bash -c "$GPU_DUMP"
  [ $RC -eq 0 ] && [ "$(count '^GPU .* CVD=0 .* OPEN=1 END')" = 2 ] && pass "$name, MN_NCCL_GPUS=slurm: Slurm's CUDA_VISIBLE_DEVICES=0, one GPU per task" ||
    fail "$name, MN_NCCL_GPUS=slurm" "rc=$RC"
  cluster start || fail "$name: the plain cluster did not come back" "$(tail -5 "$OUT/cluster.log")"
}

run_checks
