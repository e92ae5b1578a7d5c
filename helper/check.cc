#include "check.h"

#include <sys/ioctl.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "helper/gpu.h"
#include "helper/wire.h"
#include "lib/fabric.h"
#include "lib/hostlist.h"
#include "lib/json.h"
#include "lib/netprobe.h"
#include "lib/preflight.h"
#include "lib/sha256.h"
#include "lib/step_plan.h"
#include "lib/text.h"
#include "lib/verbs.h"

namespace mn {
namespace {

using wire::Deadline;
using wire::Fd;
using wire::Fields;

std::string env_or(const char* name, const std::string& dflt = "") {
    const char* v = std::getenv(name);
    return v && *v ? v : dflt;
}

std::string host_name() {
    char buf[256] = {0};
    return gethostname(buf, sizeof buf - 1) == 0 ? buf : "?";
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

std::string random_hex(std::size_t bytes) {
    std::random_device rd;
    std::string raw;
    for (std::size_t i = 0; i < bytes; ++i) raw.push_back(static_cast<char>(rd() & 0xff));
    return to_hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
}

// What this process is, from Slurm's and the plugin's variables.
struct Self {
    uint32_t rank = 0, world = 1;
    uint32_t node = 0;      // NODE_RANK (emulation-aware), else SLURM_NODEID
    std::string label;      // the host, or NCCL_HOSTID under emulation
    std::string master;
    uint16_t port = 0;
    std::string secret;
    bool task_mode = true;  // LOCAL_WORLD_SIZE set: one GPU per task
    uint32_t local_rank = 0;
};

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
    s.task_mode = !env_or("LOCAL_WORLD_SIZE").empty();
    s.local_rank = static_cast<uint32_t>(std::strtoul(env_or("LOCAL_RANK", env_or("SLURM_LOCALID", "0")).c_str(), nullptr, 10));
    return s;
}

// The discovery a node contributes to the consistency check.
struct LocalFacts {
    FabricSignature sig;
    std::string ifname;
    std::vector<std::string> problems;
};

LocalFacts local_facts(Mode mode, const std::string& master) {
    LocalFacts f;
    auto choice = choose_fabric(discover_ports(sysfs_root(process_env(), SiteConfig{})), mode);
    if (!choice) {
        f.problems.push_back(choice.problem().text());
        f.sig.fabric = "?";
    } else {
        f.sig.fabric = choice->fabric;
        unsigned mtu = 0;
        for (const auto& v : choice->ports) {
            if (!v.chosen) continue;
            f.sig.hcas += (f.sig.hcas.empty() ? "" : ",") + v.port.name();
            f.sig.rate_gbps = std::max(f.sig.rate_gbps, v.port.rate_gbps);
            if (v.port.mtu && (!mtu || v.port.mtu < mtu)) mtu = v.port.mtu;
        }
        f.sig.mtu = mtu;
    }
    f.ifname = interface_towards(master, SystemNetwork{});
    if (f.sig.fabric == "socket") f.sig.mtu = interface_mtu(f.ifname);
    return f;
}

// ---- the CPU path: a ring all-reduce over TCP ------------------------------

// One ring all-reduce (reduce-scatter, then all-gather) of `buf` among n
// members; this one is at position `pos`, sending to next and receiving
// from prev (one socket when n == 2).
bool ring_allreduce(std::vector<float>& buf, uint32_t pos, uint32_t n, int next_fd, int prev_fd, const Deadline& d,
                    std::string* err) {
    if (n < 2) return true;
    const std::size_t count = buf.size();
    auto lo = [&](uint32_t c) { return count * c / n; };
    auto len = [&](uint32_t c) { return lo(c + 1) - lo(c); };
    std::vector<float> tmp(count / n + 1);
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t send_c = (pos + n - s) % n, recv_c = (pos + n - s - 1) % n;
        if (!wire::exchange(next_fd, buf.data() + lo(send_c), len(send_c) * 4, prev_fd, tmp.data(), len(recv_c) * 4,
                            d, err))
            return false;
        for (std::size_t i = 0; i < len(recv_c); ++i) buf[lo(recv_c) + i] += tmp[i];
    }
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t send_c = (pos + 1 + n - s) % n, recv_c = (pos + n - s) % n;
        if (!wire::exchange(next_fd, buf.data() + lo(send_c), len(send_c) * 4, prev_fd, buf.data() + lo(recv_c),
                            len(recv_c) * 4, d, err))
            return false;
    }
    return true;
}

struct Timed {
    bool ok = false, correct = false;
    double seconds = 0;  // per iteration
    std::string error;
};

Timed timed_ring(std::size_t bytes, int iters, uint32_t pos, uint32_t n, uint32_t fill_rank, int next_fd, int prev_fd,
                 const Deadline& d) {
    Timed t;
    std::vector<float> buf(bytes / 4);
    fill_pattern(buf, fill_rank);
    if (!ring_allreduce(buf, pos, n, next_fd, prev_fd, d, &t.error)) return t;
    // fill_rank is the position: sums over 0..n-1, as check_pattern expects.
    t.error = check_pattern(buf, n);
    t.correct = t.error.empty();
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i)
        if (!ring_allreduce(buf, pos, n, next_fd, prev_fd, d, &t.error)) return t;
    t.seconds = (now_s() - t0) / std::max(1, iters);
    t.ok = true;
    return t;
}

