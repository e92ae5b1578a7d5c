// SPDX-License-Identifier: Apache-2.0
#include "helper/watch.h"

#include "helper/check/self.h"
#include "helper/gpu.h"
#include "helper/slurm_command.h"
#include "helper/watch_plane.h"
#include "helper/wire.h"

#include <dirent.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/check/exclude_list.h"
#include "lib/check/flight_record.h"
#include "lib/check/history.h"
#include "lib/check/link_watch.h"
#include "lib/check/nccl_ras.h"
#include "lib/check/gpu_events.h"
#include "lib/check/rank_positions.h"
#include "lib/check/stall.h"
#include "lib/check/watch_verdict.h"
#include "lib/fabric/fabric.h"
#include "lib/plan/hostlist.h"
#include "lib/plan/netprobe.h"
#include "lib/plan/step_plan.h"
#include "lib/util/bounded_file.h"
#include "lib/util/json.h"
#include "lib/util/replace_file.h"
#include "lib/util/text.h"

extern char** environ;

namespace mn {
namespace {

constexpr double kLook = 1.0;  // seconds between looks at the task's processes
// Rank 0's watch says the block this long after the first finding: the
// watchers that one fault makes see it (a link: the node's own and its
// peers') name it within a look or two of each other.
constexpr double kGather = 2.0;
constexpr double kTellWait = 3.0;  // seconds another node's watch tries to tell rank 0's
constexpr double kFlightWait = 10.0;  // seconds for the Flight Recorder's dump once asked for
// Between two askings of the program's Flight Recorder for where its ranks
// stand, a sixth of the window, 2 to 10 s (two while every rank moves): a
// stall is named within the window and three of these (torch writes a dump
// in well under a second without stack traces to symbolize; the watch
// reads one of 2,000 entries in about 10 ms).
double probe_period(double window) { return std::min(10.0, std::max(2.0, window / 6)); }
// Signals Slurm sends every process of the step: the program takes them
// itself (their default actions restored), the watch outlives them.
constexpr int kStepSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT};

void say(const std::string& text) {
    std::size_t off = 0;
    while (off < text.size()) {
        const ssize_t n = write(STDERR_FILENO, text.data() + off, text.size() - off);
        if (n <= 0 && errno != EINTR) return;
        if (n > 0) off += static_cast<std::size_t>(n);
    }
}

double monotonic() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

// A small file of /proc, or "" (the process may be gone, or another user's).
std::string proc_file(int pid, const char* what, std::size_t max = 4096) {
    return read_bounded_text("/proc/" + std::to_string(pid) + "/" + what, max).value_or("");
}

// Every process this user can see, from /proc.
std::vector<ProcStat> all_processes() {
    std::vector<ProcStat> out;
    DIR* d = opendir("/proc");
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        const std::string text = proc_file(std::atoi(e->d_name), "stat", 1024);
        if (auto p = parse_proc_stat(text)) out.push_back(*p);
    }
    closedir(d);
    return out;
}

// The task's processes, root first, from the children the kernel lists
// for each thread (/proc/PID/task/TID/children): a look reads the task's
// tree, not every process of the node (with 8,192 tasks on one machine,
// each watch reading every /proc/PID/stat each second would not keep up).
// Every process of /proc where the kernel keeps no such list
// (CONFIG_PROC_CHILDREN unset).
std::vector<ProcStat> task_tree(int root) {
    const std::string own = "/proc/" + std::to_string(root) + "/task/" + std::to_string(root) + "/children";
    if (access(own.c_str(), R_OK) != 0) return process_tree(all_processes(), root);
    std::vector<ProcStat> out;
    std::set<int> seen;
    std::vector<int> next{root};
    while (!next.empty() && out.size() < 4096) {
        const int pid = next.back();
        next.pop_back();
        if (!seen.insert(pid).second) continue;
        const auto p = parse_proc_stat(proc_file(pid, "stat", 1024));
        if (!p) continue;  // gone meanwhile
        out.push_back(*p);
        const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
        DIR* d = opendir(tasks.c_str());
        if (!d) continue;
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
            const auto kids = read_bounded_text(tasks + "/" + e->d_name + "/children", 1 << 16).value_or("");
            for (const std::string& k : split_list(kids, ' '))
                if (auto n = whole_number(k); n && *n > 0 && *n < (1u << 31)) next.push_back(static_cast<int>(*n));
        }
        closedir(d);
    }
    return out;
}

// One variable of a process's environment (the same user's: readable).
std::string env_of(int pid, const std::string& name) {
    const std::string env = proc_file(pid, "environ", 1 << 20);
    const std::string key = name + "=";
    std::size_t at = 0;
    while (at < env.size()) {
        const std::size_t end = env.find('\0', at);
        const std::string kv = env.substr(at, end == std::string::npos ? std::string::npos : end - at);
        if (kv.compare(0, key.size(), key) == 0) return kv.substr(key.size());
        if (end == std::string::npos) break;
        at = end + 1;
    }
    return "";
}

