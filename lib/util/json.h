// SPDX-License-Identifier: Apache-2.0
// Every JSON mn-nccl writes or reads is built, dumped and parsed by
// nlohmann-json; this header says how the project's texts and numbers go
// into it, and how a document becomes one line of output.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mn {

// Objects keep their keys in the order they were set: the order the man
// page and README show.
using Json = nlohmann::ordered_json;

// A text as the string a JSON value holds, every byte kept: bytes
// 0x80-0xff become U+0080-U+00FF, which json_line() writes as
// \u0080-\u00ff. Texts from sysfs, libraries and peers need not be UTF-8;
// mn-preflight has always written each such byte so, and its history
// lines read back byte for byte.
std::string json_text(const std::string& bytes);
// The bytes back from a string a parser gave (UTF-8): U+0000-U+00FF are
// that byte again, characters above stay UTF-8.
std::string json_text_bytes(const std::string& utf8);

// Texts as a JSON array of json_text()s.
Json json_texts(const std::vector<std::string>& texts);

// A number: whole numbers below 1e15 without a fraction ("400",
// "1764000000"), others the shortest text that reads back as the same
// double ("0.0052", "1e+300"); NaN and the infinities are null.
Json json_number(double v);
// v rounded to `decimals` places, as printf's %.*f rounds; a fraction
// stays ("12.0"), trailing zeros go ("0.59", not "0.5900").
Json json_rounded(double v, int decimals);

// The document on one line, ASCII only, newline at the end.
std::string json_line(const Json& j);

}  // namespace mn
