// SPDX-License-Identifier: Apache-2.0
#include "helper/wire.h"

#include "lib/util/crypto.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

namespace mn::wire {

int Deadline::poll_ms() const {
    const double l = left();
    return l <= 0 ? 0 : static_cast<int>(std::min(l, 1.0) * 1000) + 1;
}

Fd& Fd::operator=(Fd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

Fd::~Fd() {
    if (fd_ >= 0) ::close(fd_);
}

namespace {

void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string errtext() { return std::strerror(errno); }

// The fix for a socket, accept or epoll call that found no resource left
// (8,192 ranks on one host), "" for any other errno.
std::string resource_fix(int err) {
    if (err == EMFILE)
        return "this process's open-file limit is reached: raise ulimit -n (slurmd's LimitNOFILE with "
               "PropagateResourceLimits)";
    if (err == ENFILE) return "the host's open-file table is full: raise fs.file-max";
    if (err == ENOMEM || err == ENOBUFS) return "the host is out of memory for sockets";
    return "";
}

std::atomic<uint64_t> g_msgs_out{0}, g_msgs_in{0}, g_bytes_out{0}, g_bytes_in{0};

}  // namespace

Outcome<Fd> listen_tcp(const std::string& addr, uint16_t port, uint16_t* bound) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return Problem{"cannot open a socket: " + errtext(), resource_fix(errno)};
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (addr.empty()) sa.sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
        return Problem{"'" + addr + "' is not an IPv4 address", ""};
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        const int e = errno;
        return Problem{"cannot listen on " + (addr.empty() ? std::string("*") : addr) + ":" + std::to_string(port) +
                           ": " + errtext(),
                       port ? "another process holds the port; use a new step (its MASTER_PORT differs)"
                       : e == EADDRINUSE
                           ? "this host has no free port: its ephemeral ports (net.ipv4.ip_local_port_range) are all "
                             "held, by connections and their TIME_WAIT; wait a minute, or widen the range"
                           : ""};
    }
    // A step's ranks connect at once: a backlog that holds them all (the
    // kernel caps it at net.core.somaxconn), or SYNs are dropped and retried
    // a second later.
    if (::listen(fd.get(), 8192) != 0) return Problem{"listen: " + errtext(), ""};
    fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    socklen_t len = sizeof sa;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    if (bound) *bound = ntohs(sa.sin_port);
    return fd;
}

namespace {

// An abstract socket's address: a NUL, then the name.
socklen_t local_address(const std::string& name, sockaddr_un& sa) {
    sa = sockaddr_un{};
    sa.sun_family = AF_UNIX;
    const std::size_t n = std::min(name.size(), sizeof sa.sun_path - 1);
    std::memcpy(sa.sun_path + 1, name.data(), n);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace

Outcome<Fd> listen_local(const std::string& name) {
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return Problem{"cannot open a local socket: " + errtext(), resource_fix(errno)};
    sockaddr_un sa{};
    const socklen_t len = local_address(name, sa);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
        return Problem{"cannot listen on the local socket @" + name + ": " + errtext(), ""};
    if (::listen(fd.get(), 1024) != 0) return Problem{"listen: " + errtext(), ""};
    fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    return fd;
}

Outcome<Fd> accept_one(int listen_fd, const Deadline& d, std::string* peer) {
    while (true) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int c = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
        if (c >= 0) {
            tune(c);
            if (peer && ss.ss_family == AF_UNIX) {
                // Whose process, for the strangers' summary: the kernel's word.
                ucred cred{};
                socklen_t cl = sizeof cred;
                *peer = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0
                            ? "local uid " + std::to_string(cred.uid)
                            : "local";
            } else if (peer) {
                const auto& sa = reinterpret_cast<const sockaddr_in&>(ss);
                char buf[INET_ADDRSTRLEN] = {0};
                inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
                *peer = buf;
            }
            return Fd(c);
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return Problem{"cannot accept a connection: " + errtext(), resource_fix(errno)};
        if (d.passed()) return Problem{"nobody connected in time", ""};
        pollfd p{listen_fd, POLLIN, 0};
        ::poll(&p, 1, d.poll_ms());
    }
}

Outcome<Fd> connect_tcp(const std::string& addr, uint16_t port, const Deadline& d, Retry retry) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) return Problem{"'" + addr + "' is not an IPv4 address", ""};
    std::string last = "timed out";
    while (!d.passed()) {
        Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) return Problem{"cannot open a socket: " + errtext(), resource_fix(errno)};
        int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd.get(), POLLOUT, 0};
            rc = ::poll(&p, 1, std::max(1, std::min(d.poll_ms(), 500)));
            int soerr = rc > 0 ? 0 : ETIMEDOUT;
            socklen_t l = sizeof soerr;
            if (rc > 0) getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &l);
            rc = soerr == 0 ? 0 : -1;
            errno = soerr;
        }
        if (rc == 0) {
            tune(fd.get());
            return fd;
        }
        last = errtext();
        if (retry == Retry::Never) break;
        // Not listening yet (ECONNREFUSED) or the SYN was lost: try again.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Problem{"cannot connect to " + addr + ":" + std::to_string(port) + " (" + last + ")", ""};
}

