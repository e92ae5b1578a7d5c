// SPDX-License-Identifier: Apache-2.0
// PyTorch's Flight Recorder dump (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, written
// on a watchdog's time-out or when asked through its pipe), read for the
// hang watch: where each process group of a rank had got to. The dump is a
// pickle (protocol 2, torch's own pickler) of a dict: "version",
// "comm_lib_version", "pg_config" {pg: {name, desc, ranks}}, "pg_status"
// {pg: {last_enqueued_collective, last_started_collective,
// last_completed_collective}} and "entries" [{pg_id, collective_seq_id,
// profiling_name, state, input_sizes, input_dtypes, ...}]. Read here by a
// small reader of the opcodes such dumps use (no Python, no code run): the
// file is the program's, and so outside input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

// One collective of the entries: its sequence number in its group, what
// it calls, its first input, its state ("scheduled", "started", "completed").
struct FlightCall {
    int64_t seq = -1;
    std::string op, input, state;
};

struct FlightGroup {
    std::string id, desc;                // pg_config's key and "desc" ("default_pg")
    int64_t enqueued = -1, started = -1, completed = -1;  // pg_status's; -1: not said (started: without timing)
    // Its oldest collective not completed in the entries: the one the rank
    // waits in (seq -1: none).
    int64_t waiting_seq = -1;
    std::string waiting_op, waiting_state, waiting_input;  // "nccl:all_reduce", "scheduled", "Float [262144]"
    // Its last kRecentCalls collectives in the entries, oldest first: what
    // each rank called at the same place is compared across the step.
    std::vector<FlightCall> recent;
};
constexpr std::size_t kRecentCalls = 8;

struct FlightSummary {
    std::string version, comm_lib;  // the dump's format ("2.10"), NCCL's release ("2.28.9")
    std::vector<FlightGroup> groups;
    std::size_t entries = 0;
};

// The dump's bytes, or what is wrong with them (not a pickle, an opcode no
// dump uses, nesting or size past the reader's bounds, no pg_status).
Outcome<FlightSummary> read_flight_record(const std::string& bytes);

// One line per group: "default_pg: completed #1289, enqueued to #1800;
// waits in nccl:all_reduce #1290 (Float [262144], scheduled)".
std::vector<std::string> flight_words(const FlightSummary& s);

}  // namespace mn
