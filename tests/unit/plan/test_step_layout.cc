// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <set>

#include "lib/plan/step_layout.h"
#include "tests/unit/unit.h"

using namespace mn;

static void tasks_per_node_forms(void**) {
    auto v = parse_tasks_per_node("2(x3),1");
    assert_true(v.ok());
    assert_int_equal(v->size(), 4);
    assert_int_equal((*v)[0], 2);
    assert_int_equal((*v)[2], 2);
    assert_int_equal((*v)[3], 1);
    auto w = parse_tasks_per_node("4");
    assert_int_equal(w->size(), 1);
    assert_int_equal((*w)[0], 4);
    for (const char* bad : {"", "2(x", "2(x0)", "a", "2,,1", "2(y3)", "1(x3"}) {
        auto b = parse_tasks_per_node(bad);
        if (b.ok()) fail_msg("'%s' should be refused", bad);
        assert_contains(b.problem().what, "SLURM_STEP_TASKS_PER_NODE");
    }
}

static StepFacts facts(uint32_t nnodes, uint32_t node_id, uint32_t local, uint32_t total, const char* tpn) {
    StepFacts f;
    f.job_id = 42;
    f.step_id = 0;
    f.nnodes = nnodes;
    f.node_id = node_id;
    f.local_tasks = local;
    f.total_tasks = total;
    f.nodelist = "n[0-9]";
    f.tasks_per_node = tpn;
    return f;
}

static void facts_must_agree(void**) {
    assert_true(check_facts(facts(3, 0, 2, 5, "2(x2),1")).ok());
    assert_contains(check_facts(facts(3, 0, 2, 6, "2(x2),1")).problem().what, "adds up to 5");
    assert_contains(check_facts(facts(2, 0, 2, 5, "2(x2),1")).problem().what, "lists 3 nodes");
    assert_contains(check_facts(facts(3, 2, 2, 5, "2(x2),1")).problem().what, "says 1");
    assert_contains(check_facts(facts(3, 3, 1, 5, "2(x2),1")).problem().what, "node id 3");
    assert_contains(check_facts(facts(0, 0, 0, 0, "")).problem().what, "no nodes");
}

static void launch_detection(void**) {
    // One task on each node: a launcher per node (torchrun).
    assert_true(resolve_launch(LaunchMode::Detect, facts(4, 0, 1, 4, "1(x4)")) == LaunchMode::Node);
    // Several tasks somewhere: a task per GPU.
    assert_true(resolve_launch(LaunchMode::Detect, facts(3, 0, 2, 5, "2(x2),1")) == LaunchMode::Task);
    assert_true(resolve_launch(LaunchMode::Detect, facts(1, 0, 4, 4, "4")) == LaunchMode::Task);
    // The user's word wins.
    assert_true(resolve_launch(LaunchMode::Task, facts(4, 0, 1, 4, "1(x4)")) == LaunchMode::Task);
}

static void ports_stay_in_range(void**) {
    PortRange r;
    for (uint32_t job = 0; job < 5000; job += 7)
        for (uint32_t step = 0; step < 40; ++step) {
            uint16_t p = derive_port(r, job, step);
            assert_in_range(p, r.lo, r.hi);
        }
    PortRange tiny{30000, 30004};
    for (uint32_t job = 0; job < 100; ++job) assert_in_range(derive_port(tiny, job, 3), 30000, 30004);
}

static void concurrent_steps_of_a_job_differ(void**) {
    PortRange r;
    std::set<uint16_t> seen;
    for (uint32_t step = 0; step < 16; ++step) seen.insert(derive_port(r, 123456, step));
    assert_int_equal(seen.size(), 16);
}

static void nearby_jobs_differ(void**) {
    PortRange r;  // 10000 ports: 625 jobs in a row never share a port
    std::set<uint16_t> seen;
    for (uint32_t job = 9000; job < 9000 + 625; ++job)
        for (uint32_t step = 0; step < 2; ++step) seen.insert(derive_port(r, job, step));
    assert_int_equal(seen.size(), 625 * 2);
}

static void same_inputs_same_port(void**) {
    PortRange r;
    assert_int_equal(derive_port(r, 77, 3), derive_port(r, 77, 3));
}

