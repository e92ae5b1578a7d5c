// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/step_layout.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

namespace mn {

static bool digits(const std::string& s) {
    if (s.empty() || s.size() > 9) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

Outcome<std::vector<uint32_t>> parse_tasks_per_node(const std::string& s) {
    auto bad = [&](const std::string& why) {
        return Problem{"SLURM_STEP_TASKS_PER_NODE='" + s + "' is not valid: " + why,
                       "this comes from Slurm; report it with the Slurm version"};
    };
    std::vector<uint32_t> out;
    std::size_t start = 0;
    if (s.empty()) return bad("it is empty");
    while (true) {
        std::size_t comma = s.find(',', start);
        std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::string count = item, reps = "1";
        std::size_t paren = item.find("(x");
        if (paren != std::string::npos) {
            if (item.back() != ')') return bad("'" + item + "' lacks ')'");
            count = item.substr(0, paren);
            reps = item.substr(paren + 2, item.size() - paren - 3);
        }
        if (!digits(count) || !digits(reps)) return bad("'" + item + "' is not N or N(xM)");
        unsigned long c = std::strtoul(count.c_str(), nullptr, 10);
        unsigned long r = std::strtoul(reps.c_str(), nullptr, 10);
        if (r == 0 || out.size() + r > (1u << 20)) return bad("'" + item + "' repeats a bad number of times");
        out.insert(out.end(), r, static_cast<uint32_t>(c));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

bool is_training_step(uint32_t step_id) {
    return step_id != kBatchStepId && step_id != kExternStepId && step_id != kInteractiveStepId;
}

Outcome<std::vector<uint32_t>> check_facts(const StepFacts& f) {
    const std::string fix = "this comes from Slurm; report it with the Slurm version";
    if (f.nnodes == 0) return Problem{"the step has no nodes", fix};
    if (f.node_id >= f.nnodes)
        return Problem{"node id " + std::to_string(f.node_id) + " is not below the step's " +
                           std::to_string(f.nnodes) + " nodes",
                       fix};
    auto per_node = parse_tasks_per_node(f.tasks_per_node);
    if (!per_node) return per_node.problem();
    if (per_node->size() != f.nnodes)
        return Problem{"SLURM_STEP_TASKS_PER_NODE='" + f.tasks_per_node + "' lists " +
                           std::to_string(per_node->size()) + " nodes, the step has " +
                           std::to_string(f.nnodes),
                       fix};
    uint64_t sum = 0;
    for (uint32_t n : *per_node) sum += n;
    if (sum != f.total_tasks)
        return Problem{"SLURM_STEP_TASKS_PER_NODE='" + f.tasks_per_node + "' adds up to " +
                           std::to_string(sum) + " tasks, the step has " + std::to_string(f.total_tasks),
                       fix};
    if ((*per_node)[f.node_id] != f.local_tasks)
        return Problem{"this node runs " + std::to_string(f.local_tasks) + " tasks but " +
                           "SLURM_STEP_TASKS_PER_NODE says " + std::to_string((*per_node)[f.node_id]),
                       fix};
    return per_node;
}

LaunchMode resolve_launch(LaunchMode asked, const StepFacts& f) {
    if (asked != LaunchMode::Detect) return asked;
    return f.total_tasks == f.nnodes ? LaunchMode::Node : LaunchMode::Task;
}

uint16_t derive_port(const PortRange& r, uint32_t job_id, uint32_t step_id, uint32_t salt) {
    const unsigned span = r.span();
    constexpr unsigned kSlots = 16;
    if (span < kSlots) return static_cast<uint16_t>(r.lo + (uint64_t(job_id) + step_id + salt) % span);
    const unsigned blocks = span / kSlots;
    return static_cast<uint16_t>(r.lo + ((uint64_t(job_id) + salt) % blocks) * kSlots + step_id % kSlots);
}

uint32_t port_salt(const std::string& secret) {
    const char* end = secret.data() + std::min<std::size_t>(secret.size(), 8);
    uint32_t salt = 0;
    const auto [at, err] = std::from_chars(secret.data(), end, salt, 16);
    return err == std::errc() && at == end ? salt : 0;
}

uint16_t derive_watch_port(const PortRange& r, uint32_t job_id, uint32_t step_id, const std::string& secret) {
    const uint32_t salt = port_salt(secret.size() > 8 ? secret.substr(8) : "") ^ 0x9e3779b9u;
    const uint16_t port = derive_port(r, job_id, step_id + 8, salt);
    const uint16_t master = derive_port(r, job_id, step_id, port_salt(secret));
    // A range too small for blocks: the next port of it.
    if (port != master) return port;
    return static_cast<uint16_t>(port == r.hi ? r.lo : port + 1);
}

std::string rdzv_id(uint32_t job_id, uint32_t step_id) {
    return std::to_string(job_id) + "." + std::to_string(step_id);
}

static uint32_t count_list(const std::string& s) {
    if (s.empty()) return 0;
    uint32_t n = 1;
    for (char c : s) n += c == ',';
    return n;
}

uint32_t count_gpus(const std::string& step_gpus, const std::string& cuda_visible,
                    const std::string& gpus_on_node) {
    if (!step_gpus.empty()) return count_list(step_gpus);
    // NoDevFiles is what Slurm writes when the step has no GPU.
    if (!cuda_visible.empty() && cuda_visible != "NoDevFiles") return count_list(cuda_visible);
    if (digits(gpus_on_node)) return static_cast<uint32_t>(std::strtoul(gpus_on_node.c_str(), nullptr, 10));
    return 0;
}

}  // namespace mn
