// SPDX-License-Identifier: Apache-2.0
#include "lib/util/boolean.h"
#include "tests/unit/unit.h"

using namespace mn;

static void every_word_in_any_case(void**) {
    for (const char* v : {"1", "yes", "true", "on", "YES", "True", "oN"}) {
        auto b = parse_boolean(v, "force");
        if (!b.ok() || !*b) fail_msg("'%s' should read as true", v);
    }
    for (const char* v : {"0", "no", "false", "off", "NO", "False", "OFF"}) {
        auto b = parse_boolean(v, "force");
        if (!b.ok() || *b) fail_msg("'%s' should read as false", v);
    }
}

static void anything_else_names_the_setting_and_the_words(void**) {
    for (const char* v : {"", "2", "y", "n", "enable", " yes", "yes ", "01", "-1", "nope"}) {
        auto b = parse_boolean(v, "MN_NCCL_EXPLAIN");
        if (b.ok()) fail_msg("'%s' should be refused", v);
        assert_contains(b.problem().what, std::string("MN_NCCL_EXPLAIN='") + v + "'");
        assert_contains(b.problem().fix, "1/0, yes/no, true/false or on/off");
    }
    assert_false(boolean_word("").has_value());
    assert_false(boolean_word("maybe").has_value());
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_word_in_any_case),
        cmocka_unit_test(anything_else_names_the_setting_and_the_words),
    };
    return cmocka_run_group_tests_name("boolean", tests, nullptr, nullptr);
}
