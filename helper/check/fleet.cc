// SPDX-License-Identifier: Apache-2.0
// Every node alike, and remembered (lib/check/fingerprint, history,
// metrics): each rank's node fingerprint, read on a thread from launch and
// sent with its readiness; rank 0's comparison once every rank is ready
// (before NCCL's init); after the verdict, one history line and one metrics file
// per node (rank 0 writes them all: it alone has the verdict, and a shared
// DIR then holds the whole cluster's).
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <set>

#include "helper/check/fleet.h"
#include "helper/check/hooks.h"
#include "helper/check/lead.h"
#include "lib/check/fingerprint.h"
#include "lib/check/node_reading.h"
#include "lib/check/history.h"
#include "lib/check/metrics.h"
#include "lib/fabric/fabric.h"
#include "lib/plan/step_plan.h"
#include "lib/util/text.h"

namespace mn::check {
namespace {

std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d)) out.push_back(e->d_name);
        closedir(d);
    }
    return out;
}

// Installed verbs providers (rdma-core's /etc/libibverbs.d), and the ones
// the node's ACTIVE RDMA ports need, from their kernel drivers in sysfs
// under `root`.
void verbs_of_node(Fingerprint& f, const std::string& root) {
    const char* conf = std::getenv("MN_PREFLIGHT_VERBS_DIR");
    const std::string dir = conf && *conf ? conf : "/etc/libibverbs.d";
    struct stat sb {};
    f.verbs_known = stat(dir.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
    std::set<std::string> have, need;
    for (const auto& file : files_in(dir))
        if (auto p = verbs_provider_of_file(file); !p.empty()) have.insert(p);
    // The ports as fabric discovery reads them; each ACTIVE port's HCA needs
    // the provider of its kernel driver.
    std::set<std::string> active;
    for (const auto& port : read_sysfs_ports(root))
        if (port.state == "ACTIVE") active.insert(port.hca);
    for (const auto& hca : active) {
        char link[PATH_MAX] = {0};
        const ssize_t n = readlink((root + "/class/infiniband/" + hca + "/device/driver").c_str(), link, sizeof link - 1);
        if (n <= 0) continue;
        const std::string driver = std::string(link, static_cast<std::size_t>(n));
        if (auto p = verbs_provider_for_driver(driver.substr(driver.rfind('/') + 1)); !p.empty()) need.insert(p);
    }
    f.verbs.assign(have.begin(), have.end());
    f.verbs_needed.assign(need.begin(), need.end());
}

// libibverbs' release, from the file the loader finds ("" without it):
// rdma-core's and MLNX_OFED's differ there (1.14.50.0, 1.14.2307.0).
std::string verbs_library() {
    void* lib = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return "";
    std::string out;
    Dl_info info{};
    if (void* s = dlsym(lib, "ibv_get_device_list"); s && dladdr(s, &info) && info.dli_fname) {
        char real[PATH_MAX];
        if (realpath(info.dli_fname, real)) out = library_file_version(real);
    }
    dlclose(lib);
    return out;
}

unsigned gpus_requested() {
    const std::string v = env_or("SLURM_GPUS_ON_NODE");
    return v.empty() ? 0 : static_cast<unsigned>(std::strtoul(v.c_str(), nullptr, 10));
}

}  // namespace

