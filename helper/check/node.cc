// SPDX-License-Identifier: Apache-2.0
// Whether ranks gather at their node's speaker (control/relay.h says what
// a speaker does and why), a speaker's door opened at launch, and the
// other ranks' way in. The relaying itself is the control thread's
// (control/relay.cc, a part of the speaker's inbox).
#include <cstdio>

#include "helper/check/step.h"
#include "lib/util/text.h"

namespace mn::check {

bool gathers(const Self& self) {
    static const uint32_t above = hook_bound("MN_PREFLIGHT_GATHER_ABOVE", kGatherAbove);
    return self.local_world > 1 && self.world > above;
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

std::optional<Line> join_speaker(Step& st) {
    const Self& self = st.self;
    if (!gathers(self) || self.local_rank == 0 || self.node == 0) return std::nullopt;
    // Nobody at the door for kSpeakerWait: this rank joins rank 0 itself.
    // Once a connection was taken it waits for the handshake as long as the
    // rendezvous lasts: the speaker may be slow to answer on a loaded host,
    // and having read this rank's knock it may already have relayed its
    // hello (a rank that then came to rank 0 too would come twice).
    bool unheard = false;
    auto c = knock(node_door_name(self), 0, "node", self.rank, std::nullopt, msg::encode(st.hello), self.secret,
                   st.rdzv, Deadline::in(kSpeakerWait), &unheard);
    if (c) return Line(std::move(c.value().fd), std::move(c.value().seal));
    std::fprintf(stderr, "mn-preflight: %s rank %u: its node's leader (LOCAL_RANK 0): %s%s\n", self.label.c_str(),
                 self.rank, c.problem().text().c_str(), unheard ? "; it joins rank 0 directly" : "");
    if (unheard) return std::nullopt;
    return Line();
}

}  // namespace mn::check
