// SPDX-License-Identifier: Apache-2.0
// Phase 1, rendezvous: every rank finds what it brings (fabric, GPUs, a
// data port), connects to rank 0 at MASTER_ADDR:MASTER_PORT and proves it
// holds the step's secret. Budget: half of --timeout.
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

#include "helper/check/fleet.h"
#include "lib/check/node_reading.h"
#include "helper/check/lead.h"
#include "helper/check/ring.h"
#include "lib/check/gpu_claims.h"
#include "lib/fabric/fabric.h"
#include "lib/plan/hostlist.h"
#include "lib/plan/netprobe.h"
#include "lib/plan/step_plan.h"
#include "lib/util/text.h"
#include "lib/util/machine.h"
#include "lib/fabric/verbs.h"

namespace mn::check {
namespace {

unsigned interface_mtu(const std::string& ifname) {
    if (ifname.empty()) return 0;
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    unsigned mtu = ioctl(s, SIOCGIFMTU, &ifr) == 0 ? static_cast<unsigned>(ifr.ifr_mtu) : 0;
    ::close(s);
    return mtu;
}

// The discovery a node contributes to the consistency check.
void local_facts(Step& st) {
    auto choice = choose_fabric(discover_ports(user_sysfs_root(process_env())), st.o.mode);
    if (!choice) {
        st.home_problems.push_back(choice.problem().text());
        st.sig.fabric = "?";
    } else {
        st.sig.fabric = choice->fabric;
        unsigned mtu = 0;
        for (const auto& v : choice->ports) {
            if (!v.chosen) continue;
            st.sig.hcas += (st.sig.hcas.empty() ? "" : ",") + v.port.name();
            st.sig.rate_gbps = std::max(st.sig.rate_gbps, v.port.rate_gbps);
            if (v.port.mtu && (!mtu || v.port.mtu < mtu)) mtu = v.port.mtu;
        }
        st.sig.mtu = mtu;
    }
    st.ifname = interface_towards(st.self.master, SystemNetwork{});
    if (st.sig.fabric == "socket") st.sig.mtu = interface_mtu(st.ifname);
}

// Rank 0 may hold a connection per rank (a standby too, taking over), and
// every doorway a flood's worth of callers (waiting_cap() is a quarter of
// the limit): the soft open-file limit is raised towards what both need,
// within the hard one; below what the step needs rank 0 says so, naming
// the fix.
void allow_connections(const Self& self) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
    const rlim_t need = self.world + 64;
    const rlim_t want = need + 4 * kMaxWaiting;
    if (lim.rlim_cur >= want) return;
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min<rlim_t>(want, lim.rlim_max);
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
    if (self.rank == 0 && lim.rlim_cur < need)
        std::fprintf(stderr, "mn-preflight: %s rank 0: %u ranks need %lu open files, the limit is %lu: raise it "
                             "(ulimit -n in the job, or slurmd's LimitNOFILE with PropagateResourceLimits)\n",
                     self.label.c_str(), self.world, static_cast<unsigned long>(need),
                     static_cast<unsigned long>(lim.rlim_cur));
}

std::string missing_ranks(const std::vector<Member>& m, const std::vector<bool>& have) {
    std::vector<uint32_t> miss;
    for (uint32_t r = 0; r < have.size(); ++r)
        if (!have[r]) miss.push_back(r);
    if (miss.empty()) return "";
    std::string out = (miss.size() == 1 ? "rank " : "ranks ") + rank_ranges(miss) + " did not arrive";
    // The nodes from which not one rank came, by Slurm's node names.
    std::set<std::string> seen;
    for (uint32_t r = 0; r < have.size(); ++r)
        if (have[r]) seen.insert(m[r].hello.slurm_node);
    if (auto hosts = Hostlist::parse(env_or("SLURM_STEP_NODELIST", env_or("SLURM_JOB_NODELIST")))) {
        std::string none;
        for (std::size_t i = 0; i < hosts->size(); ++i)
            if (!seen.count((*hosts)[i])) none += (none.empty() ? "" : ",") + (*hosts)[i];
        if (!none.empty()) out += " (none from " + none + ")";
    }
    return out;
}

}  // namespace

