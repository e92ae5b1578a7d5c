// SPDX-License-Identifier: Apache-2.0
// A node's last check for Prometheus: every line of the exposition read
// back by a checker of format 0.0.4 (below), its values compared, and the
// file replaced atomically. promtool, when installed, checks it too.
#include "lib/check/metrics.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "tests/unit/unit.h"

using namespace mn;

namespace {

// ---- A checker of the text exposition format 0.0.4 --------------------------

struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};

struct Exposition {
    std::vector<Sample> samples;
    std::map<std::string, std::string> help, type;
    double value(const std::string& name, const std::map<std::string, std::string>& labels) const {
        for (const auto& s : samples)
            if (s.name == name && s.labels == labels) return s.value;
        fail_msg("no sample %s", name.c_str());
        return 0;
    }
    std::size_t count(const std::string& name) const {
        std::size_t n = 0;
        for (const auto& s : samples) n += s.name == name;
        return n;
    }
};

bool metric_name(const std::string& s) {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
    return true;
}

bool label_name(const std::string& s) { return metric_name(s) && s.find(':') == std::string::npos; }

// Go's strconv.ParseFloat as Prometheus reads values.
bool parse_value(const std::string& s, double& v) {
    if (s == "NaN") return v = NAN, true;
    if (s == "+Inf" || s == "Inf") return v = INFINITY, true;
    if (s == "-Inf") return v = -INFINITY, true;
    if (s.empty() || s.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return *end == '\0';
}

// name{a="x",b="y"} value
Sample parse_sample(const std::string& line) {
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!metric_name(s.name)) fail_msg("bad metric name in: %s", line.c_str());
    if (i < line.size() && line[i] == '{') {
        ++i;
        while (i < line.size() && line[i] != '}') {
            const std::size_t eq = line.find('=', i);
            if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') fail_msg("bad label in: %s", line.c_str());
            const std::string name = line.substr(i, eq - i);
            if (!label_name(name) || s.labels.count(name)) fail_msg("bad or repeated label '%s'", name.c_str());
            std::string value;
            for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
                if (line[i] == '\n') fail_msg("raw newline in a label");
                if (line[i] != '\\') {
                    value += line[i];
                    continue;
                }
                const char e = ++i < line.size() ? line[i] : '\0';
                if (e == '\\') value += '\\';
                else if (e == '"') value += '"';
                else if (e == 'n') value += '\n';
                else fail_msg("bad escape in a label value: %s", line.c_str());
            }
            if (i >= line.size()) fail_msg("unterminated label value: %s", line.c_str());
            s.labels[name] = value;
            ++i;
            if (i < line.size() && line[i] == ',') ++i;
        }
        if (i >= line.size()) fail_msg("no '}' in: %s", line.c_str());
        ++i;
    }
    if (i >= line.size() || line[i] != ' ') fail_msg("no value in: %s", line.c_str());
    const std::string rest = line.substr(i + 1);
    const std::string value = rest.substr(0, rest.find(' '));
    if (!parse_value(value, s.value)) fail_msg("bad value '%s' in: %s", value.c_str(), line.c_str());
    if (rest.find(' ') != std::string::npos) {  // a timestamp: an integer in ms
        const std::string ts = rest.substr(rest.find(' ') + 1);
        if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos) fail_msg("bad timestamp: %s", line.c_str());
    }
    return s;
}

