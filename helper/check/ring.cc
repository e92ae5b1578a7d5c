// SPDX-License-Identifier: Apache-2.0
// The CPU path's ring and data connections (ring.h says what they own).
#include "helper/check/ring.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "helper/check/hooks.h"
#include "lib/check/preflight.h"
#include "lib/util/text.h"

namespace mn::check {
namespace {

// One ring all-reduce (reduce-scatter, then all-gather) of `buf` among n
// members; this one is at position `pos`, sending to next and receiving
// from prev (one socket when n == 2).
bool ring_allreduce(float* buf, std::size_t count, uint32_t pos, uint32_t n, int next_fd, int prev_fd,
                    const Deadline& d, std::string* err) {
    if (n < 2) return true;
    auto lo = [&](uint32_t c) { return count * c / n; };
    auto len = [&](uint32_t c) { return lo(c + 1) - lo(c); };
    std::vector<float> tmp(count / n + 1);
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t send_c = (pos + n - s) % n, recv_c = (pos + n - s - 1) % n;
        if (!wire::exchange(next_fd, buf + lo(send_c), len(send_c) * 4, prev_fd, tmp.data(), len(recv_c) * 4, d, err))
            return false;
        for (std::size_t i = 0; i < len(recv_c); ++i) buf[lo(recv_c) + i] += tmp[i];
    }
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t send_c = (pos + 1 + n - s) % n, recv_c = (pos + n - s) % n;
        if (!wire::exchange(next_fd, buf + lo(send_c), len(send_c) * 4, prev_fd, buf + lo(recv_c), len(recv_c) * 4, d,
                            err))
            return false;
    }
    return true;
}

// One all-reduce of `piece` (count floats) over `links`: a member sends
// its piece to its leader and gets the sum back; a leader adds its
// members' pieces, rings with the other leaders and hands the sum back.
// A failure names the rank at the other end.
bool node_allreduce(float* piece, std::size_t count, const Links& links, std::vector<float>& tmp, const Deadline& d,
                    std::string* err) {
    const std::size_t bytes = count * sizeof(float);
    auto rank_of = [](const std::optional<uint32_t>& r) { return r ? "rank " + std::to_string(*r) : std::string("?"); };
    auto member = [&](std::size_t m) {
        return "rank " + (m < links.member_ranks.size() ? std::to_string(links.member_ranks[m]) : std::string("?"));
    };
    tmp.resize(std::max(tmp.size(), count));
    if (links.head >= 0) {
        if (!wire::send_all(links.head, piece, bytes, d) || !wire::recv_all(links.head, tmp.data(), bytes, d)) {
            *err = "no sum back from its node's leader, " + rank_of(links.head_rank);
            return false;
        }
        std::copy(tmp.begin(), tmp.begin() + static_cast<long>(count), piece);
        return true;
    }
    for (std::size_t m = 0; m < links.members.size(); ++m) {
        if (!wire::recv_all(links.members[m], tmp.data(), bytes, d)) {
            *err = "no piece from " + member(m) + " of its node";
            return false;
        }
        for (std::size_t i = 0; i < count; ++i) piece[i] += tmp[i];
    }
    if (!ring_allreduce(piece, count, links.pos, links.n, links.next, links.prev, d, err)) {
        if (links.prev_rank)
            *err = "leaders' ring from " + rank_of(links.prev_rank) + " to " + rank_of(links.next_rank) + ": " + *err;
        return false;
    }
    for (std::size_t m = 0; m < links.members.size(); ++m)
        if (!wire::send_all(links.members[m], piece, bytes, d)) {
            *err = "could not hand the sum to " + member(m) + " of its node";
            return false;
        }
    return true;
}

}  // namespace

std::string prepare_ring(std::vector<float>& ring, std::size_t bytes, uint32_t pos) {
    try {
        ring.assign(bytes / sizeof(float), 0.0f);
    } catch (const std::bad_alloc&) {
        return "cannot allocate the " + num(bytes / 1048576.0, -1) + " MiB all-reduce buffer";
    }
    // This rank's own pattern, read back: the all-reduce starts from it.
    fill_pattern(ring, pos);
    if (std::string bad = check_fill(ring, pos); !bad.empty())
        return "the all-reduce buffer does not hold what was written: " + bad;
    return "";
}