// Data connections carry a proof of the step secret, so a stray connection
// to a data port is refused like one to MASTER_PORT.
Outcome<Fd> data_connect(const std::string& addr, uint16_t port, const std::string& purpose, uint32_t rank,
                         const std::string& secret, const Deadline& d) {
    auto fd = wire::connect_tcp(addr, port, d);
    if (!fd) return fd.problem();
    Fields f{{"purpose", purpose}, {"rank", std::to_string(rank)},
             {"proof", hmac_hex(secret, "data:" + purpose + ":" + std::to_string(rank))}};
    if (!wire::send_msg(fd->get(), f, d)) return Problem{"could not greet " + addr + ":" + std::to_string(port), ""};
    return fd;
}

Outcome<Fd> data_accept(int listen_fd, const std::string& purpose, uint32_t from, const std::string& secret,
                        const Deadline& d) {
    while (!d.passed()) {
        std::string peer;
        auto fd = wire::accept_one(listen_fd, d, &peer);
        if (!fd) break;
        std::string err;
        auto m = wire::recv_msg(fd->get(), Deadline::in(std::min(2.0, std::max(0.1, d.left()))), &err);
        if (!m) continue;
        auto& f = *m;
        if (f["purpose"] == purpose && f["rank"] == std::to_string(from) &&
            f["proof"] == hmac_hex(secret, "data:" + purpose + ":" + f["rank"]))
            return std::move(fd.value());
        std::fprintf(stderr, "mn-preflight: %s: refused a data connection from %s (no valid step secret)\n",
                     host_name().c_str(), peer.c_str());
    }
    return Problem{"rank " + std::to_string(from) + " did not connect for " + purpose, ""};
}

// ---- the watchdog: nothing outlives the budget -----------------------------

struct Watch {
    std::mutex mu;
    std::string phase = "rendezvous";
    std::string waiting_for;  // rank 0: who has not reported
    bool done = false;
};

Watch& watch() {
    static Watch w;
    return w;
}

void set_phase(const std::string& p, const std::string& waiting = "") {
    std::lock_guard<std::mutex> g(watch().mu);
    watch().phase = p;
    watch().waiting_for = waiting;
}

void start_watchdog(double seconds, const Self& self, bool json) {
    std::thread([seconds, self, json] {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        std::lock_guard<std::mutex> g(watch().mu);
        if (watch().done) return;
        const std::string what = "phase " + watch().phase + " did not finish within --timeout " + num(seconds, -1) +
                                 " s" + (watch().waiting_for.empty() ? "" : "; " + watch().waiting_for);
        if (self.rank == 0) {
            if (json)
                std::printf("{\"verdict\":\"FAIL\",\"exit_code\":3,\"timed_out\":%s}\n", json_string(what).c_str());
            else
                std::printf("problem: time-out: %s\nFAIL (time-out)\n", what.c_str());
        } else {
            std::fprintf(stderr, "mn-preflight: %s rank %u: time-out: %s\n", self.label.c_str(), self.rank,
                         what.c_str());
        }
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(kTimeout);
    }).detach();
}

void progress(const Self& self, const std::string& line) {
    if (self.rank == 0) std::fprintf(stderr, "mn-preflight: %s\n", line.c_str());
}

// What one rank brings to the collective and the pair tests.
struct Share {
    const Self& self;
    const std::vector<int>& devices;
    int data_listen;
    std::string nccl_log;
    Deadline end;
};

std::vector<double> split_numbers(const std::string& csv) {
    std::vector<double> out;
    for (const std::string& x : split_list(csv)) out.push_back(std::atof(x.c_str()));
    return out;
}

