// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/hostlist.h"

#include <algorithm>
#include <cctype>

namespace mn {
namespace {

struct Range {
    unsigned long lo = 0, hi = 0;
    std::size_t width = 0;  // digits of the lower bound, for zero padding
};

Problem bad(const std::string& expr, const std::string& why) {
    return {"host list '" + expr + "' is not valid: " + why,
            "write it as Slurm does, e.g. node[01-04,07],login1"};
}

bool all_digits(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// Splits on commas that are not inside brackets.
Outcome<std::vector<std::string>> split_top(const std::string& expr) {
    std::vector<std::string> parts;
    std::string cur;
    int depth = 0;
    for (char c : expr) {
        if (c == '[') {
            if (++depth > 1) return bad(expr, "nested '['");
        } else if (c == ']') {
            if (--depth < 0) return bad(expr, "']' without '['");
        }
        if (c == ',' && depth == 0) {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    if (depth != 0) return bad(expr, "'[' without ']'");
    parts.push_back(cur);
    return parts;
}

Outcome<std::vector<Range>> parse_ranges(const std::string& expr, const std::string& body) {
    std::vector<Range> out;
    std::size_t start = 0;
    while (start <= body.size()) {
        std::size_t comma = body.find(',', start);
        std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::size_t dash = item.find('-');
        std::string lo = item.substr(0, dash);
        std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
        if (!all_digits(lo) || !all_digits(hi))
            return bad(expr, "range '" + item + "' must be N or N-M with digits");
        if (lo.size() > 9 || hi.size() > 9) return bad(expr, "range '" + item + "' is too large");
        Range r{std::stoul(lo), std::stoul(hi), lo.size()};
        if (r.hi < r.lo) return bad(expr, "range '" + item + "' goes backwards");
        out.push_back(r);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

std::string padded(unsigned long v, std::size_t width) {
    std::string s = std::to_string(v);
    if (s.size() < width) s.insert(0, width - s.size(), '0');
    return s;
}

}  // namespace

Outcome<Hostlist> Hostlist::parse(const std::string& expr) {
    std::string trimmed;
    for (char c : expr)
        if (!std::isspace(static_cast<unsigned char>(c))) trimmed += c;
    if (trimmed.empty()) return bad(expr, "it is empty");

    auto parts = split_top(trimmed);
    if (!parts) return parts.problem();

    Hostlist list;
    for (const std::string& part : *parts) {
        if (part.empty()) return bad(expr, "empty host name between commas");
        // Each bracket group multiplies the names built so far.
        std::vector<std::string> names{""};
        std::size_t pos = 0;
        while (pos < part.size()) {
            std::size_t open = part.find('[', pos);
            std::string text = part.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
            for (auto& n : names) n += text;
            if (open == std::string::npos) break;
            std::size_t close = part.find(']', open);
            auto ranges = parse_ranges(expr, part.substr(open + 1, close - open - 1));
            if (!ranges) return ranges.problem();
            std::size_t count = 0;
            for (const Range& r : *ranges) count += r.hi - r.lo + 1;
            if (count * names.size() + list.hosts_.size() > kMaxHosts)
                return bad(expr, "it expands to more than " + std::to_string(kMaxHosts) + " hosts");
            std::vector<std::string> next;
            next.reserve(names.size() * count);
            for (const auto& n : names)
                for (const Range& r : *ranges)
                    for (unsigned long v = r.lo; v <= r.hi; ++v) next.push_back(n + padded(v, r.width));
            names.swap(next);
            pos = close + 1;
        }
        for (auto& n : names) list.hosts_.push_back(std::move(n));
    }
    return list;
}

std::string Hostlist::compress(const std::vector<std::string>& hosts) {
    // A group: one prefix and one digit width (0: no zero padding, so
    // node9 and node10 share a group as Slurm writes node[9-10]).
    struct Group {
        std::string prefix;
        std::size_t width = 0;
        std::vector<unsigned long> numbers;
        std::string plain;  // a name without trailing digits
    };
    std::vector<Group> groups;
    auto group_for = [&](const std::string& prefix, std::size_t width) -> Group& {
        for (auto& g : groups)
            if (g.plain.empty() && g.prefix == prefix && g.width == width) return g;
        groups.push_back(Group{prefix, width, {}, ""});
        return groups.back();
    };
    for (const std::string& h : hosts) {
        std::size_t d = h.size();
        while (d > 0 && std::isdigit(static_cast<unsigned char>(h[d - 1]))) --d;
        const std::string digits = h.substr(d);
        // Names without digits, or with too many to count, stay as they are.
        if (digits.empty() || digits.size() > 9 || h.find_first_of("[],") != std::string::npos) {
            bool seen = false;
            for (const auto& g : groups) seen = seen || g.plain == h;
            if (!seen) groups.push_back(Group{"", 0, {}, h});
            continue;
        }
        const bool padded = digits.size() > 1 && digits[0] == '0';
        // An unpadded number as wide as a padded group joins it: node[08-10].
        std::size_t width = padded ? digits.size() : 0;
        if (!padded)
            for (const auto& g : groups)
                if (g.plain.empty() && g.prefix == h.substr(0, d) && g.width == digits.size()) width = g.width;
        group_for(h.substr(0, d), width).numbers.push_back(std::stoul(digits));
    }
    std::string out;
    for (auto& g : groups) {
        if (!out.empty()) out += ",";
        if (!g.plain.empty()) {
            out += g.plain;
            continue;
        }
        std::sort(g.numbers.begin(), g.numbers.end());
        g.numbers.erase(std::unique(g.numbers.begin(), g.numbers.end()), g.numbers.end());
        if (g.numbers.size() == 1) {
            out += g.prefix + padded(g.numbers[0], g.width);
            continue;
        }
        std::string ranges;
        for (std::size_t i = 0; i < g.numbers.size();) {
            std::size_t j = i;
            while (j + 1 < g.numbers.size() && g.numbers[j + 1] == g.numbers[j] + 1) ++j;
            ranges += (ranges.empty() ? "" : ",") + padded(g.numbers[i], g.width);
            if (j > i) ranges += "-" + padded(g.numbers[j], g.width);
            i = j + 1;
        }
        out += g.prefix + "[" + ranges + "]";
    }
    return out;
}

}  // namespace mn
