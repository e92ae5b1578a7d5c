// SPDX-License-Identifier: Apache-2.0
#include "helper/watch_plane.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "helper/check/control/doorway.h"
#include "helper/check/control/messages.h"
#include "helper/wire.h"

namespace mn {

namespace msg = check::msg;

namespace {

msg::Finding finding_of(const WatchReport& r) {
    return msg::Finding{r.kind,   r.host,     r.rank,  r.local_rank, static_cast<uint32_t>(r.pid),
                        r.comm,   r.seen_from, r.detail, r.evidence,  r.dumps,
                        r.excluded, r.host_evidence};
}

WatchReport report_of(const msg::Finding& f) {
    WatchReport r;
    r.kind = f.kind;
    r.host = f.host;
    r.rank = f.rank;
    r.local_rank = f.local_rank;
    r.pid = static_cast<int>(f.pid);
    r.comm = f.comm;
    r.seen_from = f.seen_from;
    r.detail = f.detail;
    r.evidence = f.evidence;
    r.dumps = f.dumps;
    r.excluded = f.excluded;
    r.host_evidence = f.host_evidence;
    return r;
}

msg::Position position_msg(const RankPosition& p) {
    msg::Position m{p.host, p.rank, p.local_rank, p.comm, p.gpu, static_cast<uint32_t>(p.pid), p.still, p.cpu, {}, std::nullopt, std::nullopt};
    for (const FlightGroup& g : p.flight.groups)
    {
        m.groups.push_back({g.id, g.desc, g.enqueued, g.started, g.completed, g.waiting_seq, g.waiting_op,
                            g.waiting_state, g.waiting_input, {}});
        for (const FlightCall& c : g.recent) m.groups.back().recent.push_back({c.seq, c.op, c.input, c.state});
    }
    if (!p.gpu_events.empty()) m.gpu_events = p.gpu_events;
    if (!p.dump.empty()) m.dump = p.dump;
    return m;
}

RankPosition position_of(const msg::Position& m) {
    RankPosition p;
    p.host = m.host;
    p.rank = m.rank;
    p.local_rank = m.local_rank;
    p.comm = m.comm;
    p.gpu = m.gpu;
    p.pid = static_cast<int>(m.pid);
    p.still = m.still;
    p.cpu = m.cpu;
    if (m.gpu_events) p.gpu_events = *m.gpu_events;
    if (m.dump) p.dump = *m.dump;
    for (const msg::GroupPosition& g : m.groups) {
        FlightGroup f;
        f.id = g.id;
        f.desc = g.desc;
        f.enqueued = g.enqueued;
        f.started = g.started;
        f.completed = g.completed;
        f.waiting_seq = g.waiting_seq;
        f.waiting_op = g.waiting_op;
        f.waiting_state = g.waiting_state;
        f.waiting_input = g.waiting_input;
        for (const msg::CallPosition& c : g.recent) f.recent.push_back({c.seq, c.op, c.input, c.state});
        p.flight.groups.push_back(f);
    }
    return p;
}

}  // namespace

struct WatchDoor::State {
    wire::Fd listen;
    std::unique_ptr<check::Doorway> door;
    uint32_t world = 1;
    std::atomic<bool> stop{false};
    std::thread thread;
    std::mutex mu;
    std::vector<WatchReport> came;  // guarded by mu
    std::vector<RankPosition> positions;  // guarded by mu
    std::string strangers;          // the doorway's summary, taken when it closes
    unsigned garbled = 0;           // guarded by mu: proven, but no finding in what it sent

    void run() {
        auto want = [this](const std::string& purpose, uint32_t rank) {
            return purpose == "watch" && rank > 0 && rank < world;
        };
        while (!stop.load()) {
            std::vector<check::Guest> guests = door->turn(0.25, want);
            std::lock_guard<std::mutex> g(mu);
            for (const check::Guest& guest : guests) {
                if (auto f = msg::decode<msg::Finding>(guest.first)) came.push_back(report_of(f.value()));
                else if (auto p = msg::decode<msg::Position>(guest.first); p && positions.size() < (1u << 16))
                    positions.push_back(position_of(p.value()));
                else if (!p) ++garbled;
            }
        }
    }
};

Outcome<std::unique_ptr<WatchDoor>> WatchDoor::open(uint16_t port, const std::string& secret, uint32_t world) {
    uint16_t bound = 0;
    auto fd = wire::listen_tcp("", port, &bound);
    if (!fd) return fd.problem();
    auto st = std::make_shared<State>();
    st->listen = std::move(fd.value());
    st->world = world;
    st->door = std::make_unique<check::Doorway>(st->listen.get(), secret, 0, true);
    try {
        st->thread = std::thread([st] { st->run(); });
    } catch (const std::system_error& e) {
        return Problem{std::string("cannot start the thread of rank 0's watch port: ") + e.what(),
                       "each node's watch says its own block"};
    }
    return std::unique_ptr<WatchDoor>(new WatchDoor(st));
}

WatchDoor::~WatchDoor() { close(); }

void WatchDoor::close() {
    st_->stop.store(true);
    if (st_->thread.joinable()) st_->thread.join();
    if (st_->door) st_->strangers = st_->door->strangers().summary();
    st_->door.reset();
    st_->listen = wire::Fd();
}

std::vector<WatchReport> WatchDoor::take() {
    std::lock_guard<std::mutex> g(st_->mu);
    std::vector<WatchReport> out;
    out.swap(st_->came);
    return out;
}

std::vector<RankPosition> WatchDoor::take_positions() {
    std::lock_guard<std::mutex> g(st_->mu);
    std::vector<RankPosition> out;
    out.swap(st_->positions);
    return out;
}

std::string WatchDoor::strangers() {
    std::lock_guard<std::mutex> g(st_->mu);
    std::string out = st_->strangers;
    if (st_->garbled)
        out += (out.empty() ? "" : "; ") + std::to_string(st_->garbled) +
               " proved the step secret but sent no finding or position this build reads (another release?)";
    return out;
}

std::string tell_rank0(const std::string& addr, uint16_t port, uint32_t rank, const WatchReport& r,
                       const std::string& secret, double wait) {
    auto c = check::knock(addr, port, "watch", rank, 0u, msg::encode(finding_of(r)), secret,
                          wire::Deadline::in(wait));
    return c ? "" : c.problem().text();
}

std::string tell_rank0(const std::string& addr, uint16_t port, uint32_t rank, const RankPosition& p,
                       const std::string& secret, double wait) {
    auto c = check::knock(addr, port, "watch", rank, 0u, msg::encode(position_msg(p)), secret,
                          wire::Deadline::in(wait));
    return c ? "" : c.problem().text();
}

}  // namespace mn
