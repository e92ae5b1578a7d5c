// SPDX-License-Identifier: Apache-2.0
// A node's speaker's door and relay (relay.h says what they own).
#include "helper/check/control/relay.h"

#include <cstdio>

#include "lib/util/crypto.h"
#include "lib/util/text.h"

namespace mn::check {

std::string node_door_name(const Self& self) {
    // Named by the secret: nobody without it can know the name before the
    // speaker binds it, so nobody can take it first. Once bound it shows
    // in /proc/net/unix, but a caller must still prove the secret.
    const Mac m = hmac_sha256(self.secret, "node door\n" + std::to_string(self.port) + "\n" +
                                               std::to_string(self.node));
    return "@mn-preflight-node-" + to_hex(m.data(), 16);
}

NodeDoor::NodeDoor(Fd listen, const Self& self) : listen_(std::move(listen)), self_(self) {
    door_ = std::make_unique<Doorway>(listen_.get(), self_.secret, self_.rank, true);
}

NodeDoor::~NodeDoor() = default;

std::vector<Guest> NodeDoor::turn(double wait) {
    std::vector<Guest> out = std::move(held_);
    held_.clear();
    if (!door_) return out;
    auto wanted = [&](const std::string& purpose, uint32_t r) {
        return purpose == "node" && r != 0 && r != self_.rank && r < self_.world && !seen_.count(r);
    };
    for (Guest& g : door_->turn(wait, wanted)) {
        seen_.insert(g.rank);
        out.push_back(std::move(g));
    }
    return out;
}

void NodeDoor::hold(double wait) {
    std::vector<Guest> more = turn(wait);
    for (Guest& g : more) held_.push_back(std::move(g));
}

void NodeDoor::close() {
    if (!door_) return;
    door_->close_waiting();
    if (const std::string s = door_->strangers().summary(); !s.empty())
        std::fprintf(stderr, "mn-preflight: %s rank %u: strangers at its node's door: %s\n", self_.label.c_str(),
                     self_.rank, s.c_str());
    for (const auto& u : door_->unwanted())
        std::fprintf(stderr, "mn-preflight: %s rank %u: refused %s at its node's door (a second connection)\n",
                     self_.label.c_str(), self_.rank, u.c_str());
    closed_ = door_->strangers();
    door_.reset();
    listen_ = Fd();
}

// A rank of its node that knocked at its door. Its hello goes up as it
// came (rank 0 decodes and judges it); one for another node or another
// rank is refused here.
void NodeRelay::admit(wire::Mux& mux, Guest& g) {
    auto h = msg::decode<msg::Hello>(g.first);
    if (!h || h->rank != g.rank || h->node != self_.node) {
        std::fprintf(stderr, "mn-preflight: %s rank %u: refused rank %u at its node's door: its hello %s\n",
                     self_.label.c_str(), self_.rank, g.rank,
                     !h ? "does not decode" : h->rank != g.rank ? "names another rank" : "names another node");
        return;
    }
    auto line = std::make_unique<Line>(std::move(g.fd), std::move(g.seal));
    mux.add(g.rank, line->fd(), line->seal());
    heard_[g.rank] = now_s();
    up_.push_back({g.rank, msg::Carried::What::Hello, {std::move(g.first)}, "", false});
    lines_[g.rank] = std::move(line);
}

bool NodeRelay::door_turn(wire::Mux& mux, bool rostered) {
    if (!door_ || !door_->open()) return false;
    for (Guest& g : door_->turn(0.02)) admit(mux, g);
    if (rostered || door_->came() + 1 >= self_.local_world) door_->close();
    return true;
}

void NodeRelay::take(const wire::Mux::Event& e) {
    const uint32_t r = static_cast<uint32_t>(e.key);
    if (!heard_.count(r)) return;
    if (!e.msg) {
        heard_.erase(r);
        up_.push_back({r, msg::Carried::What::Gone, {}, e.error, false});
        return;
    }
    heard_[r] = now_s();
    auto m = msg::decode_from_rank(*e.msg);
    if (m && std::holds_alternative<msg::Beat>(m.value())) return;
    up_.push_back({r, msg::Carried::What::Said, {*e.msg}, "", false});
}

void NodeRelay::pass_down(uint32_t to, const wire::Body& body) {
    if (auto it = lines_.find(to); it != lines_.end()) it->second->send_fields(body, Deadline::in(1));
}

void NodeRelay::serve(const wire::Mux& mux, Line& up, msg::Stage stage, bool quiet, double period) {
    const double now = now_s();
    if (quiet) {
        for (auto& [r, t] : heard_) t = now;
    } else {
        if (now >= next_beat_) {
            const wire::Body beat = msg::encode(msg::Beat{stage});
            for (auto& [r, line] : lines_)
                if (heard_.count(r) && due_beat(*line, now, period)) line->send_fields(beat, Deadline::in(1));
            next_beat_ = now + period;
        }
        for (uint32_t r : stopped_answering(heard_, mux, now)) {
            heard_.erase(r);
            up_.push_back({r, msg::Carried::What::Gone, {}, silence_words(), true});
        }
    }
    up.send_batched<msg::Relayed>(up_, Deadline::in(1),
                                  [](const msg::Carried& c) { return c.body.bytes.size() + c.error.size() + 32; });
    // Strangers at the door, once more came: rank 0 counts them against a
    // time-out (fail_closed), never against this node.
    if (door_ && door_->strangers().total > strangers_said_) {
        msg::Relayed r;
        r.door_strangers = door_->strangers().brief();
        if (up.send(r, Deadline::in(1))) strangers_said_ = door_->strangers().total;
    }
}

void NodeRelay::tell_all(const msg::Word& w) {
    const wire::Body b = msg::encode(msg::FromLead(msg::Word{false, w.code, w.why}));
    for (auto& [r, line] : lines_) line->send_fields(b, Deadline::in(0.5));
}

}  // namespace mn::check