Exposition check_exposition(const std::string& text) {
    Exposition e;
    if (text.empty() || text.back() != '\n') fail_msg("the exposition does not end in a newline");
    std::set<std::string> done;  // families whose samples ended
    std::string current;
    std::set<std::string> series;
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t nl = text.find('\n', at);
        const std::string line = text.substr(at, nl - at);
        at = nl + 1;
        if (line.empty()) fail_msg("an empty line");
        if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
            const std::string rest = line.substr(7);
            const std::string name = rest.substr(0, rest.find(' '));
            const std::string arg = rest.find(' ') == std::string::npos ? "" : rest.substr(rest.find(' ') + 1);
            if (!metric_name(name)) fail_msg("bad name in: %s", line.c_str());
            auto& map = line[2] == 'H' ? e.help : e.type;
            if (map.count(name)) fail_msg("second %s line for %s", line[2] == 'H' ? "HELP" : "TYPE", name.c_str());
            if (line[2] == 'T') {
                static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
                if (!kTypes.count(arg)) fail_msg("bad type in: %s", line.c_str());
                for (const auto& s : e.samples)
                    if (s.name == name) fail_msg("TYPE after samples of %s", name.c_str());
            }
            for (std::size_t i = 0; i < arg.size(); ++i)
                if (arg[i] == '\\' && (i + 1 >= arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n')))
                    fail_msg("bad escape in: %s", line.c_str());
                else if (arg[i] == '\\') ++i;
            map[name] = arg;
            continue;
        }
        if (line[0] == '#') continue;
        Sample s = parse_sample(line);
        if (s.name != current) {
            if (done.count(s.name)) fail_msg("samples of %s are not together", s.name.c_str());
            if (!current.empty()) done.insert(current);
            current = s.name;
        }
        if (!e.type.count(s.name) || !e.help.count(s.name)) fail_msg("%s has no TYPE or HELP", s.name.c_str());
        std::string key = s.name;
        for (const auto& [k, v] : s.labels) key += "\x1f" + k + "=" + v;
        if (!series.insert(key).second) fail_msg("a series twice: %s", line.c_str());
        e.samples.push_back(std::move(s));
    }
    return e;
}

// ---- The node's readings ----------------------------------------------------

GpuReadings gpu(int index, bool healthy) {
    GpuReadings g;
    g.gpu = "GPU" + std::to_string(index) + " (00000000:" + std::to_string(18 + index) + ":00.0)";
    g.nvml = true;
    g.ecc_uncorrected = healthy ? 0 : 2;
    g.remap_pending = !healthy;
    g.remap_failed = false;
    g.pcie_gen = healthy ? 5 : 4;
    g.pcie_gen_max = 5;
    g.pcie_width = 16;
    g.pcie_width_max = 16;
    g.nvlinks = 18;
    g.nvlinks_up = healthy ? 18 : 16;
    g.hw_thermal = !healthy;
    return g;
}

