// SPDX-License-Identifier: Apache-2.0
// Which GPUs a node check may touch (issue 36). In a Slurm Prolog only the
// job's: slurmd gives them as SLURM_JOB_GPUS (Slurm's GPU indices, the
// order of gres.conf's File= lines, NVML's PCI bus order with
// AutoDetect=nvml), and, when gres.conf's flags ask for them,
// CUDA_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL with the same indices (MIG:
// CUDA_VISIBLE_DEVICES holds the MIG UUIDs). A job without GPUs here gets
// none of them: the check then touches no GPU. With no job at all
// (SLURM_JOB_ID unset: HealthCheckProgram, or an admin's shell) the node's
// GPUs are all its own. And which processes found on the checked GPUs are
// foreign: plain text in, no CUDA or NVML type.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

struct JobGpus {
    bool whole_node = false;       // no job: every GPU of the node
    std::string job_id;            // SLURM_JOB_ID; "" with whole_node
    std::vector<std::string> ids;  // the job's GPUs on this node, as Slurm gave them; empty: none
    std::string source;            // the variable they came from, "" when none
    // CUDA_VISIBLE_DEVICES for the check's own process ("" with none).
    std::string cuda_visible() const;
    // Whether ids are Slurm's indices, to be read in PCI bus order
    // (CUDA_DEVICE_ORDER=PCI_BUS_ID, as Slurm's gres guide asks); MIG
    // UUIDs need no order.
    bool indices() const;
    // "job 42's GPUs 1,3 (SLURM_JOB_GPUS)", "job 42 has no GPU on this
    // node", "every GPU of the node (no job: SLURM_JOB_ID unset)".
    std::string text() const;
};

// From the prolog's environment (variable -> value; absent: unset). A list
// that is neither indices nor UUIDs is a problem naming the variable: it
// is Slurm's (or a hand-made) environment at fault, never the node.
Outcome<JobGpus> job_gpus(const std::map<std::string, std::string>& env);

// The Slurm job a process belongs to, "" for none: its /proc/PID/cgroup
// (".../job_42/step_0/...", cgroup v1 and v2 alike), else its
// /proc/PID/environ ('\0'-separated; SLURM_JOB_ID=, for
// proctrack/linuxproc nodes without cgroups).
std::string job_of_process(const std::string& cgroup, const std::string& environ_text);

// Who a process on a checked GPU is, for the verdict:
enum class GpuUser {
    this_check,  // the check itself (excused)
    this_job,    // the job the prolog runs for (excused)
    other_job,   // a process of another job on this job's GPU: that job strays (noted, never blamed on the node)
    no_job,      // no job's at all: left behind, or a daemon (the node fails: that GPU is not free)
};
GpuUser gpu_user(unsigned pid, const std::string& its_job, unsigned self, const JobGpus& scope);

}  // namespace mn