namespace {

// The node's software and GPUs, read: the verbs providers (sysfs, files)
// beside the libraries and the driver (gpu::identity, its parts at once).
std::string read_node(const std::string& host, const std::vector<std::string>& nccl_env) {
    Fingerprint f;
    f.host = host;
    const std::string root = user_sysfs_root(process_env());
    auto verbs = std::async(std::launch::async, [&f, &root] {
        verbs_of_node(f, root);
        f.hca_firmware = read_hca_firmware(root);
        f.verbs_library = verbs_library();
        const ImageIdentity image = image_identity("/");
        f.image = image.id;
        f.image_name = image.name;
    });
    const gpu::Identity id = gpu::identity();
    verbs.get();
    f.pcie = read_pcie_links(root, gpu_buses_on_purpose().value_or(id.gpu_buses));
    f.nccl_env_known = true;
    f.nccl_env = nccl_env;
    f.nccl = nccl_version_text(id.nccl_code);
    f.nccl_path = id.nccl_path;
    f.cuda_driver = cuda_version_text(id.cuda_code);
    f.gpu_model = id.gpu_model;
    f.net.known = id.net_known;
    f.net.name = id.net_name;
    f.net.api = id.net_api;
    f.net.path = id.net_path;
    f.gpus = static_cast<unsigned>(std::max(0, id.gpus));
    f.gpus_requested = gpus_requested();
    // Where the program's torch is known to the step (a launcher or the
    // user may say which NCCL it was built with).
    f.torch_nccl = env_or("MN_PREFLIGHT_TORCH_NCCL");
    return encode_fingerprint(f);
}

}  // namespace

std::vector<std::string> process_environment() {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
    return out;
}

std::string node_fingerprint(const std::string& host, const std::optional<std::vector<std::string>>& nccl_env) {
    const std::vector<std::string> env = nccl_env ? *nccl_env : nccl_environment(process_environment());
    // MN_PREFLIGHT_SHARED_READ=DIR: the nodes emulated on one machine
    // (--mn-emulate-nodes) read its software once, in turn through a file
    // there per machine and step, rather than each at once (32 nodes on
    // 32 cores: 1.8 s of readiness).
    const std::string dir = env_or("MN_PREFLIGHT_SHARED_READ");
    if (dir.empty()) return read_node(host, env);
    char machine[256] = {0};
    gethostname(machine, sizeof machine - 1);
    // What each node's read depends on beside the machine: nodes that see
    // other GPUs, ask for others or load another NCCL read apart.
    std::string own;
    for (const char* v : {"CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "MN_PREFLIGHT_TORCH_NCCL", "MN_PREFLIGHT_LIBNCCL", "MN_PREFLIGHT_NCCL",
                          "NCCL_NET_PLUGIN", "MN_PREFLIGHT_VERBS_DIR", "LD_LIBRARY_PATH"})
        own += std::string(v) + "=" + env_or(v) + "\n";
    for (const auto& kv : env) own += kv + "\n";
    std::string key = std::string("mn-preflight-node.") + machine + "." + env_or("SLURM_JOB_ID", "0") + "." +
                      env_or("SLURM_STEP_ID", "0") + "." + std::to_string(std::hash<std::string>{}(own));
    std::replace(key.begin(), key.end(), '/', '_');
    return shared_node_read(dir, key, host, [&host, &env] { return read_node(host, env); });
}

bool fingerprints_alike(Lead& l) {
    std::vector<Fingerprint> nodes;
    std::vector<std::size_t> index;  // report node of each fingerprint
    for (std::size_t i = 0; i < l.rep.nodes.size(); ++i) {
        if (l.rep.nodes[i].ranks.empty()) continue;
        // One task of each node reads it (LOCAL_RANK 0): the first that sent one.
        const Member* from = nullptr;
        for (uint32_t r : l.rep.nodes[i].ranks)
            if (l.members[r].fingerprint || !l.members[r].fingerprint_problem.empty()) {
                from = &l.members[r];
                break;
            }
        if (!from) {
            l.rep.notes.push_back("warning: " + l.rep.nodes[i].host +
                                  ": its software (NCCL, CUDA) was not read within readiness' time; not compared");
            continue;
        }
        const auto& f = from->fingerprint;
        if (!f) {
            l.rep.nodes[i].problems.push_back(
                {VerdictKind::Fingerprint, "fingerprint: unreadable (" + from->fingerprint_problem + ")"});
            continue;
        }
        nodes.push_back(*f);
        index.push_back(i);
    }
    bool ok = true;
    std::string tied;
    for (const auto& x : compare_fingerprints(nodes)) {
        if (x.node >= index.size()) continue;
        auto& n = l.rep.nodes[index[x.node]];
        if (x.fail && x.tie) {
            // No majority: the step cannot run, but no node is the odd one.
            tied += (tied.empty() ? "" : "; ") + n.host + ": " + x.text.substr(std::string(kFingerprintTag).size());
            ok = false;
        } else if (x.fail) {
            n.problems.push_back({VerdictKind::Fingerprint, x.text});
            ok = false;
        } else {
            l.rep.notes.push_back("warning: " + n.host + ": " + x.text);
        }
    }
    if (!tied.empty())
        l.rep.coll.error = "the nodes' software differs with no majority to tell the odd one, so none is blamed (" +
                           tied + ")";
    else if (!ok)
        l.rep.coll.error = "the nodes' software differs (see the nodes named)";
    return ok;
}

