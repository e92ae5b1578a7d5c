// SPDX-License-Identifier: Apache-2.0
#include "helper/check/control/line.h"

namespace mn::check {

bool Pulse::skipped(double limit) {
    const double now = now_s();
    gap_ = now - last_;
    last_ = now;
    return gap_ > limit;
}

std::vector<uint32_t> stopped_answering(std::map<uint32_t, double>& heard, const wire::Mux& mux, double now) {
    std::vector<uint32_t> out;
    for (auto& [r, t] : heard)
        if (now - t > kSilence) {
            if (mux.pending(r)) t = now;
            else out.push_back(r);
        }
    return out;
}

std::string silence_words() { return "nothing heard from it for " + num(kSilence, -1) + " s"; }

std::string loss_words(Gone gone, const std::string& detail, msg::Stage s) {
    const std::string phase = msg::stage_name(s);
    switch (gone) {
    case Gone::StoppedAnswering: return "stopped answering in " + phase + " (" + detail + ")";
    case Gone::Garbled: return "sent rank 0 a message that does not decode during " + phase + " (" + detail + ")";
    case Gone::Ended: break;
    }
    return "its process ended during " + phase + " (" + detail + ")";
}

}  // namespace mn::check
