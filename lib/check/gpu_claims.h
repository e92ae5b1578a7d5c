// SPDX-License-Identifier: Apache-2.0
// The GPU each rank opens, as the program would (issue 19): in task mode
// torch.cuda.set_device(LOCAL_RANK) takes CUDA's device LOCAL_RANK, so the
// check opens that one too, never LOCAL_RANK modulo the GPUs it sees (which
// would pass a step the program then dies in). Rank 0 then names ranks of
// one host that open the same GPU: NCCL refuses them ("Duplicate GPU
// detected"), or, on a release that allows it, they halve each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

// Task mode: the CUDA device a rank with this LOCAL_RANK opens among
// `visible` devices (CUDA_VISIBLE_DEVICES as given, for the message). A
// problem, naming the list and the fix, when LOCAL_RANK is past the end.
Outcome<int> task_gpu(uint32_t local_rank, int visible, const std::string& cuda_visible_devices);

struct GpuClaim {
    uint32_t rank = 0;
    std::string label;    // the node as the table names it
    std::string host_id;  // hosts as NCCL tells them apart: NCCL_HOSTID, else the host name
    std::vector<std::string> gpus;  // what the rank opened, as gpu::describe() names it: "GPU0 (0000:07:00.0)"
};

// The PCI bus id in a describe() text ("GPU0 (0000:07:00.0)" ->
// "0000:07:00.0"); the whole text when it names none.
std::string gpu_identity(const std::string& described);

struct SharedGpu {
    std::string host_id;
    std::string gpu;              // the bus id (or text) they share
    std::vector<uint32_t> ranks;  // ascending
    std::string label;            // the first rank's node
    std::string text() const;     // "ranks 0 and 1 of node1 both open GPU 0000:07:00.0; ..."
};
// Every GPU that two or more ranks of one host open, by host then GPU.
std::vector<SharedGpu> shared_gpus(const std::vector<GpuClaim>& claims);

}  // namespace mn
