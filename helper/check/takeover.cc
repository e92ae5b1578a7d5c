// SPDX-License-Identifier: Apache-2.0
// Rank 0 lost (its process ended, it stopped answering, or it sent what
// does not decode): the check still ends within seconds, with a verdict.
// Every other rank reports to the standbys of rank 0's roster (ranks 1 to
// kStandbys) in order; the lowest that answers takes the reports for a
// moment, prints the table naming rank 0's node, and tells the others its
// word. Each rank then leaves rank 0 a Superseded on its control
// connection, so that a rank 0 that was only stopped (SIGSTOP) ends
// quietly when it resumes rather than giving a second verdict.
#include <cstdio>
#include <string>
#include <vector>

#include "helper/check/lead.h"
#include "helper/check/ring.h"
#include "lib/plan/hostlist.h"

namespace mn::check {
namespace {

// How long a standby takes reports: the others noticed rank 0's loss at
// about the same time (its heartbeats stopped for all at once).
constexpr double kReportWindow = 1.5;

void say(const Standin& me, const std::string& text) {
    std::fprintf(stderr, "mn-preflight: %s rank %u: %s\n", me.self.label.c_str(), me.self.rank, text.c_str());
}

// Reports to standby s; its word, or none when it does not take over
// (gone, stopped, or not a standby after all). Its Welcome says it takes
// the report; the word follows on the same sealed connection.
std::optional<msg::Word> report_to(const Standin& me, const msg::Standby& s) {
    // A stopped standby's kernel accepts the connection, but nobody answers.
    auto c = knock(s.addr, s.port, "takeover", me.self.rank, s.rank, msg::encode(msg::TakeoverReport{me.hello}),
                   me.self.secret, Deadline::in(2));
    if (!c) return std::nullopt;
    std::string err;
    auto w = wire::recv_msg(c->fd.get(), Deadline::in(kReportWindow + 2.5), &err, c->seal.get());
    auto word = w ? msg::decode_word(*w) : Outcome<msg::Word>(Problem{err, ""});
    if (!word) return std::nullopt;
    return word.value();
}

// The standby's side: reports from the others, until every rank but 0 is
// in or the window closes. Each connection carries the word later.
void take_reports(const Standin& me, Lead& l, std::vector<bool>& have) {
    const uint32_t world = me.self.world;
    uint32_t count = 0;
    for (bool h : have) count += h;
    const Deadline window = Deadline::in(kReportWindow);
    Doorway door(me.standby_fd, me.self.secret, me.self.rank, true);
    auto wanted = [&](const std::string& purpose, uint32_t r) {
        return purpose == "takeover" && r > 0 && r < world && !have[r];
    };
    while (count < world && !window.passed()) {
        for (Guest& g : door.turn(std::min(0.05, std::max(0.0, window.left())), wanted)) {
            auto report = msg::decode_takeover_report(g.first);
            if (!report || report->hello.rank != g.rank) {
                say(me, "refused a report from " + g.peer + " (its report does not name the rank it proved)");
                continue;
            }
            l.members[g.rank].hello = report->hello;
            l.members[g.rank].ctl = Line(std::move(g.fd), std::move(g.seal));
            have[g.rank] = true;
            ++count;
        }
    }
    // Every rank came: whoever still waits at the door, or in its backlog,
    // is a stranger that held a connection (as at a data port). Else they
    // may be a rank still knocking: not counted.
    Strangers seen;
    if (count == world) {
        door.close_waiting();
        seen.merge(take_waiting(me.standby_fd));
    }
    seen.merge(door.strangers());
    // In the verdict too: ranks that did not report may have met them.
    if (const std::string s = seen.brief(); !s.empty()) {
        say(me, "strangers at its standby port: " + s);
        l.rep.notes.push_back("strangers at rank " + std::to_string(me.self.rank) + "'s standby port: " + s);
    }
}

// The verdict in rank 0's place: rank 0's node is at fault, every rank
// that reported was stopped by it; ranks that did not report are named.
[[noreturn]] void lead_in_place(const Standin& me, const msg::Roster& roster, const std::string& loss, Line& ctl,
                               const NodeWord& tell_node) {
    const uint32_t world = me.self.world;
    say(me, "gives the verdict in rank 0's place");
    Step st;
    st.o = me.o;
    st.self = me.self;
    st.start = me.start;
    Lead l;
    l.members.resize(world);
    std::vector<bool> have(world, false);
    l.members[0].hello = roster.lead;
    l.members[me.self.rank].hello = me.hello;
    have[0] = have[me.self.rank] = true;
    take_reports(me, l, have);
    place_nodes(l, have);
    std::vector<uint32_t> missing;
    for (uint32_t r = 0; r < world; ++r) {
        if (!have[r]) {
            missing.push_back(r);
            continue;
        }
        RankEvidence e;
        e.rank = r;
        e.node = l.members[r].node_index;
        e.state = r == 0 ? RankState::Fault : RankState::Stopped;
        e.error = r == 0 ? loss : "";
        l.evidence.push_back(e);
    }
    l.rep.notes.push_back("rank 0 was lost; rank " + std::to_string(me.self.rank) + " (" + me.hello.label +
                          ") gave this verdict in its place");
    if (!missing.empty())
        l.rep.notes.push_back((missing.size() == 1 ? "rank " : "ranks ") + rank_ranges(missing) +
                              " did not report to rank " + std::to_string(me.self.rank) + " either");
    l.phase = "rank 0 lost";
    const int code = verdict(st, l);
    if (tell_node)
        tell_node({false, code, "rank " + std::to_string(me.self.rank) + " (" + me.hello.label +
                                    ") gave the verdict in rank 0's place"});
    ctl.send(msg::Superseded{me.self.rank, me.hello.label, code}, Deadline::in(0.5));
    end_now(code);
}

// Rank 0's node before its roster names it: Slurm puts rank 0 on the
// step's first node.
std::string first_node() {
    const char* v = std::getenv("SLURM_STEP_NODELIST");
    auto hosts = Hostlist::parse(v ? v : "");
    return hosts && hosts->size() > 0 ? (*hosts)[0] : "?";
}

}  // namespace

[[noreturn]] void take_over(const Standin& me, const std::optional<msg::Roster>& roster, const std::string& loss,
                            Line& ctl, const NodeWord& tell_node) {
    if (me.via_speaker) {
        // Its speaker is lost, not rank 0 (which names the speaker), or the
        // speaker went to the standbys itself: either way no verdict is this
        // rank's to give or to take.
        say(me, "its node's leader (LOCAL_RANK 0), its way to rank 0: " + loss +
                    "; the verdict names the leader, and this rank ends");
        end_now(kCheckFailed);
    }
    say(me, "rank 0 (" + (roster ? roster->lead.label : first_node()) + "): " + loss);
    if (!roster) {
        say(me, "rank 0 was lost before it named the standbys (the rendezvous was not over): no verdict; this rank ends");
        end_now(kCheckFailed);
    }
    bool standby = false;
    std::vector<uint32_t> asked;
    for (const auto& s : roster->standbys) {
        if (s.rank == me.self.rank) standby = true;
        if (s.rank >= me.self.rank) continue;
        asked.push_back(s.rank);
        if (auto w = report_to(me, s)) {
            say(me, "stopped by rank " + std::to_string(s.rank) + " (" + s.label + "), which gave the verdict (" +
                        w->why + ")");
            // This node's ranks reported to nobody: they end with the word.
            if (tell_node) tell_node(*w);
            ctl.send(msg::Superseded{s.rank, s.label, w->code}, Deadline::in(0.5));
            end_now(w->code);
        }
    }
    if (standby) lead_in_place(me, *roster, loss, ctl, tell_node);
    say(me, "no standby (" + std::string(asked.size() == 1 ? "rank " : "ranks ") + rank_ranges(asked) +
                ") gave a verdict; this rank ends");
    end_now(kCheckFailed);
}

}  // namespace mn::check
