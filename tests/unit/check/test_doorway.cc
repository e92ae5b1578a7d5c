// SPDX-License-Identifier: Apache-2.0
// The handshake (helper/check/doorway) and the seal (helper/wire) over real
// loopback sockets: a rank with the step secret is admitted and proves the
// acceptor in turn; a stranger, a replayed knock, another protocol (both
// named, either side), a squatter without the secret, idle and slow
// connections are each refused for what they are, and none of them holds
// the doorway up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "helper/check/control/doorway.h"
#include "lib/util/crypto.h"
#include "lib/util/text.h"
#include "tests/unit/unit.h"

using namespace mn;
using namespace mn::check;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef";

struct Door {
    Fd listen;
    uint16_t port = 0;
    Door() {
        auto l = wire::listen_tcp("127.0.0.1", 0, &port);
        if (!l) fail_msg("%s", l.problem().text().c_str());
        listen = std::move(l.value());
    }
};

// Runs a doorway for `seconds` (or until `want_n` guests came) on a thread.
struct Acceptor {
    std::vector<Guest> guests;
    Strangers strangers;
    std::vector<std::string> unwanted;
    Strangers closed;  // strangers() after close_waiting()
};
std::future<Acceptor> run_doorway(int fd, const std::string& secret, double seconds, std::size_t want_n, bool first,
                                  std::size_t cap = kMaxWaiting) {
    return std::async(std::launch::async, [=] {
        Doorway door(fd, secret, 0, first, cap);
        Acceptor a;
        const Deadline d = Deadline::in(seconds);
        while (!d.passed() && a.guests.size() < want_n)
            for (Guest& g : door.turn(0.05, [](const std::string& p, uint32_t r) { return p == "control" && r > 0 && r < 4; }))
                a.guests.push_back(std::move(g));
        a.strangers = door.strangers();
        a.unwanted = door.unwanted();
        door.close_waiting();
        a.closed = door.strangers();
        return a;
    });
}

std::string raw_frame(const std::string& body) {
    const std::size_t n = body.size();
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                       static_cast<char>(n)} +
           body;
}

wire::Body hello_of(uint32_t rank) {
    msg::Hello h;
    h.rank = rank;
    h.label = "node" + std::to_string(rank);
    return msg::encode(h);
}