// The report directory: the one given, made 0700 and refused when another
// user owns it or may write to it; else a new one, mkdtemp's, which no
// one else can have made first.
Outcome<std::string> report_dir(const CheckSettings& s, const std::string& job, const std::string& step) {
    if (!s.watch_dir.empty()) {
        if (mkdir(s.watch_dir.c_str(), 0700) != 0 && errno != EEXIST)
            return Problem{"--report-dir " + s.watch_dir + ": " + std::strerror(errno), "give a directory you can make"};
        struct stat st{};
        if (lstat(s.watch_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            return Problem{"--report-dir " + s.watch_dir + " is not a directory", "give a directory of your own"};
        if (st.st_uid != getuid() || (st.st_mode & 022))
            return Problem{"--report-dir " + s.watch_dir + " is another user's or others may write to it",
                           "give a directory of your own, mode 0700"};
        return s.watch_dir;
    }
    std::string base = env_or("TMPDIR", "/tmp");
    if (base.empty() || base[0] != '/') base = "/tmp";
    std::string tmpl = base + "/mn-nccl-watch." + (job.empty() ? "nojob" : job) + "." + (step.empty() ? "0" : step) +
                       ".XXXXXX";
    if (!mkdtemp(tmpl.data()))
        return Problem{"cannot make a report directory in " + base + " (" + std::strerror(errno) + ")",
                       "set TMPDIR to a directory you can write, or give --report-dir DIR"};
    return tmpl;
}

// What the frameworks need to keep and give up evidence, where the user
// did not set it: PyTorch's Flight Recorder (both its names across
// releases), its dump on a watchdog time-out, and the pipe that asks for a
// dump on demand, all into DIR.
void arm(const std::string& dir, const std::string& job, const std::string& step) {
    auto keep = [](const char* name, const std::string& value) { setenv(name, value.c_str(), 0); };
    // NCCL's RAS at the step's own loopback address (lib/check/nccl_ras.h),
    // so that the report asked for is this step's, not another job's.
    if (!job.empty() && !step.empty())
        keep("NCCL_RAS_ADDR", ras_address(static_cast<uint32_t>(std::strtoul(job.c_str(), nullptr, 10)),
                                          static_cast<uint32_t>(std::strtoul(step.c_str(), nullptr, 10))));
    keep("TORCH_FR_BUFFER_SIZE", "2000");
    keep("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000");
    keep("TORCH_NCCL_DUMP_ON_TIMEOUT", "1");
    // A collective's start on the GPU (a CUDA event), so that a rank whose
    // GPU never starts the collective the others' started is told apart.
    keep("TORCH_NCCL_ENABLE_TIMING", "1");
    keep("TORCH_FR_DUMP_TEMP_FILE", dir + "/fr_rank_");
    keep("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", dir + "/fr_rank_");
    keep("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", dir + "/fr_pipe_");
    setenv("MN_NCCL_WATCH_DIR", dir.c_str(), 1);
}


// The inodes of the sockets the task's processes hold (/proc/PID/fd/N ->
// "socket:[INODE]").
std::set<uint64_t> socket_inodes(const std::vector<ProcStat>& tree) {
    std::set<uint64_t> out;
    for (const auto& p : tree) {
        const std::string dir = "/proc/" + std::to_string(p.pid) + "/fd";
        DIR* d = opendir(dir.c_str());
        if (!d) continue;
        std::size_t seen = 0;
        char target[64];
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] == '.' || ++seen > 65536) continue;
            const ssize_t n = readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
            if (n < 10 || std::strncmp(target, "socket:[", 8) != 0) continue;
            target[n] = '\0';
            out.insert(std::strtoull(target + 8, nullptr, 10));
        }
        closedir(d);
    }
    return out;
}

// The program's IPv4 TCP connections, as its own network namespace shows
// them (a container with a network of its own included); none where the
// file cannot be read as the kernel writes it.
std::vector<TcpSocket> program_connections(int pid, const std::set<uint64_t>& inodes) {
    std::vector<TcpSocket> out;
    if (inodes.empty()) return out;
    const auto text = read_bounded_text("/proc/" + std::to_string(pid) + "/net/tcp", 8 << 20);
    if (!text) return out;
    auto all = parse_proc_net_tcp(*text);
    if (!all) return out;
    for (const auto& c : all.value())
        if (inodes.count(c.inode)) out.push_back(c);
    return out;
}

// This node's interfaces with their IPv4 addresses, up with a carrier or not.
std::vector<LocalInterface> interfaces_here() {
    std::vector<LocalInterface> out;
    for (const auto& i : local_interfaces())
        for (const auto& a : i.addrs) {
            LocalInterface l;
            l.name = i.name;
            l.addr = a.str();
            l.up = i.up && i.running;
            out.push_back(l);
        }
    return out;
}

// The step's nodes, in Slurm's order (SLURM_NODEID indexes them).
Outcome<Hostlist> step_nodes() { return Hostlist::parse(env_or("SLURM_STEP_NODELIST", env_or("SLURM_JOB_NODELIST"))); }

// The step's node whose name resolves to `addr`, or "" (the data may go
// over another network than the one the names resolve to).
std::string node_of(const std::string& addr) {
    auto nodes = step_nodes();
    if (!nodes) return "";
    for (std::size_t i = 0; i < nodes->size() && i < 4096; ++i) {
        std::string err;
        for (const auto& a : resolve_ipv4((*nodes)[i], err))
            if (a.str() == addr) return (*nodes)[i];
    }
    return "";
}

