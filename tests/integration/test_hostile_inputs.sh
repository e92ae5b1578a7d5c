#!/usr/bin/env bash
# Inputs that crashed a parser under the fuzzers (tests/fuzz), through the
# real path: srun, slurmstepd with the plugin, mn-preflight. Each must end as
# a clear message in a step that still runs, never as a dead slurmstepd.
source "$(dirname "$0")/lib.sh"
plugstack required

# hwloc 2.9.0 dies on this topology.xml; MN_NCCL_SYSFS_ROOT lets a user
# point the plugin's --mn-nccl-explain (in slurmstepd) at it.
t_topology_xml_that_crashes_hwloc() {
  local name="a topology.xml that crashes hwloc: the step runs, explain says locality is unknown, discover too"
  bash "$TOP/tests/fixtures/make-sysfs.sh" "$OUT/sysfs" >/dev/null
  cp "$TOP/tests/fuzz/corpus/hwloc_xml/regress-hwloc-segv-truncated" "$OUT/sysfs/dgx-h100/topology.xml"
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N2 -n2 --mn-nccl --mn-nccl-explain echo STEP-RAN
  local rc=$RC ran; ran=$(count '^STEP-RAN$')
  local unknown; unknown=$(count "locality: unknown: hwloc cannot read the topology file $OUT/sysfs/dgx-h100/topology.xml")
  MN_NCCL_SYSFS_ROOT=$OUT/sysfs/dgx-h100 run srun -N1 -n1 --mn-nccl "$TOP/helper/mn-preflight" discover
  local drc=$RC
  [ "$rc" = 0 ] && [ "$ran" = 2 ] && [ "$unknown" = 2 ] && [ "$drc" = 0 ] && has 'hwloc cannot read the topology file' ||
    { fail "$name" "rc=$rc ran=$ran unknown=$unknown discover rc=$drc"; return; }
  pass "$name"
}

run_checks