Outcome<Self> read_self() {
    Self s;
    const std::string host = host_name();
    auto need = [&](const char* name, const std::string& fix) -> Outcome<std::string> {
        std::string v = env_or(name);
        if (v.empty()) return Problem{"mn-preflight: " + host + ": " + name + " is not set", fix};
        return v;
    };
    const std::string under = "run it as a step: srun --mn-nccl=auto mn-preflight";
    auto rank = need("SLURM_PROCID", under);
    if (!rank) return rank.problem();
    auto world = need("SLURM_NTASKS", under);
    if (!world) return world.problem();
    auto master = need("MASTER_ADDR", under + " (the plugin sets MASTER_ADDR)");
    if (!master) return master.problem();
    auto port = need("MASTER_PORT", under + " (the plugin sets MASTER_PORT)");
    if (!port) return port.problem();
    auto secret = need("MN_NCCL_STEP_SECRET", under + "; with --export, keep MN_NCCL_STEP_SECRET (e.g. --export=ALL)");
    if (!secret) return secret.problem();
    s.rank = static_cast<uint32_t>(std::strtoul(rank->c_str(), nullptr, 10));
    s.world = static_cast<uint32_t>(std::strtoul(world->c_str(), nullptr, 10));
    if (s.world == 0 || s.rank >= s.world)
        return Problem{"mn-preflight: " + host + ": SLURM_PROCID=" + *rank + " does not fit SLURM_NTASKS=" + *world,
                       under};
    s.node = static_cast<uint32_t>(std::strtoul(env_or("NODE_RANK", env_or("SLURM_NODEID", "0")).c_str(), nullptr, 10));
    // Slurm's node name, as users know it (several slurmd may share a host);
    // an emulated node's NCCL_HOSTID.
    s.label = env_or("NCCL_HOSTID", env_or("SLURMD_NODENAME", host));
    auto addr = Ipv4::parse(*master);
    if (!addr) {
        std::string err;
        auto a = resolve_ipv4(*master, err);
        if (a.empty()) return Problem{"mn-preflight: " + host + ": MASTER_ADDR='" + *master + "' does not resolve", under};
        addr = a[0];
    }
    s.master = addr->str();
    unsigned long p = std::strtoul(port->c_str(), nullptr, 10);
    if (p == 0 || p > 65535) return Problem{"mn-preflight: " + host + ": MASTER_PORT='" + *port + "' is not a port", under};
    s.port = static_cast<uint16_t>(p);
    s.secret = *secret;
    // Node mode sets PET_*; with one task per node it sets RANK and
    // LOCAL_WORLD_SIZE too (for a plain program), and this rank still
    // checks every GPU of its node, as the launcher's workers would use them.
    s.task_mode = !env_or("LOCAL_WORLD_SIZE").empty() && env_or("PET_NPROC_PER_NODE").empty();
    // SLURM_NTASKS_PER_NODE may read "8" or "8(x4)": its leading number.
    s.local_world = static_cast<uint32_t>(
        std::max(1ul, std::strtoul(env_or("LOCAL_WORLD_SIZE", env_or("SLURM_NTASKS_PER_NODE", "1")).c_str(), nullptr, 10)));
    s.local_rank = static_cast<uint32_t>(std::strtoul(env_or("LOCAL_RANK", env_or("SLURM_LOCALID", "0")).c_str(), nullptr, 10));
    return s;
}