namespace {

// kinds: each finding's, for the metrics (finding_kinds()).
void write_record(const std::string& hist, const std::string& mets, const HistoryRecord& r,
                  const std::vector<std::string>& kinds, const std::vector<GpuReadings>& gpus) {
    if (!hist.empty())
        if (auto w = append_history(hist, r); !w)
            std::fprintf(stderr, "mn-preflight: %s: history: %s\n", r.node.c_str(), w.problem().text().c_str());
    if (!mets.empty())
        if (auto w = write_metrics(mets, node_metrics(r, kinds, gpus)); !w)
            std::fprintf(stderr, "mn-preflight: %s: metrics: %s\n", r.node.c_str(), w.problem().text().c_str());
}

HistoryRecord record_now(const std::string& node) {
    HistoryRecord r;
    r.job = env_or("SLURM_JOB_ID");
    r.step = env_or("SLURM_STEP_ID");
    r.time = static_cast<int64_t>(std::time(nullptr));
    r.node = node;
    return r;
}

}  // namespace

void remember(const Step& st, const Lead& l) {
    const std::string& hist = st.o.history_dir;
    const std::string& mets = st.o.metrics_dir;
    if (hist.empty() && mets.empty()) return;
    const PreflightReport& rep = l.rep;
    for (std::size_t i = 0; i < rep.nodes.size(); ++i) {
        const auto& n = rep.nodes[i];
        HistoryRecord r = record_now(n.host);
        r.verdict = n.verdict;
        r.kind = kind_word(n.kind);
        std::vector<std::string> kinds;
        // A culprit of a check that ran out of time: each of its charges
        // counts as the time-out it was.
        for (const auto& c : n.charges) {
            r.findings.push_back(c.text);
            kinds.push_back(kind_word(n.kind == VerdictKind::Timeout ? VerdictKind::Timeout : c.kind));
        }
        for (const auto& p : rep.notes)
            if (note_about(p, n.host)) {
                r.findings.push_back(p);
                kinds.push_back("warning");
            }
        if (rep.coll.busbw_gbps > 0) r.busbw_gbps = rep.coll.busbw_gbps;
        if (n.pair_busbw) r.pair_busbw_gbps = *n.pair_busbw;
        const std::vector<GpuReadings> none;
        write_record(hist, mets, r, kinds, i < l.node_health.size() ? l.node_health[i] : none);
    }
}

void remember_prolog(const PrologOptions& o, const std::string& host, const std::vector<Charge>& problems,
                     const std::vector<std::string>& notes, const std::vector<GpuReadings>& gpus) {
    if (o.history_dir.empty() && o.metrics_dir.empty()) return;
    HistoryRecord r = record_now(host);
    r.step = r.step.empty() ? "prolog" : r.step;
    std::vector<std::string> kinds;
    for (const auto& p : problems) {
        r.verdict += (r.verdict.empty() ? "" : "; ") + p.text;
        r.findings.push_back(p.text);
        kinds.push_back(kind_word(p.kind));
    }
    if (problems.empty()) r.verdict = "ok";
    r.kind = kind_word(problems.empty() ? VerdictKind::Ok : problems.front().kind);
    for (const auto& n : notes) {
        r.findings.push_back("warning: " + n);
        kinds.push_back("warning");
    }
    write_record(o.history_dir, o.metrics_dir, r, kinds, gpus);
}

}  // namespace mn::check
