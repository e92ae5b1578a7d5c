// SPDX-License-Identifier: Apache-2.0
// Every node alike: the software and GPUs each node of a step runs with
// (its fingerprint), sent to rank 0 as one line, and compared there as the
// fabric is (inconsistent_nodes): the majority value of each field, then
// the odd nodes named with what differs. Which difference fails the check
// and which only warns, and why, is written at compare_fingerprints() and
// in mn-preflight(1), FINGERPRINT.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

// ncclGetVersion's code as text: 22809 -> "2.28.9"; codes before 2.9 were
// major*1000 + minor*100 + patch: 2708 -> "2.7.8". "" for a code no NCCL
// gives (0 or below).
std::string nccl_version_text(int code);
// cuDriverGetVersion's code as text: 12040 -> "12.4". "" for 0 or below.
std::string cuda_version_text(int code);

struct Version {
    int major = 0, minor = 0;
    int patch = -1;  // -1: not given ("12.4")
};
// "2.28.9", "2.28.9+cuda12.4", "12.4", torch's "(2, 21, 5)"; none when
// the text is not a version.
std::optional<Version> parse_version(const std::string& s);
// Whether two versions are one release (major.minor: "2.28.9" and
// "2.28.3"), what NCCL's wire protocol goes by.
bool same_release(const std::string& a, const std::string& b);

// The libibverbs provider a file of its provider directory or of
// /etc/libibverbs.d gives: "libmlx5-rdmav34.so" -> "mlx5", "mlx5.driver"
// -> "mlx5"; "" for any other file.
std::string verbs_provider_of_file(const std::string& file_name);
// The provider an RDMA device needs, from the name of its kernel driver
// (the sysfs link /sys/class/infiniband/DEV/device/driver): "mlx5_core"
// -> "mlx5", "bnxt_en" -> "bnxt_re"; "" when not known.
std::string verbs_provider_for_driver(const std::string& kernel_driver);

// The external network plugin NCCL loaded, read from its INFO log (the
// plugin's own release is not told to NCCL: the API version it offers is).
struct NetPlugin {
    bool known = false;  // the log said whether a plugin loaded
    std::string name;    // "" with known: none, NCCL's internal IB/Socket
    std::string api;     // "v10"
    std::string path;    // the library, when the log names it
    bool none() const { return known && name.empty(); }
};
NetPlugin net_plugin_from_log(const std::string& nccl_log);

// A GPU's PCIe link as sysfs says it: lanes and speed now, and the most
// that the GPU and the port above it both take (a Gen5 GPU in a Gen4 slot
// reaches Gen4). GPUs lower their link speed when idle, never their
// width: only the width now is judged against its maximum.
struct PcieLink {
    std::string gpu;  // "0000:19:00.0"
    unsigned width = 0, max_width = 0;
    double gts = 0, max_gts = 0;  // GT/s: 16 is Gen4, 32 Gen5
};
// "Gen5" for 32 GT/s; "" for a speed no generation has.
std::string pcie_generation(double gts);

// One node's fingerprint. Empty strings (and known = false) are "not
// known" (the CPU path has no NCCL, a node without libibverbs no
// providers) and are never compared.
struct Fingerprint {
    std::string host;
    std::string nccl;       // "2.28.9", the NCCL this check loaded
    std::string nccl_path;  // the file it came from
    NetPlugin net;
    std::string cuda_driver;  // "12.4"
    std::string gpu_model;    // "NVIDIA H100 80GB HBM3"; several models: joined by " + "
    unsigned gpus = 0;            // GPUs the step can use on the node
    unsigned gpus_requested = 0;  // what the step asked for there; 0: not known
    bool verbs_known = false;
    std::vector<std::string> verbs;         // installed providers, sorted
    std::vector<std::string> verbs_needed;  // what the node's ACTIVE RDMA ports need, sorted
    std::string torch_nccl;                 // torch.cuda.nccl.version(), where known
    // Read from sysfs, the libraries and the environment
    // (lib/check/node_reading.h); empty: not known, never compared.
    std::vector<PcieLink> pcie;             // the step's GPUs' PCIe links
    std::vector<std::string> hca_firmware;  // "mlx5_0 28.39.1002", sorted
    std::string verbs_library;              // libibverbs' file version: "1.14.50.0"
    bool nccl_env_known = false;
    std::vector<std::string> nccl_env;      // "NCCL_ALGO=Ring": NCCL_* the step set itself, sorted
    std::string image;                      // the system or container image's identity (12 hex digits)
    std::string image_name;                 // and what it says it is: "Ubuntu 22.04.4 LTS"
};

// One line, "key=value" words separated by spaces, values %-escaped: fits
// one field of mn-preflight's hello or ready message. Unknown keys are
// skipped on decode (a newer rank may send more); a malformed word or a
// number that is not one is a problem.
std::string encode_fingerprint(const Fingerprint& f);
Outcome<Fingerprint> decode_fingerprint(const std::string& text);

struct FingerprintFinding {
    uint32_t node = 0;  // index in the vector compared
    bool fail = false;  // else a warning
    // No majority (two nodes, or as many on each value): nobody is the odd
    // one, so the step fails without blaming a node (mn-preflight(1)).
    bool tie = false;
    std::string text;   // "fingerprint: NCCL 2.21.5 (/opt/...), the others 2.28.9; fix: ..."
};
// What a node alone shows: fewer GPUs than asked for, a provider its
// RDMA ports need missing, torch's NCCL not the one loaded. For --prolog.
std::vector<FingerprintFinding> node_fingerprint_findings(const Fingerprint& f, uint32_t index = 0);
// Every node's own findings, then each field against the majority.
std::vector<FingerprintFinding> compare_fingerprints(const std::vector<Fingerprint>& nodes);

// Nodes that share one host (--mn-emulate-nodes: 1,024 of them on one
// machine) run the same software: one read serves them all. `dir` is a
// directory of this user's alone (not writable by others); this host's
// file there, `key` (host and step), is locked; the first to lock it reads
// (`read`, an encoded fingerprint) and writes it there, the others wait
// for the lock and take what it wrote, each with its own `host`. Where
// the directory or file will not do (someone else's, writable by others,
// a link), `read` runs here as without sharing.
std::string shared_node_read(const std::string& dir, const std::string& key, const std::string& host,
                             const std::function<std::string()>& read);

// Every finding text starts with it (history and metrics file them under
// the kind "fingerprint").
constexpr const char* kFingerprintTag = "fingerprint: ";

}  // namespace mn
