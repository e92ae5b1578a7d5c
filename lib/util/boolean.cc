// SPDX-License-Identifier: Apache-2.0
#include "lib/util/boolean.h"

#include "lib/util/text.h"

namespace mn {

std::optional<bool> boolean_word(const std::string& value) {
    const std::string v = lower(value);
    if (v == "1" || v == "yes" || v == "true" || v == "on") return true;
    if (v == "0" || v == "no" || v == "false" || v == "off") return false;
    return std::nullopt;
}

Outcome<bool> parse_boolean(const std::string& value, const std::string& setting) {
    if (auto b = boolean_word(value)) return *b;
    return Problem{setting + "='" + value + "' is not a yes or no", std::string("use ") + kBooleanWords};
}

}  // namespace mn
