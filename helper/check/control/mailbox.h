// SPDX-License-Identifier: Apache-2.0
// The one queue between the control thread and a phase's thread: the hub
// puts what the ranks said for rank 0's phases, the inbox what rank 0 said
// for a rank's. Whoever takes waits until something comes or a deadline.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "helper/wire.h"

namespace mn::check {

template <typename T>
class Mailbox {
public:
    void put(T m) {
        std::lock_guard<std::mutex> g(mu_);
        q_.push_back(std::move(m));
        cv_.notify_all();
    }
    // Several at once: one wake-up of the taker for the lot.
    void put_all(std::vector<T>& ms) {
        if (ms.empty()) return;
        std::lock_guard<std::mutex> g(mu_);
        for (T& m : ms) q_.push_back(std::move(m));
        cv_.notify_all();
    }
    // The first in, or none by d.
    std::optional<T> take(const wire::Deadline& d) {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait_until(g, d.at, [&] { return !q_.empty(); });
        if (q_.empty()) return std::nullopt;
        T m = std::move(q_.front());
        q_.pop_front();
        return m;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<T> q_;
};

}  // namespace mn::check