namespace {

// What takes a while starts now, beside the rendezvous, and readiness
// collects it: the GPUs opened and their buffers written (or the CPU
// path's buffer), the node's fingerprint.
void start_setup(Step& st) {
    // The NCCL_* variables as the step set them, before ours below.
    std::vector<std::string> nccl_env = nccl_environment(process_environment());
    // NCCL reads its variables once, at its first call (even
    // ncclGetVersion): its INFO lines, which say the transport each channel
    // took, go to a file of ours.
    if (st.o.path != "cpu") {
        // In a directory of its own (0700, mkdtemp): nobody else can put a
        // link or a file of theirs where NCCL writes and this rank reads back.
        std::string dir = env_or("TMPDIR", "/tmp") + "/mn-preflight.XXXXXX";
        if (mkdtemp(dir.data())) {
            st.nccl_log = dir + "/nccl.log";
            setenv("NCCL_DEBUG", "INFO", 1);
            setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
            setenv("NCCL_DEBUG_FILE", st.nccl_log.c_str(), 1);
        }
        st.ga = gpu::probe();
        if (!st.ga.ok) forget_nccl_log(st.nccl_log);  // the CPU path: no NCCL log to read
    }
    // The node's software, read by one rank of each node (its first task):
    // 8 ranks of a node each loading NCCL and initialising CUDA only to
    // say the same thing cost 3.9 s of rendezvous at 32 x 8 on one
    // machine. After NCCL's variables are set: NCCL reads them at its
    // first call.
    if (st.self.local_rank == 0)
        st.fingerprint = on_thread<std::string>([host = st.self.label, nccl_env] {
                             return node_fingerprint(host, nccl_env);
                         }).share();
    if (st.ga.ok && st.self.task_mode) {
        // The GPU the program opens (set_device(LOCAL_RANK)); a rank whose
        // LOCAL_RANK is past its list has no GPU path, and says why.
        auto own = task_gpu(st.self.local_rank, st.ga.devices, env_or("CUDA_VISIBLE_DEVICES"));
        if (own) st.devices.push_back(*own);
        else {
            st.ga.ok = false;
            st.ga.why = own.problem().text();
        }
    }
    if (st.ga.ok) {
        if (!st.self.task_mode)
            for (int i = 0; i < st.ga.devices; ++i) st.devices.push_back(i);
        // Opening GPUs takes a while: start now, beside the rendezvous;
        // readiness collects it.
        const std::size_t bytes = st.o.bytes ? st.o.bytes : kGpuBytes;
        // NVML reads right after the buffer's copy: a busy PCIe link shows
        // its real speed, an idle one may have trained down.
        // Its NCCL ranks are rank x lanes when every rank has as many
        // lanes (always in task mode): the buffer gets that pattern now.
        const uint32_t guess = st.self.rank * static_cast<uint32_t>(st.devices.size());
        try {
            st.gpu_setup = std::async(std::launch::async, [devs = st.devices, bytes, guess] {
                               std::string e = gpu::prepare(devs, bytes, guess);
                               return std::make_pair(e, gpu::health(devs));
                           }).share();
        } catch (const std::system_error& e) {
            // No thread: readiness reports the set-up's fault, naming why.
            std::promise<std::pair<std::string, std::vector<GpuReadings>>> none;
            none.set_value({starved("cannot start the GPU set-up thread", e.code().value()).text(), {}});
            st.gpu_setup = none.get_future().share();
        }
    }
    // No GPUs: the CPU path's buffer, now, beside the rendezvous, as the
    // GPUs' set-up is (readiness then has nothing left to do).
    if (!st.ga.ok && !setup_fails_on_purpose(st.self.rank))
        st.ring_ready =
            prepare_ring(st.ring, st.o.bytes ? st.o.bytes : cpu_default_bytes(st.self.local_world), st.self.rank);
}

// Whether this rank may be among the standbys: rank 0's roster names the
// first kStandbys ranks on a line of their own, that is ranks 1 to
// kStandbys, or where ranks gather at their speakers, the ranks of rank
// 0's node and the speakers (LOCAL_RANK 0). One that found no speaker and
// joined rank 0 itself has no port, and the roster passes it by.
bool may_stand_by(const Self& self) {
    if (self.rank == 0) return false;
    return self.rank <= kStandbys || (gathers(self) && (self.local_rank == 0 || self.node == 0));
}

// The ports the others reach this rank on: data (pairs, the ring) and a
// standby's (the others' reports if rank 0 is lost).
bool open_ports(Step& st, uint16_t& standby_port) {
    // Only on the address this node reaches rank 0 from (rank 0: MASTER_ADDR
    // itself), where the others reach it too; every interface only when
    // the kernel names none.
    if (auto master = Ipv4::parse(st.self.master))
        if (auto src = SystemNetwork{}.route_source(*master)) st.bind_addr = src->str();
    auto data_listen = wire::listen_tcp(st.bind_addr, 0, &st.data_port);
    if (!data_listen) {
        std::fprintf(stderr, "mn-preflight: %s: %s\n", st.self.label.c_str(), data_listen.problem().text().c_str());
        return false;
    }
    st.data_listen = std::move(data_listen.value());
    // At most kStandbys ranks stand by, the first on a line of their own:
    // no listener on the others (8,192 of them idle at 8,192 ranks).
    if (!may_stand_by(st.self)) return true;
    auto standby_listen = wire::listen_tcp(st.bind_addr, 0, &standby_port);
    if (!standby_listen) {
        std::fprintf(stderr, "mn-preflight: %s: %s\n", st.self.label.c_str(), standby_listen.problem().text().c_str());
        return false;
    }
    st.standby_listen = std::move(standby_listen.value());
    return true;
}

// What this rank tells rank 0 in its hello.
void fill_hello(Step& st, uint16_t standby_port) {
    msg::Hello& h = st.hello;
    h.rank = st.self.rank;
    h.node = st.self.node;
    h.label = st.self.label;
    h.slurm_node = env_or("SLURMD_NODENAME", host_name());
    // This process on its host: never a foreign process on a GPU.
    h.host = host_name();
    h.pid = static_cast<unsigned>(getpid());
    h.gpu_ok = st.ga.ok;
    h.gpu_why = st.ga.why;
    // Also without a GPU path: GPUs it cannot use keep the check off TCP alone.
    h.gpus = static_cast<uint32_t>(st.ga.devices);
    h.lanes = static_cast<uint32_t>(std::max<std::size_t>(1, st.devices.size()));
    for (int d : st.devices) h.lane_gpus.push_back(gpu::describe(d));
    h.data_port = st.data_port;
    h.standby_port = standby_port;
    h.sig = st.sig;
    h.ifname = st.ifname;
    h.problems = st.home_problems;
    h.machine = boot_id();
    h.fresh_ports = true;
}

}  // namespace

