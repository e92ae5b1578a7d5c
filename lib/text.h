// Small text helpers shared by the reports (discover, mn-preflight) and the
// parsers of comma lists (CUDA_VISIBLE_DEVICES, the helper's messages).
#pragma once

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

}  // namespace mn
