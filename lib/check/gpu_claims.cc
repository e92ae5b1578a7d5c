// SPDX-License-Identifier: Apache-2.0
#include "lib/check/gpu_claims.h"

#include <algorithm>
#include <map>
#include <utility>

namespace mn {

Outcome<int> task_gpu(uint32_t local_rank, int visible, const std::string& cuda_visible_devices) {
    if (visible > 0 && local_rank < static_cast<uint32_t>(visible)) return static_cast<int>(local_rank);
    const std::string list = cuda_visible_devices.empty() ? "CUDA_VISIBLE_DEVICES unset" : "CUDA_VISIBLE_DEVICES=" + cuda_visible_devices;
    return Problem{"LOCAL_RANK " + std::to_string(local_rank) + " has no GPU: this task sees " + std::to_string(visible) +
                       " (" + list + "), so torch.cuda.set_device(LOCAL_RANK) fails with \"invalid device ordinal\"",
                   "give every task of a node its own GPU among the node's (--gres=gpu:N with N the tasks per node, "
                   "or --gpus-per-task=1 with srun --mn-nccl, which puts each task's GPU at place LOCAL_RANK)"};
}

std::string gpu_identity(const std::string& described) {
    const auto open = described.find('(');
    const auto close = described.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close <= open + 1) return described;
    return described.substr(open + 1, close - open - 1);
}

std::string SharedGpu::text() const {
    std::string who;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (i) who += i + 1 == ranks.size() ? " and " : ", ";
        who += std::to_string(ranks[i]);
    }
    return "ranks " + who + " of " + label + std::string(ranks.size() == 2 ? " both" : " all") + " open GPU " + gpu +
           ": NCCL needs one GPU per rank (\"Duplicate GPU detected\"); give each task its own GPU "
           "(--gpus-per-task=1, or --gres=gpu:N with as many tasks per node as GPUs) and let the program "
           "take torch.cuda.set_device(LOCAL_RANK)";
}

std::vector<SharedGpu> shared_gpus(const std::vector<GpuClaim>& claims) {
    // (host, GPU) -> the ranks opening it, and the first one's node.
    std::map<std::pair<std::string, std::string>, SharedGpu> by;
    for (const auto& c : claims)
        for (const auto& g : c.gpus) {
            SharedGpu& s = by[{c.host_id, gpu_identity(g)}];
            if (s.ranks.empty()) {
                s.host_id = c.host_id;
                s.gpu = gpu_identity(g);
                s.label = c.label;
            }
            if (s.ranks.empty() || s.ranks.back() != c.rank) s.ranks.push_back(c.rank);
        }
    std::vector<SharedGpu> out;
    for (auto& [key, s] : by) {
        if (s.ranks.size() < 2) continue;
        std::sort(s.ranks.begin(), s.ranks.end());
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace mn