Outcome<Fd> connect_to(const std::string& addr, uint16_t port, const Deadline& d) {
    if (addr.empty() || addr[0] != '@') return connect_tcp(addr, port, d);
    sockaddr_un sa{};
    const socklen_t len = local_address(addr.substr(1), sa);
    std::string last = "timed out";
    while (!d.passed()) {
        // Non-blocking: a full backlog (a flood at the door) is EAGAIN here,
        // never a connect that waits without bound.
        Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) return Problem{"cannot open a local socket: " + errtext(), resource_fix(errno)};
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0) {
            tune(fd.get());
            return fd;
        }
        last = errno == EAGAIN ? "its backlog is full" : errtext();
        // Not listening yet (the node's leader may start after this rank), or full.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Problem{"cannot connect to the local socket " + addr + " (" + last + ")", ""};
}

bool exchange(int send_fd, const void* send, std::size_t send_n, int recv_fd, void* recv, std::size_t recv_n,
              const Deadline& d, std::string* err) {
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    std::size_t sent = 0, got = 0;
    while (sent < send_n || got < recv_n) {
        pollfd p[2];
        int n = 0;
        int si = -1, ri = -1;
        if (send_fd == recv_fd) {
            short ev = (sent < send_n ? POLLOUT : 0) | (got < recv_n ? POLLIN : 0);
            p[n] = {send_fd, ev, 0};
            si = ri = n++;
        } else {
            if (sent < send_n) p[si = n++] = {send_fd, POLLOUT, 0};
            if (got < recv_n) p[ri = n++] = {recv_fd, POLLIN, 0};
        }
        if (d.passed()) {
            if (err) *err = "time ran out after " + std::to_string(sent) + " of " + std::to_string(send_n) +
                            " bytes sent and " + std::to_string(got) + " of " + std::to_string(recv_n) + " received";
            return false;
        }
        if (::poll(p, n, d.poll_ms()) < 0 && errno != EINTR) {
            if (err) *err = "poll: " + errtext();
            return false;
        }
        if (si >= 0 && sent < send_n && (p[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = ::send(send_fd, s + sent, send_n - sent, MSG_NOSIGNAL);
            if (k > 0) sent += static_cast<std::size_t>(k);
            else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                if (err) *err = "send: " + errtext();
                return false;
            }
        }
        if (ri >= 0 && got < recv_n && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t k = ::recv(recv_fd, r + got, recv_n - got, 0);
            if (k > 0) got += static_cast<std::size_t>(k);
            else if (k == 0) {
                if (err) *err = "the peer closed the connection";
                return false;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                if (err) *err = "recv: " + errtext();
                return false;
            }
        }
    }
    return true;
}

bool send_all(int fd, const void* data, std::size_t n, const Deadline& d) {
    return exchange(fd, data, n, fd, nullptr, 0, d, nullptr);
}

bool recv_all(int fd, void* data, std::size_t n, const Deadline& d) {
    return exchange(fd, nullptr, 0, fd, data, n, d, nullptr);
}

std::string Seal::mac(char dir, uint64_t seq, const std::string& body) const {
    std::string m(1, dir);
    for (int i = 7; i >= 0; --i) m.push_back(static_cast<char>(seq >> (8 * i)));
    m += body;
    const Mac h = hmac_sha256(key_, m);
    return std::string(reinterpret_cast<const char*>(h.data()), h.size());
}

std::string Seal::close(const std::string& body) { return mac(out_, sent_++, body); }

bool Seal::open(const std::string& body, const std::string& m) {
    if (!same_bytes(m, mac(in_, received_, body))) return false;
    ++received_;
    return true;
}

uint32_t length_of(const std::string& buf) {
    const auto* b = reinterpret_cast<const unsigned char*>(buf.data());
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
}

std::string frame(const Body& body, Seal* seal) {
    const std::string mac = seal ? seal->close(body) : "";
    const std::size_t n = body.size() + mac.size();
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                       static_cast<char>(n)} +
           body + mac;
}

