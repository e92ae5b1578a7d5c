// CMocka in C++: its header wants these first.
#pragma once

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
