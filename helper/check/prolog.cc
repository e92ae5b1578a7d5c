// SPDX-License-Identifier: Apache-2.0
// The prolog's single-node check (doc/prolog.md): this node's GPUs and
// fabric read and judged alone, before a job starts, with a history line
// and metrics like the step's check.
#include "helper/check.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "helper/check/fleet.h"
#include "helper/check/step.h"
#include "helper/gpu.h"
#include "lib/check/fingerprint.h"
#include "lib/check/job_gpus.h"
#include "lib/fabric/fabric.h"
#include "lib/fabric/verbs.h"
#include "lib/plan/step_plan.h"
#include "lib/util/bounded_file.h"
#include "lib/util/json.h"
#include "lib/util/replace_file.h"

namespace mn {

using namespace check;

namespace {

// The environment as a map, for job_gpus(): only the variables it reads.
std::map<std::string, std::string> prolog_env() {
    std::map<std::string, std::string> env;
    for (const char* v : {"SLURM_JOB_ID", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"})
        if (const char* x = std::getenv(v)) env[v] = x;
    return env;
}

// The Slurm job of a process NVML found on a checked GPU ("" for none).
std::string job_of_pid(unsigned pid) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/";
    return job_of_process(read_bounded_text(dir + "cgroup", 1 << 16).value_or(""),
                          read_bounded_text(dir + "environ", 1 << 20).value_or(""));
}

// Sorts the processes on the checked GPUs: the check's and the job's own
// are excused, another job's are noted (that job strays; the node is not
// at fault, and another job's GPUs are never judged), and nobody's are
// left for gpu_health() to fail. Returns the other jobs seen.
std::set<std::string> sort_gpu_users(const std::vector<GpuReadings>& readings, const JobGpus& scope,
                                     std::set<unsigned>& excused, std::vector<std::string>& notes) {
    std::set<std::string> jobs;
    const unsigned self = static_cast<unsigned>(getpid());
    for (const auto& g : readings)
        for (const auto& p : g.processes) {
            const std::string job = job_of_pid(p.pid);
            switch (gpu_user(p.pid, job, self, scope)) {
            case GpuUser::this_check:
            case GpuUser::this_job:
                excused.insert(p.pid);
                break;
            case GpuUser::other_job:
                excused.insert(p.pid);
                jobs.insert(job);
                notes.push_back(g.gpu + ": pid " + std::to_string(p.pid) + " (" + (p.name.empty() ? "?" : p.name) +
                                ") of job " + job + " is on " +
                                (scope.whole_node ? std::string("it") : "job " + scope.job_id + "'s GPU") +
                                "; fix: ConstrainDevices=yes in cgroup.conf keeps each job to its GPUs");
                break;
            case GpuUser::no_job:
                break;
            }
        }
    return jobs;
}

std::vector<std::string> texts_of(const std::vector<Charge>& charges) {
    std::vector<std::string> out;
    for (const auto& c : charges) out.push_back(c.text);
    return out;
}

}  // namespace

int run_prolog(const PrologOptions& o) {
    const std::string host = host_name();
    Self self;
    self.label = host;
    set_identity(self);
    if (auto c = start_watchdog(o.timeout, self, o.json); !c) {
        std::fprintf(stderr, "%s\n", c.problem().text().c_str());
        return kCheckFailed;
    }
    // Only the job's GPUs (issue 36): on a node shared between jobs, the
    // others' GPUs are never opened, allocated on or judged. CUDA is told
    // before its first call; Slurm's indices are in PCI bus order.
    const auto scope = job_gpus(prolog_env());
    if (!scope) {
        std::fprintf(stderr, "mn-preflight: prolog: %s\n", scope.problem().text().c_str());
        return kUsage;
    }
    if (!scope->whole_node) {
        setenv("CUDA_VISIBLE_DEVICES", scope->cuda_visible().c_str(), 1);
        if (scope->indices()) setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    }
    const bool job_has_gpus = scope->whole_node || !scope->ids.empty();
    std::vector<Charge> problems;
    std::vector<std::string> notes;
    const auto ports = discover_ports(user_sysfs_root(process_env()));
    auto choice = choose_fabric(ports, o.mode);
    std::string fabric = "?";
    if (!choice) {
        // The rule's text names the plugin's option; here it was --mode.
        std::string what = choice.problem().what;
        if (what.rfind("--mn-nccl=", 0) == 0) what = "--mode " + what.substr(10);
        problems.push_back({VerdictKind::Fault, what});
    } else {
        fabric = choice->fabric;
        // RDMA hardware with not one usable port: the node is cut off from
        // the fast network, whatever the job wants.
        if (std::string cut = unusable_fabric(*choice); !cut.empty()) problems.push_back({VerdictKind::Fault, cut});
        for (const auto& v : choice->ports)
            if (!v.chosen && v.port.state != "ACTIVE") notes.push_back(v.port.name() + " " + v.reason);
    }
    gpu::Availability ga;
    std::vector<GpuReadings> readings;
    std::set<unsigned> excused{static_cast<unsigned>(getpid())};
    if (job_has_gpus) {
        ga = gpu::probe();
        std::vector<int> all;
        for (int i = 0; ga.ok && i < ga.devices; ++i) all.push_back(i);
        bool exercise = true;
        if (scope->whole_node && ga.ok) {
            // No job named its GPUs (HealthCheckProgram): a job running
            // here after all keeps its GPUs untouched; they are read only.
            const auto before = gpu::health(all);
            const auto jobs = sort_gpu_users(before, *scope, excused, notes);
            if (!jobs.empty()) {
                exercise = false;
                notes.insert(notes.begin(), "GPUs in use by job " + join_list({jobs.begin(), jobs.end()}, ',') +
                                                ": read, not exercised (run it as HealthCheckProgram on idle nodes only)");
            }
        }
        if (exercise)
            if (std::string g = gpu::local_check(o.timeout); !g.empty()) problems.push_back({VerdictKind::Fault, g});
        if (ga.ok) {
            // NVML's view of the checked GPUs, after local_check's copies
            // kept the links busy.
            readings = gpu::health(all);
            sort_gpu_users(readings, *scope, excused, notes);
            for (const auto& f : gpu_health(host, readings, excused)) {
                if (f.fail) problems.push_back({VerdictKind::Fault, f.text.substr(host.size() + 1)});
                else notes.push_back(f.text.substr(host.size() + 1));
            }
        }
    }
    // What this node alone shows of its software (no majority to compare with).
    if (auto fp = decode_fingerprint(check::node_fingerprint(host)))
        for (const auto& f : node_fingerprint_findings(*fp)) {
            if (f.fail) problems.push_back({VerdictKind::Fingerprint, f.text});
            else notes.push_back(f.text);
        }
    const int checked = ga.ok ? ga.devices : 0;
    std::string gpus = scope->text() + ": " +
                       (checked ? std::to_string(checked) + " checked"
                                : std::string("none checked") + (ga.why.empty() ? "" : " (" + ga.why + ")"));
    std::string line = "mn-preflight: " + host + ": ";
    if (problems.empty())
        line += "ok (fabric " + fabric + "; " + gpus + (notes.empty() ? "" : "; " + notes.front()) + ")";
    else
        for (std::size_t i = 0; i < problems.size(); ++i) line += (i ? "; " : "") + problems[i].text;
    mark_done();
    if (!o.reason_file.empty() && !problems.empty()) {
        // Slurm's drain reason: one line, short, whatever bytes a problem
        // carried (sysfs text, a library's message). It starts with the
        // tool's name, so that the prolog script resumes only nodes that
        // mn-preflight drained (as NHC does with its own).
        std::string reason = line.substr(std::string("mn-preflight: ").size());
        if (reason.rfind(host + ": ", 0) == 0) reason = reason.substr(host.size() + 2);
        reason = "mn-preflight: " + reason;
        for (char& c : reason)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
        if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
        // Run as root, often in a directory others can write: a new file
        // renamed over the path, so a link left there is replaced, never
        // followed to truncate its target.
        if (auto w = replace_file(o.reason_file, reason + "\n", 0644); !w)
            std::fprintf(stderr, "mn-preflight: --reason-file: %s\n", w.problem().text().c_str());
    }
    check::remember_prolog(o, host, problems, notes, readings);
    if (o.json) {
        const Json j = {{"host", json_text(host)},
                  {"verdict", problems.empty() ? "PASS" : "FAIL"},
                  {"fabric", json_text(fabric)},
                  {"gpus", checked},
                  {"gpu_scope", json_text(scope->text())},
                  {"job_gpus", json_texts(scope->ids)},
                  {"problems", json_texts(texts_of(problems))},
                  {"notes", json_texts(notes)}};
        std::fputs(json_line(j).c_str(), stdout);
    } else {
        std::printf("%s\n", line.c_str());
    }
    return problems.empty() ? kPass : kCheckFailed;
}

}  // namespace mn
