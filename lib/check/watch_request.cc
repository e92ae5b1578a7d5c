// SPDX-License-Identifier: Apache-2.0
#include "lib/check/watch_request.h"

#include <cstdlib>

#include "lib/util/boolean.h"
#include "lib/util/text.h"

namespace mn {

Outcome<WatchRequest> parse_watch_request(const std::string& what, const std::string& source) {
    WatchRequest r;
    r.source = source;
    r.enabled = true;
    const std::string fix = "give " + source + "=report, abort, off, or add window=S (5 to 3600 seconds) or "
                            "exclude-file=PATH or history=DIR, e.g. " + source + "=abort,window=30";
    for (const std::string& raw : split_list(what, ',')) {
        const std::string w = lower(raw);
        if (w.empty() || w == "report") continue;
        if (w == "abort") {
            r.abort = true;
            continue;
        }
        if (w.compare(0, 7, "window=") == 0) {
            const std::string v = w.substr(7);
            char* end = nullptr;
            const double s = std::strtod(v.c_str(), &end);
            if (v.empty() || !end || *end || !(s >= 5 && s <= 3600))
                return Problem{source + ": window='" + v + "' is not seconds from 5 to 3600", fix};
            r.window = s;
            continue;
        }
        if (w.compare(0, 13, "exclude-file=") == 0 || w.compare(0, 8, "history=") == 0) {
            const bool file = w[0] == 'e';
            std::string& into = file ? r.exclude_file : r.history_dir;
            into = raw.substr(file ? 13 : 8);
            if (into.empty()) return Problem{source + ": " + raw + " names no " + (file ? "file" : "directory"), fix};
            continue;
        }
        if (auto b = parse_boolean(w, source)) {
            r.enabled = *b;
            continue;
        }
        return Problem{source + ": '" + raw + "' is not report, abort, off, window=S, exclude-file=PATH or history=DIR", fix};
    }
    if (!r.enabled) r.abort = false;
    return r;
}

std::vector<std::string> watch_argv(const WatchRequest& r, const std::string& bin) {
    std::vector<std::string> a{bin, "watch"};
    if (r.abort) a.push_back("--abort");
    if (r.window) {
        a.push_back("--window");
        a.push_back(num(*r.window, -1));
    }
    if (!r.exclude_file.empty()) {
        a.push_back("--exclude-file");
        a.push_back(r.exclude_file);
    }
    if (!r.history_dir.empty()) {
        a.push_back("--history");
        a.push_back(r.history_dir);
    }
    a.push_back("--");
    return a;
}

}  // namespace mn