void forget_nccl_log(std::string& path) {
    if (path.empty()) return;
    std::remove(path.c_str());
    rmdir(path.substr(0, path.rfind('/')).c_str());
    path.clear();
}

bool prepare_self(Step& st) {
    log_start(st.self, st.start);
    start_profile(st.self);  // test hook: rank 0's CPU, sampled
    // First: the node's other ranks knock from their start, and on a loaded
    // host (8,192 ranks on 32 cores) this rank's own facts took seconds.
    open_node_door(st);
    // A standby may take every rank's report.
    if (st.self.rank == 0 || may_stand_by(st.self)) allow_connections(st.self);
    local_facts(st);
    start_setup(st);
    uint16_t standby_port = 0;
    if (!open_ports(st, standby_port)) return false;
    fill_hello(st, standby_port);
    return true;
}

bool join(Step& st, Follower& f) {
    const Self& self = st.self;
    // The hello's data address: the one this rank reaches rank 0 from,
    // where its data port listens (open_ports).
    st.hello.data_addr = st.bind_addr;
    Standin me;
    me.self = self;
    me.o = st.o;
    me.start = st.start;
    me.hello = st.hello;
    me.standby_fd = st.standby_listen.get();
    // Rank 0 lost: the standbys (takeover.cc), from the inbox's thread.
    auto lost = [&f](const Standin& who) {
        return [who, ctl = &f.ctl](const std::optional<msg::Roster>& roster, const std::string& loss,
                                   const NodeWord& tell_node) { take_over(who, roster, loss, *ctl, tell_node); };
    };
    if (auto line = join_speaker(st)) {
        if (!*line) return false;
        f.ctl = std::move(*line);
        me.via_speaker = true;
        f.inbox.start(&f.ctl, self, true, lost(me));
        return true;
    }
    bool other_release = false;
    auto ctl = knock(self.master, self.port, "control", self.rank, 0u, msg::encode(st.hello), self.secret, st.rdzv,
                     std::nullopt, nullptr, &other_release);
    if (!ctl) {
        if (other_release) f.code = kUsage;
        std::fprintf(stderr, "mn-preflight: %s rank %u: %s%s\n", self.label.c_str(), self.rank,
                     st.rdzv.passed() ? "time-out: rank 0: " : "rank 0: ", ctl.problem().text().c_str());
        return false;
    }
    f.ctl = Line(std::move(ctl.value().fd), std::move(ctl.value().seal));
    f.inbox.start(&f.ctl, self, false, lost(me), st.node_door);
    return true;
}

