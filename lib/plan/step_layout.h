// SPDX-License-Identifier: Apache-2.0
// What Slurm says about a step, and the per-task distributed environment
// derived from it. Plain values only: the SPANK glue fills StepFacts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/plan/config.h"
#include "lib/util/outcome.h"

namespace mn {

// Slurm's step id of the batch script and of the extern step.
constexpr uint32_t kBatchStepId = 0xfffffffb;
constexpr uint32_t kExternStepId = 0xfffffffc;
constexpr uint32_t kInteractiveStepId = 0xfffffffa;

// "2(x3),1" -> {2,2,2,1}: Slurm's compressed tasks-per-node form.
Outcome<std::vector<uint32_t>> parse_tasks_per_node(const std::string& s);

struct StepFacts {
    uint32_t job_id = 0;
    uint32_t step_id = 0;
    uint32_t nnodes = 0;
    uint32_t node_id = 0;
    uint32_t local_tasks = 0;
    uint32_t total_tasks = 0;
    std::string nodelist;        // SLURM_STEP_NODELIST
    std::string tasks_per_node;  // SLURM_STEP_TASKS_PER_NODE
    std::vector<std::string> argv;  // the step's command
};

// Steps that are not training steps: the batch script and the extern step.
bool is_training_step(uint32_t step_id);

// Checks the facts agree with each other; names the one that does not.
Outcome<std::vector<uint32_t>> check_facts(const StepFacts& f);

// Node (launcher) mode when every node of the step runs exactly one task;
// the same answer on every node, since it depends only on step-wide counts.
LaunchMode resolve_launch(LaunchMode asked, const StepFacts& f);

// MASTER_PORT from the job and step ids: a block of 16 ports per job, the
// step's slot in it, so up to 16 concurrent steps of one job differ. salt
// moves the block: port_salt(the step secret), which no other user can
// read, so nobody can hold a step's port before its rank 0 listens (issue
// 38); without one (0), jobs whose ids differ by less than span/16 differ.
uint16_t derive_port(const PortRange& r, uint32_t job_id, uint32_t step_id, uint32_t salt = 0);

// The salt of a step secret (MN_NCCL_STEP_SECRET, random hex): its first
// 32 bits; 0 when there is none.
uint32_t port_salt(const std::string& secret);

// Where rank 0's hang watch takes the other nodes' findings (mn-preflight
// watch --port): in the range as MASTER_PORT is, never the step's
// MASTER_PORT (the program's), its block moved by the secret's second 32
// bits and its slot half a block from the step's, so that it meets
// neither this step's ports nor, but by chance, another job's.
uint16_t derive_watch_port(const PortRange& r, uint32_t job_id, uint32_t step_id, const std::string& secret);

// torchrun's rendezvous id: distinct for two steps of one job.
std::string rdzv_id(uint32_t job_id, uint32_t step_id);

// GPUs the step has on this node: SLURM_STEP_GPUS, else CUDA_VISIBLE_DEVICES,
// else SLURM_GPUS_ON_NODE; 0 when none says anything.
uint32_t count_gpus(const std::string& step_gpus, const std::string& cuda_visible,
                    const std::string& gpus_on_node);

}  // namespace mn
