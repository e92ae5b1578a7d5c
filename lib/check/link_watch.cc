// SPDX-License-Identifier: Apache-2.0
#include "lib/check/link_watch.h"

#include <cctype>

#include "lib/util/text.h"

namespace mn {

namespace {

// Exactly `digits` hex digits (0: any count from 1 to 16).
std::optional<uint64_t> hex(const std::string& s, std::size_t digits) {
    if (s.empty() || s.size() > 16 || (digits && s.size() != digits)) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
        v = v * 16 + static_cast<uint64_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

// "HI:LO" of two hex fields of the given widths.
bool hex_pair(const std::string& s, std::size_t a, std::size_t b, uint64_t& x, uint64_t& y) {
    const std::size_t colon = s.find(':');
    if (colon == std::string::npos) return false;
    auto l = hex(s.substr(0, colon), a);
    auto r = hex(s.substr(colon + 1), b);
    if (!l || !r) return false;
    x = *l;
    y = *r;
    return true;
}

// The kernel prints the address as the 32-bit word it keeps in network
// order, read as a host integer: on a little-endian host the first octet
// is the lowest byte.
std::string quad(uint32_t v) {
    unsigned o[4];
    for (int i = 0; i < 4; ++i) o[i] = (v >> (8 * i)) & 0xff;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    std::swap(o[0], o[3]);
    std::swap(o[1], o[2]);
#endif
    return std::to_string(o[0]) + "." + std::to_string(o[1]) + "." + std::to_string(o[2]) + "." + std::to_string(o[3]);
}

std::string bytes_words(uint64_t n) {
    if (n < 10 * 1024) return std::to_string(n) + " bytes";
    if (n < 10 * 1024 * 1024) return std::to_string(n / 1024) + " KiB";
    return std::to_string(n / (1024 * 1024)) + " MiB";
}

}  // namespace

Outcome<std::vector<TcpSocket>> parse_proc_net_tcp(const std::string& text) {
    std::vector<TcpSocket> out;
    std::size_t at = 0, number = 0;
    const auto bad = [&](const std::string& why) {
        return Problem{"/proc/net/tcp line " + std::to_string(number) + ": " + why,
                       "the watch names no link from it (a kernel whose format differs)"};
    };
    while (at < text.size()) {
        const std::size_t end = text.find('\n', at);
        const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
        at = end == std::string::npos ? text.size() : end + 1;
        ++number;
        const auto f = split_list(line, ' ');  // the kernel pads with spaces
        if (f.empty()) continue;
        if (number == 1 && f[0] == "sl") continue;  // the header
        if (f.size() < 10) return bad("fewer than 10 fields");
        if (f[0].size() < 2 || f[0].back() != ':' || !whole_number(f[0].substr(0, f[0].size() - 1)))
            return bad("no slot number");
        TcpSocket s;
        uint64_t la, lp, ra, rp, tx, rx, tr, when;
        if (!hex_pair(f[1], 8, 4, la, lp) || !hex_pair(f[2], 8, 4, ra, rp)) return bad("an address is not ADDR:PORT");
        auto st = hex(f[3], 2);
        if (!st) return bad("no state");
        if (!hex_pair(f[4], 8, 8, tx, rx)) return bad("no tx_queue:rx_queue");
        if (!hex_pair(f[5], 2, 8, tr, when)) return bad("no timer");
        auto re = hex(f[6], 8);
        auto inode = whole_number(f[9]);
        if (!re || !inode) return bad("no retransmit count or inode");
        s.local = quad(static_cast<uint32_t>(la));
        s.remote = quad(static_cast<uint32_t>(ra));
        s.local_port = static_cast<uint16_t>(lp);
        s.remote_port = static_cast<uint16_t>(rp);
        s.state = static_cast<unsigned>(*st);
        s.unacked = tx;
        s.timer = static_cast<unsigned>(tr);
        s.retransmits = static_cast<unsigned>(*re);
        s.inode = *inode;
        out.push_back(s);
    }
    return out;
}

std::string link_stall_words(const LinkStall& s, const std::string& peer_name, const std::string& here) {
    const std::string peer = peer_name.empty() ? s.peer : peer_name + " (" + s.peer + ")";
    const std::string on = " on " + std::to_string(s.connections) + (s.connections == 1 ? " connection" : " connections");
    if (s.own)
        return here + "'s " + s.ifname + " is down: the program's data waits behind it (" + bytes_words(s.unacked) + on + ") for " +
               num(s.seconds, 0) + " s";
    return peer + " does not acknowledge the program's data from " + here + ": " + bytes_words(s.unacked) + " unacknowledged" + on + ", " +
           std::to_string(s.retransmits) + (s.retransmits == 1 ? " retransmission" : " retransmissions") + ", for " +
           num(s.seconds, 0) + " s; " +
           (s.ifname.empty()
                ? "the interface that holds it is not one of " + here +
                      "'s (the program's network namespace is its own) and was not read: the link of " +
                      (peer_name.empty() ? s.peer : peer_name) + ", or the path to it, or this side's, is down"
                : here + "'s " + s.ifname + " is up: the link of " + (peer_name.empty() ? s.peer : peer_name) +
                      ", or the path to it, is down");
}

std::optional<LinkStall> LinkWatch::look(double now, const std::vector<TcpSocket>& mine,
                                         const std::vector<LocalInterface>& interfaces) {
    std::map<std::string, const LocalInterface*> by_addr;
    for (const auto& i : interfaces) by_addr.emplace(i.addr, &i);
    std::map<std::string, LinkStall> now_seen;
    for (const auto& s : mine) {
        if (s.state != 1 || s.unacked == 0) continue;
        const auto it = by_addr.find(s.local);
        const LocalInterface* i = it == by_addr.end() ? nullptr : it->second;
        std::string key;
        if (i && !i->up) key = "own " + i->name;
        else if (s.timer == 1 && s.retransmits > 0) key = "peer " + s.remote;
        else continue;
        LinkStall& l = now_seen[key];
        l.own = i && !i->up;
        if (l.peer.empty()) l.peer = s.remote;
        if (i) l.ifname = i->name;
        l.unacked += s.unacked;
        l.retransmits = std::max(l.retransmits, s.retransmits);
        ++l.connections;
    }
    std::map<std::string, Waiting> kept;
    std::optional<LinkStall> named;
    // "own ..." sorts before "peer ...": this node's own link first.
    for (auto& [key, l] : now_seen) {
        const auto was = waiting_.find(key);
        const bool acked = was != waiting_.end() && !l.own && l.retransmits < was->second.retransmits;
        const double since = was == waiting_.end() || acked ? now : was->second.since;
        kept[key] = Waiting{since, l.retransmits};
        if (!named && now - since >= window_ && (l.own || l.retransmits >= kDownRetransmits)) {
            l.seconds = now - since;
            named = l;
        }
    }
    waiting_ = std::move(kept);
    return named;
}

bool hca_selected(const std::string& nccl_ib_hca, const std::string& hca, unsigned port) {
    std::string list = nccl_ib_hca;
    if (list.empty()) return true;
    const bool exclude = list[0] == '^';
    if (exclude) list.erase(0, 1);
    const bool exact = !list.empty() && list[0] == '=';
    if (exact) list.erase(0, 1);
    bool listed = false;
    for (const std::string& e : split_list(list, ',')) {
        if (e.empty()) continue;
        const std::size_t colon = e.find(':');
        const std::string name = e.substr(0, colon);
        if (colon != std::string::npos && e.substr(colon + 1) != std::to_string(port)) continue;
        if (exact ? name == hca : hca.compare(0, name.size(), name) == 0) listed = true;
    }
    return exclude ? !listed : listed;
}

std::string port_stall_words(const PortStall& s, const std::string& here) {
    const std::string port = s.port.name + ", an RDMA port of the step's on " + here + ", is ";
    switch (s.fault) {
    case PortFault::Garbled:
        return port + "ACTIVE and took in no packet for " + num(s.seconds, 0) + " s while its link counted " +
               std::to_string(s.link_errors) + " errors: the link carries nothing";
    case PortFault::Silent:
        return port + "ACTIVE and took in no packet for " + num(s.seconds, 0) + " s while its senders timed out " +
               std::to_string(s.ack_timeouts) + " times waiting for acknowledgements: it carries nothing, from " +
               "this port or its far side (cable, switch port)";
    case PortFault::NotActive:
        break;
    }
    return port + s.port.state + (s.port.phys_state.empty() ? "" : " (phys_state " + s.port.phys_state + ")") +
           " for " + num(s.seconds, 0) + " s: NCCL's traffic over it has stopped";
}

std::optional<uint64_t> port_counter(const std::string& text) {
    std::string t = text;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    const auto v = whole_number(t);
    if (!v || *v == 0xffffffffULL) return std::nullopt;
    return v;
}

std::optional<PortStall> PortWatch::look(double now, const std::vector<PortReading>& ports, bool program_waits) {
    if (first_) {
        first_ = false;
        for (const PortReading& p : ports)
            if (p.state == "ACTIVE") watched_[p.name] = Watched{};
    }
    std::optional<PortStall> named;
    for (const PortReading& p : ports) {
        const auto at = watched_.find(p.name);
        if (at == watched_.end()) continue;
        Watched& w = at->second;
        if (p.state.empty()) {  // unreadable: neither down nor quiet
            w.down_since = w.quiet_since = -1;
            continue;
        }
        if (p.state != "ACTIVE") {
            w.quiet_since = -1;
            if (w.down_since < 0) w.down_since = now;
            if (!named && now - w.down_since >= window_) named = PortStall{p, PortFault::NotActive, now - w.down_since};
            continue;
        }
        w.down_since = -1;
        // Quiet from the last look at which a packet came in (or its
        // counters could first be read, or one went back: a reset, the
        // driver reloaded); the counts start there.
        if (!p.rcv_packets || w.quiet_since < 0 || *p.rcv_packets != w.rcv ||
            p.ack_timeouts.has_value() != w.timeouts.has_value() || p.link_errors.has_value() != w.errors.has_value() ||
            p.ack_timeouts < w.timeouts || p.link_errors < w.errors) {
            w.quiet_since = p.rcv_packets ? now : -1;
            w.rcv = p.rcv_packets.value_or(0);
            w.timeouts = p.ack_timeouts;
            w.errors = p.link_errors;
            continue;
        }
        if (named || !program_waits || now - w.quiet_since < window_) continue;
        const uint64_t errors = p.link_errors.value_or(0) - w.errors.value_or(0);
        const uint64_t timeouts = p.ack_timeouts.value_or(0) - w.timeouts.value_or(0);
        if (errors >= kSilentTimeouts)
            named = PortStall{p, PortFault::Garbled, now - w.quiet_since, timeouts, errors};
        else if (timeouts >= kSilentTimeouts)
            named = PortStall{p, PortFault::Silent, now - w.quiet_since, timeouts, errors};
    }
    return named;
}

}  // namespace mn