namespace {

// A rank at the door: a guest of the doorway on MASTER_PORT (the rank its
// knock proved, its line) or a hello its node's speaker carried (`via`).
struct Arrival {
    uint32_t rank = 0;
    const wire::Body* hello = nullptr;  // the connection's first message, as it came
    Guest* guest = nullptr;             // on MASTER_PORT
    uint32_t via = 0;                   // else its speaker
};

// The one way into the step, munge's dec_process_msg's shape: the hello is
// decoded once, and each step passes or sets the one refusal: a note in
// the report, or none for a hello the rendezvous never hears (a speaker's
// for a rank not of the step, or one here already). True: a member.
bool admit(Lead& l, Arrival& a, std::vector<bool>& have) {
    const uint32_t r = a.rank;
    const std::string who = a.guest ? "rank " + std::to_string(r) + " from " + a.guest->peer : "";
    std::optional<std::string> refused;  // "": dropped unsaid
    Outcome<msg::Hello> h = Problem{"", ""};
    if (r == 0 || r >= have.size() || have[r]) refused = "";
    if (!refused) h = msg::decode<msg::Hello>(*a.hello);
    if (!refused && !h) refused = a.guest ? who + " proved the step secret but its hello does not decode: refused" : "";
    if (!refused && h->rank != r)
        refused = a.guest ? who + " proved the step secret but its hello names another rank: refused" : "";
    if (!refused && !a.guest && (!have[a.via] || l.members[a.via].hello.node != h->node))
        refused = "rank " + std::to_string(r) + " came through rank " + std::to_string(a.via) +
                  " (not its node's leader): refused";
    if (refused) {
        if (!refused->empty()) l.rep.notes.push_back(*refused);
        return false;
    }
    Member& m = l.members[r];
    m.hello = std::move(h.value());
    if (a.guest) {
        m.ctl = Line(std::move(a.guest->fd), std::move(a.guest->seal));
        l.hub.add(r, &m.ctl);
    } else {
        m.via = a.via;
    }
    have[r] = true;
    return true;
}

// A rank that arrived went silent or away before the others came: the
// rendezvous ends with it named (noted), the others stopped by it.
void lost_in_rendezvous(Lead& l, const std::vector<bool>& have, const Heard& h) {
    place_nodes(l, have);
    std::vector<bool> absent_mask(have.size());
    std::vector<uint32_t> absent;
    for (uint32_t r = 0; r < have.size(); ++r) {
        absent_mask[r] = !have[r];
        if (!have[r]) absent.push_back(r);
    }
    l.lose(h, absent_mask);
    if (!absent.empty())
        l.rep.notes.push_back((absent.size() == 1 ? "rank " : "ranks ") + rank_ranges(absent) + " had not arrived yet");
}

// After the rendezvous: rank 0's hello and the standbys, for every rank.
void send_roster(const Step& st, Lead& l) {
    msg::Roster roster;
    roster.lead = l.members[0].hello;
    // The first ranks on a line of their own: one that speaks through its
    // node's speaker hears of rank 0 only through it, and never takes over.
    for (uint32_t r = 1; r < st.self.world && roster.standbys.size() < kStandbys; ++r) {
        const msg::Hello& h = l.members[r].hello;
        if (l.members[r].via || h.standby_port == 0) continue;  // no port: it cannot stand by
        roster.standbys.push_back({r, h.label, h.data_addr, h.standby_port});
    }
    std::vector<uint32_t> ranks;
    for (const auto& s : roster.standbys) ranks.push_back(s.rank);
    l.hub.standbys(std::move(ranks));
    // Its own second: the rendezvous' deadline may be all but spent.
    l.tell_all(roster, Deadline::in(1));
}

}  // namespace

void place_nodes(Lead& l, const std::vector<bool>& have) {
    std::map<uint32_t, NodeReport> by_node;
    for (uint32_t r = 0; r < have.size(); ++r) {
        if (!have[r]) continue;
        const msg::Hello& h = l.members[r].hello;
        NodeReport& n = by_node[h.node];
        n.node = h.node;
        if (n.ranks.empty()) {
            n.host = h.label;
            n.machine = h.machine.value_or("");
            n.sig = h.sig;
            n.ifname = h.ifname;
            n.gpus = h.gpus;
            std::string problems;
            for (const auto& p : h.problems) problems += (problems.empty() ? "" : " | ") + p;
            if (!problems.empty()) n.problems.push_back({VerdictKind::Fault, problems});
        }
        n.ranks.push_back(r);
    }
    std::map<uint32_t, uint32_t> node_index;  // NODE_RANK -> index in rep.nodes
    for (auto& [id, n] : by_node) {
        node_index[id] = static_cast<uint32_t>(l.rep.nodes.size());
        l.rep.nodes.push_back(n);
    }
    for (uint32_t r = 0; r < have.size(); ++r)
        if (have[r]) l.members[r].node_index = node_index[l.members[r].hello.node];
}

