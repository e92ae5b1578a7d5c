// mn-preflight's check, phase by phase (helper/check/*.cc: rendezvous,
// readiness, collective, pairs, verdict; helper/check/step.h holds the
// state they share and each phase's budget), and the prolog check.
#include "helper/check.h"

#include <cstdio>
#include <unistd.h>

#include "helper/check/step.h"
#include "helper/gpu.h"
#include "lib/check/fingerprint.h"
#include "lib/fabric/fabric.h"
#include "lib/util/json.h"
#include "lib/util/replace_file.h"
#include "lib/plan/step_plan.h"
#include "lib/fabric/verbs.h"

namespace mn {

using namespace check;

namespace {

// After a rank's phase failed: rank 0's word (done or stop) ends it.
int await_verdict(Step& st, Follower& f) {
    set_phase("waiting for rank 0's verdict");
    while (true) {
        std::string err;
        // Rank 0 speaks at the end of its budget: listen a little longer.
        auto m = f.inbox.next(Deadline::in(st.end.left() + 0.4), &err);
        if (!m) {
            std::fprintf(stderr, "mn-preflight: %s rank %u: no verdict from rank 0 (%s)\n", st.self.label.c_str(),
                         st.self.rank, err.c_str());
            return kTimeout;
        }
        if (const auto* w = std::get_if<msg::Word>(&*m)) {
            mark_done();
            return w->code;
        }
    }
}

int follow(Step& st) {
    Follower f;
    if (!join(st, f)) return kTimeout;
    if (!serve_readiness(st, f)) return await_verdict(st, f);
    if (!serve_collective(st, f)) return await_verdict(st, f);
    return serve_pairs(st, f);
}

int lead(Step& st) {
    Lead l;
    if (gather(st, l) && lead_readiness(st, l) && lead_collective(st, l)) {
        lead_pairs(st, l);
        l.finished = true;
    }
    const int code = verdict(st, l);
    return code;
}

}  // namespace

int run_check(const CheckOptions& o) {
    Step st;
    st.o = o;
    st.start = now_s();
    auto me = read_self();
    if (!me) {
        std::fprintf(stderr, "%s\n", me.problem().text().c_str());
        return kUsage;
    }
    st.self = *me;
    set_identity(st.self);
    st.budget = Budgets::of(o.timeout);
    // The one thread that serves the heartbeats and the watchdog: none to be
    // had, and this rank says so (rank 0 names it as one that did not arrive).
    if (auto c = start_watchdog(o.timeout, st.self, o.json); !c) {
        std::fprintf(stderr, "%s\n", c.problem().text().c_str());
        return kCheckFailed;
    }
    st.rdzv = Deadline::in(st.budget.rendezvous);
    st.ready_by = Deadline::in(st.budget.readiness);
    st.work_end = Deadline::in(st.budget.transfers);
    st.end = Deadline::in(st.budget.verdict);
    if (!prepare_self(st)) return kCheckFailed;
    const int code = st.self.rank == 0 ? lead(st) : follow(st);
    forget_nccl_log(st.nccl_log);
    log_end(st.self, "checked");
    return code;
}

int run_prolog(const PrologOptions& o) {
    const std::string host = host_name();
    Self self;
    self.label = host;
    set_identity(self);
    if (auto c = start_watchdog(o.timeout, self, o.json); !c) {
        std::fprintf(stderr, "%s\n", c.problem().text().c_str());
        return kCheckFailed;
    }
    std::vector<std::string> problems, notes;
    const auto ports = discover_ports(sysfs_root(process_env(), SiteConfig{}));
    auto choice = choose_fabric(ports, o.mode);
    std::string fabric = "?";
    if (!choice) {
        // The rule's text names the plugin's option; here it was --mode.
        std::string what = choice.problem().what;
        if (what.rfind("--mn-nccl=", 0) == 0) what = "--mode " + what.substr(10);
        problems.push_back(what);
    } else {
        fabric = choice->fabric;
        // RDMA hardware with not one usable port: the node is cut off from
        // the fast network, whatever the job wants.
        if (std::string cut = unusable_fabric(*choice); !cut.empty()) problems.push_back(cut);
        for (const auto& v : choice->ports)
            if (!v.chosen && v.port.state != "ACTIVE") notes.push_back(v.port.name() + " " + v.reason);
    }
    if (std::string g = gpu::local_check(o.timeout); !g.empty()) problems.push_back(g);
    const auto ga = gpu::probe();
    std::vector<GpuReadings> readings;
    if (ga.ok) {
        // NVML's view of every GPU, after local_check's copies kept the
        // links busy; this process is the only one that may be there.
        std::vector<int> all;
        for (int i = 0; i < ga.devices; ++i) all.push_back(i);
        readings = gpu::health(all);
        for (const auto& f : gpu_health(host, readings, {static_cast<unsigned>(getpid())}))
            (f.fail ? problems : notes).push_back(f.text.substr(host.size() + 1));
    }
    // What this node alone shows of its software (no majority to compare with).
    if (auto fp = decode_fingerprint(check::node_fingerprint(host)))
        for (const auto& f : node_fingerprint_findings(*fp)) (f.fail ? problems : notes).push_back(f.text);
    std::string line = "mn-preflight: " + host + ": ";
    if (problems.empty())
        line += "ok (fabric " + fabric + ", " + std::to_string(ga.ok ? ga.devices : 0) + " GPUs" +
                (notes.empty() ? "" : "; " + notes.front()) + ")";
    else
        for (std::size_t i = 0; i < problems.size(); ++i) line += (i ? "; " : "") + problems[i];
    mark_done();
    if (!o.reason_file.empty() && !problems.empty()) {
        // Slurm's drain reason: one line, short, whatever bytes a problem
        // carried (sysfs text, a library's message).
        std::string reason = line.substr(std::string("mn-preflight: ").size());
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
                  {"gpus", ga.ok ? ga.devices : 0},
                  {"problems", json_texts(problems)}};
        std::fputs(json_line(j).c_str(), stdout);
    } else {
        std::printf("%s\n", line.c_str());
    }
    return problems.empty() ? kPass : kCheckFailed;
}

}  // namespace mn