bool send_msg(int fd, const Body& body, const Deadline& d, Seal* seal) {
    const std::string bytes = frame(body, seal);
    g_msgs_out += 1;
    g_bytes_out += bytes.size();
    return send_all(fd, bytes.data(), bytes.size(), d);
}

Outcome<std::optional<Body>> take_frame(const std::string& buf, std::size_t limit, Seal* seal, std::size_t* used) {
    if (used) *used = 0;
    if (buf.size() < 4) return std::optional<Body>{};
    const uint32_t n = length_of(buf);
    const std::size_t mac = seal ? Seal::kMacBytes : 0;
    // A stray client (an HTTP probe, a port scan) must not make us allocate.
    if (n > limit + mac) return Problem{"a message of " + std::to_string(n) + " bytes is not mn-preflight's", ""};
    if (n < mac) return Problem{"a message of " + std::to_string(n) + " bytes is too short for its seal", ""};
    if (buf.size() < 4 + std::size_t(n)) return std::optional<Body>{};
    Body body = buf.substr(4, n - mac);
    if (seal && !seal->open(body, buf.substr(4 + n - mac, mac)))
        return Problem{"a message that does not carry this connection's seal (not from the rank that proved the "
                       "step secret, replayed or out of order)",
                       ""};
    if (used) *used = 4 + n;
    g_msgs_in += 1;
    g_bytes_in += 4 + n;
    return std::optional<Body>(std::move(body));
}

std::optional<Body> recv_msg(int fd, const Deadline& d, std::string* err, Seal* seal, std::size_t limit) {
    std::string buf(4, '\0');
    if (!exchange(fd, nullptr, 0, fd, buf.data(), 4, d, err)) return std::nullopt;
    const uint32_t n = length_of(buf);
    const std::size_t mac = seal ? Seal::kMacBytes : 0;
    if (n <= limit + mac && n >= mac) {
        buf.resize(4 + std::size_t(n));
        if (!exchange(fd, nullptr, 0, fd, buf.data() + 4, n, d, err)) return std::nullopt;
    }
    auto f = take_frame(buf, limit, seal, nullptr);
    if (!f) {
        if (err) *err = f.problem().what;
        return std::nullopt;
    }
    return std::move(*f.value());
}

namespace {
constexpr uint64_t kWakeKey = ~uint64_t{0};
}  // namespace

Mux::Mux() {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    // Thrown as the errno it is: mn-preflight's main names the rank and the fix.
    if (ep_ < 0) throw std::system_error(errno, std::generic_category(), "cannot create an epoll instance");
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        wake_[0] = wake_[1] = -1;
        return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeKey;
    epoll_ctl(ep_, EPOLL_CTL_ADD, wake_[0], &ev);
}