// Rank 1's knock at a rank 0 that sends this challenge and nothing more.
Outcome<Channel> knock_after(const std::string& challenge) {
    Door d;
    std::thread rank0([&] {
        std::string peer;
        auto c = wire::accept_one(d.listen.get(), Deadline::in(3), &peer);
        if (c) wire::send_msg(c->get(), challenge, Deadline::in(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    });
    auto c = knock("127.0.0.1", d.port, "control", 1, 0u, hello_of(1), kSecret, Deadline::in(3));
    rank0.join();
    return c;
}

}  // namespace

static void hmac_matches_rfc_4231(void**) {
    auto hex = [](const Mac& m) { return to_hex(m.data(), m.size()); };
    assert_str(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    assert_str(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    assert_int_equal(random_bytes(16).size(), 16);
    assert_true(random_bytes(16) != random_bytes(16));
    assert_true(same_bytes("abc", "abc"));
    assert_false(same_bytes("abc", "abd"));
    assert_false(same_bytes("abc", "ab"));
}

static void seal_refuses_replay_reorder_and_other_direction(void**) {
    wire::Seal a("key", 'a', 'c'), c("key", 'c', 'a'), other("other", 'c', 'a');
    const std::string m1 = c.close("one"), m2 = c.close("two");
    assert_false(a.open("two", m2));  // out of order
    assert_true(a.open("one", m1));
    assert_false(a.open("one", m1));  // replayed
    assert_true(a.open("two", m2));
    assert_true(c.open("three", a.close("three")));  // the other way works...
    const std::string back = a.close("four");
    assert_false(a.open("four", back));  // ...but a message is never taken back in its own direction
    assert_false(a.open("x", other.close("x")));  // another key
}

static void a_rank_with_the_secret_is_admitted_both_ways(void**) {
    Door d;
    auto acc = run_doorway(d.listen.get(), kSecret, 5, 2, true);
    auto c1 = knock("127.0.0.1", d.port, "control", 1, 0u, hello_of(1), kSecret, Deadline::in(5));
    auto c2 = knock("127.0.0.1", d.port, "control", 2, 0u, hello_of(2), kSecret, Deadline::in(5));
    Acceptor a = acc.get();
    if (!c1 || !c2) fail_msg("%s", (!c1 ? c1 : c2).problem().text().c_str());
    assert_int_equal(a.guests.size(), 2);
    assert_int_equal(a.strangers.total, 0);
    for (Guest& g : a.guests) assert_int_equal(msg::decode<msg::Hello>(g.first)->rank, g.rank);
    // The sealed line works both ways after the handshake.
    Guest& g1 = a.guests[0].rank == 1 ? a.guests[0] : a.guests[1];
    assert_true(wire::send_msg(c1->fd.get(), msg::encode(msg::Beat{}), Deadline::in(1), c1->seal.get()));
    std::string err;
    assert_true(wire::recv_msg(g1.fd.get(), Deadline::in(1), &err, g1.seal.get()).has_value());
    assert_true(wire::send_msg(g1.fd.get(), msg::encode(msg::Word{true, 0, ""}), Deadline::in(1), g1.seal.get()));
    assert_true(wire::recv_msg(c1->fd.get(), Deadline::in(1), &err, c1->seal.get()).has_value());
    // A message sealed for rank 1's connection is refused on rank 2's.
    Guest& g2 = a.guests[0].rank == 2 ? a.guests[0] : a.guests[1];
    assert_true(wire::send_msg(c2->fd.get(), msg::encode(msg::Beat{}), Deadline::in(1), c1->seal.get()));
    assert_false(wire::recv_msg(g2.fd.get(), Deadline::in(1), &err, g2.seal.get()).has_value());
    assert_contains(err, "does not carry this connection's seal");
}

static void a_wrong_secret_is_refused_and_told(void**) {
    Door d;
    auto acc = run_doorway(d.listen.get(), kSecret, 1.5, 1, true);
    auto c = knock("127.0.0.1", d.port, "control", 1, 0u, hello_of(1), "guessed", Deadline::in(3));
    Acceptor a = acc.get();
    assert_false(c.ok());
    assert_contains(c.problem().what, "refused this rank: it does not take this rank's proof of the step secret");
    assert_int_equal(a.guests.size(), 0);
    assert_contains(a.strangers.summary(), "1 connection from 127.0.0.1 (1 did not prove the step secret)");
}

static void a_squatter_without_the_secret_is_found_out(void**) {
    // The port's holder answers every knock with a welcome it cannot seal.
    Door d;
    std::thread squatter([&] {
        std::string peer;
        auto c = wire::accept_one(d.listen.get(), Deadline::in(3), &peer);
        if (!c) return;
        wire::send_msg(c->get(), msg::encode(msg::Challenge{msg::kProtocol, std::string(32, 'a'), ""}), Deadline::in(1));
        char buf[4096];
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        (void)::recv(c->get(), buf, sizeof buf, MSG_DONTWAIT);
        const std::string body = msg::encode(msg::Welcome{0});
        const std::string forged = raw_frame(body + std::string(32, 'x'));
        (void)::send(c->get(), forged.data(), forged.size(), MSG_NOSIGNAL);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    });
    auto c = knock("127.0.0.1", d.port, "control", 1, 0u, hello_of(1), kSecret, Deadline::in(3));
    squatter.join();
    assert_false(c.ok());
    assert_contains(c.problem().what, "does not prove this step's secret");
    assert_contains(c.problem().what, "another process holds the port");
}

static void an_older_protocol_is_named_on_both_sides(void**) {
    // Protocol 1's rank 0: a challenge without a version.
    auto c = knock_after("nonce=n\nop=challenge\n");
    assert_false(c.ok());
    assert_contains(c.problem().what, "did not send mn-preflight's challenge");
    // Protocol 1's rank: it answers the challenge with a hello.
    Door d2;
    auto acc = run_doorway(d2.listen.get(), kSecret, 1, 1, true);
    auto s = wire::connect_tcp("127.0.0.1", d2.port, Deadline::in(1));
    std::string err;
    assert_true(wire::recv_msg(s->get(), Deadline::in(1), &err).has_value());
    assert_true(wire::send_msg(s->get(), "op=hello\nproof=00\nrank=1\n", Deadline::in(1)));
    Acceptor a = acc.get();
    assert_contains(a.strangers.summary(), "spoke an older mn-preflight protocol (1)");
}

// Protocol 2 (messages as key=value lines) and this build (CBOR) meet: each
// side names both protocols and the fix, whichever of them listens.
static void another_build_is_named_on_both_sides(void**) {
    // Protocol 2's rank 0, its challenge byte for byte (keys in order).
    auto c = knock_after("nonce=" + std::string(32, 'e') + "\nop=challenge\nv=2\n");
    assert_false(c.ok());
    assert_contains(c.problem().what, "speaks protocol 2 (mn-nccl before 0.2.0), this one protocol 6 (mn-nccl " +
                                          release() + "): releases further apart than one protocol do not check together");
    assert_contains(c.problem().fix, "install one mn-nccl release on every node of the step");
    // A build that says its release is named by it.
    c = knock_after("op=challenge\nv=5\nnonce=" + std::string(32, 'e') + "\nrelease=0.1.5\n");
    assert_contains(c.problem().what, "speaks protocol 5 (mn-nccl 0.1.5), this one protocol 6");
    // This build's challenge, read as protocol 2 reads every message
    // (key=value lines; op, v and nonce): it finds protocol 6 and says so.
    Door d;
    auto acc = run_doorway(d.listen.get(), kSecret, 1, 1, true);
    auto s = wire::connect_tcp("127.0.0.1", d.port, Deadline::in(1));
    std::string err;
    auto ch = wire::recv_msg(s->get(), Deadline::in(1), &err);
    acc.get();
    if (!ch) fail_msg("no challenge: %s", err.c_str());
    std::map<std::string, std::string> v2;
    for (const std::string& line : split_list(*ch, '\n')) v2[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
    assert_str(v2["op"], "challenge");
    assert_str(v2["v"], "6");
    assert_int_equal(v2["nonce"].size(), 32);
    // A rank of another protocol that knocks all the same is refused for
    // it; proven under its own protocol with the step secret, it is a rank
    // of this step on a node of another release, named as such.
    const msg::Knock k7{7, "control", 1, std::string(32, 'b'), std::string("0.3.0")};
    const std::string nonce_a(32, 'c');
    KnockReading r = read_knock(knock_bytes(k7, hello_of(1), *connector_seal(kSecret, k7, nonce_a)), nonce_a, kSecret, true);
    assert_int_equal(static_cast<int>(r.state), static_cast<int>(KnockReading::State::Stranger));
    assert_str(r.what, "rank 1 of this step spoke mn-preflight protocol 7 (mn-nccl 0.3.0)");
    assert_str(r.skew, "rank 1 speaks mn-preflight protocol 7 (mn-nccl 0.3.0)");
    assert_str(r.refusal, "protocol");
    // The same knock under another secret: a stranger, never a rank named.
    r = read_knock(knock_bytes(k7, hello_of(1), *connector_seal("another secret", k7, nonce_a)), nonce_a, kSecret, true);
    assert_str(r.what, "spoke mn-preflight protocol 7 (mn-nccl 0.3.0)");
    assert_str(r.skew, "");
    assert_str(r.refusal, "protocol");
}

static void a_replayed_knock_is_not_a_proof(void**) {
    // A knock recorded under one challenge, sent again under another.
    const msg::Knock k{msg::kProtocol, "control", 1, std::string(32, 'b'), std::nullopt};
    const std::string nonce_then = std::string(32, 'c'), nonce_now = std::string(32, 'd');
    auto seal = connector_seal(kSecret, k, nonce_then);
    const std::string bytes = knock_bytes(k, hello_of(1), *seal);
    assert_int_equal(static_cast<int>(read_knock(bytes, nonce_then, kSecret, true).state),
                     static_cast<int>(KnockReading::State::Proven));
    KnockReading again = read_knock(bytes, nonce_now, kSecret, true);
    assert_int_equal(static_cast<int>(again.state), static_cast<int>(KnockReading::State::Stranger));
    assert_str(again.what, "did not prove the step secret");
    // A knock made for a data port is no control connection's, and the other way round.
    const msg::Knock data{msg::kProtocol, "data:ring", 1, std::string(32, 'b'), std::nullopt};
    const std::string as_data = knock_bytes(data, hello_of(1), *connector_seal(kSecret, k, nonce_then));
    assert_int_equal(static_cast<int>(read_knock(as_data, nonce_then, kSecret, true).state),
                     static_cast<int>(KnockReading::State::Stranger));
}

static void idle_and_slow_strangers_hold_nobody_up(void**) {
    // 50 idle connections and 5 that send a byte at a time are held while a
    // rank knocks: it is admitted at once; the strangers are counted.
    Door d;
    auto acc = run_doorway(d.listen.get(), kSecret, 4, 1, true);
    std::vector<Fd> idle;
    for (int i = 0; i < 50; ++i)
        if (auto s = wire::connect_tcp("127.0.0.1", d.port, Deadline::in(1))) idle.push_back(std::move(s.value()));
    std::vector<Fd> slow;
    for (int i = 0; i < 5; ++i)
        if (auto s = wire::connect_tcp("127.0.0.1", d.port, Deadline::in(1))) slow.push_back(std::move(s.value()));
    std::atomic<bool> stop{false};
    std::thread dribble([&] {
        while (!stop) {
            for (auto& s : slow) (void)::send(s.get(), "\0", 1, MSG_NOSIGNAL);
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    });
    const double t0 = now_s();
    auto c = knock("127.0.0.1", d.port, "control", 3, 0u, hello_of(3), kSecret, Deadline::in(3));
    const double took = now_s() - t0;
    stop = true;
    dribble.join();
    Acceptor a = acc.get();
    assert_true(c.ok());
    assert_int_equal(a.guests.size(), 1);
    if (took > 1.0) fail_msg("the rank waited %.2f s behind the strangers", took);
    // The doorway returned at the rank's arrival: the strangers still wait
    // for their deadline, so none is counted yet, and no rank is blamed.
    assert_int_equal(a.unwanted.size(), 0);
    // Closed once the rank it wanted came (a data port's pair test): each
    // is counted, as the pair's report says (helper/check/pairs.cc).
    assert_true(a.closed.total >= a.strangers.total + 50);
    assert_contains(a.closed.summary(), " connections from 127.0.0.1 (");
    assert_contains(a.closed.summary(), "held a connection without a word");
    Strangers both = a.closed;
    both.merge(a.closed);
    assert_int_equal(both.total, 2 * a.closed.total);
    assert_int_equal(both.by_address.size(), 1);
}

static void strangers_time_out_and_are_summarised_by_address(void**) {
    Door d;
    auto acc = run_doorway(d.listen.get(), kSecret, kKnockWait + 1.0, 99, true);
    std::vector<Fd> held;
    for (int i = 0; i < 12; ++i)
        if (auto s = wire::connect_tcp("127.0.0.1", d.port, Deadline::in(1))) held.push_back(std::move(s.value()));
    // One that sends what is not ours, one a frame too large to be a knock.
    if (auto s = wire::connect_tcp("127.0.0.1", d.port, Deadline::in(1))) {
        (void)::send(s->get(), "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL);
        held.push_back(std::move(s.value()));
    }
    Acceptor a = acc.get();
    const std::string s = a.strangers.summary();
    assert_contains(s, "13 connections from 127.0.0.1 (");
    assert_contains(s, "12 sent nothing in time");
    assert_contains(s, "1 sent what is not mn-preflight's");
    assert_true(s.find("GET") == std::string::npos);  // their bytes are never quoted
}

// Another user that holds `most` connections from `source` and opens a new
// one for each the doorway cuts off, as fast as it can, until stopped.
struct Churner {
    std::atomic<bool> stop{false};
    std::atomic<unsigned> opened{0};
    std::thread t;
    Churner(const char* source, uint16_t port, std::size_t most) {
        t = std::thread([=] {
            std::vector<int> held;
            sockaddr_in to{}, from{};
            to.sin_family = from.sin_family = AF_INET;
            to.sin_port = htons(port);
            inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
            inet_pton(AF_INET, source, &from.sin_addr);
            while (!stop) {
                while (held.size() < most && !stop) {
                    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                    timeval tv{0, 200000};
                    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
                        ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
                        ::close(fd);
                        break;
                    }
                    held.push_back(fd);
                    ++opened;
                }
                // Those the doorway cut off make room for new ones.
                std::vector<int> still;
                for (int fd : held) {
                    char buf[512];
                    const ssize_t k = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ::close(fd);
                    else still.push_back(fd);
                }
                held.swap(still);
            }
            for (int fd : held) ::close(fd);
        });
    }
    ~Churner() {
        stop = true;
        t.join();
    }
};

// Rank 2 knocks from 127.0.0.1 while a Churner holds `hold` connections
// from `source` at a doorway of `cap`: its knock, the doorway's side, and
// how many connections the flood opened.
struct ThroughFlood {
    Outcome<Channel> knocked = Problem{"", ""};
    Acceptor door;
    unsigned opened = 0;
};
ThroughFlood knock_through_flood(const char* source, std::size_t cap, std::size_t hold, double seconds) {
    Door d;
    auto acc = run_doorway(d.listen.get(), kSecret, seconds, 1, true, cap);
    ThroughFlood t;
    {
        Churner flood(source, d.port, hold);
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        t.knocked = knock("127.0.0.1", d.port, "control", 2, 0u, hello_of(2), kSecret, Deadline::in(seconds - 1));
        t.opened = flood.opened;
    }
    t.door = acc.get();
    if (!t.knocked.ok()) fail_msg("%s", t.knocked.problem().text().c_str());
    assert_int_equal(t.door.guests.size(), 1);
    return t;
}

// A flood from another address: the doorway cuts the flood's own callers
// and takes the whole backlog each turn, so the rank behind it in the
// kernel's queue is read as soon as it knocks, and never cut off.
static void a_flood_from_another_address_never_cuts_a_rank(void**) {
    const ThroughFlood t = knock_through_flood("127.0.0.2", 32, 400, 4);
    assert_true(t.opened > 32);
    const std::string s = t.door.strangers.summary();
    assert_contains(s, "from 127.0.0.2 (");
    assert_contains(s, "cut off for a newer connection while 32 waited at once");
    assert_true(s.find("from 127.0.0.1") == std::string::npos);  // the rank's address: never cut
}

// The same from the rank's own address (another user on its node): the
// doorway still takes the backlog each turn, and a rank answers its
// challenge long before the flood's newer connections push it out (it
// knocks again if they do).
static void a_flood_from_the_ranks_address_does_not_hold_it_out(void**) {
    const ThroughFlood t = knock_through_flood("127.0.0.1", 64, 600, 6);
    assert_true(t.opened > 600);  // it reopened what was cut off
    assert_contains(t.door.strangers.summary(), "cut off for a newer connection while 64 waited at once");
}

// The cap follows the open-file limit, within its bounds.
static void the_cap_follows_the_open_file_limit(void**) {
    rlimit lim{};
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    const std::size_t cap = waiting_cap();
    assert_in_range(cap, kFewestWaiting, kMaxWaiting);
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur / 4 >= kFewestWaiting && lim.rlim_cur / 4 <= kMaxWaiting)
        assert_int_equal(cap, lim.rlim_cur / 4);
}

// A refusal is tried again until the deadline unless told not to (NCCL's
// RAS, absent in a step without NCCL, must not hold the step's end).
static void a_refused_connection_is_tried_again_only_when_asked(void**) {
    uint16_t port = 0;
    {
        auto l = wire::listen_tcp("127.0.0.1", 0, &port);
        assert_true(static_cast<bool>(l));
    }  // closed: nobody listens there now
    const auto once = Deadline::in(3);
    auto refused = wire::connect_tcp("127.0.0.1", port, once, wire::Retry::Never);
    assert_false(static_cast<bool>(refused));
    assert_contains(refused.problem().text(), "Connection refused");
    assert_true(once.left() > 2);
    const auto until = Deadline::in(0.4);
    assert_false(static_cast<bool>(wire::connect_tcp("127.0.0.1", port, until)));
    assert_true(until.passed());
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hmac_matches_rfc_4231),
        cmocka_unit_test(seal_refuses_replay_reorder_and_other_direction),
        cmocka_unit_test(a_rank_with_the_secret_is_admitted_both_ways),
        cmocka_unit_test(a_wrong_secret_is_refused_and_told),
        cmocka_unit_test(a_squatter_without_the_secret_is_found_out),
        cmocka_unit_test(an_older_protocol_is_named_on_both_sides),
        cmocka_unit_test(another_build_is_named_on_both_sides),
        cmocka_unit_test(a_replayed_knock_is_not_a_proof),
        cmocka_unit_test(idle_and_slow_strangers_hold_nobody_up),
        cmocka_unit_test(strangers_time_out_and_are_summarised_by_address),
        cmocka_unit_test(a_flood_from_another_address_never_cuts_a_rank),
        cmocka_unit_test(a_flood_from_the_ranks_address_does_not_hold_it_out),
        cmocka_unit_test(the_cap_follows_the_open_file_limit),
        cmocka_unit_test(a_refused_connection_is_tried_again_only_when_asked),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
