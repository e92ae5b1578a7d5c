// SPDX-License-Identifier: Apache-2.0
#include "lib/check/watch_verdict.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mn {
namespace {

bool is_link(const WatchReport& r) { return r.kind == "link down"; }

// One subject: a link by the node named; a process by its host and pid.
bool same_subject(const WatchReport& a, const WatchReport& b) {
    if (is_link(a) || is_link(b)) return is_link(a) && is_link(b) && a.host == b.host;
    return a.host == b.host && a.pid == b.pid && a.kind == b.kind;
}

void add_once(std::vector<std::string>& to, const std::vector<std::string>& from) {
    for (const auto& x : from)
        if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
}

// `into` takes what `r` adds: another watcher that saw it, its evidence.
void fold(WatchReport& into, const WatchReport& r) {
    // A node's own report of its link (its program, its interface) leads:
    // it names the rank and the interface; the others say who else saw it.
    if (r.pid != 0 && into.pid == 0) {
        WatchReport lead = r;
        add_once(lead.evidence, into.evidence);
        add_once(lead.dumps, into.dumps);
        lead.seen_from = into.seen_from;
        lead.host_evidence = into.host_evidence || r.host_evidence;
        if (lead.excluded.empty() || into.host_evidence) lead.excluded = into.excluded;
        into = lead;
        return;
    }
    add_once(into.evidence, r.evidence);
    add_once(into.dumps, r.dumps);
    if (!r.seen_from.empty() && into.seen_from.find(r.seen_from) == std::string::npos)
        into.seen_from += (into.seen_from.empty() ? "" : ", ") + r.seen_from;
    if (r.host_evidence && !into.host_evidence) into.excluded = r.excluded;
    into.host_evidence = into.host_evidence || r.host_evidence;
}

}  // namespace

std::vector<WatchReport> merge_reports(const std::vector<WatchReport>& reports) {
    std::vector<WatchReport> out;
    for (const auto& r : reports) {
        auto at = std::find_if(out.begin(), out.end(), [&](const WatchReport& o) { return same_subject(o, r); });
        if (at == out.end()) out.push_back(r);
        else fold(*at, r);
    }
    return out;
}

std::string watch_verdict_text(const std::vector<WatchReport>& subjects) {
    std::string out;
    for (const auto& r : subjects) out += watch_report_text(r);
    return out;
}

}  // namespace mn
