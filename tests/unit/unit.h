// SPDX-License-Identifier: Apache-2.0
// CMocka in C++: its header wants these first.
#pragma once

// The C++ library before CMocka: its fail() macro would rename a member of <ios>.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
extern "C" {
#include <cmocka.h>
}

#include <string>

#define assert_str(actual, expected) assert_string_equal(std::string(actual).c_str(), std::string(expected).c_str())
#define assert_contains(haystack, needle)                                                  \
    do {                                                                                   \
        const std::string h_ = (haystack);                                                 \
        if (h_.find(needle) == std::string::npos) fail_msg("'%s' lacks '%s'", h_.c_str(), needle); \
    } while (0)

// A scratch directory of the test's own: /tmp/mn-NAME-XXXXXX.
inline std::string scratch_dir(const std::string& name) {
    std::string tmpl = "/tmp/mn-" + name + "-XXXXXX";
    if (!mkdtemp(tmpl.data())) fail_msg("mkdtemp %s", tmpl.c_str());
    return tmpl;
}

inline void remove_tree(const std::string& dir) {
    if (system(("rm -rf " + dir).c_str()) != 0) fail_msg("rm -rf %s", dir.c_str());
}

inline std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A call that blocks ends the test (exit 1) after `seconds` instead of
// hanging make check; alarm(0) when it returned.
inline void fail_if_blocked(unsigned seconds) {
    signal(SIGALRM, [](int) {
        static const char msg[] = "a call blocked: the test ends here (SIGALRM)\n";
        (void)!::write(2, msg, sizeof msg - 1);
        _exit(1);
    });
    alarm(seconds);
}
