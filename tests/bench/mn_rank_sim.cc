// SPDX-License-Identifier: Apache-2.0
// mn-rank-sim: rank 0's control plane at scale beyond one host's processes
// (issue 29, item 2; doc/scale.md). Starts a real rank 0 (mn-preflight,
// CPU path, the step's variables set as the plugin sets them) and plays
// ranks 1..N-1 in this one process over the real protocol: the doorway's
// handshake under the real step secret, sealed CBOR messages, heartbeats
// every beat period (helper/check/step.h; none within half a period of
// another message, as a rank's), Ready and Result answers. One thread, epoll.
// Above the gathering bound (helper/check/step.h, kGatherAbove) each node
// but rank 0's speaks through its leader, as mn-preflight's ranks do
// (helper/check/node.cc): the leader's socket is played to rank 0, its
// node's other ranks inside it (their hellos and answers go up in its
// Relayed, rank 0's words to them come in its Relay, a silent one is
// reported gone kSilence after its last word, as the leader would), since
// on a cluster their traffic never reaches rank 0's host.
//
//   mn-rank-sim --preflight BIN --ranks N [--tasks-per-node T] [--timeout S]
//               [--silent K] [--slow K --delay S] [--flood C] [--quiet-above Q]
//               [--gather-above G] [--json]
//
//   --silent K   K ranks (spread over the step) stop answering once they
//                have said hello: no beats, no answers (a stopped process)
//   --slow K     K ranks answer readiness and the all-reduce --delay S late
//   --flood C    C strangers connect to MASTER_PORT during the rendezvous
//                (half say nothing, half send bytes that prove no secret)
//   --quiet-above Q  the rendezvous is quiet above Q ranks, not 4,096 (rank 0
//                gets the test hook MN_PREFLIGHT_QUIET_ABOVE): the quiet
//                rendezvous played with few ranks, where a loaded machine
//                keeps up
//   --gather-above G  ranks gather at their node's leader above G ranks, not
//                1,024 (rank 0 gets MN_PREFLIGHT_GATHER_ABOVE)
//
// Rank 0's own share of the all-reduce is the test hook
// MN_PREFLIGHT_SIM_SHARE's (nothing here runs a data path), so the build
// must have --enable-test-hooks (scripts/build.sh). Pair tests are off
// (--no-pairs): they are data, not control.
//
// Prints one line: the verdict, rank 0's phases and cost from its --json
// "control" object, this process's CPU, and for --silent the time from the
// silent ranks' last word to the stop word naming them, and how many
// healthy ranks the verdict named. Exit 0 when the verdict is what the mode
// expects (PASS; FAIL naming every silent rank and no other).
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "helper/check/control/doorway.h"
#include "helper/check/control/messages.h"
#include "helper/wire.h"
#include "lib/fabric/fabric.h"
#include "lib/fabric/verbs.h"
#include "lib/plan/step_plan.h"

using namespace mn;
using namespace mn::check;
using Json = nlohmann::json;

namespace {

double now_s() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

double cpu_s(int who) {
    rusage ru{};
    getrusage(who, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

// As helper/check/step.h's beat_period and quiet_rendezvous.
double beat_period(uint32_t world) { return world > 4096 ? 1.0 : 0.5; }
uint32_t g_quiet_above = 4096;
bool quiet_rendezvous(uint32_t world) { return world > g_quiet_above; }
constexpr double kSilence = 3.0;  // as step.h's
constexpr std::size_t kMaxHandshakes = 200;  // below the doorway's fewest cap of callers at once (256 at 1,024 open files)

struct Options {
    std::string preflight;
    uint32_t ranks = 64, tasks = 8;
    double timeout = 30;
    uint32_t silent = 0, slow = 0, flood = 0, quiet_above = 4096, gather_above = 1024;
    double delay = 0.5;
    bool json = false;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "mn-rank-sim: %s\nusage: mn-rank-sim --preflight BIN --ranks N [--tasks-per-node T] [--timeout S] "
                 "[--silent K] [--slow K --delay S] [--flood C] [--quiet-above Q] [--gather-above G] [--json]\n",
                 why.c_str());
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--preflight") o.preflight = val();
        else if (a == "--ranks") o.ranks = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--tasks-per-node") o.tasks = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--timeout") o.timeout = std::stod(val());
        else if (a == "--silent") o.silent = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--slow") o.slow = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--delay") o.delay = std::stod(val());
        else if (a == "--flood") o.flood = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--quiet-above") o.quiet_above = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--gather-above") o.gather_above = static_cast<uint32_t>(std::stoul(val()));
        else if (a == "--json") o.json = true;
        else usage("unknown argument " + a);
    }
    if (o.preflight.empty()) usage("--preflight BIN is needed");
    if (o.ranks < 2 || o.tasks == 0) usage("--ranks must be 2 or more, --tasks-per-node 1 or more");
    if (o.silent + o.slow >= o.ranks) usage("--silent and --slow leave no healthy rank");
    return o;
}

