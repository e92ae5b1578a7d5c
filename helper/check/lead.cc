// SPDX-License-Identifier: Apache-2.0
// Rank 0's membership and its words to the ranks (lead.h): who speaks for
// whom (Member::via), what a rank's loss does (Lead::lose), where rank 0
// is (Lead::enter), and what the control plane cost.
#include "helper/check/lead.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "lib/util/json.h"
#include "lib/util/text.h"

namespace mn::check {

std::string Lead::who(uint32_t rank) const {
    std::string label;
    if (rank < members.size() && !members[rank].hello.label.empty()) label = members[rank].hello.label + " ";
    return label + "rank " + std::to_string(rank);
}

void Lead::note(uint32_t rank, RankState s, const std::string& error) {
    if (evidence.size() < members.size()) {
        evidence.resize(members.size());
        for (uint32_t r = 0; r < members.size(); ++r) {
            evidence[r].rank = r;
            evidence[r].node = members[r].node_index;
        }
    }
    evidence[rank].state = s;
    evidence[rank].error = error;
}

namespace {

// A speaker's Relay of `parts`, sealed on its line (a Plan per rank at 8
// ranks a node is far below one message's limit).
void relay(Line& line, std::vector<msg::RelayPart>& parts, const Deadline& d) {
    line.send_batched<msg::Relay>(parts, d,
                                  [](const msg::RelayPart& p) { return p.body.bytes.size() + 8 * p.to.size() + 16; });
}

}  // namespace

void Lead::tell_same(const wire::Body& body, const Deadline& d) {
    std::map<uint32_t, std::vector<uint32_t>> by_speaker;
    for (uint32_t r = 1; r < members.size(); ++r)
        if (members[r].via) by_speaker[*members[r].via].push_back(r);
    for (uint32_t r = 1; r < members.size(); ++r)
        if (!members[r].via && members[r].ctl && !by_speaker.count(r)) members[r].ctl.send_fields(body, d);
    for (auto& [speaker, to] : by_speaker) {
        to.insert(to.begin(), speaker);
        std::vector<msg::RelayPart> parts{{std::move(to), {body}}};
        relay(members[speaker].ctl, parts, d);
    }
}

void Lead::tell_bodies(const std::vector<std::pair<uint32_t, wire::Body>>& each, const Deadline& d) {
    std::map<uint32_t, std::vector<msg::RelayPart>> by_speaker;
    for (const auto& [r, body] : each)
        if (r < members.size() && members[r].via) by_speaker[*members[r].via].push_back({{r}, {body}});
    for (const auto& [r, body] : each) {
        if (r == 0 || r >= members.size() || members[r].via) continue;
        if (auto it = by_speaker.find(r); it != by_speaker.end()) it->second.insert(it->second.begin(), {{r}, {body}});
        else if (members[r].ctl) members[r].ctl.send_fields(body, d);
    }
    for (auto& [speaker, parts] : by_speaker) relay(members[speaker].ctl, parts, d);
}

void Lead::stop_the_rest() {
    for (uint32_t r = 0; r < members.size(); ++r)
        if (r >= evidence.size() || evidence[r].state == RankState::Done) note(r, RankState::Stopped, "");
}

std::optional<Heard> Lead::hear(const Deadline& d) {
    while (auto h = hub.next(d)) {
        if (h->via != 0 && !h->joined && (h->rank >= members.size() || members[h->rank].via != h->via))
            continue;  // carried by a rank that does not speak for it
        if (h->via == 0 && !h->msg)
            for (uint32_t m = 1; m < members.size(); ++m)
                if (members[m].via == h->rank) h->carried.push_back(m);
        return h;
    }
    return std::nullopt;
}

bool Lead::past(const Deadline& until) {
    if (pulse_.skipped(1.0)) grace_end_ = now_s() + kPauseGrace;
    return until.passed() && now_s() >= grace_end_;
}

std::string Lead::own_pause_words() const {
    const auto p = hub.own_pause();
    return p ? "; rank 0 itself was " + pause_words(*p) : "";
}

void Lead::enter(msg::Stage s) {
    stage_ = s;
    pulse_ = Pulse();
    hub.stage(s);
    if (s == msg::Stage::Verdict) return;
    phase = msg::stage_word(s);
    set_phase(phase);
}

Reply Lead::lose(const Heard& h, const std::vector<bool>& waiting) {
    const msg::Stage s = stage_;
    const bool owed = waiting[h.rank];
    const bool carried_owed =
        std::any_of(h.carried.begin(), h.carried.end(), [&](uint32_t m) { return m < waiting.size() && waiting[m]; });
    if (s == msg::Stage::Collective && !owed && !carried_owed) return Reply::Ignored;
    if (h.after_pause) {
        const OwnPause& p = *h.after_pause;
        const std::string pause = pause_words(p) + " in " + msg::stage_name(s);
        rep.notes.push_back(who(h.rank) + ": ended while rank 0 was " + pause + " (a rank gives up on rank 0 after " +
                            num(kSilence, -1) + " s without a word from it): not its fault");
        note(h.rank, RankState::Stopped, "");
        if (pause_kind(p) == PauseKind::Stopped) {
            note(0, RankState::Fault, pause + "; the ranks waiting for it gave up");
        } else if (rep.disturbed.empty()) {
            rep.disturbed = who(0) + ": " + pause + "; the ranks waiting for it gave up";
            rep.disturbed_by = "load";
        }
    } else {
        note(h.rank, RankState::Fault, loss_words(h.gone, h.error, s));
    }
    if (s == msg::Stage::Rendezvous) {
        // `waiting`: the ranks not yet come, named apart (lost_in_rendezvous).
        for (uint32_t r = 0; r < waiting.size(); ++r)
            if (!waiting[r] && r != h.rank && (r >= evidence.size() || evidence[r].state == RankState::Done))
                note(r, RankState::Stopped, "");
        return Reply::Stop;
    }
    if (s != msg::Stage::Collective || !owed) stop_the_rest();
    return Reply::Stop;
}

std::vector<std::string> Lead::hosts() const {
    std::vector<std::string> out;
    for (const auto& n : rep.nodes) out.push_back(n.host);
    return out;
}

bool Lead::own_work_running() const {
    auto running = [](const auto& f) {
        return f.valid() && f.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    };
    return running(own) || running(own_pair) || running(own_ready) || running(own_retest);
}

std::vector<std::vector<GpuFinding>> Lead::gpu_findings_by_node() const {
    std::map<std::string, std::set<unsigned>> by_host;
    for (const auto& m : members) by_host[m.hello.host].insert(m.hello.pid);
    std::vector<const std::set<unsigned>*> ours(rep.nodes.size(), nullptr);
    for (std::size_t i = 0; i < rep.nodes.size(); ++i)
        if (!rep.nodes[i].ranks.empty()) ours[i] = &by_host[members[rep.nodes[i].ranks.front()].hello.host];
    return gpu_findings(hosts(), node_health, ours);
}

// ---- the control plane's cost ----------------------------------------------

namespace {

// This process's open sockets (its control connections and listeners).
unsigned open_sockets() {
    unsigned n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (const dirent* e = readdir(d)) {
            struct stat sb {};
            if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &sb, 0) == 0 && S_ISSOCK(sb.st_mode)) ++n;
        }
        closedir(d);
    }
    return n;
}

}  // namespace

Json ControlCost::json(double start) const {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    const wire::Traffic t = wire::traffic();
    Json by_kind = Json::object();
    for (const auto& [kind, n] : control_messages_by_kind()) by_kind[kind] = n;
    Json phases = Json::object();
    double prev = 0;
    for (const auto& [phase, end] : marks) {
        phases[json_text(phase)] = json_rounded(end - prev, 4);
        prev = end;
    }
    return {{"phases_s", std::move(phases)},
            {"start_unix", json_rounded(start_unix, 6)},
            {"elapsed_s", json_rounded(now_s() - start, 4)},
            {"accepted", accepted},
            {"sockets", open_sockets()},
            {"messages_sent", t.messages_sent},
            {"messages_received", t.messages_received},
            {"bytes_sent", t.bytes_sent},
            {"bytes_received", t.bytes_received},
            {"cpu_s", json_rounded(cpu, 4)},
            {"max_rss_kib", ru.ru_maxrss},
            {"messages_by_kind", by_kind}};
}

}  // namespace mn::check
