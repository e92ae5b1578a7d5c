// SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the reports (discover, mn-preflight), the parsers
// of comma lists (CUDA_VISIBLE_DEVICES, options) and every log line that
// names its host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mn {

// A number with `precision` decimals; precision -1 means printf's %g.
std::string num(double v, int precision = 2);
// s followed by spaces up to `width`, then one space: a table column.
std::string pad(std::string s, std::size_t width);
// "a,,b" -> {"a", "b"}: the non-empty fields between separators.
std::vector<std::string> split_list(const std::string& s, char sep = ',');
std::string join_list(const std::vector<std::string>& v, char sep = ',');
// A whole decimal number within 64 bits, and nothing else (no sign, no
// spaces): the kernel's numbers in /proc.
std::optional<uint64_t> whole_number(const std::string& s);
// ASCII lower case (option values and sysfs words are ASCII).
std::string lower(std::string s);
// This machine's host name, "?" if the kernel will not say.
std::string host_name();
// The environment variable's value, or `dflt` when it is unset or empty.
std::string env_or(const char* name, const std::string& dflt = "");
// Seconds on the monotonic clock, for durations.
double now_s();
// Bytes as lower-case hex ("0a1b..."): secrets and nonces in environment
// variables and messages.
std::string to_hex(const void* data, std::size_t n);

}  // namespace mn
