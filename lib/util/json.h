// A small JSON writer for reports: objects, arrays, strings, numbers, bools.
#pragma once

#include <string>

namespace mn {

std::string json_string(const std::string& s);

}  // namespace mn