// What this host's ranks say of their fabric, as rendezvous.cc's
// local_facts finds it: the same for every simulated node as for rank 0.
FabricSignature local_sig(const std::string& master, std::string* ifname) {
    FabricSignature sig;
    auto choice = choose_fabric(discover_ports(sysfs_root(process_env(), SiteConfig{})), Mode::Auto);
    if (!choice) {
        sig.fabric = "?";
    } else {
        sig.fabric = choice->fabric;
        unsigned mtu = 0;
        for (const auto& v : choice->ports) {
            if (!v.chosen) continue;
            sig.hcas += (sig.hcas.empty() ? "" : ",") + v.port.name();
            sig.rate_gbps = std::max(sig.rate_gbps, v.port.rate_gbps);
            if (v.port.mtu && (!mtu || v.port.mtu < mtu)) mtu = v.port.mtu;
        }
        sig.mtu = mtu;
    }
    *ifname = interface_towards(master, SystemNetwork{});
    if (sig.fabric == "socket" && !ifname->empty()) {
        int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ifreq ifr{};
        std::strncpy(ifr.ifr_name, ifname->c_str(), IFNAMSIZ - 1);
        if (s >= 0 && ioctl(s, SIOCGIFMTU, &ifr) == 0) sig.mtu = static_cast<unsigned>(ifr.ifr_mtu);
        if (s >= 0) ::close(s);
    }
    return sig;
}

// This host's software as a node's first task sends it with readiness:
// mn-preflight discover's own reading.
std::string host_fingerprint(const std::string& bin) {
    std::string out;
    if (FILE* p = popen(("'" + bin + "' discover --json 2>/dev/null").c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        pclose(p);
    }
    auto j = Json::parse(out, nullptr, false);
    return j.is_object() && j.contains("fingerprint") && j["fingerprint"].is_string() ? j["fingerprint"].get<std::string>()
                                                                                     : "";
}

uint16_t free_port() {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        std::perror("mn-rank-sim: a free port");
        std::exit(1);
    }
    ::close(s);
    return ntohs(sa.sin_port);
}

enum class State { Connecting, Challenged, Knocked, Joined, Done, Failed };

struct Rank {
    uint32_t rank = 0;
    int fd = -1;
    State state = State::Connecting;
    std::string in, out;
    std::shared_ptr<wire::Seal> seal;
    msg::Stage stage = msg::Stage::Rendezvous;
    bool silent = false, slow = false, stranger = false;
    double next_beat = 0, quiet_since = 0, sent_at = 0;
    bool rostered = false;  // rank 0's roster came: the rendezvous is over
    double rostered_at = 0;
    // Answers a slow rank owes, and when.
    std::vector<std::pair<double, msg::FromRank>> owed;
    std::string error;
    // Through a node's leader: a rank played inside its leader (no socket
    // of its own); a leader's parts for rank 0's next Relayed.
    bool member = false, reported = false;
    uint32_t leader = 0;
    std::vector<msg::Carried> up;
};

class Sim {
public:
    explicit Sim(const Options& o) : o_(o) {}
    int run();

private:
    bool start_rank0();
    void open(Rank& r);
    void want_out(Rank& r, bool on);
    void flush(Rank& r);
    void send(Rank& r, const msg::FromRank& m);
    void on_readable(Rank& r);
    void take_frames(Rank& r);
    void take(Rank& r, const wire::Body& body);
    void take_word(Rank& r, const msg::FromLead& m);
    void answer(Rank& r, msg::FromRank m);
    void send_now(Rank& r, const msg::FromRank& m);
    void relay_up(Rank& leader);
    bool gathering() const { return o_.ranks > o_.gather_above && o_.tasks > 1; }
    void fail(Rank& r, const std::string& why);
    void close(Rank& r);
    msg::Hello hello_of(uint32_t rank) const;
    const wire::Body& body_of(const msg::FromRank& m);
    // Every rank's hello, encoded before rank 0 starts, as a rank fills its
    // own before it connects; the answers that are alike, encoded once.
    std::vector<wire::Body> hellos_;
    std::map<int, wire::Body> alike_;