// The step's RDMA ports on this node (NCCL_IB_HCA as NCCL reads it; none
// with NCCL_IB_DISABLE=1), as sysfs lists them under `root`: up to 64.
std::vector<std::pair<std::string, unsigned>> step_ports(const std::string& root) {
    std::vector<std::pair<std::string, unsigned>> out;
    if (env_or("NCCL_IB_DISABLE") == "1") return out;
    const std::string hcas = env_or("NCCL_IB_HCA");
    const std::string ib = root + "/class/infiniband";
    DIR* d = opendir(ib.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string hca = e->d_name;
        DIR* p = opendir((ib + "/" + hca + "/ports").c_str());
        if (!p) continue;
        while (dirent* q = readdir(p)) {
            const auto n = whole_number(q->d_name);
            if (n && *n > 0 && *n < 256 && out.size() < 64 && hca_selected(hcas, hca, static_cast<unsigned>(*n)))
                out.emplace_back(hca, static_cast<unsigned>(*n));
        }
        closedir(p);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

std::string port_dir(const std::string& root, const std::pair<std::string, unsigned>& p) {
    return root + "/class/infiniband/" + p.first + "/ports/" + std::to_string(p.second);
}

// A sysfs file's one line, its newline off.
std::string sysfs_line(const std::string& path) {
    std::string text = read_bounded_text(path, 256).value_or("");
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

// The physical link's own error counters, summed (PortReading::link_errors).
constexpr const char* kLinkErrorCounters[] = {"symbol_error", "link_error_recovery", "port_rcv_errors",
                                              "local_link_integrity_errors"};

// Their state now, and the counters that say whether each still carries:
// eight small files a port.
std::vector<PortReading> read_ports(const std::string& root, const std::vector<std::pair<std::string, unsigned>>& ports) {
    std::vector<PortReading> out;
    for (const auto& p : ports) {
        const std::string dir = port_dir(root, p);
        PortReading r;
        r.name = p.first + ":" + std::to_string(p.second);
        r.state = parse_state(sysfs_line(dir + "/state"));
        r.phys_state = parse_state(sysfs_line(dir + "/phys_state"));
        r.rcv_packets = port_counter(sysfs_line(dir + "/counters/port_rcv_packets"));
        r.ack_timeouts = port_counter(sysfs_line(dir + "/hw_counters/local_ack_timeout_err"));
        uint64_t sum = 0;
        bool all = true;
        for (const char* n : kLinkErrorCounters) {
            const auto v = port_counter(sysfs_line(dir + "/counters/" + n));
            all = all && v;
            sum += v.value_or(0);
        }
        if (all) r.link_errors = sum;
        out.push_back(std::move(r));
    }
    return out;
}

// scancel of this step, all its tasks at once; false when it could not run.
// scancel runs in the step it ends: killed by its SIGKILL, it did its work.
bool end_step(const std::string& job, const std::string& step, std::string& why) {
    int st = 0;
    return run_slurm_command({"scancel", "--signal=KILL", job + "." + step}, why, &st) ||
           (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

void ignore_signal(int) {}

struct Task {
    std::string job, step, host, rank, local_rank, dir;
    std::string exclude_file;  // --exclude-file: where a node named for its link goes
    std::string history_dir;   // --history: where it gets a line
    bool abort = false;
    // Rank 0's watch says the step's one block; the others tell it at
    // rank0_addr:port (MN_NCCL_WATCH_PORT), or say their own where there is
    // no such port or it cannot be told.
    bool lead = false;
    std::string rank0_addr, secret;
    uint16_t port = 0;
    // The standby: the first task of the step's second node listens at the
    // same port, and a watch that cannot tell rank 0's (rank 0's node cut
    // off) tells it instead, so the others' findings are still one block.
    bool standby = false;
    std::string standby_addr;  // "" where there is none (one node)
    // The dumps the watch itself asked for (path -> its mtime, ns): a dump
    // torch wrote on its own (its watchdog's time-out) is any other.
    mutable std::map<std::string, int64_t> asked_dumps;
};

int64_t mtime_ns(const struct stat& st) { return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

// The Flight Recorder's files in the report directory that torch wrote on
// its own (not at the watch's asking).
std::vector<std::string> dumps_in(const Task& t) {
    std::vector<std::string> out;
    if (DIR* d = opendir(t.dir.c_str())) {
        while (dirent* e = readdir(d)) {
            if (std::strncmp(e->d_name, "fr_rank_", 8) != 0 || out.size() >= 64) continue;
            const std::string path = t.dir + "/" + e->d_name;
            struct stat st{};
            const auto asked = t.asked_dumps.find(path);
            if (asked != t.asked_dumps.end() && stat(path.c_str(), &st) == 0 && mtime_ns(st) == asked->second) continue;
            out.push_back(path);
        }
        closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Where this watch's own ranks had got to, from their Flight Recorders:
// each pipe of the report directory (fr_pipe_RANK.pipe, torch's, one per
// rank of the task: torchrun's workers each have theirs) asked for a dump
// as soon as something is named, each dump read when the block is said,
// waiting until kFlightWait after the asking (torch takes seconds to
// write one: its stack traces). Nothing is asked, and nobody waits, where
// the program keeps no pipe (no NCCL process group; Debian's torch) or
// nobody reads it (the program gone).
struct FlightAsk {
    struct Asked {
        std::string rank;
        std::string path;  // its dump, where torch writes it (TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank)
        bool done = false;
        off_t size = -1;
        std::optional<FlightSummary> summary;  // once done and read
        std::string problem;                   // once done and not read
        bool torch_own = false;                // read from torch's own dump (its watchdog's), not an answer
        bool deaf = false;                     // torch reads the pipe no more: its last dump is read at once
    };
    std::vector<Asked> asked;
    timespec before{};
    double at = 0;
};

FlightAsk ask_flight(const Task& t) {
    FlightAsk a;
    clock_gettime(CLOCK_REALTIME, &a.before);
    a.at = monotonic();
    if (DIR* d = opendir(t.dir.c_str())) {
        while (dirent* e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.rfind("fr_pipe_", 0) != 0 || n.size() < 14 || n.compare(n.size() - 5, 5, ".pipe") != 0) continue;
            const std::string rank = n.substr(8, n.size() - 13);
            if (!whole_number(rank) || a.asked.size() >= 16) continue;
            // Torch's monitor thread holds the pipe open for reading; with
            // no reader, opening it fails at once (ENXIO), never blocks.
            const int fd = open((t.dir + "/" + n).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) continue;
            // The last asking still unread in the pipe: torch no longer
            // reads it (its watchdog dumped of its own and serves no more),
            // so the rank stands where its last dump says.
            int unread = 0;
            const bool deaf = ioctl(fd, FIONREAD, &unread) == 0 && unread > 0;
            const bool sent = deaf || write(fd, "1\n", 2) == 2;
            close(fd);
            if (!sent) continue;
            a.asked.emplace_back();
            a.asked.back().rank = rank;
            a.asked.back().path = t.dir + "/fr_rank_" + rank;
            a.asked.back().deaf = deaf;
        }
        closedir(d);
    }
    return a;
}

// Reads each dump asked for that is whole now, without waiting; true once
// every one is read, or kFlightWait has passed since the asking.
bool poll_flight(const Task& t, FlightAsk& a) {
    bool all = true;
    for (FlightAsk::Asked& k : a.asked) {
        if (k.done) continue;
        const std::string& path = k.path;
        struct stat st{};
        const bool fresh = stat(path.c_str(), &st) == 0 &&
                           (st.st_mtim.tv_sec > a.before.tv_sec ||
                            (st.st_mtim.tv_sec == a.before.tv_sec && st.st_mtim.tv_nsec >= a.before.tv_nsec));
        if (!fresh || st.st_size == 0) {
            // Torch's own dump (its watchdog's, on an error or a time-out,
            // or a peer's signal through the store): torch answers no more
            // asking after it, so where the rank stood then is read from it.
            const auto asked = t.asked_dumps.find(path);
            if (!fresh && st.st_size > 0 && (k.deaf || asked == t.asked_dumps.end() || asked->second != mtime_ns(st)))
                if (const auto bytes = read_bounded_text(path, 64 << 20))
                    if (auto f = read_flight_record(*bytes)) {
                        k.done = k.torch_own = true;
                        k.summary = std::move(f.value());
                        continue;
                    }
            all = false;
            continue;
        }
        // Whole once it reads to the pickle's end (torch writes it in one
        // go); one cut short is read again at the next poll, and what is
        // wrong with it said only once its size held still between two.
        const auto bytes = read_bounded_text(path, 64 << 20);
        auto f = bytes ? read_flight_record(*bytes) : Outcome<FlightSummary>(Problem{"its dump " + path + " could not be read", ""});
        if (!f && st.st_size != k.size) {
            k.size = st.st_size;
            all = false;
            continue;
        }
        k.done = true;
        t.asked_dumps[path] = mtime_ns(st);
        if (f) k.summary = std::move(f.value());
        else k.problem = f.problem().text();
    }
    return all || monotonic() >= a.at + kFlightWait;
}

// Where this watch's own ranks stand, for the block: every dump asked for
// read, waiting up to kFlightWait after the asking.
std::vector<std::string> flight_positions(const Task& t, FlightAsk& a) {
    while (!a.asked.empty() && !poll_flight(t, a)) usleep(100 * 1000);
    std::vector<std::string> out;
    for (const FlightAsk::Asked& k : a.asked) {
        if (k.summary)
            for (const std::string& w : flight_words(*k.summary)) out.push_back("rank " + k.rank + ": " + w);
        else
            out.push_back("rank " + k.rank + ": " +
                          (k.done ? k.problem : "no dump within " + num(kFlightWait, 0) + " s of asking"));
    }
    a.asked.clear();
    return out;
}

// Adds `node` to the exclude file: "node1 added to PATH", or why not. The
// watchers of several nodes may name one link at once: each adds under the
// file's lock and writes it in place (after a rename, a watcher waiting on
// the old file's lock would add to a stale copy).
std::string exclude_node(const std::string& path, const std::string& node) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return "cannot open " + path + " (" + std::strerror(errno) + "): " + node + " not added";
    std::string why;
    if (flock(fd, LOCK_EX) == 0) {
        std::string text;
        char buf[4096];
        ssize_t n;
        while (text.size() < (1 << 20) && (n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
        const auto merged = add_to_exclude(text, node);
        if (!merged) why = path + ": " + merged.problem().text() + ": " + node + " not added";
        else if (ftruncate(fd, 0) != 0 || pwrite(fd, merged->data(), merged->size(), 0) != static_cast<ssize_t>(merged->size()))
            why = "cannot write " + path + " (" + std::strerror(errno) + "): " + node + " not added";
    } else {
        why = "cannot lock " + path + " (" + std::strerror(errno) + "): " + node + " not added";
    }
    close(fd);
    return why.empty() ? node + " added to " + path : why;
}

WatchReport report_of(const Task& t, int pid, const std::string& comm) {
    WatchReport r;
    r.job = t.job;
    r.step = t.step;
    r.host = t.host;
    // The process's own rank where it has one (torchrun's workers: RANK),
    // else the task's.
    const std::string rank = env_of(pid, "RANK");
    r.rank = !rank.empty() ? rank : t.rank;
    const std::string local = env_of(pid, "LOCAL_RANK");
    r.local_rank = !local.empty() ? local : t.local_rank;
    r.pid = pid;
    r.comm = comm;
    return r;
}

// A link named: this node's own (the task's program and pid), or a
// peer's, by its node where its name resolves to the address (no process
// of the peer's is known here).
WatchReport link_report(const Task& t, const LinkStall& l, int child, const std::string& comm) {
    // The peer's node by name only for a peer's link: behind this node's
    // own link that is down, the resolver may wait without end.
    const std::string peer = l.own ? "" : node_of(l.peer);
    WatchReport r = l.own ? report_of(t, child, comm) : WatchReport{};
    r.kind = "link down";
    if (!l.own) {
        r.job = t.job;
        r.step = t.step;
        r.host = peer.empty() ? l.peer : peer;
        r.seen_from = t.host + " rank " + t.rank + " (pid " + std::to_string(child) + ")";
    }
    r.detail = link_stall_words(l, peer, t.host);
    // Host evidence, the kernel's: a peer of the step by name goes into the
    // exclude file (settle), where this side's interface was read up. A
    // node whose own link is down leaves it to the others' watchers: its
    // file system may be behind that link.
    r.host_evidence = !l.own && !peer.empty() && !l.ifname.empty();
    if (!t.exclude_file.empty() && !r.host_evidence)
        r.excluded = l.own           ? "left to the other nodes' watchers (this node's link is down)"
                     : peer.empty() ? "not added: " + l.peer + " is no node of the step by name"
                                    : "not added: this side's interface was not read (the program's network "
                                      "namespace is its own), so this side's link is not ruled out";
    r.evidence.push_back(l.own ? t.host + "'s " + l.ifname + ": not up, or no carrier"
                               : "the kernel on " + t.host + " retransmits to " + l.peer + " and hears no acknowledgement");
    return r;
}

// An RDMA port of the step's named (PortWatch): this node's link, with the
// kernel's words for it. Out of ACTIVE, or ACTIVE with its own link's
// errors climbing, is host evidence; ACTIVE and silent while its senders
// time out may be the far side's (the cable's other end, the switch port,
// the peer), so the node is named and not blamed.
WatchReport port_report(const Task& t, const PortStall& p, const std::string& pdir, int child, const std::string& comm) {
    WatchReport r = report_of(t, child, comm);
    r.kind = "link down";
    r.detail = port_stall_words(p, t.host);
    const std::string on = t.host + "'s " + pdir;
    r.evidence.push_back(on + "/state: " + p.port.state);
    if (p.fault != PortFault::NotActive) {
        r.evidence.push_back(on + "/counters/port_rcv_packets: " + std::to_string(p.port.rcv_packets.value_or(0)) +
                             ", unchanged for " + num(p.seconds, 0) + " s while this node's ranks wait in a collective");
        if (p.port.ack_timeouts)
            r.evidence.push_back(on + "/hw_counters/local_ack_timeout_err: " + std::to_string(*p.port.ack_timeouts) +
                                 " (+" + std::to_string(p.ack_timeouts) + ")");
        if (p.port.link_errors)
            r.evidence.push_back(on + "/counters/{symbol_error,link_error_recovery,port_rcv_errors," +
                                 "local_link_integrity_errors}: " + std::to_string(*p.port.link_errors) + " in all (+" +
                                 std::to_string(p.link_errors) + ")");
    }
    const std::string downed = sysfs_line(pdir + "/counters/link_downed");
    if (!downed.empty()) r.evidence.push_back("link_downed " + downed);
    r.host_evidence = p.fault != PortFault::Silent;
    if (!t.exclude_file.empty() && !r.host_evidence)
        r.excluded = "not added: a port that hears nothing may be let down by its far side (the cable's other end, "
                     "the switch port, the peer); its own link's errors would be this node's";
    return r;
}

// A subject named with host evidence: into the exclude file and the
// history, by whoever says the block (rank 0's watch, or a node that could
// not tell it), before --abort ends the step.
void settle(const Task& t, WatchReport& r) {
    if (!r.host_evidence) return;
    if (!t.exclude_file.empty()) r.excluded = exclude_node(t.exclude_file, r.host);
    if (!t.history_dir.empty()) {
        // Its history line: a failure of the fabric's, as the check's own.
        HistoryRecord h;
        h.job = t.job;
        h.step = t.step;
        h.time = static_cast<int64_t>(::time(nullptr));
        h.node = r.host;
        h.verdict = r.kind + " (mn-nccl watch)";
        h.kind = kind_word(r.kind == "link down" ? VerdictKind::Fabric : VerdictKind::Fault);
        h.findings = {r.detail};
        const auto w = append_history(t.history_dir, h);
        r.history = w ? "line in " + *w : w.problem().text();
    }
}

// NCCL's RAS report at ADDR ("127.A.B.C:PORT" or "localhost:PORT", as
// NCCL_RAS_ADDR says; other hosts are not asked), within `seconds`: the
// whole reply, or "" (nobody listening, no answer in time). RAS is told to
// wait 2 s for missing peers; a refusal is not tried again (a step without
// NCCL has no RAS, and must not wait for one to end).
std::string ask_ras(const std::string& addr, double seconds) {
    const auto colon = addr.rfind(':');
    std::string host = colon == std::string::npos ? "" : addr.substr(0, colon);
    const unsigned long port = colon == std::string::npos ? 0 : std::strtoul(addr.c_str() + colon + 1, nullptr, 10);
    if (host == "localhost") host = "127.0.0.1";
    in_addr a{};
    if (port == 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &a) != 1 || (ntohl(a.s_addr) >> 24) != 127)
        return "";
    const auto d = wire::Deadline::in(seconds);
    auto fd = wire::connect_tcp(host, static_cast<uint16_t>(port), d, wire::Retry::Never);
    if (!fd) return "";
    const std::string ask = "CLIENT PROTOCOL 2\nTIMEOUT 2\nSTATUS\n";
    if (send(fd->get(), ask.data(), ask.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(ask.size())) return "";
    std::string reply;
    char buf[16384];
    while (reply.size() < (256u << 10) && !d.passed()) {
        pollfd p{fd->get(), POLLIN, 0};
        if (poll(&p, 1, d.poll_ms()) < 0 && errno != EINTR) break;
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = recv(fd->get(), buf, sizeof buf, 0);
        if (n <= 0) break;  // RAS closes once its report is sent
        reply.append(buf, static_cast<std::size_t>(n));
    }
    return reply;
}

// The block on stderr, a JSON report per subject, then (with --abort) the
// step's end. `note`: a last line (why rank 0's watch did not say it).
// `flight`: the Flight Recorder's dumps asked for when the first of them was named.
void say_block(const Task& t, const std::vector<WatchReport>& reports, const std::string& note = "",
               FlightAsk* flight = nullptr) {
    std::vector<WatchReport> subjects = merge_reports(reports);
    // NCCL's own view of the job, asked once and only when the step ends
    // (a report asked while ranks are missing has crashed NCCL before
    // 2.29.2): kept whole in the directory, its telling lines in the first
    // subject's evidence.
    if (t.abort && !subjects.empty()) {
        const std::string addr = env_or("NCCL_RAS_ADDR", "localhost:28028");
        const std::string reply = ask_ras(addr, 5);
        const RasSummary ras = summarize_ras(reply);
        if (!reply.empty() && (ras.troubled || !ras.version.empty())) {
            replace_file(t.dir + "/nccl_ras.txt", reply, 0600);
            std::string words = ras.version.empty() ? "" : ras.version;
            for (const std::string& l : ras.lines) words += (words.empty() ? "" : "; ") + l;
            if (!ras.troubled) words += "; every communicator RUNNING, no errors";
            subjects.front().evidence.push_back("NCCL RAS at " + addr + " (whole in " + t.dir + "/nccl_ras.txt): " + words);
        }
    }
    for (std::size_t i = 0; i < subjects.size(); ++i) {
        WatchReport& r = subjects[i];
        r.job = t.job;
        r.step = t.step;
        settle(t, r);
        // A report on a process is named by its rank; one on a peer's link
        // by the node named.
        const std::string file = t.dir + "/" + r.host + (r.pid ? ".rank" + r.rank : ".link") + ".json";
        if (auto w = replace_file(file, watch_report_json(r) + "\n", 0600); w) r.report_file = file;
        if (i + 1 == subjects.size())
            r.action = t.abort ? "--abort: ending step " + t.job + "." + t.step + " (scancel)"
                               : "the step goes on; srun --mn-nccl-watch=abort ends it at this point";
    }
    // Where this watch's own ranks stand (rank 0's, for rank 0's watch:
    // a rank that waits on the named one), from their Flight Recorders.
    std::string where;
    if (flight)
        for (const std::string& l : flight_positions(t, *flight)) where += "mn-nccl watch:   Flight Recorder, " + l + "\n";
    say(watch_verdict_text(subjects) + where + (note.empty() ? "" : "mn-nccl watch:   " + note + "\n"));
    if (!t.abort) return;
    std::string why;
    if (!end_step(t.job, t.step, why)) say("mn-nccl watch: could not end the step: " + why + "\n");
}

// What this watch named: rank 0's keeps it for the step's block (the
// others' may come meanwhile); another rank's tells rank 0's, or says its
// own where it cannot.
struct Speaker {
    explicit Speaker(const Task& task) : t(task) {}
    const Task& t;
    std::unique_ptr<WatchDoor> door;  // rank 0's, where it listens
    std::vector<WatchReport> pending;  // rank 0's: named, not yet said
    double first = 0;                  // when the first of them came
    bool said = false;                 // a block was said (with --abort, the step is ending)
    std::string strangers_said;
    // This watch's own program stopped, stuck or dead: it cannot answer
    // a request for its Flight Recorder's dump, and nobody waits for one.
    bool own_stalled = false;
    std::optional<FlightAsk> flight;  // asked for when the first finding came

    void first_finding() {
        first = monotonic();
        if (!own_stalled) flight = ask_flight(t);
    }
    // Says `reports` with this program's Flight Recorder, where it answers.
    void say_now(const std::vector<WatchReport>& reports, const std::string& note = "") {
        if (!flight && !own_stalled) flight = ask_flight(t);
        say_block(t, reports, note, flight ? &*flight : nullptr);
        flight.reset();
        said = true;
    }
    void named(WatchReport r) {
        r.dumps = dumps_in(t);
        if (r.kind != "link down") own_stalled = true;
        if (t.lead && door) {
            if (pending.empty()) first_finding();
            pending.push_back(std::move(r));
            return;
        }
        if (!t.lead && t.port) {
            const std::string why = tell_rank0(t.rank0_addr, t.port, rank_number(), r, t.secret, kTellWait);
            if (why.empty()) return;
            std::string note = "rank 0's watch (" + t.rank0_addr + ":" + std::to_string(t.port) +
                               ") could not be told (" + why + ")";
            if (door) {  // the standby: the block is its to say
                if (pending.empty()) first_finding();
                pending.push_back(std::move(r));
                standby_note = note;
                return;
            }
            if (!t.standby_addr.empty()) {
                const std::string also = tell_rank0(t.standby_addr, t.port, rank_number(), r, t.secret, kTellWait);
                if (also.empty()) return;
                note += ", nor the standby's at " + t.standby_addr + " (" + also + ")";
            }
            say_now({r}, note + ", so this node says it");
            return;
        }
        say_now({r});
    }
    // The standby's: why rank 0's watch was not told its own finding, and
    // whether another watch's came to it (then its block is the step's).
    std::string standby_note;
    bool heard = false;
    // Rank 0's: the others' findings; the block once the first has waited
    // kGather for the rest of what one fault makes several watchers see
    // (or at once: `now_too`, the watch ends, and stops listening first).
    void turn(bool now_too = false) {
        if (!door) return;  // without it, named() says each finding at once
        if (now_too) door->close();
        for (auto& r : door->take()) {
            if (pending.empty()) first_finding();
            pending.push_back(std::move(r));
            heard = true;
        }
        if (!pending.empty() && (now_too || monotonic() - first >= kGather)) {
            // What reaches the standby is what rank 0's watch was not told:
            // the step's block where other watches told it, else its own.
            std::string note;
            if (!t.lead)
                note = (standby_note.empty() ? "rank 0's watch could not be told" : standby_note) +
                       (heard ? ", so " + t.host + "'s watch (the standby) says the step's block" : ", so this node says it");
            say_now(pending, note);
            pending.clear();
            heard = false;
        }
        // Strangers at the door, once, when the watch ends: nobody without
        // the step secret was heard.
        if (now_too) {
            const std::string s = door->strangers();
            if (!s.empty() && s != strangers_said)
                say("mn-nccl watch: " + t.host + " rank " + t.rank + "'s watch port " + std::to_string(t.port) + ": " +
                    s + "; none was heard\n");
            strangers_said = s;
        }
    }
    // Rank 0's, its program ended in error (another rank's death seen
    // through a collective, often): the others' watches may name the cause
    // in a moment, so it listens `seconds` before it ends.
    void listen_on(double seconds) {
        if (!door) return;
        const double until = monotonic() + seconds;
        while (monotonic() < until) {
            turn();
            usleep(250 * 1000);
        }
    }
    uint32_t rank_number() const { return static_cast<uint32_t>(std::strtoul(t.rank.c_str(), nullptr, 10)); }

    // Rank 0's: where the ranks stand whose Flight Recorders held still
    // (its own and the others' watches'), compared a moment after the
    // first came (the others see theirs within a probe of it). A rank and
    // kind once named is not named again.
    struct Held {
        RankPosition p;
        double came = 0;
    };
    std::map<std::string, Held> positions;
    uint32_t world = 1;  // the step's ranks (check::read_self)
    double compare_at = 0;
    std::set<std::string> position_named;
    void position(RankPosition p, double settle) {
        const double now = monotonic();
        std::string rank = p.rank;
        positions[rank] = Held{std::move(p), now};
        // Every rank's in: compared at once; else once the rest had a probe.
        if (positions.size() >= world) compare_at = now;
        else if (compare_at == 0) compare_at = now + settle;
    }
    // Each comparison, a line in the report directory's positions.jsonl
    // (up to 10,000): what each rank's Flight Recorder said and who was
    // named, also when nobody was (a pause every rank shares).
    std::size_t recorded = 0;
    void record_positions(const std::vector<RankPosition>& held, const std::vector<WatchReport>& found) {
        if (++recorded > 10000) return;
        Json j;
        j["time"] = static_cast<int64_t>(::time(nullptr));
        Json ranks = Json::array();
        for (const RankPosition& p : held) {
            Json r;
            r["rank"] = json_text(p.rank);
            r["host"] = json_text(p.host);
            r["still_s"] = json_rounded(p.still, 1);
            r["cpu_cores"] = json_rounded(p.cpu, 3);
            r["flight"] = json_texts(flight_words(p.flight));
            ranks.push_back(r);
        }
        j["ranks"] = ranks;
        std::vector<std::string> named;
        for (const WatchReport& r : found) named.push_back(r.kind + ": rank " + r.rank + " on " + r.host);
        j["named"] = json_texts(named);
        const std::string line = json_line(j);  // one line, its newline included
        const int fd = open((t.dir + "/positions.jsonl").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) return;
        if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
            // A full disk loses a line of evidence, nothing more.
        }
        close(fd);
    }
    void compare(double keep, double settle) {
        if (door)
            for (RankPosition& p : door->take_positions()) position(std::move(p), settle);
        const double now = monotonic();
        if (compare_at == 0 || now < compare_at || said) return;
        compare_at = 0;
        std::vector<RankPosition> held;
        for (auto it = positions.begin(); it != positions.end();) {
            // One not sent again within `keep` moved on since.
            if (now - it->second.came > keep) it = positions.erase(it);
            else held.push_back((it++)->second.p);
        }
        std::vector<WatchReport> found = compare_positions(held);
        record_positions(held, found);
        // Where every compared rank's Flight Recorder lies (HOST:PATH),
        // and torch's own dumps here: for fr_trace.
        std::vector<std::string> every;
        for (const RankPosition& p : held)
            if (!p.dump.empty() && every.size() < 64) every.push_back(p.host + ":" + p.dump);
        for (const std::string& d : dumps_in(t))
            if (std::find(every.begin(), every.end(), t.host + ":" + d) == every.end()) every.push_back(t.host + ":" + d);
        for (WatchReport& r : found) {
            if (!position_named.insert(r.rank + "/" + r.kind).second) continue;
            r.dumps = every;
            if (pending.empty()) first_finding();
            pending.push_back(std::move(r));
        }
    }
};

// The ticks of CPU the task's processes have used.
uint64_t tree_ticks(const std::vector<ProcStat>& tree) {
    uint64_t n = 0;
    for (const ProcStat& p : tree) n += p.ticks;
    return n;
}

// Where this watch's ranks stand: their Flight Recorders asked for every
// probe_period, each rank's position (what it enqueued and completed, and
// the collective it waits in) kept with when it was first seen so; one
// that has not moved for the window goes to rank 0's watch, again each
// window while it holds. Nothing is asked where the program keeps no pipe
// (no NCCL process group yet, Debian's torch). Each answer overwrites the
// last (one file a rank) and is never removed: a dump torch's watchdog
// writes of its own at the same path may follow at any time, and is
// evidence. Once torch dumped of its own it answers no more asking: the
// rank's position is then read from that dump (poll_flight).
struct Prober {
    const Task& t;
    double window;
    std::optional<FlightAsk> ask;
    double next = 0;
    struct Still {
        std::string key;
        double since = 0;
        uint64_t ticks = 0;
        double sent = -1;
        bool in_collective = false;  // some group of its waits in a collective
    };
    std::map<std::string, Still> still;

    static std::string key_of(const FlightSummary& f) {
        std::string k;
        for (const FlightGroup& g : f.groups)
            k += g.id + ":" + std::to_string(g.enqueued) + ":" + std::to_string(g.completed) + ":" +
                 std::to_string(g.waiting_seq) + ":" + g.waiting_state + ";";
        return k;
    }
    // Whether a rank of this task has waited in one collective, its
    // position unmoved, for the window: the step's traffic then waits on
    // the fabric or on another rank.
    bool holds_in_collective(double now) const {
        return std::any_of(still.begin(), still.end(), [&](const auto& k) {
            return k.second.in_collective && now - k.second.since >= window;
        });
    }
    // Positions held for the window, to be sent now.
    std::vector<RankPosition> look(double now, const std::vector<ProcStat>& tree, int child) {
        std::vector<RankPosition> out;
        if (!ask) {
            if (now < next) return out;
            ask = ask_flight(t);
            if (ask->asked.empty()) {
                ask.reset();
                next = now + probe_period(window);
            }
            return out;
        }
        if (!poll_flight(t, *ask)) return out;
        const uint64_t ticks = tree_ticks(tree);
        // While every rank moves (a run that trains), the next asking waits
        // two periods: half the cost; once a position holds, one.
        bool held = false;
        for (const FlightAsk::Asked& k : ask->asked) {
            if (!k.summary) continue;
            const std::string key = key_of(*k.summary);
            auto [it, fresh] = still.try_emplace(k.rank);
            Still& s = it->second;
            if (fresh || s.key != key) {
                const auto& g = k.summary->groups;
                s = Still{key, now, ticks, -1,
                          std::any_of(g.begin(), g.end(), [](const FlightGroup& x) { return x.waiting_seq >= 0; })};
                continue;
            }
            held = true;
            if (now - s.since < window || (s.sent >= 0 && now - s.sent < window)) continue;
            s.sent = now;
            RankPosition p;
            p.rank = k.rank;
            p.host = t.host;
            p.local_rank = ask->asked.size() == 1 ? t.local_rank : "?";
            p.pid = child;
            p.comm = tree.empty() ? "" : tree[0].comm;
            p.gpu = env_or("CUDA_VISIBLE_DEVICES");
            p.still = now - s.since;
            p.cpu = static_cast<double>(ticks - std::min(ticks, s.ticks)) / static_cast<double>(sysconf(_SC_CLK_TCK)) /
                    std::max(p.still, 1.0);
            p.flight = *k.summary;
            p.dump = k.path;
            out.push_back(std::move(p));
        }
        next = ask->at + (held ? 1 : 2) * probe_period(window);
        ask.reset();
        return out;
    }
};

}  // namespace

int run_watch(const CommandLine& c) {
    Task t;
    t.job = env_or("SLURM_JOB_ID");
    t.step = env_or("SLURM_STEP_ID");
    t.host = env_or("SLURMD_NODENAME", host_name());
    t.rank = env_or("SLURM_PROCID", "?");
    t.local_rank = env_or("SLURM_LOCALID", "?");
    t.abort = c.settings.watch_abort;
    t.exclude_file = c.settings.exclude_file;
    t.history_dir = c.settings.check.history_dir;
    if (t.abort && (t.job.empty() || t.step.empty())) {
        say("mn-preflight: watch: --abort ends the step, and this is not one (SLURM_JOB_ID, SLURM_STEP_ID unset); "
            "run it under srun, or without --abort\n");
        return 2;
    }
    auto dir = report_dir(c.settings, t.job, t.step);
    if (!dir) {
        say("mn-preflight: watch: " + t.host + ": " + dir.problem().text() + "\n");
        return 2;
    }
    t.dir = *dir;
    arm(t.dir, t.job, t.step);
    // The step's one block: rank 0's watch listens at the step's watch
    // port, the others tell it. The step as the check reads it (read_self:
    // the world, rank 0's address resolved, MASTER_PORT, the secret);
    // without it, the port (the plugin gives it) or a second task, each
    // node says its own.
    t.lead = t.rank == "0";
    uint32_t world = 1;
    const unsigned long port =
        c.settings.port ? c.settings.port : std::strtoul(env_or("MN_NCCL_WATCH_PORT").c_str(), nullptr, 10);
    if (auto self = check::read_self(); self && self->world > 1 && port > 0 && port <= 65535 && port != self->port) {
        world = self->world;
        t.rank0_addr = self->master;
        t.secret = self->secret;
        t.port = static_cast<uint16_t>(port);
    }
    // The standby, where the step has a second node whose name resolves.
    if (t.port && !t.lead) {
        const auto nodes = step_nodes();
        std::string err;
        if (nodes && nodes->size() > 1)
            if (const auto a = resolve_ipv4((*nodes)[1], err); !a.empty() && a.front().str() != t.rank0_addr) {
                t.standby_addr = a.front().str();
                t.standby = env_or("SLURM_NODEID") == "1" && env_or("SLURM_LOCALID") == "0";
            }
    }
    Speaker speaker{t};
    speaker.world = world;
    if ((t.lead || t.standby) && t.port) {
        if (auto d = WatchDoor::open(t.port, t.secret, world)) speaker.door = std::move(d.value());
        else if (t.lead)
            say("mn-nccl watch: " + t.host + " rank 0: cannot listen at the watch port " + std::to_string(t.port) +
                " (" + d.problem().text() + "): each node's watch says its own block\n");
        // A standby that cannot listen (its node is rank 0's machine, as
        // emulated nodes are): the others say their own when rank 0's is cut off.
    }
    // The program gets srun's signals itself (Slurm signals every process
    // of the step); the watch stays to see how it ends.
    struct sigaction sa{};
    sa.sa_handler = ignore_signal;
    for (int sig : kStepSignals) sigaction(sig, &sa, nullptr);
    std::vector<char*> argv;
    for (const auto& a : c.program) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    sigset_t dflt;
    sigemptyset(&dflt);
    for (int sig : kStepSignals) sigaddset(&dflt, sig);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    // The program's end is seen at once (SIGCHLD, taken by sigtimedwait),
    // not at the next look: a rank killed is named before any other rank's
    // --abort ends the step.
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, nullptr);
    pid_t child = 0;
    const int rc = posix_spawnp(&child, argv[0], nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        say("mn-preflight: watch: " + t.host + ": cannot run " + c.program[0] + ": " + std::strerror(rc) + "\n");
        return 127;
    }
    // The node's first task's watch hears its GPUs' critical Xids (NVML,
    // loaded on a thread): the host evidence for a GPU stuck on this node.
    const bool hears_gpus = t.local_rank == "0";
    if (hears_gpus) gpu::start_gpu_events();
    std::vector<std::string> node_xids;  // the hardware's, as lines of evidence (16 at most)
    StallWatch watch(c.settings.watch_window);
    LinkWatch links(c.settings.watch_window);
    Prober prober{t, c.settings.watch_window, std::nullopt, 0, {}};
    const std::string sysfs = user_sysfs_root(process_env());
    // The node's RDMA ports are the node's first task's to look at, every
    // probe period: a port's counters are firmware queries on some HCAs,
    // not for every task of a node to repeat each second.
    const auto ports = t.local_rank == "0" ? step_ports(sysfs) : std::vector<std::pair<std::string, unsigned>>{};
    PortWatch port_watch(c.settings.watch_window);
    double next_port_look = 0;
    bool named_port = false;
    int named_pid = 0;
    bool named_link = false;
    for (;;) {
        int st = 0;
        const pid_t done = waitpid(child, &st, WNOHANG);
        if (done == child) {
            int sig = 0;
            const std::string how = ended_words(st, &sig);
            // A death by signal that no stall explained: the program's
            // process is gone while the others may wait for it.
            if (sig != 0 && named_pid == 0) {
                WatchReport r = report_of(t, child, c.program[0]);
                r.kind = death_kind(sig, !dumps_in(t).empty());
                r.detail = how;
                if (r.kind != std::string("process dead"))
                    r.detail += ": its collective timed out waiting on another rank; the dump names the collective";
                // Dead where this node's GPU said it is at fault: two
                // signals, the node is blamed.
                for (const std::string& x : node_xids) r.evidence.push_back("NVML: " + x);
                if (r.kind == std::string("process dead") && !node_xids.empty()) {
                    r.detail += "; and " + t.host + "'s GPUs reported a hardware fault (NVML)";
                    r.host_evidence = true;
                }
                speaker.named(r);
            } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0 && named_pid == 0 && (t.abort || speaker.door)) {
                // The program's own end (an exception, often another
                // rank's death seen through the collective): not named; a
                // moment in which a rank that died or stopped first is named
                // by its own watch (to rank 0's, which listens meanwhile),
                // then, with --abort, the step ends.
                if (t.abort)
                    say("mn-nccl watch: " + t.host + " rank " + t.rank + ": the program " + how +
                        "; --abort: ending step " + t.job + "." + t.step + " in 3 s\n");
                if (speaker.door) speaker.listen_on(3);
                else sleep(3);
                speaker.turn(true);
                std::string why;
                if (t.abort && !speaker.said && !end_step(t.job, t.step, why))
                    say("mn-nccl watch: could not end the step: " + why + "\n");
            }
            speaker.turn(true);
            return sig ? 128 + sig : WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        }
        if (done < 0 && errno != EINTR) return 1;
        if (hears_gpus)
            for (const gpu::GpuXid& x : gpu::gpu_events())
                if (xid_meaning(x.xid).hardware && node_xids.size() < 16) {
                    node_xids.push_back(xid_words(x.busid, x.xid, static_cast<int64_t>(::time(nullptr))));
                    say("mn-nccl watch: " + t.host + ": NVML: " + node_xids.back() + "\n");
                }
        const auto tree = task_tree(child);
        if (auto s = watch.look(monotonic(), tree); s && s->proc.pid != named_pid) {
            named_pid = s->proc.pid;
            WatchReport r = report_of(t, s->proc.pid, s->proc.comm);
            r.kind = stall_words(s->kind);
            r.detail = std::string("state ") + s->proc.state + " for " + num(s->seconds, 0) + " s";
            std::string wchan = proc_file(s->proc.pid, "wchan", 256);
            if (!wchan.empty() && wchan != "0") r.evidence.push_back("wchan " + wchan);
            r.evidence.push_back("cpu " + num(static_cast<double>(s->proc.ticks) / sysconf(_SC_CLK_TCK)) +
                                 " s, none since");
            if (s->proc.pid != child) r.evidence.push_back("a process of the task (its program is pid " +
                                                           std::to_string(child) + ")");
            speaker.named(r);
        }
        // The link rule: the program's data not acknowledged for the window.
        // This node's interfaces are asked only while some data waits.
        if (!named_link) {
            const auto conns = program_connections(child, socket_inodes(tree));
            const bool waiting =
                std::any_of(conns.begin(), conns.end(), [](const TcpSocket& k) { return k.state == 1 && k.unacked; });
            if (auto l = links.look(monotonic(), conns, waiting ? interfaces_here() : std::vector<LocalInterface>{})) {
                named_link = true;
                speaker.named(link_report(t, *l, child, tree.empty() ? c.program[0] : tree[0].comm));
            }
        }
        // The positions rule: ranks whose Flight Recorders hold still.
        // (Not while the block's own asking waits: one dump at a time.)
        if (!speaker.own_stalled && !speaker.said && !speaker.flight)
            for (RankPosition& p : prober.look(monotonic(), tree, child)) {
                p.gpu_events = node_xids;
                if (t.lead) speaker.position(std::move(p), probe_period(c.settings.watch_window));
                else if (t.port) tell_rank0(t.rank0_addr, t.port, speaker.rank_number(), p, t.secret, kTellWait);
            }
        // The others' positions come within a probe of the first; the
        // block then waits kGather as for any finding.
        speaker.compare(c.settings.watch_window + 3 * probe_period(c.settings.watch_window),
                        probe_period(c.settings.watch_window));
        // The RDMA port rule: a port of the step's out of ACTIVE for the
        // window, or ACTIVE and carrying nothing while the ranks wait, as
        // this node's kernel says (PortWatch): this node's link (its
        // Ethernet, and so its word to rank 0's watch and the exclude
        // file, is another path).
        if (const double now = monotonic(); !named_port && !ports.empty() && now >= next_port_look) {
            next_port_look = now + probe_period(c.settings.watch_window);
            if (auto p = port_watch.look(now, read_ports(sysfs, ports), prober.holds_in_collective(now))) {
                named_port = true;
                const auto at = std::find_if(ports.begin(), ports.end(), [&](const auto& q) {
                    return q.first + ":" + std::to_string(q.second) == p->port.name;
                });
                WatchReport r = port_report(t, *p, at == ports.end() ? "" : port_dir(sysfs, *at), child,
                                            tree.empty() ? c.program[0] : tree[0].comm);
                speaker.named(r);
            }
        }
        speaker.turn();
        // A dump asked for is read within a fifth of a second of its writing.
        const double wait = prober.ask ? 0.2 : kLook;
        timespec ts{};
        ts.tv_sec = static_cast<time_t>(wait);
        ts.tv_nsec = static_cast<long>((wait - static_cast<double>(ts.tv_sec)) * 1e9);
        sigtimedwait(&chld, nullptr, &ts);
    }
}

}  // namespace mn
