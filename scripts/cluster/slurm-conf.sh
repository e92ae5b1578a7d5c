# SPDX-License-Identifier: Apache-2.0
# Sourced by local-cluster.sh and gpu-cluster.sh: the slurm.conf lines both
# clusters share (root daemons, munge on our own socket, no accounting, no
# cgroups unless asked, GPUs as gres), with every file under DIR.
#   slurm_conf_common DIR [TASK_PLUGIN]     TASK_PLUGIN default task/none
slurm_conf_common() {
  local dir=$1 task_plugin=${2:-task/none}
  cat <<CONF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/run/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
PlugStackConfig=$dir/plugstack.conf
GresTypes=gpu
InactiveLimit=0
KillWait=5
CONF
  # Slurm 23.11 without accounting storage: its main scheduler passes over
  # every pending batch job ("sched: JobId=N has invalid account":
  # assoc_mgr_validate_assoc_id asks for a QOS list that no storage plugin
  # gives), so only the backfill scheduler starts one, every bf_interval
  # (30 s by default). 22.05, 24.11 and 26.05 start it at once.
  case "$(slurmctld -V 2>/dev/null)" in "slurm 23.11."*) echo "SchedulerParameters=bf_interval=1" ;; esac
}