    Options o_;
    std::string secret_, master_ = "127.0.0.1", ifname_, fingerprint_, out_path_, err_path_;
    uint16_t port_ = 0;
    FabricSignature sig_;
    std::vector<Rank> ranks_;  // [0] unused; strangers after the ranks
    int ep_ = -1;
    pid_t rank0_ = -1;
    double t0_ = 0;
    std::size_t handshakes_ = 0;
    std::deque<uint32_t> to_open_;
    uint32_t joined_ = 0, words_ = 0;
    double first_word_ = 0, silent_at_ = 0;
    std::string stop_why_;
    int word_code_ = -1;
    uint64_t sim_msgs_in_ = 0, sim_msgs_out_ = 0;
    double beat_late_ = 0;  // the latest this process sent a rank's beat, seconds
};

msg::Hello Sim::hello_of(uint32_t rank) const {
    msg::Hello h;
    h.rank = rank;
    h.node = rank / o_.tasks;
    h.label = "sim-node" + std::to_string(h.node);
    h.slurm_node = h.label;
    h.host = h.label;
    h.pid = static_cast<unsigned>(getpid());
    h.gpu_ok = false;
    h.gpu_why = "no GPU (mn-rank-sim)";
    h.lanes = 1;
    h.data_addr = master_;
    h.data_port = 9;  // nothing connects: rank 0's share is simulated, pairs are off
    h.standby_port = 9;
    h.sig = sig_;
    h.ifname = ifname_;
    return h;
}

