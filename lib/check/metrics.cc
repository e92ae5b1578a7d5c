// SPDX-License-Identifier: Apache-2.0
#include "lib/check/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lib/util/json.h"
#include "lib/util/replace_file.h"

namespace mn {

const std::vector<std::string>& finding_kinds() {
    static const std::vector<std::string> k = [] {
        std::vector<std::string> v;
        for (const auto& kind : verdict_kinds())
            if (is_failure(kind)) v.push_back(kind);
        v.push_back("warning");
        return v;
    }();
    return k;
}

NodeMetrics node_metrics(const HistoryRecord& r, const std::vector<std::string>& kinds,
                         const std::vector<GpuReadings>& gpus) {
    NodeMetrics m;
    m.node = r.node;
    m.time = r.time;
    m.kind = r.kind;
    m.busbw_gbps = r.busbw_gbps;
    m.pair_busbw_gbps = r.pair_busbw_gbps;
    m.gpus = gpus;
    for (const auto& k : kinds) ++m.findings[k];
    // A failed verdict without findings listed is one finding of its kind.
    if (r.findings.empty() && is_failure(r.kind)) ++m.findings[r.kind];
    return m;
}

std::string prom_label_value(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string prom_number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return json_number(v).dump();
}

std::string metrics_file_name(const std::string& node) {
    std::string name = node.empty() ? "unknown" : node;
    for (char& c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
    return "mn_preflight_" + name + ".prom";
}

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One metric family: HELP, TYPE, then its samples.
class Family {
public:
    Family(std::string& out, const std::string& name, const std::string& help) : out_(out), name_(name) {
        std::string h;
        for (char c : help) h += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
        out_ += "# HELP " + name + " " + h + "\n# TYPE " + name + " gauge\n";
    }
    void sample(const Labels& labels, double v) {
        out_ += name_;
        for (std::size_t i = 0; i < labels.size(); ++i)
            out_ += (i ? "," : "{") + labels[i].first + "=\"" + prom_label_value(labels[i].second) + "\"";
        out_ += (labels.empty() ? " " : "} ") + prom_number(v) + "\n";
    }

private:
    std::string& out_;
    std::string name_;
};

// "GPU1 (0000:19:00.0)" -> {"1", "0000:19:00.0"}; otherwise the whole name and "".
std::pair<std::string, std::string> gpu_labels(const std::string& gpu) {
    const std::size_t open = gpu.find(" ("), close = gpu.rfind(')');
    if (gpu.rfind("GPU", 0) == 0 && open != std::string::npos && close == gpu.size() - 1 && close > open)
        return {gpu.substr(3, open - 3), gpu.substr(open + 2, close - open - 2)};
    return {gpu, ""};
}

// A GPU family: a sample for each GPU whose reading is known.
template <typename Read>
void gpu_family(std::string& out, const NodeMetrics& m, const std::string& name, const std::string& help, Read read) {
    bool any = false;
    for (const auto& g : m.gpus) any |= read(g).has_value();
    if (!any) return;
    Family f(out, name, help);
    for (const auto& g : m.gpus) {
        const auto v = read(g);
        if (!v) continue;
        const auto [index, bus] = gpu_labels(g.gpu);
        f.sample({{"node", m.node}, {"gpu", index}, {"pci_bus_id", bus}}, *v);
    }
}

template <typename T>
std::optional<double> opt(const std::optional<T>& v) {
    return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

void render_gpus(std::string& out, const NodeMetrics& m) {
    using R = const GpuReadings&;
    using O = std::optional<double>;
    gpu_family(out, m, "mn_preflight_gpu_health_read", "1 when NVML answered for the GPU during the check, else 0.",
               [](R g) -> O { return g.nvml ? 1 : 0; });
    gpu_family(out, m, "mn_preflight_gpu_ecc_uncorrected_errors",
               "Uncorrectable ECC errors since the driver loaded or the GPU was reset (volatile count).",
               [](R g) { return opt(g.ecc_uncorrected); });
    gpu_family(out, m, "mn_preflight_gpu_page_retirement_pending",
               "1 when retired pages wait for a GPU reset (before Ampere).", [](R g) { return opt(g.retirement_pending); });
    gpu_family(out, m, "mn_preflight_gpu_row_remap_pending", "1 when a row remap waits for a GPU reset (Ampere on).",
               [](R g) { return opt(g.remap_pending); });
    gpu_family(out, m, "mn_preflight_gpu_row_remap_failed", "1 when a row remap failed: no spare rows left.",
               [](R g) { return opt(g.remap_failed); });
    gpu_family(out, m, "mn_preflight_gpu_pcie_link_generation", "PCIe generation the GPU's link runs at.",
               [](R g) { return opt(g.pcie_gen); });
    gpu_family(out, m, "mn_preflight_gpu_pcie_link_generation_max", "Highest PCIe generation of the GPU and its slot.",
               [](R g) { return opt(g.pcie_gen_max); });
    gpu_family(out, m, "mn_preflight_gpu_pcie_link_width", "PCIe lanes the GPU's link runs with.",
               [](R g) { return opt(g.pcie_width); });
    gpu_family(out, m, "mn_preflight_gpu_pcie_link_width_max", "Most PCIe lanes of the GPU and its slot.",
               [](R g) { return opt(g.pcie_width_max); });
    gpu_family(out, m, "mn_preflight_gpu_nvlinks", "NVLink links the GPU has.",
               [](R g) -> O { return g.nvml ? O(g.nvlinks) : std::nullopt; });
    gpu_family(out, m, "mn_preflight_gpu_nvlinks_up", "NVLink links of the GPU that are up.",
               [](R g) -> O { return g.nvml ? O(g.nvlinks_up) : std::nullopt; });
    bool any = false;
    for (const auto& g : m.gpus) any |= g.nvml;
    if (!any) return;
    Family f(out, "mn_preflight_gpu_clock_event",
             "1 when the reason holds the GPU's clocks down now (NVML clock event reasons).");
    for (const auto& g : m.gpus) {
        if (!g.nvml) continue;
        const auto [index, bus] = gpu_labels(g.gpu);
        const std::pair<const char*, bool> reasons[] = {{"hw_slowdown", g.hw_slowdown},
                                                        {"hw_thermal", g.hw_thermal},
                                                        {"sw_thermal", g.sw_thermal},
                                                        {"power_brake", g.power_brake}};
        for (const auto& [reason, on] : reasons)
            f.sample({{"node", m.node}, {"gpu", index}, {"pci_bus_id", bus}, {"reason", reason}}, on ? 1 : 0);
    }
}

}  // namespace

std::string render_metrics(const NodeMetrics& m) {
    std::string out;
    const Labels node = {{"node", m.node}};
    {
        Family f(out, "mn_preflight_last_verdict",
                 "The kind of the node's last mn-preflight verdict: 1 on that kind, 0 on the others (ok: passed).");
        for (const auto& kind : verdict_kinds()) f.sample({{"node", m.node}, {"kind", kind}}, kind == m.kind ? 1 : 0);
    }
    Family(out, "mn_preflight_last_check_timestamp_seconds", "When the node's last mn-preflight check ran.")
        .sample(node, static_cast<double>(m.time));
    if (m.busbw_gbps)
        Family(out, "mn_preflight_busbw_bytes_per_second",
               "Bus bandwidth of the last check's all-reduce over every node (as nccl-tests computes busbw).")
            .sample(node, *m.busbw_gbps * 1e9);
    if (m.pair_busbw_gbps)
        Family(out, "mn_preflight_pair_busbw_bytes_per_second",
               "Median bus bandwidth of the last check's pair tests between this node and the others.")
            .sample(node, *m.pair_busbw_gbps * 1e9);
    {
        Family f(out, "mn_preflight_findings", "Findings of the node's last check by kind (warning: not a failure).");
        for (const auto& kind : finding_kinds()) {
            const auto it = m.findings.find(kind);
            f.sample({{"node", m.node}, {"kind", kind}}, it == m.findings.end() ? 0 : it->second);
        }
    }
    render_gpus(out, m);
    return out;
}

Outcome<std::string> write_metrics(const std::string& dir, const NodeMetrics& m) {
    const std::string base = dir + (!dir.empty() && dir.back() == '/' ? "" : "/");
    const std::string path = base + metrics_file_name(m.node);
    const std::string fix = "name node_exporter's --collector.textfile.directory, writable by the job's user";
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Problem{"mn-preflight: the metrics directory " + dir + " does not exist", fix};
    // A hidden temporary file renamed over the .prom (the collector reads
    // *.prom only, and whole); a link someone left there is replaced, not
    // followed. The collector may run as another user: 0644.
    auto w = replace_file(path, render_metrics(m), 0644);
    if (!w) return Problem{"mn-preflight: " + w.problem().what, fix};
    return path;
}

}  // namespace mn
