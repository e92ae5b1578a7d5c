// SPDX-License-Identifier: Apache-2.0
#include "lib/plan/hostlist.h"
#include "tests/unit/unit.h"

using mn::Hostlist;

static std::string joined(const Hostlist& h) {
    std::string s;
    for (const auto& n : h.hosts()) s += (s.empty() ? "" : " ") + n;
    return s;
}

static std::string expand(const char* expr) {
    auto h = Hostlist::parse(expr);
    if (!h) fail_msg("'%s' did not parse: %s", expr, h.problem().text().c_str());
    return joined(*h);
}

static void single_names(void**) {
    assert_str(expand("login1"), "login1");
    assert_str(expand("a,b,c"), "a b c");
}

static void zero_padded_ranges(void**) {
    assert_str(expand("node[01-04]"), "node01 node02 node03 node04");
    assert_str(expand("node[098-101]"), "node098 node099 node100 node101");
    assert_str(expand("node[8-11]"), "node8 node9 node10 node11");
}

static void lists_inside_brackets(void**) {
    assert_str(expand("gpu[1,3-5,9]"), "gpu1 gpu3 gpu4 gpu5 gpu9");
}

static void several_prefixes_and_suffixes(void**) {
    assert_str(expand("a[1-2]-ib,b[07],login"), "a1-ib a2-ib b07 login");
    assert_str(expand("rack[1-2]-n[1-2]"), "rack1-n1 rack1-n2 rack2-n1 rack2-n2");
}

static void first_host_is_node_zero(void**) {
    auto h = Hostlist::parse("node[03-04],node01");
    assert_true(h.ok());
    assert_int_equal(h->size(), 3);
    assert_str((*h)[0], "node03");  // Slurm's order, not sorted by us
}

static void bad_input_names_the_list_and_the_fix(void**) {
    const char* bad[] = {"",          "node[1-",   "node1-2]", "node[2-1]", "node[a-b]",
                         "node[]",    "a,,b",      "n[[1]]",   "node[1-2",  "n[1-99999999999]"};
    for (const char* expr : bad) {
        auto h = Hostlist::parse(expr);
        if (h.ok()) fail_msg("'%s' should be refused", expr);
        assert_contains(h.problem().what, "host list");
        assert_contains(h.problem().fix, "node[01-04");
    }
}

static void refuses_absurd_sizes(void**) {
    auto h = Hostlist::parse("n[0-99999999]");
    assert_false(h.ok());
    assert_contains(h.problem().what, "more than");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_names),
        cmocka_unit_test(zero_padded_ranges),
        cmocka_unit_test(lists_inside_brackets),
        cmocka_unit_test(several_prefixes_and_suffixes),
        cmocka_unit_test(first_host_is_node_zero),
        cmocka_unit_test(bad_input_names_the_list_and_the_fix),
        cmocka_unit_test(refuses_absurd_sizes),
    };
    return cmocka_run_group_tests_name("hostlist", tests, nullptr, nullptr);
}