bool Sim::start_rank0() {
    char out_tmpl[] = "/tmp/mn-rank-sim.out.XXXXXX", err_tmpl[] = "/tmp/mn-rank-sim.err.XXXXXX";
    int out = mkstemp(out_tmpl), err = mkstemp(err_tmpl);
    if (out < 0 || err < 0) return false;
    out_path_ = out_tmpl;
    err_path_ = err_tmpl;
    const std::string timeout = std::to_string(o_.timeout);
    rank0_ = fork();
    if (rank0_ < 0) return false;
    if (rank0_ == 0) {
        dup2(out, 1);
        dup2(err, 2);
        setenv("SLURM_PROCID", "0", 1);
        setenv("SLURM_NTASKS", std::to_string(o_.ranks).c_str(), 1);
        setenv("SLURM_NTASKS_PER_NODE", std::to_string(o_.tasks).c_str(), 1);
        setenv("MASTER_ADDR", master_.c_str(), 1);
        setenv("MASTER_PORT", std::to_string(port_).c_str(), 1);
        setenv("MN_NCCL_STEP_SECRET", secret_.c_str(), 1);
        setenv("NODE_RANK", "0", 1);
        setenv("NCCL_HOSTID", "sim-node0", 1);
        setenv("SLURMD_NODENAME", "sim-node0", 1);
        setenv("LOCAL_RANK", "0", 1);
        setenv("LOCAL_WORLD_SIZE", std::to_string(std::min(o_.tasks, o_.ranks)).c_str(), 1);
        setenv("MN_PREFLIGHT_SIM_SHARE", "1", 1);
        setenv("MN_PREFLIGHT_QUIET_ABOVE", std::to_string(o_.quiet_above).c_str(), 1);
        setenv("MN_PREFLIGHT_GATHER_ABOVE", std::to_string(o_.gather_above).c_str(), 1);
        unsetenv("SLURM_STEP_NODELIST");
        unsetenv("SLURM_JOB_NODELIST");
        unsetenv("PET_NPROC_PER_NODE");
        execl(o_.preflight.c_str(), o_.preflight.c_str(), "--json", "--cpu", "--no-pairs", "--timeout",
              timeout.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    ::close(out);
    ::close(err);
    return true;
}

void Sim::want_out(Rank& r, bool on) {
    epoll_event ev{};
    ev.events = EPOLLIN | (on ? EPOLLOUT : 0u);
    ev.data.u64 = r.rank;
    epoll_ctl(ep_, EPOLL_CTL_MOD, r.fd, &ev);
}

void Sim::open(Rank& r) {
    r.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (r.fd < 0) {
        fail(r, std::string("cannot open a socket: ") + std::strerror(errno) + " (raise ulimit -n)");
        return;
    }
    int one = 1;
    setsockopt(r.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Each simulated node connects from an address of its own (127.1.0.1
    // for node 0, and on: all of 127/8 is this host's), as ranks on their
    // own nodes do. From one address, each connect() searched the
    // ephemeral ports for a free one among those in use: O(R) each, a
    // third of the simulator's time at 16,384 ranks.
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(0x7f010001u + r.rank / std::max(1u, o_.tasks));
    setsockopt(r.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (bind(r.fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
        fail(r, std::string("cannot bind a source address: ") + std::strerror(errno));
        return;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port_);
    inet_pton(AF_INET, master_.c_str(), &sa.sin_addr);
    if (::connect(r.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
        // Rank 0 not listening yet: tried again by the loop.
        ::close(r.fd);
        r.fd = -1;
        return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = r.rank;
    epoll_ctl(ep_, EPOLL_CTL_ADD, r.fd, &ev);
    r.state = State::Challenged;  // waiting for the challenge
    if (!r.stranger) ++handshakes_;
    if (r.stranger && r.rank % 2 == 0) {
        // Half the strangers send what proves no secret.
        r.out = std::string("\x00\x00\x00\x10", 4) + std::string(16, 'x');
        flush(r);
    }
}

void Sim::flush(Rank& r) {
    while (!r.out.empty()) {
        ssize_t k = ::send(r.fd, r.out.data(), r.out.size(), MSG_NOSIGNAL);
        if (k > 0) {
            r.out.erase(0, static_cast<std::size_t>(k));
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want_out(r, true);
            return;
        }
        if (k < 0 && errno == EINTR) continue;
        fail(r, std::string("send: ") + std::strerror(errno));
        return;
    }
    want_out(r, false);
}

const wire::Body& Sim::body_of(const msg::FromRank& m) {
    const auto* ready = std::get_if<msg::Ready>(&m);
    const bool alike =
        (ready && ready->fingerprint.empty() && !ready->node_fingerprint) || std::holds_alternative<msg::Result>(m);
    if (!alike) return alike_[-1] = msg::encode(m);
    auto it = alike_.find(static_cast<int>(m.index()));
    if (it == alike_.end()) it = alike_.emplace(static_cast<int>(m.index()), msg::encode(m)).first;
    return it->second;
}

void Sim::send(Rank& r, const msg::FromRank& m) {
    r.out += wire::frame(body_of(m), r.seal.get());
    r.sent_at = now_s();
    ++sim_msgs_out_;
    flush(r);
}

void Sim::fail(Rank& r, const std::string& why) {
    // After rank 0's word its process ends: connections reset then are not failures.
    if (r.state != State::Done && r.state != State::Failed && !r.stranger && r.error.empty() && !words_) r.error = why;
    if (!r.stranger && (r.state == State::Challenged || r.state == State::Knocked)) --handshakes_;
    r.state = r.stranger ? State::Done : State::Failed;
    close(r);
}

void Sim::close(Rank& r) {
    if (r.fd >= 0) {
        epoll_ctl(ep_, EPOLL_CTL_DEL, r.fd, nullptr);
        ::close(r.fd);
    }
    r.fd = -1;
}

void Sim::answer(Rank& r, msg::FromRank m) {
    if (r.slow) r.owed.push_back({now_s() + o_.delay, std::move(m)});
    else send_now(r, m);
}

// On its own line, or up through its leader.
void Sim::send_now(Rank& r, const msg::FromRank& m) {
    if (!r.member) return send(r, m);
    ranks_[r.leader].up.push_back({r.rank, msg::Carried::What::Said, {body_of(m)}, "", false});
}

void Sim::relay_up(Rank& leader) {
    if (leader.up.empty() || leader.fd < 0) return;
    send(leader, msg::Relayed{std::move(leader.up), std::nullopt});
    leader.up.clear();
}

void Sim::take(Rank& r, const wire::Body& body) {
    ++sim_msgs_in_;
    auto m = msg::decode_from_lead(body);
    if (!m) {
        fail(r, "rank 0 sent what does not decode: " + m.problem().text());
        return;
    }
    const auto* relay = std::get_if<msg::Relay>(&m.value());
    if (!relay) return take_word(r, m.value());
    // A leader: each part to the ranks it names, its own among them.
    for (const msg::RelayPart& p : relay->parts) {
        auto part = msg::decode_from_lead(p.body.bytes);
        if (!part) {
            fail(r, "rank 0 relayed what does not decode: " + part.problem().text());
            return;
        }
        for (uint32_t to : p.to) {
            if (to >= o_.ranks || (to != r.rank && (!ranks_[to].member || ranks_[to].leader != r.rank))) {
                fail(r, "rank 0 relayed a word for rank " + std::to_string(to) + " to another node's leader");
                return;
            }
            Rank& t = ranks_[to];
            if (t.silent && t.member) continue;
            take_word(t, part.value());
        }
    }
    if (r.state == State::Done) close(r);
    else relay_up(r);
}

void Sim::take_word(Rank& r, const msg::FromLead& m) {
    if (const auto* b = std::get_if<msg::Beat>(&m)) {
        r.stage = b->stage;
    } else if (std::holds_alternative<msg::Roster>(m)) {
        r.rostered = true;
        r.rostered_at = now_s();
    } else if (const auto* p = std::get_if<msg::Prepare>(&m)) {
        msg::Ready ready;
        // One task a node reads the node's software (rendezvous.cc): as
        // fields where rank 0 asks for them, as a rank does.
        if (r.rank % o_.tasks == 0) {
            auto f = decode_fingerprint(fingerprint_);
            if (p->fingerprint_fields.value_or(false) && f) ready.node_fingerprint = f.value();
            else ready.fingerprint = fingerprint_;
        }
        answer(r, ready);
    } else if (std::holds_alternative<msg::Plan>(m)) {
        msg::Result res;
        res.ran = res.correct = true;
        res.seconds = 0.001;
        res.passes = 1;
        answer(r, res);
    } else if (const auto* w = std::get_if<msg::Word>(&m)) {
        if (!words_++) {
            first_word_ = now_s();
            word_code_ = w->code;
            stop_why_ = w->why;
        }
        r.state = State::Done;
        // A leader's socket stays until the rest of its Relay is read (take).
        if (!r.member && !(gathering() && r.rank >= o_.tasks && r.rank % o_.tasks == 0)) close(r);
    }
}

void Sim::on_readable(Rank& r) {
    char buf[65536];
    std::string ended;  // the connection's end, after what came before it
    while (r.fd >= 0) {
        ssize_t k = ::recv(r.fd, buf, sizeof buf, 0);
        if (k > 0) {
            r.in.append(buf, static_cast<std::size_t>(k));
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (k < 0 && errno == EINTR) continue;
        if ((r.state == State::Challenged || r.state == State::Knocked) && !r.stranger) {
            // Cut off during its handshake (a full doorway): again, as knock() does.
            --handshakes_;
            close(r);
            r.in.clear();
            r.out.clear();
            r.state = State::Connecting;
            to_open_.push_back(r.rank);
            return;
        }
        ended = k == 0 ? "rank 0 closed the connection" : std::string("recv: ") + std::strerror(errno);
        break;
    }
    if (r.stranger) {
        r.in.clear();
        if (!ended.empty()) fail(r, ended);
        return;
    }
    take_frames(r);
    if (!ended.empty() && r.fd >= 0) fail(r, ended);
}

void Sim::take_frames(Rank& r) {
    while (r.fd >= 0) {
        std::size_t used = 0;
        // The challenge is unsealed; everything after it is sealed.
        auto f = wire::take_frame(r.in, r.state == State::Challenged ? kKnockLimit : wire::kMaxMessage,
                                  r.state == State::Challenged ? nullptr : r.seal.get(), &used);
        if (!f) {
            fail(r, "a frame from rank 0 does not open: " + f.problem().text());
            return;
        }
        if (!f.value()) return;
        const wire::Body body = std::move(*f.value());
        r.in.erase(0, used);
        if (r.state == State::Challenged) {
            auto ch = msg::decode<msg::Challenge>(body);
            if (!ch || ch->version != msg::kProtocol) {
                fail(r, "rank 0's challenge does not decode or speaks another protocol");
                return;
            }
            const msg::Knock kn{msg::kProtocol, "control", r.rank, fresh_nonce(), release()};
            r.seal = connector_seal(secret_, kn, ch->nonce);
            r.out += knock_bytes(kn, hellos_[r.rank], *r.seal);
            r.state = State::Knocked;
            flush(r);
        } else if (r.state == State::Knocked) {
            auto w = msg::decode<msg::Welcome>(body);
            if (!w || w->rank != 0) {
                fail(r, "rank 0's welcome does not decode");
                return;
            }
            r.state = State::Joined;
            --handshakes_;
            ++joined_;
            r.next_beat = now_s() + beat_period(o_.ranks) * (r.rank % 10) / 10.0;
            // A leader: its node's hellos, as they came to its door.
            for (uint32_t m = r.rank + 1; m < o_.ranks && ranks_[m].member && ranks_[m].leader == r.rank; ++m) {
                r.up.push_back({m, msg::Carried::What::Hello, {hellos_[m]}, "", false});
                ranks_[m].state = State::Joined;
                ++joined_;
                if (ranks_[m].silent) ranks_[m].quiet_since = now_s();
                if (ranks_[m].silent) silent_at_ = std::max(silent_at_, ranks_[m].quiet_since);
            }
            relay_up(r);
            if (r.silent) {
                // Stopped from here on: no reading, no writing, the socket kept.
                r.quiet_since = now_s();
                silent_at_ = std::max(silent_at_, r.quiet_since);
                epoll_ctl(ep_, EPOLL_CTL_DEL, r.fd, nullptr);
                return;
            }
        } else {
            take(r, body);
        }
    }
}

int Sim::run() {
    secret_ = fresh_nonce() + fresh_nonce();
    port_ = free_port();
    sig_ = local_sig(master_, &ifname_);
    fingerprint_ = host_fingerprint(o_.preflight);
    // A socket per simulated rank, and rank 0 one per rank too.
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    const rlim_t need = o_.ranks + o_.flood + 256;
    if (lim.rlim_cur < need) {
        lim.rlim_cur = std::min<rlim_t>(need, lim.rlim_max);
        setrlimit(RLIMIT_NOFILE, &lim);
    }
    if (lim.rlim_cur < need) {
        std::fprintf(stderr, "mn-rank-sim: %u ranks need %lu open files, the hard limit is %lu: raise it\n", o_.ranks,
                     static_cast<unsigned long>(need), static_cast<unsigned long>(lim.rlim_cur));
        return 2;
    }
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    ranks_.resize(o_.ranks + o_.flood);
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
        ranks_[r].rank = r;
        ranks_[r].stranger = r >= o_.ranks;
    }
    // Silent and slow ranks spread over the step: every (N / K)th rank from the end.
    std::set<uint32_t> silent, slow;
    for (uint32_t i = 0; i < o_.silent; ++i) silent.insert(o_.ranks - 1 - i * ((o_.ranks - 1) / o_.silent));
    for (uint32_t i = 0; i < o_.slow; ++i) {
        uint32_t r = 1 + i * ((o_.ranks - 1) / o_.slow);
        while (silent.count(r)) ++r;
        slow.insert(r);
    }
    for (uint32_t r : silent) ranks_[r].silent = true;
    for (uint32_t r : slow) ranks_[r].slow = true;
    for (uint32_t r = 1; r < o_.ranks; ++r) {
        // Rank 0's node joins rank 0; every other node its leader, its first rank.
        if (gathering() && r >= o_.tasks && r % o_.tasks != 0) {
            ranks_[r].member = true;
            ranks_[r].leader = r - r % o_.tasks;
            continue;
        }
        to_open_.push_back(r);
    }
    hellos_.resize(o_.ranks);
    for (uint32_t r = 1; r < o_.ranks; ++r) hellos_[r] = msg::encode(hello_of(r));
    t0_ = now_s();
    const double cpu0 = cpu_s(RUSAGE_SELF);
    if (!start_rank0()) {
        std::perror("mn-rank-sim: starting rank 0");
        return 2;
    }
    uint32_t next_stranger = o_.ranks;
    int status = 0;
    bool rank0_done = false;
    std::vector<epoll_event> evs(1024);
    const double give_up = t0_ + o_.timeout + 5;
    double next_trace = 0, next_sweep = 0;
    while (!rank0_done && now_s() < give_up) {
        // Open connections, a bounded number handshaking at once; ranks
        // refused before their challenge come round again.
        while (handshakes_ < kMaxHandshakes && !to_open_.empty()) {
            Rank& r = ranks_[to_open_.front()];
            to_open_.pop_front();
            open(r);
            if (r.fd < 0 && r.state == State::Connecting) {  // rank 0 not listening yet
                to_open_.push_front(r.rank);
                break;
            }
        }
        // Strangers during the rendezvous, a few at a time.
        for (int i = 0; joined_ > 0 && i < 64 && next_stranger < ranks_.size(); ++i) open(ranks_[next_stranger++]);
        int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), 10);
        for (int i = 0; i < n; ++i) {
            Rank& r = ranks_[evs[i].data.u64];
            if (r.fd < 0) continue;
            if (evs[i].events & EPOLLOUT) flush(r);
            if (r.fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_readable(r);
        }
        const double now = now_s();
        if (now < next_sweep) continue;
        next_sweep = now + 0.01;
        for (uint32_t i = 1; i < o_.ranks; ++i) {
            Rank& r = ranks_[i];
            if (r.member) {
                // Played inside its leader: what it owes, and its leader's
                // word on its silence (kSilence after its last word, counted
                // from the roster through a quiet rendezvous, as the leader
                // counts it).
                Rank& lead = ranks_[r.leader];
                if (r.state != State::Joined || lead.fd < 0) continue;
                if (r.silent && !r.reported && (lead.rostered || !quiet_rendezvous(o_.ranks))) {
                    const double since = quiet_rendezvous(o_.ranks) ? std::max(r.quiet_since, lead.rostered_at)
                                                                    : r.quiet_since;
                    if (now - since > kSilence) {
                        lead.up.push_back({r.rank, msg::Carried::What::Gone, {}, "nothing heard from it for 3 s", true});
                        r.reported = true;
                    }
                }
                if (!r.owed.empty()) {
                    auto due = std::partition(r.owed.begin(), r.owed.end(), [&](const auto& x) { return x.first > now; });
                    for (auto it = due; it != r.owed.end(); ++it) send_now(r, it->second);
                    r.owed.erase(due, r.owed.end());
                }
                if (r.rank % o_.tasks == o_.tasks - 1 || r.rank + 1 == o_.ranks) relay_up(lead);
                continue;
            }
            if (r.state != State::Joined || r.silent || r.fd < 0) continue;
            // As a rank: no beats before the roster above 4,096 ranks (step.h).
            if (!r.rostered && quiet_rendezvous(o_.ranks)) {
                r.next_beat = now + beat_period(o_.ranks) * (r.rank % 10) / 10.0;
            } else if (now >= r.next_beat) {
                // How late this process plays a beat: its own lag, not rank 0's.
                if (r.next_beat > 0) beat_late_ = std::max(beat_late_, now - r.next_beat);
                // As a rank's inbox does (control/inbox.cc, due_beat): none within
                // half a period of another message.
                if (now - r.sent_at >= beat_period(o_.ranks) / 2) send(r, msg::Beat{r.stage});
                r.next_beat = now + beat_period(o_.ranks);
            }
            if (!r.owed.empty() && r.fd >= 0) {
                auto due = std::partition(r.owed.begin(), r.owed.end(), [&](const auto& x) { return x.first > now; });
                for (auto it = due; it != r.owed.end() && r.fd >= 0; ++it) send(r, it->second);
                r.owed.erase(due, r.owed.end());
            }
        }
        if (std::getenv("MN_RANK_SIM_TRACE") && now >= next_trace) {
            std::fprintf(stderr, "mn-rank-sim: %.2f s: %u joined, %zu handshaking, sim cpu %.2f s\n", now - t0_, joined_,
                         handshakes_, cpu_s(RUSAGE_SELF) - cpu0);
            next_trace = now + 1;
        }
        if (waitpid(rank0_, &status, WNOHANG) == rank0_) rank0_done = true;
    }
    if (!rank0_done) {
        kill(rank0_, SIGKILL);
        waitpid(rank0_, &status, 0);
    }
    const double wall = now_s() - t0_;
    const double sim_cpu = cpu_s(RUSAGE_SELF) - cpu0;

    // Rank 0's report: the last line of its stdout.
    std::ifstream f(out_path_);
    std::string line, last;
    while (std::getline(f, line))
        if (!line.empty()) last = line;
    auto rep = Json::parse(last, nullptr, false);
    std::ifstream ferr(err_path_);
    std::stringstream errs;
    errs << ferr.rdbuf();
    std::remove(out_path_.c_str());
    std::remove(err_path_.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string verdict = rep.is_object() && rep.contains("verdict") ? rep["verdict"].get<std::string>() : "?";
    // Which silent ranks rank 0's verdict names ("rank 17 ..." in a problem).
    std::string problems = rep.is_object() && rep.contains("problems") ? rep["problems"].dump() : "";
    uint32_t named = 0;
    for (uint32_t r : silent) {
        const std::string w = "rank " + std::to_string(r);
        for (std::size_t at = problems.find(w); at != std::string::npos; at = problems.find(w, at + 1)) {
            const char next = at + w.size() < problems.size() ? problems[at + w.size()] : ' ';
            if (!std::isdigit(static_cast<unsigned char>(next))) {
                ++named;
                break;
            }
        }
    }
    // Healthy ranks the verdict names ("rank 17: ..."): none may be.
    uint32_t healthy_named = 0;
    for (std::size_t at = problems.find("rank "); at != std::string::npos; at = problems.find("rank ", at + 1)) {
        char* end = nullptr;
        const unsigned long r = std::strtoul(problems.c_str() + at + 5, &end, 10);
        if (end != problems.c_str() + at + 5 && *end == ':' && r < o_.ranks && !silent.count(static_cast<uint32_t>(r)))
            ++healthy_named;
    }
    const bool expect_pass = o_.silent == 0;
    const bool ok = expect_pass ? (code == 0 && verdict == "PASS")
                                : (code != 0 && named == o_.silent && healthy_named == 0);
    const Json c = rep.is_object() && rep.contains("control") ? rep["control"] : Json::object();
    const Json ph = c.value("phases_s", Json::object());
    auto phase = [&](const char* k) { return ph.contains(k) ? ph[k].get<double>() : 0.0; };
    const double ctl = phase("rendezvous") + phase("readiness") + phase("go") + phase("verdict");
    const double to_name = o_.silent && first_word_ > 0 ? first_word_ - silent_at_ : -1;
    uint32_t failed = 0;
    std::string first_failure;
    for (uint32_t r = 1; r < o_.ranks; ++r)
        if (ranks_[r].state == State::Failed && !ranks_[r].error.empty()) {
            if (!failed++) first_failure = "rank " + std::to_string(r) + ": " + ranks_[r].error;
        }
    Json out = {{"ranks", o_.ranks},
                {"tasks_per_node", o_.tasks},
                {"silent", o_.silent},
                {"slow", o_.slow},
                {"delay_s", o_.delay},
                {"flood", o_.flood},
                {"ok", ok},
                {"exit", code},
                {"verdict", verdict},
                {"silent_named", named},
                {"healthy_named", healthy_named},
                {"wall_s", wall},
                {"ctl_s", ctl},
                {"phases_s", ph},
                {"rank0_cpu_s", c.value("cpu_s", 0.0)},
                {"rank0_msgs_in", c.value("messages_received", 0)},
                {"rank0_msgs_out", c.value("messages_sent", 0)},
                {"rank0_by_kind", c.value("messages_by_kind", Json::object())},
                {"rank0_rss_kib", c.value("max_rss_kib", 0)},
                {"sim_cpu_s", sim_cpu},
                {"sim_msgs_in", sim_msgs_in_},
                {"sim_msgs_out", sim_msgs_out_},
                {"sim_beat_late_s", beat_late_},
                {"joined", joined_},
                {"sim_failed", failed},
                {"to_name_s", to_name},
                {"stop_why", stop_why_}};
    if (o_.json) {
        std::printf("%s\n", out.dump().c_str());
    } else {
        std::printf("mn-rank-sim: %u ranks (%u a node), silent %u, slow %u (%.2f s), flood %u: %s exit %d, %s; "
                    "wall %.2f s, ctl %.3f s (rdzv %.3f ready %.3f go %.3f coll %.3f verdict %.3f); rank 0 cpu %.2f s, "
                    "msgs in %s out %s; sim cpu %.2f s, its beats up to %.2f s late",
                    o_.ranks, o_.tasks, o_.silent, o_.slow, o_.delay, o_.flood, ok ? "ok" : "NOT AS EXPECTED", code,
                    verdict.c_str(), wall, ctl, phase("rendezvous"), phase("readiness"), phase("go"),
                    phase("collective"), phase("verdict"), c.value("cpu_s", 0.0),
                    c.value("messages_received", Json(0)).dump().c_str(), c.value("messages_sent", Json(0)).dump().c_str(),
                    sim_cpu, beat_late_);
        if (o_.silent)
            std::printf("; silent named %u of %u, %.2f s after they went quiet, healthy named %u", named, o_.silent,
                        to_name, healthy_named);
        std::printf("\n");
        if (!c.value("messages_by_kind", Json::object()).empty())
            std::printf("  rank 0's messages by kind: %s\n", c["messages_by_kind"].dump().c_str());
        if (!problems.empty() && problems != "[]") std::printf("  problems: %.600s\n", problems.c_str());
    }
    if (failed) std::fprintf(stderr, "mn-rank-sim: %u simulated ranks failed; first: %s\n", failed, first_failure.c_str());
    if (!ok) {
        const std::string e = errs.str();
        std::fprintf(stderr, "mn-rank-sim: rank 0's stderr (last 2000 bytes):\n%s\n",
                     e.substr(e.size() > 2000 ? e.size() - 2000 : 0).c_str());
    }
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    signal(SIGPIPE, SIG_IGN);
    Options o = parse(argc, argv);
    g_quiet_above = o.quiet_above;
    return Sim(o).run();
}