bool gather(Step& st, Lead& l) {
    const Self& self = st.self;
    l.enter(msg::Stage::Rendezvous);
    uint16_t bound = 0;
    // On MASTER_ADDR itself (an address of this node), not every interface.
    auto lfd = wire::listen_tcp(st.bind_addr, self.port, &bound);
    if (!lfd) {
        l.halted = "rank 0 could not listen on MASTER_PORT: " + lfd.problem().text();
        std::fprintf(stderr, "mn-preflight: %s rank 0: %s\n", self.label.c_str(), l.halted.c_str());
        return false;
    }
    l.members.resize(self.world);
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    l.cost.start_unix = ts.tv_sec + ts.tv_nsec / 1e9 - (now_s() - st.start);
    l.hub.start(self, st.o.json);
    std::vector<bool> have(self.world, false);
    l.members[0].hello = st.hello;
    l.members[0].hello.data_addr = st.bind_addr.empty() ? self.master : st.bind_addr;
    have[0] = true;
    uint32_t arrived = 1;
    set_phase("rendezvous", missing_ranks(l.members, have));
    Doorway door(lfd->get(), self.secret, 0, true);
    auto wanted = [&](const std::string& purpose, uint32_t r) {
        return purpose == "control" && r > 0 && r < self.world && !have[r];
    };
    double told = now_s();
    bool lost = false, told_trouble = false;
    while (arrived < self.world && !l.past(st.rdzv)) {
        // Those already here are heard meanwhile: one that dies or stops
        // answering ends the rendezvous at once.
        while (auto h = l.hear(Deadline::in(0)))
            if (h->joined) {
                Arrival a{h->rank, &*h->joined, nullptr, h->via};
                if (admit(l, a, have)) ++arrived;
            } else if (!h->msg) {
                lost = true;
                lost_in_rendezvous(l, have, *h);
                break;
            }
        if (lost) break;
        // Through node speakers most ranks come as the hub's: wait less here.
        const double wait = gathers(self) ? 0.01 : 0.1;
        for (Guest& g : door.turn(std::min(wait, std::max(0.0, l.room(st.rdzv))), wanted)) {
            Arrival a{g.rank, &g.first, &g, 0};
            if (admit(l, a, have)) ++arrived;
        }
        // Ranks of another release proved who they are and will not come:
        // once every other rank is here, waiting on would only delay the
        // same verdict (and those here hear it).
        if (!door.skewed().empty()) {
            uint32_t absent = 0;
            for (uint32_t r : door.skewed_ranks()) absent += r < self.world && !have[r];
            if (arrived + absent >= self.world) break;
        }
        if (!door.trouble().empty() && !told_trouble) {
            // Said at once, not only at the time-out: the ranks not yet in cannot come.
            told_trouble = true;
            std::fprintf(stderr, "mn-preflight: %s rank 0: %s\n", self.label.c_str(), door.trouble().c_str());
            l.rep.notes.push_back("rank 0 " + door.trouble());
        }
        // Who is missing, for a time-out: every few turns, not every
        // arrival (it reads every rank).
        if (now_s() - told > 0.25) {
            set_phase("rendezvous", missing_ranks(l.members, have));
            told = now_s();
        }
    }
    l.cost.accepted = door.accepted();
    l.strangers = door.strangers();
    l.skewed = door.skewed();
    for (const auto& u : door.unwanted()) l.rep.notes.push_back("refused " + u + " (a second connection, or a rank "
                                                                "out of range)");
    if (lost) return false;
    set_phase("rendezvous", missing_ranks(l.members, have));
    place_nodes(l, have);
    if (arrived < self.world && !l.skewed.empty() && !st.rdzv.passed()) return false;  // fail_closed says why
    if (arrived < self.world) {
        l.rep.timed_out = "rendezvous: " + missing_ranks(l.members, have) + " at " + self.master + ":" +
                          std::to_string(self.port) + " within " + num(st.budget.rendezvous, -1) + " s (" +
                          std::to_string(arrived) + " of " + std::to_string(self.world) + " ranks came" +
                          l.own_pause_words() + ")";
        return false;
    }
    send_roster(st, l);
    log_end(self, "rendezvous");  // test hook: a fault injected after it comes mid-check
    l.cost.mark("rendezvous", st.start);
    progress(self, "rendezvous: " + std::to_string(self.world) + " ranks on " + std::to_string(l.rep.nodes.size()) +
                       " nodes in " + num(now_s() - st.start) + " s");
    return true;
}

}  // namespace mn::check
