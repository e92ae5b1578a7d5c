// SPDX-License-Identifier: Apache-2.0
// mn-preflight's check, phase by phase (helper/check/*.cc: rendezvous,
// readiness, collective, pairs, verdict; helper/check/step.h holds every
// rank's state and each phase's budget, lead.h rank 0's): the harness
// that steps them. The prolog check is helper/check/prolog.cc.
#include "helper/check.h"

#include <cstdio>

#include "helper/check/lead.h"

namespace mn {

using namespace check;

namespace {

// After a rank's phase failed: rank 0's word (done or stop) ends it.
int await_verdict(Step& st, Follower& f) {
    return f.until_word(st.self, st.end, "waiting for rank 0's verdict", "no verdict from rank 0",
                        [](const msg::FromLead&) { return true; });
}

int follow(Step& st) {
    Follower f;
    if (!join(st, f)) return f.code;
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

}  // namespace mn
