// SPDX-License-Identifier: Apache-2.0
// The one reading of a boolean setting, wherever it is written: the
// environment (MN_NCCL_EXPLAIN=yes), plugstack.conf (force=on), or an
// option's whole value (--mn-nccl-preflight=off). One set of words
// everywhere, so that a value accepted in one place is accepted in all.
#pragma once

#include <optional>
#include <string>

#include "lib/util/outcome.h"

namespace mn {

// The words, for messages and help texts.
constexpr const char* kBooleanWords = "1/0, yes/no, true/false or on/off";

// 1, yes, true, on -> true; 0, no, false, off -> false; any case;
// nullopt for anything else (the empty value too).
std::optional<bool> boolean_word(const std::string& value);

// The same, with an error naming the setting ("force", "MN_NCCL_EXPLAIN")
// and the words it takes.
Outcome<bool> parse_boolean(const std::string& value, const std::string& setting);

}  // namespace mn