Mux::~Mux() {
    for (int fd : wake_)
        if (fd >= 0) ::close(fd);
    if (ep_ >= 0) ::close(ep_);
}

void Mux::add(std::size_t key, int fd, Seal* seal) {
    // A key given a new socket (a rank reconnecting) stops hearing its old one.
    if (auto it = src_.find(key); it != src_.end() && !it->second.closed)
        epoll_ctl(ep_, EPOLL_CTL_DEL, it->second.fd, nullptr);
    src_[key] = Source{fd, "", false, seal};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = key;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
}

void Mux::wake() {
    const char b = 1;
    ssize_t rc = wake_[1] >= 0 ? ::write(wake_[1], &b, 1) : 0;
    (void)rc;  // a full pipe wakes the reader just as well
}

bool Mux::pending(std::size_t key) const {
    auto it = src_.find(key);
    if (it == src_.end() || it->second.closed) return false;
    if (!it->second.buf.empty()) return true;
    for (const Event& e : ready_)
        if (e.key == key) return true;
    int n = 0;
    return ioctl(it->second.fd, FIONREAD, &n) == 0 && n > 0;
}

std::optional<Mux::Event> Mux::take(std::size_t key, Source& s) {
    std::size_t used = 0;
    auto f = take_frame(s.buf, kMaxMessage, s.seal, &used);
    if (!f) {
        s.closed = true;
        return Event{key, std::nullopt, f.problem().what};
    }
    if (!f.value()) return std::nullopt;
    Event e{key, std::move(*f.value()), ""};
    s.buf.erase(0, used);
    return e;
}

void Mux::read_one(std::size_t key) {
    auto it = src_.find(key);
    if (it == src_.end() || it->second.closed) return;
    Source& s = it->second;
    char chunk[65536];
    ssize_t k = ::recv(s.fd, chunk, sizeof chunk, 0);
    if (k > 0) s.buf.append(chunk, static_cast<std::size_t>(k));
    else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    const std::string why = k == 0 ? "the connection closed" : k < 0 ? "recv: " + errtext() : "";
    // Every whole message, then (once) the end: nothing said before a
    // close is lost.
    while (!s.closed)
        if (auto e = take(key, s)) ready_.push_back(std::move(*e));
        else break;
    if (k <= 0 && !s.closed) {
        s.closed = true;
        ready_.push_back(Event{key, std::nullopt, why});
    }
    if (s.closed) epoll_ctl(ep_, EPOLL_CTL_DEL, s.fd, nullptr);
}

std::optional<Mux::Event> Mux::next(const Deadline& d) {
    bool last = false;
    epoll_event evs[256];
    while (true) {
        if (!ready_.empty()) {
            Event e = std::move(ready_.front());
            ready_.pop_front();
            return e;
        }
        if (last) return std::nullopt;
        // After the deadline, one round that reads what is there already.
        last = d.passed();
        const int n = epoll_wait(ep_, evs, 256, last ? 0 : d.poll_ms());
        if (n < 0 && errno != EINTR) return std::nullopt;
        for (int i = 0; i < n; ++i) {
            if (evs[i].data.u64 == kWakeKey) {
                char drain[64];
                while (::read(wake_[0], drain, sizeof drain) > 0) {
                }
                last = true;  // read what came with it, then return
                continue;
            }
            read_one(static_cast<std::size_t>(evs[i].data.u64));
        }
    }
}

Traffic traffic() {
    return {g_msgs_out.load(), g_msgs_in.load(), g_bytes_out.load(), g_bytes_in.load()};
}

std::optional<PathSeen> path_seen(int fd) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < offsetof(tcp_info, tcpi_total_retrans) + 4)
        return std::nullopt;
    return PathSeen{ti.tcpi_total_retrans, ti.tcpi_rtt / 1000.0};
}

}  // namespace mn::wire