// This rank's part of the all-reduce that rank 0's plan describes; the
// result as rank 0 reads it.
Fields run_collective(Fields p, const Share& sh) {
    Fields result;
    if (p["path"] == "gpu") {
        set_phase("NCCL init and all-reduce");
        gpu::AllreduceJob job;
        job.devices = sh.devices;
        job.nranks = std::atoi(p["nranks"].c_str());
        job.first_rank = std::atoi(p["first_rank"].c_str());
        job.id = p["id"];
        job.bytes = std::strtoull(p["bytes"].c_str(), nullptr, 10);
        job.warmup = std::atoi(p["warmup"].c_str());
        job.iters = std::atoi(p["iters"].c_str());
        job.pair_bytes = std::strtoull(p["pair_bytes"].c_str(), nullptr, 10);
        for (double c : split_numbers(p["colors"])) job.pair_colors.push_back(static_cast<int>(c));
        job.log_path = sh.nccl_log;
        auto r = gpu::run_allreduce(job);
        std::remove(job.log_path.c_str());
        std::vector<std::string> ps;
        for (double x : r.pair_seconds) ps.push_back(num(x, 9));
        return {{"ran", r.ran ? "1" : "0"}, {"correct", r.correct ? "1" : "0"}, {"error", r.error},
                {"seconds", num(r.seconds, 9)}, {"init", num(r.init_seconds, 6)}, {"transports", join_list(r.transports)},
                {"pair_seconds", join_list(ps)}, {"pair_error", r.pair_error}};
    }
    set_phase("ring connect");
    const uint32_t n = sh.self.world, rank = sh.self.rank;
    Fd next, prev;
    if (n > 1) {
        auto nx = data_connect(p["next_addr"], static_cast<uint16_t>(std::atoi(p["next_port"].c_str())), "ring", rank,
                               sh.self.secret, sh.end);
        auto pv = data_accept(sh.data_listen, "ring", (rank + n - 1) % n, sh.self.secret, sh.end);
        if (!nx || !pv)
            return {{"ran", "0"}, {"error", !nx ? "cannot reach the next rank: " + nx.problem().text() : pv.problem().text()}};
        next = std::move(nx.value());
        prev = std::move(pv.value());
    }
    set_phase("TCP ring all-reduce");
    Timed t = timed_ring(std::strtoull(p["bytes"].c_str(), nullptr, 10), std::atoi(p["iters"].c_str()), rank, n, rank,
                         next.get(), prev.get(), sh.end);
    // Name the ring neighbours: one of them is the likely culprit.
    if (!t.ok)
        t.error = "ring from rank " + std::to_string((rank + n - 1) % n) + " to rank " + std::to_string((rank + 1) % n) +
                  ": " + t.error;
    return {{"ran", t.ok || !t.error.empty() ? "1" : "0"}, {"correct", t.correct ? "1" : "0"}, {"error", t.error},
            {"seconds", num(t.seconds, 9)}};
}

// One side of a pair test (CPU path): a two-member ring all-reduce with the
// peer rank 0 named, inside `budget` seconds.
Fields run_pair(Fields q, const Share& sh, double budget) {
    set_phase("pair test " + q["tag"]);
    const uint32_t peer = static_cast<uint32_t>(std::atoi(q["peer"].c_str()));
    const bool connect = q["connect"] == "1";
    const Deadline pd = Deadline::in(std::min(sh.end.left(), budget));
    Outcome<Fd> fd = connect ? data_connect(q["peer_addr"], static_cast<uint16_t>(std::atoi(q["peer_port"].c_str())),
                                            q["tag"], sh.self.rank, sh.self.secret, pd)
                             : data_accept(sh.data_listen, q["tag"], peer, sh.self.secret, pd);
    Fields r{{"op", "pair"}, {"tag", q["tag"]}};
    if (!fd) {
        r["error"] = fd.problem().text();
        return r;
    }
    const uint32_t pos = connect ? 0 : 1;
    Timed t = timed_ring(std::strtoull(q["bytes"].c_str(), nullptr, 10), std::atoi(q["iters"].c_str()), pos, 2, pos,
                         fd->get(), fd->get(), pd);
    r["seconds"] = num(t.seconds, 9);
    r["error"] = t.ok ? (t.correct ? "" : "wrong result: " + t.error) : t.error;
    return r;
}

// ---- rank 0 -----------------------------------------------------------------

struct Member {
    Fields hello;
    Fd ctl;  // rank 0's own entry has none
    uint32_t node_index = 0;
};

std::string missing_ranks(const std::vector<Member>& m, const std::vector<bool>& have) {
    std::vector<uint32_t> miss;
    for (uint32_t r = 0; r < have.size(); ++r)
        if (!have[r]) miss.push_back(r);
    if (miss.empty()) return "";
    std::string out = (miss.size() == 1 ? "rank " : "ranks ") + rank_ranges(miss) + " did not arrive";
    // The nodes from which not one rank came, by Slurm's node names.
    std::set<std::string> seen;
    for (uint32_t r = 0; r < have.size(); ++r)
        if (have[r]) seen.insert(m[r].hello.count("slurm_node") ? m[r].hello.at("slurm_node") : "");
    if (auto hosts = Hostlist::parse(env_or("SLURM_STEP_NODELIST", env_or("SLURM_JOB_NODELIST")))) {
        std::string none;
        for (std::size_t i = 0; i < hosts->size(); ++i)
            if (!seen.count((*hosts)[i])) none += (none.empty() ? "" : ",") + (*hosts)[i];
        if (!none.empty()) out += " (none from " + none + ")";
    }
    return out;
}

}  // namespace