Timed timed_ring(std::vector<float>& buf, int iters, const Links& links, uint32_t patterns, const Deadline& d,
                 double budget, double pause) {
    Timed t;
    const std::size_t count = buf.size();
    if (count == 0) return t;
    // The buffer goes round in segments of 1 MiB, each with one more
    // element: this rank's vote to stop (1 once its budget is spent). The
    // sum reaches every rank, so all stop after the same segment.
    const std::size_t seg = std::min<std::size_t>(count, 1u << 18);
    const std::size_t nseg = (count + seg - 1) / seg;
    const std::size_t planned = nseg * (1 + static_cast<std::size_t>(std::max(0, iters)));
    std::vector<float> piece(seg + 1), tmp;
    const double t0 = now_s();
    double t_first = 0, t_pass = 0;
    std::vector<double> pass_times;
    std::size_t done = 0;
    bool stop = false;
    bool checked = false;
    // The first pass is checked, or as much of it as the time allowed.
    auto check_first = [&](std::size_t upto) {
        t.error = check_pattern(upto == count ? buf : std::vector<float>(buf.begin(), buf.begin() + upto), patterns);
        t.correct = t.error.empty();
        if (!t.correct) t.error = "wrong all-reduce result: " + t.error;
        checked = true;
    };
    while (done < planned && !stop) {
        const std::size_t lo = (done % nseg) * seg, len = std::min(seg, count - lo);
        std::copy(buf.begin() + lo, buf.begin() + lo + len, piece.begin());
        const double seg_start = now_s();
        piece[len] = seg_start - t0 > budget ? 1.0f : 0.0f;
        if (!node_allreduce(piece.data(), len + 1, links, tmp, d, &t.error)) {
            t.peer = true;
            return t;
        }
        std::copy(piece.begin(), piece.begin() + len, buf.begin() + lo);
        stop = piece[len] > 0;
        // A hook's load: at least `pause`, and 4 times the segment's own
        // time, so a slow build (ASan) is slowed by as much as a fast one.
        if (pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(std::max(pause, 4 * (now_s() - seg_start))));
        if (++done == nseg) {
            t_first = t_pass = now_s();
            check_first(count);
        } else if (done % nseg == 0) {
            const double end = now_s();
            pass_times.push_back(end - t_pass);
            t_pass = end;
        }
    }
    if (!pass_times.empty()) {
        std::nth_element(pass_times.begin(), pass_times.begin() + pass_times.size() / 2, pass_times.end());
        t.median_pass = pass_times[pass_times.size() / 2];
    }
    if (!checked) check_first(std::min(count, done * seg));
    const double t1 = now_s();
    if (done > nseg) {
        t.passes = double(done - nseg) / nseg;
        t.seconds = (t1 - t_first) / t.passes;
    } else {
        t.passes = double(done) / nseg;
        t.seconds = (t1 - t0) / t.passes;
    }
    t.ok = true;
    return t;
}

Outcome<Fd> data_connect(const std::string& addr, uint16_t port, const std::string& purpose, const Self& self,
                         const Deadline& d) {
    auto c = knock(addr, port, "data:" + purpose, self.rank, std::nullopt, std::nullopt, self.secret, d);
    if (!c) return c.problem();
    return std::move(c.value().fd);
}

Outcome<std::vector<Fd>> data_accept_all(int listen_fd, const std::vector<std::pair<std::string, uint32_t>>& want,
                                         const Self& self, const Deadline& d, Strangers* seen) {
    std::vector<Fd> got(want.size());
    std::size_t have = 0;
    Doorway door(listen_fd, self.secret, self.rank, false);
    auto slot = [&](const std::string& purpose, uint32_t rank) {
        for (std::size_t k = 0; k < want.size(); ++k)
            if ("data:" + want[k].first == purpose && want[k].second == rank && !got[k]) return k;
        return want.size();
    };
    while (have < want.size() && !d.passed()) {
        for (Guest& g : door.turn(std::min(0.1, std::max(0.0, d.left())), [&](const std::string& p, uint32_t r) {
                 return slot(p, r) < want.size();
             })) {
            got[slot(g.purpose, g.rank)] = std::move(g.fd);
            ++have;
        }
    }
    if (have == want.size()) door.close_waiting();
    const std::string who = self.label + " rank " + std::to_string(self.rank);
    if (seen) seen->merge(door.strangers());
    else if (const std::string s = door.strangers().summary(); !s.empty())
        std::fprintf(stderr, "mn-preflight: %s: strangers at its data port: %s\n", who.c_str(), s.c_str());
    for (const auto& u : door.unwanted())
        std::fprintf(stderr, "mn-preflight: %s: refused a data connection: %s\n", who.c_str(), u.c_str());
    for (std::size_t k = 0; k < want.size(); ++k)
        if (!got[k])
            return Problem{"rank " + std::to_string(want[k].second) + " did not connect for " + want[k].first +
                               (door.strangers().total ? " (" + std::to_string(door.strangers().total) +
                                                             " connections from strangers came instead)"
                                                       : ""),
                           ""};
    return got;
}

Outcome<Fd> data_accept(int listen_fd, const std::string& purpose, uint32_t from, const Self& self, const Deadline& d,
                        Strangers* seen) {
    auto got = data_accept_all(listen_fd, {{purpose, from}}, self, d, seen);
    if (!got) return got.problem();
    return std::move(got.value().front());
}

Strangers take_waiting(int listen_fd) {
    Strangers s;
    std::string peer;
    for (std::size_t n = 0; n < kMostWaiting; ++n) {
        auto c = wire::accept_one(listen_fd, Deadline::in(0), &peer);
        if (!c) break;
        s.add(peer, "waited at it while it was not accepting");
    }
    return s;
}

}  // namespace mn::check
