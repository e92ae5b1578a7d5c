// SPDX-License-Identifier: Apache-2.0
// Errors are values: an Outcome holds either a result or a message that says
// what is wrong and how to fix it. The SPANK glue adds the plugin and node.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace mn {

struct Problem {
    std::string what;  // what is wrong, naming the input
    std::string fix;   // what the user or admin should do

    std::string text() const { return fix.empty() ? what : what + "; " + fix; }
};

template <typename T>
class Outcome {
public:
    Outcome(T value) : value_(std::move(value)) {}
    Outcome(Problem p) : problem_(std::move(p)) {}

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }
    const T& value() const { return *value_; }
    T& value() { return *value_; }
    const T& operator*() const { return *value_; }
    const T* operator->() const { return &*value_; }
    const Problem& problem() const { return problem_; }

private:
    std::optional<T> value_;
    Problem problem_;
};

}  // namespace mn