int run_check(const CheckOptions& o) {
    const double start = now_s();
    auto me = read_self();
    if (!me) {
        std::fprintf(stderr, "%s\n", me.problem().text().c_str());
        return kUsage;
    }
    const Self self = *me;
    start_watchdog(o.timeout, self, o.json);
    const Deadline end = Deadline::in(o.timeout - 0.5);
    const Deadline rdzv = Deadline::in(std::max(1.0, o.timeout * 0.5));

    // Everything a rank tells rank 0 about itself.
    LocalFacts facts = local_facts(o.mode, self.master);
    // NCCL reads its variables once, at its first call (even
    // ncclGetVersion): its INFO lines, which say the transport each channel
    // took, go to a file of ours.
    const std::string nccl_log = "/tmp/mn-preflight." + std::to_string(getpid()) + ".nccl";
    gpu::Availability ga;
    if (o.path != "cpu") {
        setenv("NCCL_DEBUG", "INFO", 1);
        setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
        setenv("NCCL_DEBUG_FILE", nccl_log.c_str(), 1);
        ga = gpu::probe();
    }
    std::vector<int> my_devices;
    if (ga.ok) {
        if (self.task_mode) my_devices.push_back(static_cast<int>(self.local_rank % static_cast<uint32_t>(ga.devices)));
        else
            for (int i = 0; i < ga.devices; ++i) my_devices.push_back(i);
    }
    uint16_t data_port = 0;
    auto data_listen = wire::listen_tcp("", 0, &data_port);
    if (!data_listen) {
        std::fprintf(stderr, "mn-preflight: %s: %s\n", self.label.c_str(), data_listen.problem().text().c_str());
        return kCheckFailed;
    }
    // Data transfers give up 2 s before the control deadline, so a rank
    // blocked by a stuck peer still reports (naming the peer) and only the
    // stuck rank stays silent.
    const Deadline work_end = Deadline::in(std::max(o.timeout * 0.5, o.timeout - 2.5));
    const Share share{self, my_devices, data_listen->get(), nccl_log, work_end};
    Fields hello{{"rank", std::to_string(self.rank)},
                 {"node", std::to_string(self.node)},
                 {"label", self.label},
                 {"slurm_node", env_or("SLURMD_NODENAME", host_name())},
                 {"gpu_ok", ga.ok ? "1" : "0"},
                 {"gpu_why", ga.why},
                 {"gpus", std::to_string(ga.ok ? ga.devices : 0)},
                 {"lanes", std::to_string(std::max<std::size_t>(1, my_devices.size()))},
                 {"data_port", std::to_string(data_port)},
                 {"fabric", facts.sig.fabric},
                 {"hcas", facts.sig.hcas},
                 {"rate", num(facts.sig.rate_gbps, -1)},
                 {"mtu", std::to_string(facts.sig.mtu)},
                 {"ifname", facts.ifname},
                 {"problems", [&] {
                      std::string s;
                      for (const auto& p : facts.problems) s += (s.empty() ? "" : " | ") + p;
                      return s;
                  }()}};

    if (self.rank != 0) {
        // ---- every other rank: prove the secret, then do what rank 0 says.
        auto ctl = wire::connect_tcp(self.master, self.port, rdzv);
        if (!ctl) {
            std::fprintf(stderr, "mn-preflight: %s rank %u: time-out: rank 0 at %s:%u did not answer (%s)\n",
                         self.label.c_str(), self.rank, self.master.c_str(), self.port,
                         ctl.problem().text().c_str());
            return kTimeout;
        }
        std::string err;
        auto challenge = wire::recv_msg(ctl->get(), rdzv, &err);
        if (!challenge) {
            std::fprintf(stderr, "mn-preflight: %s rank %u: rank 0 sent no challenge (%s)\n", self.label.c_str(),
                         self.rank, err.c_str());
            return kTimeout;
        }
        hello["proof"] = hmac_hex(self.secret, (*challenge)["nonce"] + ":" + hello["rank"]);
        hello["data_addr"] = wire::local_address(ctl->get());
        if (!wire::send_msg(ctl->get(), hello, rdzv)) return kTimeout;
        set_phase("waiting for rank 0's plan");
        auto plan = wire::recv_msg(ctl->get(), end, &err);
        if (!plan) {
            std::fprintf(stderr, "mn-preflight: %s rank %u: rank 0 refused this rank or sent no plan (%s)\n",
                         self.label.c_str(), self.rank, err.c_str());
            return (*challenge)["nonce"].empty() ? kTimeout : kCheckFailed;
        }
        Fields& p = *plan;
        if (p["op"] == "done") return std::atoi(p["code"].c_str());
        Fields result = run_collective(p, share);
        result["op"] = "coll";
        if (!wire::send_msg(ctl->get(), result, end)) return kTimeout;
        // Pair tests (CPU path) on rank 0's cue, until it says done.
        while (true) {
            set_phase("waiting for rank 0");
            auto m = wire::recv_msg(ctl->get(), end, &err);
            if (!m) {
                std::fprintf(stderr, "mn-preflight: %s rank %u: lost rank 0 (%s)\n", self.label.c_str(), self.rank,
                             err.c_str());
                return kTimeout;
            }
            Fields& q = *m;
            if (q["op"] == "done") {
                std::lock_guard<std::mutex> g(watch().mu);
                watch().done = true;
                return std::atoi(q["code"].c_str());
            }
            if (q["op"] != "pair") continue;
            Fields r = run_pair(q, share, std::atof(q["budget"].c_str()));
            if (!wire::send_msg(ctl->get(), r, end)) return kTimeout;
        }
    }

    // ---- rank 0: rendezvous -------------------------------------------------
    uint16_t bound = 0;
    auto lfd = wire::listen_tcp("", self.port, &bound);
    if (!lfd) {
        std::fprintf(stderr, "mn-preflight: %s rank 0: %s\n", self.label.c_str(), lfd.problem().text().c_str());
        return kCheckFailed;
    }
    std::vector<Member> members(self.world);
    std::vector<bool> have(self.world, false);
    members[0].hello = hello;
    members[0].hello["data_addr"] = self.master;
    have[0] = true;
    uint32_t arrived = 1;
    std::vector<std::string> refused;
    set_phase("rendezvous", missing_ranks(members, have));
    while (arrived < self.world && !rdzv.passed()) {
        std::string peer;
        auto c = wire::accept_one(lfd->get(), rdzv, &peer);
        if (!c) break;
        const std::string nonce = random_hex(16);
        const Deadline hs = Deadline::in(std::min(2.0, std::max(0.1, rdzv.left())));
        std::string err;
        if (!wire::send_msg(c->get(), {{"nonce", nonce}}, hs)) continue;
        auto h = wire::recv_msg(c->get(), hs, &err);
        if (!h) {
            refused.push_back("a connection from " + peer + " sent no greeting (" + err + ")");
            continue;
        }
        Fields& f = *h;
        const uint32_t r = static_cast<uint32_t>(std::strtoul(f["rank"].c_str(), nullptr, 10));
        if (f["proof"] != hmac_hex(self.secret, nonce + ":" + f["rank"])) {
            refused.push_back("refused a connection from " + peer + " claiming rank " + f["rank"] +
                              ": it does not hold this step's secret");
            std::fprintf(stderr, "mn-preflight: %s\n", refused.back().c_str());
            continue;
        }
        if (r == 0 || r >= self.world || have[r]) {
            refused.push_back("refused a second or out-of-range rank " + f["rank"] + " from " + peer);
            continue;
        }
        members[r].hello = f;
        members[r].ctl = std::move(c.value());
        have[r] = true;
        ++arrived;
        set_phase("rendezvous", missing_ranks(members, have));
    }
    PreflightReport rep;
    rep.min_busbw = o.min_busbw;
    for (const auto& x : refused) rep.notes.push_back(x);
    // Nodes, in NODE_RANK order.
    std::map<uint32_t, NodeReport> by_node;
    for (uint32_t r = 0; r < self.world; ++r) {
        if (!have[r]) continue;
        Fields& f = members[r].hello;
        const uint32_t node = static_cast<uint32_t>(std::strtoul(f["node"].c_str(), nullptr, 10));
        NodeReport& n = by_node[node];
        n.node = node;
        if (n.ranks.empty()) {
            n.host = f["label"];
            n.sig.fabric = f["fabric"];
            n.sig.hcas = f["hcas"];
            n.sig.rate_gbps = std::atof(f["rate"].c_str());
            n.sig.mtu = static_cast<unsigned>(std::atoi(f["mtu"].c_str()));
            n.ifname = f["ifname"];
            n.gpus = static_cast<uint32_t>(std::atoi(f["gpus"].c_str()));
            if (!f["problems"].empty()) n.problems.push_back(f["problems"]);
        }
        n.ranks.push_back(r);
    }
    std::map<uint32_t, uint32_t> node_index;  // NODE_RANK -> index in rep.nodes
    for (auto& [id, n] : by_node) {
        node_index[id] = static_cast<uint32_t>(rep.nodes.size());
        rep.nodes.push_back(n);
    }
    for (uint32_t r = 0; r < self.world; ++r)
        if (have[r]) members[r].node_index = node_index[static_cast<uint32_t>(std::atoi(members[r].hello["node"].c_str()))];

    auto finish = [&](int) {
        rep.elapsed = now_s() - start;
        judge(rep);
        {
            std::lock_guard<std::mutex> g(watch().mu);
            watch().done = true;
        }
        const std::string out = o.json ? report_json(rep) : report_table(rep);
        std::fwrite(out.data(), 1, out.size(), stdout);
        std::fflush(stdout);
        for (uint32_t r = 1; r < self.world; ++r)
            if (members[r].ctl) wire::send_msg(members[r].ctl.get(), {{"op", "done"}, {"code", std::to_string(rep.code)}},
                                               Deadline::in(2));
        return rep.code;
    };

    if (arrived < self.world) {
        rep.timed_out = "rendezvous: " + missing_ranks(members, have) + " at " + self.master + ":" +
                        std::to_string(self.port) + " within " + num(std::max(1.0, o.timeout * 0.5), -1) + " s (" +
                        std::to_string(arrived) + " of " + std::to_string(self.world) + " ranks came)";
        return finish(kTimeout);
    }
    progress(self, "rendezvous: " + std::to_string(self.world) + " ranks on " + std::to_string(rep.nodes.size()) +
                       " nodes in " + num(now_s() - start) + " s");

    // ---- the path ------------------------------------------------------------
    std::vector<std::string> no_gpu;
    for (uint32_t r = 0; r < self.world; ++r)
        if (members[r].hello["gpu_ok"] != "1") no_gpu.push_back(members[r].hello["label"] + " rank " + std::to_string(r) + ": " + members[r].hello["gpu_why"]);
    std::string path = o.path;
    if (path == "auto") path = no_gpu.empty() ? "gpu" : (no_gpu.size() == self.world ? "cpu" : "mixed");
    if (path == "gpu" && !no_gpu.empty()) path = "mixed";
    if (path == "mixed") {
        for (const auto& x : no_gpu) rep.problems.push_back(x);
        rep.coll.error = "some ranks have no GPU path (" + no_gpu.front() + (no_gpu.size() > 1 ? ", ..." : "") +
                         "); fix those nodes or run with --cpu";
        for (auto& n : rep.nodes)
            for (uint32_t r : n.ranks)
                if (members[r].hello["gpu_ok"] != "1") {
                    n.problems.push_back("no GPU path: " + members[r].hello["gpu_why"]);
                    break;
                }
        return finish(kCheckFailed);
    }
    const bool gpu_path = path == "gpu";
    const std::size_t bytes = o.bytes ? o.bytes : (gpu_path ? (64u << 20) : (4u << 20));
    const int iters = o.iters ? o.iters : (gpu_path ? 20 : 5);
    const std::size_t pair_bytes = o.pair_bytes ? o.pair_bytes : (gpu_path ? (16u << 20) : (1u << 20));
    const auto rounds = o.pairs ? pair_rounds(static_cast<uint32_t>(rep.nodes.size()))
                                : std::vector<std::vector<std::pair<uint32_t, uint32_t>>>{};
    rep.coll.path = gpu_path ? "gpu, NCCL " + ga.nccl_version : "cpu, TCP ring on " + rep.nodes[0].ifname;
    rep.coll.bytes = bytes;
    rep.coll.iters = static_cast<uint32_t>(iters);

    // ---- the plan each rank gets ------------------------------------------------
    std::vector<uint32_t> first(self.world, 0);
    uint32_t lanes = 0;
    for (uint32_t r = 0; r < self.world; ++r) {
        first[r] = lanes;
        lanes += static_cast<uint32_t>(std::max(1, std::atoi(members[r].hello["lanes"].c_str())));
    }
    rep.coll.nranks = gpu_path ? lanes : self.world;
    const std::string id = gpu_path ? gpu::unique_id() : "";
    auto plan_for = [&](uint32_t r) {
        Fields p{{"op", "plan"},         {"path", gpu_path ? "gpu" : "cpu"},  {"bytes", std::to_string(bytes)},
                 {"iters", std::to_string(iters)}, {"warmup", "5"}, {"pair_bytes", std::to_string(pair_bytes)},
                 {"nranks", std::to_string(lanes)}, {"first_rank", std::to_string(first[r])}, {"id", id}};
        const uint32_t nx = (r + 1) % self.world;
        p["next_addr"] = members[nx].hello["data_addr"];
        p["next_port"] = members[nx].hello["data_port"];
        std::string colors;
        for (const auto& round : rounds) {
            int color = -1;
            for (std::size_t k = 0; k < round.size(); ++k)
                if (round[k].first == members[r].node_index || round[k].second == members[r].node_index)
                    color = static_cast<int>(k);
            colors += (colors.empty() ? "" : ",") + std::to_string(color);
        }
        p["colors"] = gpu_path ? colors : "";
        return p;
    };
    set_phase(gpu_path ? "NCCL init and all-reduce" : "ring connect");
    for (uint32_t r = 1; r < self.world; ++r) wire::send_msg(members[r].ctl.get(), plan_for(r), end);

    // Rank 0's own share runs beside the collection of the others'
    // reports, so that a rank stuck in NCCL is named instead of hanging
    // rank 0 with it. The thread only ever outlives run_check when the
    // process is about to exit on a time-out.
    auto own_promise = std::make_shared<std::promise<Fields>>();
    std::future<Fields> own_result = own_promise->get_future();
    std::thread([own = own_promise, plan = plan_for(0), self, my_devices, listen = data_listen->get(), nccl_log, work_end] {
        try {
            own->set_value(run_collective(plan, Share{self, my_devices, listen, nccl_log, work_end}));
        } catch (const std::exception& e) {
            own->set_value({{"ran", "0"}, {"error", std::string("internal error: ") + e.what()}});
        }
    }).detach();
    std::vector<Fields> results(self.world);
    std::vector<bool> reported(self.world, false);
    for (uint32_t r = 1; r < self.world; ++r) {
        set_phase("collecting results", "waiting for rank " + std::to_string(r) + " (" + members[r].hello["label"] + ")");
        std::string err;
        auto m = wire::recv_msg(members[r].ctl.get(), end, &err);
        if (m) {
            results[r] = *m;
            reported[r] = true;
        }
    }
    if (own_result.wait_until(end.at) == std::future_status::ready) {
        results[0] = own_result.get();
        reported[0] = true;
    }
    std::vector<uint32_t> silent;
    for (uint32_t r = 0; r < self.world; ++r)
        if (!reported[r]) silent.push_back(r);
    double worst = 0, init = 0;
    bool all_ran = true, all_correct = true;
    std::set<std::string> inter, intra;
    for (uint32_t r = 0; r < self.world; ++r) {
        if (!reported[r]) continue;
        Fields& f = results[r];
        NodeReport& n = rep.nodes[members[r].node_index];
        if (f["ran"] != "1") all_ran = false;
        if (f["correct"] != "1") all_correct = false;
        if (!f["error"].empty()) {
            n.problems.push_back("rank " + std::to_string(r) + ": " + f["error"]);
            if (rep.coll.error.empty()) rep.coll.error = n.host + " rank " + std::to_string(r) + ": " + f["error"];
        }
        worst = std::max(worst, std::atof(f["seconds"].c_str()));
        init = std::max(init, std::atof(f["init"].c_str()));
        for (const std::string& x : split_list(f["transports"])) {
            if (x.rfind("NET/", 0) == 0) {
                inter.insert(x);
                if (n.inter_transport.find(x) == std::string::npos)
                    n.inter_transport += (n.inter_transport.empty() ? "" : ",") + x;
            } else {
                intra.insert(x);
            }
        }
        if (!f["pair_error"].empty()) rep.notes.push_back("pair tests skipped: " + f["pair_error"]);
    }
    if (!silent.empty()) {
        for (uint32_t r : silent)
            rep.nodes[members[r].node_index].problems.push_back("rank " + std::to_string(r) +
                                                                " never finished the all-reduce (stuck or stopped)");
        rep.timed_out = std::string("collective: ") + (silent.size() == 1 ? "rank " : "ranks ") + rank_ranges(silent) +
                        " did not report within --timeout " + num(o.timeout, -1) + " s";
        return finish(kTimeout);
    }
    rep.coll.ran = all_ran;
    rep.coll.correct = all_ran && all_correct;
    rep.coll.seconds = worst;
    rep.coll.init_seconds = init;
    rep.coll.algbw_gbps = worst > 0 ? bytes / worst / 1e9 : 0;
    rep.coll.busbw_gbps = allreduce_busbw(rep.coll.algbw_gbps, rep.coll.nranks);
    rep.coll.inter_transport = join_list({inter.begin(), inter.end()});
    rep.coll.intra_transport = join_list({intra.begin(), intra.end()});
    progress(self, "all-reduce: busbw " + num(rep.coll.busbw_gbps) + " GB/s, result " +
                       (rep.coll.correct ? "correct" : "WRONG") + " (" + num(now_s() - start) + " s)");

    // ---- pairs -------------------------------------------------------------
    if (gpu_path) {
        // Each rank timed its pair rounds; a pair's time is its slowest rank's.
        std::vector<std::vector<double>> pair_secs(self.world);  // [rank][round]
        for (uint32_t r = 0; r < self.world; ++r) pair_secs[r] = split_numbers(results[r]["pair_seconds"]);
        for (std::size_t k = 0; k < rounds.size(); ++k)
            for (std::size_t q = 0; q < rounds[k].size(); ++q) {
                PairResult pr{rounds[k][q].first, rounds[k][q].second, 0, ""};
                double slowest = 0;
                uint32_t nr = 0;
                for (uint32_t r = 0; r < self.world; ++r) {
                    if (members[r].node_index != pr.a && members[r].node_index != pr.b) continue;
                    nr += static_cast<uint32_t>(std::max(1, std::atoi(members[r].hello["lanes"].c_str())));
                    const std::vector<double>& secs = pair_secs[r];
                    if (k < secs.size()) slowest = std::max(slowest, secs[k] > 0 ? secs[k] : 1e9);
                    else pr.error = "no timing from rank " + std::to_string(r);
                }
                if (slowest >= 1e9) pr.error = "the pair's all-reduce failed";
                if (slowest > 0 && pr.error.empty())
                    pr.busbw_gbps = allreduce_busbw(pair_bytes / slowest / 1e9, nr);
                if (slowest > 0 || !pr.error.empty()) rep.pairs.push_back(pr);
            }
    } else {
        // Node representatives (their lowest rank) test each pair, one round
        // at a time so pairs never share a link with another pair's test.
        std::vector<uint32_t> repr(rep.nodes.size());
        for (std::size_t i = 0; i < rep.nodes.size(); ++i) repr[i] = rep.nodes[i].ranks.front();
        const int piters = 3;
        for (std::size_t k = 0; k < rounds.size() && !end.passed(); ++k) {
            const double budget = std::max(1.0, end.left() / double(rounds.size() - k));
            set_phase("pair round " + std::to_string(k + 1) + " of " + std::to_string(rounds.size()));
            std::vector<std::pair<uint32_t, std::string>> expect;  // rank, tag
            std::optional<std::pair<Fields, uint32_t>> own;         // rank 0's part
            for (std::size_t q = 0; q < rounds[k].size(); ++q) {
                const uint32_t a = repr[rounds[k][q].first], b = repr[rounds[k][q].second];
                const std::string tag = "pair:" + std::to_string(k) + ":" + std::to_string(q);
                for (int side = 0; side < 2; ++side) {
                    const uint32_t me_r = side == 0 ? a : b, peer = side == 0 ? b : a;
                    Fields m{{"op", "pair"}, {"tag", tag}, {"peer", std::to_string(peer)},
                             {"peer_addr", members[peer].hello["data_addr"]}, {"peer_port", members[peer].hello["data_port"]},
                             {"connect", side == 0 ? "1" : "0"}, {"bytes", std::to_string(pair_bytes)},
                             {"iters", std::to_string(piters)}, {"budget", num(budget, 3)}};
                    if (me_r == 0) own = std::make_pair(m, q);
                    else {
                        wire::send_msg(members[me_r].ctl.get(), m, end);
                        expect.push_back({me_r, tag});
                    }
                }
            }
            std::map<std::string, std::vector<std::string>> errors;
            std::map<std::string, double> slowest;
            if (own) {
                Fields r = run_pair(own->first, share, budget);
                const std::string tag = own->first["tag"];
                if (!r["error"].empty()) errors[tag].push_back(r["error"]);
                slowest[tag] = std::max(slowest[tag], std::atof(r["seconds"].c_str()));
            }
            for (const auto& [r, tag] : expect) {
                std::string err;
                auto m = wire::recv_msg(members[r].ctl.get(), Deadline::in(std::min(end.left(), budget + 2)), &err);
                if (!m) {
                    errors[tag].push_back("rank " + std::to_string(r) + " did not report");
                    continue;
                }
                if (!(*m)["error"].empty()) errors[tag].push_back((*m)["error"]);
                slowest[tag] = std::max(slowest[tag], std::atof((*m)["seconds"].c_str()));
            }
            for (std::size_t q = 0; q < rounds[k].size(); ++q) {
                const std::string tag = "pair:" + std::to_string(k) + ":" + std::to_string(q);
                PairResult pr{rounds[k][q].first, rounds[k][q].second, 0, ""};
                if (!errors[tag].empty()) pr.error = errors[tag].front();
                else if (slowest[tag] > 0) pr.busbw_gbps = allreduce_busbw(pair_bytes / slowest[tag] / 1e9, 2);
                rep.pairs.push_back(pr);
            }
            // A long check (slow links, many rounds) shows it is moving.
            if (rounds.size() > 3 || now_s() - start > 5)
                progress(self, "pair round " + std::to_string(k + 1) + " of " + std::to_string(rounds.size()) +
                                   " done (" + num(now_s() - start) + " s)");
        }
        if (!rounds.empty())
            progress(self, "pair tests: " + std::to_string(rep.pairs.size()) + " pairs in " +
                               std::to_string(rounds.size()) + " rounds (" + num(now_s() - start) + " s)");
    }
    return finish(kPass);
}