NodeMetrics node1() {
    NodeMetrics m;
    m.node = "node1";
    m.time = 1764000000;
    m.kind = "fault";
    m.findings = {{"fault", 2}, {"warning", 1}};
    m.busbw_gbps = 0.0058;
    m.pair_busbw_gbps = 0.3816;
    GpuReadings off;
    off.gpu = "GPU2 (00000000:1A:00.0)";
    off.nvml_error = "NVML_ERROR_GPU_IS_LOST";
    m.gpus = {gpu(0, true), gpu(1, false), off};
    return m;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

static void exposition_reads_back_with_every_value(void**) {
    const Exposition e = check_exposition(render_metrics(node1()));
    assert_int_equal(e.count("mn_preflight_last_verdict"), verdict_kinds().size());
    for (const auto& kind : verdict_kinds())
        assert_true(e.value("mn_preflight_last_verdict", {{"node", "node1"}, {"kind", kind}}) == (kind == "fault"));
    assert_true(e.value("mn_preflight_last_check_timestamp_seconds", {{"node", "node1"}}) == 1764000000.0);
    // Base units: bytes per second, not GB/s.
    assert_true(e.value("mn_preflight_busbw_bytes_per_second", {{"node", "node1"}}) == 5.8e6);
    assert_true(e.value("mn_preflight_pair_busbw_bytes_per_second", {{"node", "node1"}}) == 3.816e8);
    assert_true(e.value("mn_preflight_findings", {{"node", "node1"}, {"kind", "fault"}}) == 2);
    assert_true(e.value("mn_preflight_findings", {{"node", "node1"}, {"kind", "warning"}}) == 1);
    assert_true(e.value("mn_preflight_findings", {{"node", "node1"}, {"kind", "slow"}}) == 0);
    assert_int_equal(e.count("mn_preflight_findings"), finding_kinds().size());
    const std::map<std::string, std::string> g1 = {{"node", "node1"}, {"gpu", "1"}, {"pci_bus_id", "00000000:19:00.0"}};
    assert_true(e.value("mn_preflight_gpu_ecc_uncorrected_errors", g1) == 2);
    assert_true(e.value("mn_preflight_gpu_row_remap_pending", g1) == 1);
    assert_true(e.value("mn_preflight_gpu_pcie_link_generation", g1) == 4);
    assert_true(e.value("mn_preflight_gpu_pcie_link_generation_max", g1) == 5);
    assert_true(e.value("mn_preflight_gpu_nvlinks_up", g1) == 16);
    auto reason = [&](const char* r) {
        auto l = g1;
        l["reason"] = r;
        return e.value("mn_preflight_gpu_clock_event", l);
    };
    assert_true(reason("hw_thermal") == 1 && reason("sw_thermal") == 0 && reason("power_brake") == 0);
    // GPU2: NVML did not answer; it says so and has no readings.
    const std::map<std::string, std::string> g2 = {{"node", "node1"}, {"gpu", "2"}, {"pci_bus_id", "00000000:1A:00.0"}};
    assert_true(e.value("mn_preflight_gpu_health_read", g2) == 0);
    assert_int_equal(e.count("mn_preflight_gpu_ecc_uncorrected_errors"), 2);
    assert_int_equal(e.count("mn_preflight_gpu_clock_event"), 8);
    // No readings never printed: no retirement field was read.
    assert_int_equal(e.count("mn_preflight_gpu_page_retirement_pending"), 0);
    assert_int_equal(e.help.count("mn_preflight_gpu_page_retirement_pending"), 0);
    for (const auto& [name, type] : e.type) assert_str(type, "gauge");
}

static void label_values_are_escaped(void**) {
    NodeMetrics m = node1();
    m.node = "we\"ird\\node\nname";
    m.gpus[0].gpu = "odd \"gpu\"";
    const std::string text = render_metrics(m);
    assert_contains(text, "node=\"we\\\"ird\\\\node\\nname\"");
    const Exposition e = check_exposition(text);
    assert_true(e.value("mn_preflight_last_check_timestamp_seconds", {{"node", m.node}}) == 1764000000.0);
    assert_true(e.value("mn_preflight_gpu_nvlinks", {{"node", m.node}, {"gpu", "odd \"gpu\""}, {"pci_bus_id", ""}}) == 18);
    assert_str(prom_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

static void numbers_as_prometheus_reads_them(void**) {
    assert_str(prom_number(NAN), "NaN");
    assert_str(prom_number(INFINITY), "+Inf");
    assert_str(prom_number(-INFINITY), "-Inf");
    assert_str(prom_number(1764000000), "1764000000");
    assert_str(prom_number(0), "0");
    assert_str(prom_number(0.1), "0.1");
    assert_str(prom_number(3.816e8), "381600000");
    for (double v : {1.0 / 3, 123456.789e20, 5e-324, 0.0058 * 1e9}) {
        double back = 0;
        assert_true(parse_value(prom_number(v), back) && back == v);
    }
}

static void metrics_from_the_history_line(void**) {
    HistoryRecord r;
    r.node = "node3";
    r.time = 1764000000;
    r.kind = "slow";
    r.verdict = "slow: its pairs run at 0.0052 GB/s at best";
    r.findings = {"slow: its pairs run at 0.0052 GB/s at best", "fingerprint: CUDA driver 12.4, the others 12.8",
                  "warning: node3 GPU0: PCIe link at gen 4"};
    r.pair_busbw_gbps = 0.0052;
    const NodeMetrics m = node_metrics(r, {"slow", "fingerprint", "warning"}, {});
    assert_str(m.kind, "slow");
    assert_int_equal(m.findings.at("slow"), 1);
    assert_int_equal(m.findings.at("fingerprint"), 1);
    assert_int_equal(m.findings.at("warning"), 1);
    const Exposition e = check_exposition(render_metrics(m));
    assert_int_equal(e.count("mn_preflight_busbw_bytes_per_second"), 0);  // not known: not printed
    assert_true(e.value("mn_preflight_pair_busbw_bytes_per_second", {{"node", "node3"}}) == 5.2e6);
    assert_int_equal(e.count("mn_preflight_gpu_health_read"), 0);  // no GPUs, no GPU families
    // A failed verdict without findings listed still counts once.
    r.findings.clear();
    r.kind = "timeout";
    assert_int_equal(node_metrics(r, {}, {}).findings.at("timeout"), 1);
}

static void file_is_replaced_atomically(void**) {
    char tmpl[] = "/tmp/mn-metrics-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const mode_t old = umask(077);
    NodeMetrics m = node1();
    const auto first = write_metrics(dir, m);
    m.kind = "ok";
    const auto second = write_metrics(dir + "/", m);
    umask(old);
    if (!first) fail_msg("%s", first.problem().text().c_str());
    assert_true(second.ok());
    assert_str(*first, dir + "/mn_preflight_node1.prom");
    const std::string text = read_file(*first);
    assert_str(text, render_metrics(m));
    check_exposition(text);
    struct stat st {};
    assert_int_equal(stat(first->c_str(), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    // Nothing else left behind (the temporary files are renamed or gone).
    DIR* d = opendir(dir.c_str());
    int entries = 0;
    while (dirent* e = readdir(d)) entries += e->d_name[0] != '.' || std::string(e->d_name).size() > 2;
    closedir(d);
    assert_int_equal(entries, 1);
    assert_str(metrics_file_name("node1/../x y"), "mn_preflight_node1_.._x_y.prom");
    const auto missing = write_metrics(dir + "/nowhere", m);
    assert_false(missing.ok());
    assert_contains(missing.problem().text(), "nowhere");
    assert_contains(missing.problem().text(), "textfile");
    // promtool, where installed (Debian: prometheus): its own parser and lint.
    if (system("command -v promtool >/dev/null 2>&1") == 0) {
        const std::string cmd = "promtool check metrics < " + *first;
        assert_int_equal(system(cmd.c_str()), 0);
    } else {
        print_message("promtool not installed: its check skipped\n");
    }
    assert_int_equal(system(("rm -rf " + dir).c_str()), 0);
}

// The textfile directory may be writable by every job's user: a link
// left at the .prom is replaced, its target keeps its text.
static void link_at_the_prom_is_replaced_not_followed(void**) {
    char tmpl[] = "/tmp/mn-metrics-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const std::string victim = dir + "/victim", prom = dir + "/mn_preflight_node1.prom";
    std::ofstream(victim) << "root:secret\n";
    assert_int_equal(symlink(victim.c_str(), prom.c_str()), 0);
    const auto w = write_metrics(dir, node1());
    if (!w) fail_msg("%s", w.problem().text().c_str());
    assert_str(read_file(victim), "root:secret\n");
    struct stat st {};
    assert_int_equal(lstat(prom.c_str(), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_str(read_file(prom), render_metrics(node1()));
    assert_int_equal(system(("rm -rf " + dir).c_str()), 0);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(link_at_the_prom_is_replaced_not_followed),
        cmocka_unit_test(exposition_reads_back_with_every_value),
        cmocka_unit_test(label_values_are_escaped),
        cmocka_unit_test(numbers_as_prometheus_reads_them),
        cmocka_unit_test(metrics_from_the_history_line),
        cmocka_unit_test(file_is_replaced_atomically),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
