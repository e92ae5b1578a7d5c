// SPDX-License-Identifier: Apache-2.0
// SLURM_STEP_TASKS_PER_NODE ("2(x3),1"): parse_tasks_per_node and
// check_facts. What parses compresses back to Slurm's form and parses to the
// same counts; check_facts accepts facts built from it and names the bad one
// when a count is off.
#include "tests/fuzz/fuzz.h"
#include "lib/plan/step_layout.h"

namespace {

std::string compress(const std::vector<uint32_t>& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size();) {
        std::size_t j = i;
        while (j < v.size() && v[j] == v[i]) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(v[i]) + (j - i > 1 ? "(x" + std::to_string(j - i) + ")" : "");
        i = j;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size > 512) return 0;
    const std::string s(reinterpret_cast<const char*>(data), size);
    auto counts = mn::parse_tasks_per_node(s);
    if (!counts) {
        FUZZ_CHECK(counts.problem().what.find("SLURM_STEP_TASKS_PER_NODE='") == 0, "refusal: %s",
                   counts.problem().what.c_str());
        return 0;
    }
    FUZZ_CHECK(!counts->empty() && counts->size() <= (1u << 20), "%zu nodes from '%s'", counts->size(), s.c_str());
    uint64_t sum = 0;
    for (uint32_t c : *counts) {
        FUZZ_CHECK(c <= 999999999u, "count %u from '%s'", c, s.c_str());
        sum += c;
    }
    const std::string packed = compress(*counts);
    auto again = mn::parse_tasks_per_node(packed);
    FUZZ_CHECK(again && *again == *counts, "'%s' -> '%s' parses differently", s.c_str(), packed.c_str());

    // Facts that agree are accepted on every node; one task more is refused.
    mn::StepFacts f;
    f.nnodes = static_cast<uint32_t>(counts->size());
    f.tasks_per_node = s;
    f.total_tasks = static_cast<uint32_t>(sum);
    if (sum != f.total_tasks) return 0;  // more tasks than a step can hold
    const uint32_t last = f.nnodes - 1;
    for (uint32_t node : {0u, last}) {
        f.node_id = node;
        f.local_tasks = (*counts)[node];
        auto ok = mn::check_facts(f);
        FUZZ_CHECK(ok && *ok == *counts, "check_facts refused agreeing facts for '%s' node %u", s.c_str(), node);
        f.local_tasks += 1;
        FUZZ_CHECK(!mn::check_facts(f), "check_facts took a wrong local count for '%s'", s.c_str());
    }
    f.node_id = f.nnodes;
    FUZZ_CHECK(!mn::check_facts(f), "check_facts took node id %u of %u", f.node_id, f.nnodes);
    return 0;
}