int run_prolog(const PrologOptions& o) {
    const std::string host = host_name();
    Self self;
    self.label = host;
    start_watchdog(o.timeout, self, o.json);
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
        if (!ports.empty() && choice->fabric == "socket") {
            std::string why;
            for (const auto& v : choice->ports)
                why += (why.empty() ? "" : ", ") + v.port.name() + " " + (v.port.problem.empty() ? v.reason : v.port.problem);
            problems.push_back("no usable RDMA port (" + why + ")");
        }
        for (const auto& v : choice->ports)
            if (!v.chosen && v.port.state != "ACTIVE") notes.push_back(v.port.name() + " " + v.reason);
    }
    if (std::string g = gpu::local_check(o.timeout); !g.empty()) problems.push_back(g);
    const auto ga = gpu::probe();
    std::string line = "mn-preflight: " + host + ": ";
    if (problems.empty())
        line += "ok (fabric " + fabric + ", " + std::to_string(ga.ok ? ga.devices : 0) + " GPUs" +
                (notes.empty() ? "" : "; " + notes.front()) + ")";
    else
        for (std::size_t i = 0; i < problems.size(); ++i) line += (i ? "; " : "") + problems[i];
    {
        std::lock_guard<std::mutex> g(watch().mu);
        watch().done = true;
    }
    if (!o.reason_file.empty() && !problems.empty()) {
        std::ofstream out(o.reason_file);
        // Slurm's drain reason: one line, short.
        std::string reason = line.substr(std::string("mn-preflight: ").size());
        if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
        out << reason << "\n";
        if (!out) std::fprintf(stderr, "mn-preflight: cannot write --reason-file %s\n", o.reason_file.c_str());
    }
    if (o.json) {
        std::string p;
        for (const auto& x : problems) p += (p.empty() ? "" : ",") + json_string(x);
        std::printf("{\"host\":%s,\"verdict\":\"%s\",\"fabric\":%s,\"gpus\":%d,\"problems\":[%s]}\n",
                    json_string(host).c_str(), problems.empty() ? "PASS" : "FAIL", json_string(fabric).c_str(),
                    ga.ok ? ga.devices : 0, p.c_str());
    } else {
        std::printf("%s\n", line.c_str());
    }
    return problems.empty() ? kPass : kCheckFailed;
}

}  // namespace mn
