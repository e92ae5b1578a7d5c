// SPDX-License-Identifier: Apache-2.0
#include "lib/check/job_gpus.h"

#include <cctype>

#include "lib/util/text.h"

namespace mn {

namespace {

bool digits(const std::string& s) {
    if (s.empty() || s.size() > 9) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// "GPU-8f3c...", "MIG-...", "MIG-GPU-.../1/2": what CUDA accepts besides an index.
bool uuid(const std::string& s) {
    if (s.rfind("GPU-", 0) != 0 && s.rfind("MIG-", 0) != 0) return false;
    if (s.size() > 128) return false;
    for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '/') return false;
    return true;
}

std::string get(const std::map<std::string, std::string>& env, const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
}

}  // namespace

std::string JobGpus::cuda_visible() const { return join_list(ids, ','); }

bool JobGpus::indices() const {
    for (const auto& i : ids)
        if (!digits(i)) return false;
    return !ids.empty();
}

std::string JobGpus::text() const {
    if (whole_node)
        return "every GPU of the node (no job: SLURM_JOB_ID unset" +
               (ids.empty() ? std::string(")") : "; " + source + "=" + cuda_visible() + ")");
    if (ids.empty()) return "job " + job_id + " has no GPU on this node";
    return "job " + job_id + "'s GPU" + (ids.size() > 1 ? "s " : " ") + cuda_visible() + " (" + source + ")";
}

Outcome<JobGpus> job_gpus(const std::map<std::string, std::string>& env) {
    JobGpus g;
    g.job_id = get(env, "SLURM_JOB_ID");
    g.whole_node = g.job_id.empty();
    if (!g.whole_node && !digits(g.job_id))
        return Problem{"SLURM_JOB_ID='" + g.job_id + "' is not a job id",
                       "run the prolog as slurmd does, or unset SLURM_JOB_ID to check the whole node"};
    // With no job, an admin's CUDA_VISIBLE_DEVICES is kept as it is (CUDA
    // honours it); the check then names it.
    const std::string cvd = get(env, "CUDA_VISIBLE_DEVICES");
    const std::vector<std::string> cvd_ids = split_list(cvd);
    bool mig = false;
    for (const auto& i : cvd_ids) mig = mig || uuid(i);
    // Slurm's own list first; CUDA_VISIBLE_DEVICES where it names MIG
    // instances (SLURM_JOB_GPUS then holds the parent's index, not them).
    const char* order[] = {"SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"};
    for (const char* name : order) {
        if (g.whole_node && std::string(name) != "CUDA_VISIBLE_DEVICES") continue;
        if (mig && std::string(name) == "SLURM_JOB_GPUS") continue;
        if (env.find(name) == env.end()) continue;
        const std::string value = get(env, name);
        const auto ids = split_list(value);
        // Slurm writes "" for none on some releases; CUDA reads
        // "NoDevFiles" (old gres without files) as none.
        if (ids.empty() || value == "NoDevFiles") {
            g.source = name;
            break;
        }
        for (const auto& i : ids)
            if (!digits(i) && !uuid(i))
                return Problem{std::string(name) + "='" + value + "' is not a list of GPU indices or UUIDs",
                               "the prolog's environment comes from slurmd: run it as slurmd's Prolog, or "
                               "give " + std::string(name) + " as Slurm does (\"0,2\")"};
        g.ids = ids;
        g.source = name;
        break;
    }
    return g;
}

std::string job_of_process(const std::string& cgroup, const std::string& environ_text) {
    // The innermost "job_N" of any line: v1 ("4:devices:/slurm/uid_0/job_42/step_0"),
    // v2 ("0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0").
    std::string found;
    std::size_t at = 0;
    while ((at = cgroup.find("job_", at)) != std::string::npos) {
        const bool starts = at == 0 || cgroup[at - 1] == '/';
        std::size_t end = at + 4;
        while (end < cgroup.size() && std::isdigit(static_cast<unsigned char>(cgroup[end]))) ++end;
        const bool ends = end == cgroup.size() || cgroup[end] == '/' || cgroup[end] == '\n';
        if (starts && ends && end > at + 4) found = cgroup.substr(at + 4, end - at - 4);
        at = end;
    }
    if (!found.empty()) return found;
    std::size_t start = 0;
    while (start < environ_text.size()) {
        std::size_t end = environ_text.find('\0', start);
        if (end == std::string::npos) end = environ_text.size();
        const std::string var = environ_text.substr(start, end - start);
        if (var.rfind("SLURM_JOB_ID=", 0) == 0 && digits(var.substr(13))) return var.substr(13);
        start = end + 1;
    }
    return "";
}

GpuUser gpu_user(unsigned pid, const std::string& its_job, unsigned self, const JobGpus& scope) {
    if (pid == self) return GpuUser::this_check;
    if (its_job.empty()) return GpuUser::no_job;
    if (!scope.whole_node && its_job == scope.job_id) return GpuUser::this_job;
    return GpuUser::other_job;
}

}  // namespace mn
