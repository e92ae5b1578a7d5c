// SPDX-License-Identifier: Apache-2.0
// A node's leader (step.h says when and why): its door for the node's
// other ranks, and their way in. The relaying itself is the control
// thread's (liveness.cc: the leader's Inbox).
#include <cstdio>

#include "helper/check/step.h"
#include "lib/util/crypto.h"
#include "lib/util/text.h"

namespace mn::check {

bool gathers(const Self& self) {
    static const uint32_t above = hook_bound("MN_PREFLIGHT_GATHER_ABOVE", kGatherAbove);
    return self.local_world > 1 && self.world > above;
}

std::string node_door_name(const Self& self) {
    // Named by the secret: nobody without it can know the name before the
    // leader binds it, so nobody can take it first. Once bound it shows in
    // /proc/net/unix, but a caller must still prove the secret.
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
    door_.reset();
    listen_ = Fd();
}

void open_node_door(Step& st) {
    const Self& self = st.self;
    if (!gathers(self) || self.local_rank != 0 || self.rank == 0 || self.node == 0) return;
    auto fd = wire::listen_local(node_door_name(self).substr(1));
    if (!fd) {
        // Its node's ranks find nobody there and join rank 0 themselves.
        std::fprintf(stderr, "mn-preflight: %s rank %u: %s; this node's ranks join rank 0 directly\n",
                     self.label.c_str(), self.rank, fd.problem().text().c_str());
        return;
    }
    st.node_door = std::make_shared<NodeDoor>(std::move(fd.value()), self);
    // Served from now on by the control thread, so the node's ranks get in
    // while this rank still knocks at rank 0's; its Inbox takes the door
    // over with the ranks held meanwhile.
    control_attach([door = st.node_door] {
        door->hold(0.05);
        return true;
    });
}

std::optional<Line> join_leader(Step& st) {
    const Self& self = st.self;
    if (!gathers(self) || self.local_rank == 0 || self.node == 0) return std::nullopt;
    // Nobody at the door for kLeaderWait: this rank joins rank 0 itself.
    // Once a connection was taken it waits for the handshake as long as the
    // rendezvous lasts: the leader may be slow to answer on a loaded host,
    // and having read this rank's knock it may already have relayed its
    // hello (a rank that then came to rank 0 too would come twice).
    bool unheard = false;
    auto c = knock(node_door_name(self), 0, "node", self.rank, std::nullopt, msg::encode(st.hello), self.secret,
                   st.rdzv, Deadline::in(kLeaderWait), &unheard);
    if (c) return Line(std::move(c.value().fd), std::move(c.value().seal));
    std::fprintf(stderr, "mn-preflight: %s rank %u: its node's leader (LOCAL_RANK 0): %s%s\n", self.label.c_str(),
                 self.rank, c.problem().text().c_str(), unheard ? "; it joins rank 0 directly" : "");
    if (unheard) return std::nullopt;
    return Line();
}

}  // namespace mn::check
