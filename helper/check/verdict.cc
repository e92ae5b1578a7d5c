// SPDX-License-Identifier: Apache-2.0
// Phase 5, the verdict: blame by evidence (lib/check/blame: the ranks that found
// a fault, else those that never reported; the others only waited on
// them), the table or JSON, and every rank told done or stop. Budget: the
// last half second of --timeout.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>
#include <unistd.h>

#include "helper/check/lead.h"
#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn::check {

namespace {

// Who came to the ranks' data ports without the secret while they waited
// for their ring (msg::Result::strangers): "node1 rank 1: 12 connections
// from ..."; "" when nobody did.
std::string ring_strangers(const Lead& l) {
    std::string out;
    for (uint32_t r = 0; r < l.results.size(); ++r)
        if (l.results[r].strangers) out += (out.empty() ? "" : "; ") + l.who(r) + ": " + *l.results[r].strangers;
    return out;
}

// Blame by evidence, and NVML's findings per node, into the report. Links
// that failed between ranks that all reported, while strangers held the
// data ports, say nothing of a node: their charges are "disturbed".
void weigh(const Step& st, Lead& l) {
    PreflightReport& rep = l.rep;
    if (!l.evidence.empty()) {
        const Blame b = assign_blame(l.evidence);
        const std::string ring = ring_strangers(l);
        const bool jammed = b.culprit == RankState::PeerError && !ring.empty();
        for (const auto& [node, why] : b.faults)
            for (const auto& w : why)
                rep.nodes[node].problems.push_back({jammed ? VerdictKind::Disturbed : VerdictKind::Fault, w});
        if (jammed) rep.disturbed = "strangers at the data ports during the all-reduce: " + ring;
        for (const auto& [node, on] : b.waited_on)
            for (uint32_t c : on) rep.nodes[node].waited_on.push_back(rep.nodes[c].host);
        for (const auto& [rank, text] : b.notes) rep.notes.push_back(l.who(rank) + ": " + text);
        if (b.timed_out && rep.timed_out.empty())
            rep.timed_out = l.phase + ": " + (b.silent.size() == 1 ? "rank " : "ranks ") + rank_ranges(b.silent) +
                            " did not report within --timeout " + num(st.o.timeout, -1) + " s" + l.own_pause_words();
    }
    // GPU health (NVML) per node: a fail blames the node, a warning is a note.
    const auto findings = l.gpu_findings_by_node();
    for (std::size_t i = 0; i < findings.size() && i < rep.nodes.size(); ++i) {
        for (const auto& f : findings[i]) {
            if (f.fail) rep.nodes[i].problems.push_back({VerdictKind::Fault, f.text.substr(rep.nodes[i].host.size() + 1)});
            else rep.notes.push_back("warning: " + f.text);
        }
    }
}

// A pass needs every rank of the step (SLURM_NTASKS) to have come and
// every phase to have run to its end: whatever stopped the check early
// without blaming a rank fails it all the same. Strangers at MASTER_PORT
// are named by address; when the check ran out of time while they came,
// it is disturbed: a failure, but none of the nodes'.
void fail_closed(const Step& st, Lead& l) {
    PreflightReport& rep = l.rep;
    if (!l.halted.empty()) rep.problems.insert(rep.problems.begin(), l.halted);
    if (!l.finished && rep.code == kPass) {
        if (l.halted.empty())
            rep.problems.push_back("the check stopped in " + l.phase + " before every one of the step's " +
                                   std::to_string(st.self.world) + " ranks reported");
        rep.code = kCheckFailed;
    }
    if (!l.skewed.empty()) {
        // Nodes of releases further apart than one protocol: the same
        // failure on any node, the fix the admin's, no node to blame.
        std::string who;
        for (const auto& s : l.skewed) who += (who.empty() ? "" : "; ") + s;
        rep.skew = who + "; this one, rank 0's, speaks protocol " + std::to_string(spoken_protocol()) + " (mn-nccl " +
                   release() + ")";
        rep.problems.insert(rep.problems.begin(),
                            "mn-preflight releases differ: " + rep.skew +
                                ": install one mn-nccl release on every node of the step and in every container "
                                "image (adjacent releases check together: README, Upgrading)");
        rep.code = kUsage;
        excuse_timeouts(rep);
    }
    // Strangers at the ring's data ports and at the nodes' doors: a note,
    // and a time-out they were there for is theirs (a failed link, weigh's).
    std::string doors;
    for (const auto& [speaker, seen] : l.hub.door_strangers())
        doors += (doors.empty() ? "" : "; ") + l.who(speaker) + ": " + seen;
    const std::string ring = ring_strangers(l);
    std::vector<std::string> seen_at;
    if (!ring.empty()) seen_at.push_back("strangers at the data ports during the all-reduce: " + ring);
    if (!doors.empty()) seen_at.push_back("strangers at the nodes' doors: " + doors);
    for (const std::string& who : seen_at) {
        if (rep.disturbed != who) rep.notes.push_back(who);
        if (rep.code == kTimeout && rep.disturbed.empty()) rep.disturbed = who;
        excuse_timeouts(rep);
    }
    if (l.strangers.total == 0) return;
    std::string who = l.strangers.summary() + " at MASTER_PORT " + st.self.master + ":" +
                      std::to_string(st.self.port) + ", without this step's secret";
    // A rank that gave up knocking while rank 0 was not running left such a
    // connection too: then they are not what ran the check out of time.
    const bool paused = l.hub.own_pause().has_value();
    if (paused) who += " (rank 0 itself was not running a while: ranks that gave up knocking meanwhile look so)";
    rep.notes.push_back("strangers: " + who);
    if (rep.code == kTimeout && rep.disturbed.empty() && !paused) rep.disturbed = who;
    excuse_timeouts(rep);
}

}  // namespace

int verdict(Step& st, Lead& l) {
    PreflightReport& rep = l.rep;
    l.enter(msg::Stage::Verdict);
    // What the ranks sent is read first: if they ended the check while this
    // process was stopped (a Superseded), their verdict stands, not this one.
    l.hub.settle();
    weigh(st, l);
    rep.min_busbw = st.o.min_busbw;
    rep.elapsed = now_s() - st.start;
    judge(rep);
    fail_closed(st, l);
    mark_done();
    std::string out;
    if (!st.o.json) {
        out = report_table(rep);
    } else {
        // The control plane's own cost, inside the JSON object (doc/scale.md).
        Json j = report_object(rep);
        l.cost.mark("verdict", st.start);
        j["control"] = l.cost.json(st.start);
        out = json_line(j);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    remember(st, l);
    // Done after a pass; stop otherwise, so a rank inside NCCL (waiting on
    // a failed one) leaves it now rather than at its watchdog.
    const std::string why = rep.problems.empty() ? "check failed" : rep.problems.front();
    l.tell_all(msg::Word{rep.code == kPass, rep.code, why}, Deadline::in(1));
    // Rank 0's own work may still be inside NCCL: abort it; the process
    // ends with the verdict either way. (A TCP transfer has nothing to
    // abort: the process just ends.)
    if (l.own_work_running()) {
        if (l.gpu_path) gpu::abort_nccl();
        for (int i = 0; l.gpu_path && i < 200 && l.own_work_running(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (l.own_work_running()) {
            std::fflush(stderr);
            _exit(rep.code);
        }
    }
    return rep.code;
}

}  // namespace mn::check