// The step secret moves the job's block: another user who knows the job
// and step ids (squeue) cannot tell the port, yet the steps of one job,
// each with its own secret, still never share one.
static void the_step_secret_places_the_port(void**) {
    PortRange r;
    assert_int_equal(port_salt("00000001ffff"), 1);
    assert_int_equal(port_salt("DEADbeef99"), 0xdeadbeefu);
    assert_int_equal(port_salt(""), 0);
    assert_int_equal(port_salt("zz000000"), 0);  // not hex: no salt
    assert_int_equal(derive_port(r, 4242, 0, 0), derive_port(r, 4242, 0));
    std::set<uint16_t> ports;
    for (uint32_t salt = 0; salt < 625; ++salt) {
        const uint16_t p = derive_port(r, 4242, 0, salt);
        assert_in_range(p, r.lo, r.hi);
        ports.insert(p);
    }
    assert_int_equal(ports.size(), 625);  // every block of the range, one per salt
    std::set<uint16_t> steps;
    for (uint32_t step = 0; step < 16; ++step) steps.insert(derive_port(r, 4242, step, port_salt("9f3a0c7e") + step * 7919));
    assert_int_equal(steps.size(), 16);
    PortRange tiny{30000, 30004};
    for (uint32_t salt = 0; salt < 100; ++salt) assert_in_range(derive_port(tiny, 7, 3, salt * 0x9e3779b9u), 30000, 30004);
}

// The watch's port: in the range, never the step's MASTER_PORT (the
// program's), the same on every node, moved by the secret.
static void the_watch_port_is_its_own(void**) {
    PortRange r;
    PortRange tiny{30000, 30004};
    PortRange one{30000, 30000};
    std::set<uint16_t> seen;
    for (uint32_t i = 0; i < 400; ++i) {
        char secret[17];
        std::snprintf(secret, sizeof secret, "%08x%08x", i * 2654435761u, i * 40503u + 17);
        for (const PortRange& range : {r, tiny}) {
            const uint32_t step = i % 20;
            const uint16_t w = derive_watch_port(range, 1000 + i, step, secret);
            assert_in_range(w, range.lo, range.hi);
            assert_int_not_equal(w, derive_port(range, 1000 + i, step, port_salt(secret)));
            assert_int_equal(w, derive_watch_port(range, 1000 + i, step, secret));
        }
        seen.insert(derive_watch_port(r, 4242, 0, secret));
    }
    assert_true(seen.size() > 250);  // the secret places it, as it places MASTER_PORT (400 draws of 625 blocks: ~295)
    assert_int_not_equal(derive_watch_port(r, 4242, 0, ""), derive_port(r, 4242, 0, 0));
    assert_int_equal(derive_watch_port(one, 1, 1, "ab"), 30000);  // a range of one port: no other to take
}

static void rendezvous_ids(void**) {
    assert_str(rdzv_id(1234, 0), "1234.0");
    assert_true(rdzv_id(1234, 0) != rdzv_id(1234, 1));
}

static void training_steps(void**) {
    assert_true(is_training_step(0));
    assert_true(is_training_step(17));
    assert_false(is_training_step(kBatchStepId));
    assert_false(is_training_step(kExternStepId));
    assert_false(is_training_step(kInteractiveStepId));
}

static void gpu_counts(void**) {
    assert_int_equal(count_gpus("0,1,2,3", "0,1,2,3", "4"), 4);
    assert_int_equal(count_gpus("", "2,3", ""), 2);
    assert_int_equal(count_gpus("", "NoDevFiles", "0"), 0);
    assert_int_equal(count_gpus("", "", "8"), 8);
    assert_int_equal(count_gpus("", "", "x"), 0);
    assert_int_equal(count_gpus("", "", ""), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tasks_per_node_forms),
        cmocka_unit_test(facts_must_agree),
        cmocka_unit_test(launch_detection),
        cmocka_unit_test(ports_stay_in_range),
        cmocka_unit_test(concurrent_steps_of_a_job_differ),
        cmocka_unit_test(nearby_jobs_differ),
        cmocka_unit_test(same_inputs_same_port),
        cmocka_unit_test(the_step_secret_places_the_port),
        cmocka_unit_test(the_watch_port_is_its_own),
        cmocka_unit_test(rendezvous_ids),
        cmocka_unit_test(training_steps),
        cmocka_unit_test(gpu_counts),
    };
    return cmocka_run_group_tests_name("step_layout", tests, nullptr, nullptr);
}
