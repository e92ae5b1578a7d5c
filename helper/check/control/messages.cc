// SPDX-License-Identifier: Apache-2.0
#include "helper/check/control/messages.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>

#include "lib/util/text.h"

// Each struct's fields are listed once, in MESSAGE() and FIELDS() below:
// nlohmann-json maps the struct to a JSON object of its fields, which
// travels as CBOR. Reading is strict where nlohmann-json is lax: a number
// goes only into a field that holds it exactly (its type's range, a whole
// number for a whole field, finite for a real one: nlohmann-json would cast
// 70000 into a port), bounds() narrows a few fields further, and an enum is
// one word of a fixed set.

namespace mn::check::msg {

bool release_word(const std::string& r) {
    return r.size() <= 32 && std::all_of(r.begin(), r.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                      c == '-' || c == '+' || c == '~';
           });
}

namespace {

// What is wrong with a value: where (a field's path, "lead.data_port")
// and what ("is 70000, not a whole number from 0 to 65535").
struct Wrong {
    std::string where, what;
};

template <typename J>
std::string shown(const J& j) {
    if (const auto* x = j.template get_ptr<const double*>(); x && !std::isfinite(*x))
        return std::isnan(*x) ? "NaN" : *x > 0 ? "Infinity" : "-Infinity";
    if (j.is_number() || j.is_null()) return j.dump();
    const std::string t = j.type_name();
    return (t == "array" || t == "object" ? "an " : "a ") + t;
}

template <typename T, typename J>
T exact(const J& j) {
    if constexpr (std::is_floating_point_v<T>) {
        const auto* x = j.template get_ptr<const double*>();
        if (x && std::isfinite(*x)) return static_cast<T>(*x);
        throw Wrong{"", "is " + shown(j) + ", not a finite number"};
    } else {
        constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
        if (j.type() == J::value_t::number_unsigned) {
            const uint64_t u = j.template get_ref<const uint64_t&>();
            if (u <= static_cast<uint64_t>(hi)) return static_cast<T>(u);
        } else if (j.type() == J::value_t::number_integer) {
            const int64_t i = j.template get_ref<const int64_t&>();
            if (i >= 0 ? static_cast<uint64_t>(i) <= static_cast<uint64_t>(hi)
                       : std::is_signed_v<T> && i >= static_cast<int64_t>(lo))
                return static_cast<T>(i);
        }
        throw Wrong{"", "is " + shown(j) + ", not a whole number from " + std::to_string(lo) + " to " +
                            std::to_string(hi)};
    }
}

}  // namespace

// How this file's JSON converts a value (nlohmann-json's JSONSerializer):
// as nlohmann-json does, but numbers exactly, and an optional as null or
// its value. Its namespace is where argument-dependent lookup finds the
// to_json and from_json below, mn::FabricSignature's and mn::GpuReadings'
// included (the namespace of a template argument of Wire).
template <typename T, typename = void>
struct Exact : nlohmann::adl_serializer<T> {};

template <typename T>
struct Exact<T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>>> : nlohmann::adl_serializer<T> {
    template <typename J>
    static void from_json(const J& j, T& v) {
        v = exact<T>(j);
    }
};

template <typename T>
struct Exact<std::optional<T>> {
    template <typename J>
    static void to_json(J& j, const std::optional<T>& v) {
        if (v) j = *v;
        else j = nullptr;
    }
    template <typename J>
    static void from_json(const J& j, std::optional<T>& v) {
        v = j.is_null() ? std::nullopt : std::optional<T>(j.template get<T>());
    }
};

using Wire = nlohmann::basic_json<std::map, std::vector, std::string, bool, int64_t, uint64_t, double, std::allocator,
                                  Exact>;

namespace {

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

// A field of a struct: nlohmann-json's at(), naming the field in what goes wrong.
// An optional field may also be missing: fields added within a protocol
// are optional, so that a build of the same protocol from before them
// (which sends no such key) is read as not saying it, and the two check
// together through a rolling upgrade.
template <typename T>
void get_field(const Wire& j, const char* key, T& v) {
    const auto it = j.find(key);
    if (it == j.end()) {
        if constexpr (IsOptional<T>::value) {
            v = std::nullopt;
            return;
        }
        throw Wrong{key, "is missing"};
    }
    try {
        it->get_to(v);
    } catch (Wrong& w) {
        w.where = w.where.empty() ? key : key + ("." + w.where);
        throw;
    } catch (const nlohmann::json::exception& e) {
        const std::string what = e.what();  // "[json.exception.type_error.302] type must be ..."
        throw Wrong{key, what.substr(what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2)};
    }
}

void must_be_object(const Wire& j) {
    if (!j.is_object()) throw Wrong{"", "is " + shown(j) + ", not an object of fields"};
}

// An enum as one of its words.
template <typename E, std::size_t N>
void put_word(Wire& j, E e, const char* const (&words)[N]) {
    j = words[static_cast<std::size_t>(e)];
}

template <typename E, std::size_t N>
void get_word(const Wire& j, E& e, const char* const (&words)[N]) {
    for (std::size_t i = 0; i < N; ++i)
        if (j.is_string() && j.get_ref<const std::string&>() == words[i]) {
            e = static_cast<E>(i);
            return;
        }
    std::string list;
    for (const char* w : words) list += (list.empty() ? "'" : ", '") + std::string(w) + "'";
    throw Wrong{"", "is not one of " + list};
}

constexpr const char* kStageWords[] = {"rendezvous", "readiness", "collective", "pairs", "verdict"};
constexpr const char* kKindWords[] = {"none", "peer", "fault"};
constexpr const char* kCarriedWords[] = {"hello", "said", "gone"};

// Bounds narrower than a field's type, checked once the struct is read
// (here, before the mappings that call them).
template <typename T>
void bounds(const T&) {}

void within(const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        throw Wrong{field, "is " + std::to_string(v) + ", not a whole number from " + std::to_string(lo) + " to " +
                               std::to_string(hi)};
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

void bounds(const Knock& m) {
    if (m.release && !release_word(*m.release))
        throw Wrong{"release", "is not a release (up to 32 letters, digits and .-+~)"};
}
void bounds(const Hello& m) {
    within("lanes", m.lanes, 1, 1 << 16);
    if (m.machine && m.machine->size() > 64)
        throw Wrong{"machine", "is " + std::to_string(m.machine->size()) + " bytes, more than 64"};
}
void bounds(const Plan& m) {
    within("iters", m.iters, 0, kIntMax);
    within("warmup", m.warmup, 0, kIntMax);
    within("nranks", m.nranks, 0, kIntMax);
    within("first_rank", m.first_rank, 0, kIntMax);
}
void bounds(const PairCue& m) { within("iters", m.iters, 0, kIntMax); }
void bounds(const Position& m) {
    // A dump's groups are bounded so when read (lib/check/flight_record.cc).
    if (m.groups.size() > 64) throw Wrong{"groups", "holds " + std::to_string(m.groups.size()) + ", more than 64"};
    for (const GroupPosition& g : m.groups)
        if (g.recent.size() > 16) throw Wrong{"groups.recent", "holds " + std::to_string(g.recent.size()) + ", more than 16"};
    if (m.still < 0 || m.cpu < 0) throw Wrong{m.still < 0 ? "still" : "cpu", "is below 0"};
    if (m.gpu_events) {
        if (m.gpu_events->size() > 16) throw Wrong{"gpu_events", "holds " + std::to_string(m.gpu_events->size()) + ", more than 16"};
        for (const std::string& e : *m.gpu_events)
            if (e.size() > 512) throw Wrong{"gpu_events", "holds a line of " + std::to_string(e.size()) + " bytes, more than 512"};
    }
    if (m.dump && m.dump->size() > 4096) throw Wrong{"dump", "is " + std::to_string(m.dump->size()) + " bytes, more than 4096"};
}
void bounds(const Relayed& m) {
    if (m.door_strangers && m.door_strangers->size() > kStrangersText)
        throw Wrong{"door_strangers", "is " + std::to_string(m.door_strangers->size()) + " bytes, more than " +
                                          std::to_string(kStrangersText)};
}

void bounds(const Result& m) {
    if (m.strangers && m.strangers->size() > kStrangersText)
        throw Wrong{"strangers", "is " + std::to_string(m.strangers->size()) + " bytes, more than " +
                                     std::to_string(kStrangersText)};
}

void bounds(const PairReport& m) {
    if (m.strangers_seen.size() > kStrangersText)
        throw Wrong{"strangers_seen", "is " + std::to_string(m.strangers_seen.size()) + " bytes, more than " +
                                          std::to_string(kStrangersText)};
    if (m.cpu_wait && !(*m.cpu_wait >= 0 && *m.cpu_wait <= 1))
        throw Wrong{"cpu_wait", "is " + std::to_string(*m.cpu_wait) + ", not a share from 0 to 1"};
    if (m.rtt_ms && !(*m.rtt_ms >= 0 && *m.rtt_ms <= 1e6))
        throw Wrong{"rtt_ms", "is " + std::to_string(*m.rtt_ms) + ", not a round trip from 0 to 1000000 ms"};
    if (m.listening && *m.listening == 0) throw Wrong{"listening", "is 0, not a port"};
}
void bounds(const Word& m) { within("code", m.code, 0, 255); }
void bounds(const Superseded& m) { within("code", m.code, 0, 255); }

}  // namespace

// Stage, Result::Kind and Carried::What travel as words.
[[maybe_unused]] static void to_json(Wire& j, Stage s) { put_word(j, s, kStageWords); }
[[maybe_unused]] static void from_json(const Wire& j, Stage& s) { get_word(j, s, kStageWords); }
[[maybe_unused]] static void to_json(Wire& j, Result::Kind k) { put_word(j, k, kKindWords); }
[[maybe_unused]] static void from_json(const Wire& j, Result::Kind& k) { get_word(j, k, kKindWords); }
[[maybe_unused]] static void to_json(Wire& j, Carried::What w) { put_word(j, w, kCarriedWords); }
[[maybe_unused]] static void from_json(const Wire& j, Carried::What& w) { get_word(j, w, kCarriedWords); }

// A nested message travels as a CBOR byte string.
[[maybe_unused]] static void to_json(Wire& j, const Nested& n) {
    j = Wire::binary(std::vector<std::uint8_t>(n.bytes.begin(), n.bytes.end()));
}
[[maybe_unused]] static void from_json(const Wire& j, Nested& n) {
    if (!j.is_binary()) throw Wrong{"", "is " + shown(j) + ", not a byte string"};
    const auto& b = j.get_binary();
    n.bytes.assign(b.begin(), b.end());
}

// A struct's fields, listed once: nlohmann-json's
// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE for this file's Wire, each field read
// with get_field, then the struct's bounds().
#define MN_PUT(field) j[#field] = m.field;
#define MN_GET(field) get_field(j, #field, m.field);
#define FIELDS(Type, ...)                                                                                             \
    [[maybe_unused]] static void to_json(Wire& j, const Type& m) {                                                    \
        NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(MN_PUT, __VA_ARGS__))                                                \
    }                                                                                                                 \
    [[maybe_unused]] static void from_json(const Wire& j, Type& m) {                                                  \
        must_be_object(j);                                                                                            \
        NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(MN_GET, __VA_ARGS__))                                                \
        bounds(m);                                                                                                    \
    }

// A message: its fields, its name on the wire ({"Hello": {...}}), and its
// encode and decode.
template <typename M>
constexpr const char* kName = nullptr;
#define MESSAGE(Type, ...)                                   \
    FIELDS(Type, __VA_ARGS__)                                \
    template <>                                              \
    constexpr const char* kName<Type> = #Type;               \
    template wire::Body encode<Type>(const Type&);           \
    template Outcome<Type> decode<Type>(const wire::Body&);

namespace {

// Nesting deeper than any message (a Ready's GPU processes: 6).
constexpr std::size_t kDepth = 16;

// A first pass over the CBOR that builds nothing and refuses to nest deeper
// than kDepth: nlohmann-json's reader recurses, and a body of 0x81 0x81 ...
// would use up the stack. Its public SAX interface, every event.
class DepthGuard : public nlohmann::json_sax<Wire> {
public:
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool key(string_t&) override { return true; }
    bool start_object(std::size_t) override { return ++depth_ <= kDepth; }
    bool start_array(std::size_t) override { return ++depth_ <= kDepth; }
    bool end_object() override { return depth_-- > 0; }
    bool end_array() override { return depth_-- > 0; }
    bool parse_error(std::size_t, const std::string&, const Wire::exception&) override { return false; }

private:
    std::size_t depth_ = 0;
};

// A message's name and fields, {"Hello": {...}} in CBOR and nothing after
// it; none when the body is not one.
std::optional<std::pair<std::string, Wire>> parse(const wire::Body& body) {
    Wire j;
    DepthGuard guard;
    try {
        if (!Wire::sax_parse(body.begin(), body.end(), &guard, Wire::input_format_t::cbor)) return std::nullopt;
        j = Wire::from_cbor(body.begin(), body.end(), true, false);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    if (j.is_discarded() || !j.is_object() || j.size() != 1) return std::nullopt;
    return std::make_pair(j.begin().key(), std::move(j.begin().value()));
}

const char* const kNotOne = "what came is not a message (CBOR {\"Name\": {fields}})";

template <typename M>
Outcome<M> read(const Wire& fields) {
    try {
        return fields.get<M>();
    } catch (const Wrong& w) {
        return Problem{std::string(kName<M>) + ": " + (w.where.empty() ? "" : "'" + w.where + "' ") + w.what, ""};
    } catch (const std::exception& e) {
        return Problem{std::string(kName<M>) + ": " + e.what(), ""};
    }
}

// The first of Variant's messages named `name`.
template <typename Variant, std::size_t I = 0>
Outcome<Variant> read_one_of(const std::string& name, const Wire& fields, const char* never) {
    if constexpr (I == std::variant_size_v<Variant>) {
        return Problem{"a message '" + name + "', which " + never, ""};
    } else {
        using M = std::variant_alternative_t<I, Variant>;
        if (name != kName<M>) return read_one_of<Variant, I + 1>(name, fields, never);
        auto m = read<M>(fields);
        if (!m) return m.problem();
        return Variant(std::move(m.value()));
    }
}

template <typename Variant>
Outcome<Variant> decode_one_of(const wire::Body& body, const char* never) {
    auto p = parse(body);
    if (!p) return Problem{kNotOne, ""};
    return read_one_of<Variant>(p->first, p->second, never);
}

}  // namespace

template <typename M>
wire::Body encode(const M& m) {
    Wire j = Wire::object();
    j[kName<M>] = m;
    std::string out;
    Wire::to_cbor(j, out);
    return out;
}

template <typename M>
Outcome<M> decode(const wire::Body& body) {
    auto p = parse(body);
    if (!p) return Problem{std::string(kName<M>) + ": " + kNotOne, ""};
    if (p->first != kName<M>) return Problem{std::string(kName<M>) + ": a message '" + p->first + "' came", ""};
    return read<M>(p->second);
}

// ---- the fields ----------------------------------------------------------------

FIELDS(FabricSignature, fabric, hcas, rate_gbps, mtu)
FIELDS(GpuReadings::Process, pid, name, used_mib)
FIELDS(GpuReadings, gpu, nvml, nvml_error, processes, ecc_uncorrected, retirement_pending, remap_pending, remap_failed,
       pcie_gen, pcie_gen_max, pcie_width, pcie_width_max, nvlinks, nvlinks_up, hw_slowdown, hw_thermal, sw_thermal,
       power_brake, ecc_enabled, mig_enabled, fabric_domain, fabric_unready)
FIELDS(Standby, rank, label, addr, port)
FIELDS(NetPlugin, known, name, api, path)
FIELDS(PcieLink, gpu, width, max_width, gts, max_gts)
FIELDS(Fingerprint, host, nccl, nccl_path, net, cuda_driver, gpu_model, gpus, gpus_requested, verbs_known, verbs,
       verbs_needed, torch_nccl, pcie, hca_firmware, verbs_library, nccl_env_known, nccl_env, image, image_name)

MESSAGE(Knock, version, purpose, rank, nonce, release)
MESSAGE(Welcome, rank)
MESSAGE(Refused, reason)
MESSAGE(Hello, rank, node, label, slurm_node, host, pid, gpu_ok, gpu_why, gpus, lanes, lane_gpus, data_addr, data_port,
        standby_port, sig, ifname, problems, machine, fresh_ports)
MESSAGE(Beat, stage)
MESSAGE(Roster, lead, standbys)
MESSAGE(Prepare, gpu, bytes, nranks, first_rank, id, nccl, fingerprint_fields)
MESSAGE(Plan, gpu, bytes, iters, warmup, budget, pair_budget, pair_bytes, nranks, first_rank, id, next_addr, next_port,
        leader, members, ring_pos, ring_size, prev, next, colors)
MESSAGE(PairCue, tag, peer, peer_addr, peer_port, connect, bytes, iters, budget, time_bound, fresh_port)
MESSAGE(GpuRetest, colors)
MESSAGE(Word, done, code, why)
MESSAGE(Ready, error, health, fingerprint, node_fingerprint)
MESSAGE(Result, ran, correct, error, kind, seconds, init, passes, transports, pair_seconds, pair_error, strangers)
MESSAGE(PairReport, tag, seconds, error, strangers, strangers_seen, cpu_wait, retrans, rtt_ms, listening)
MESSAGE(GpuRetestReport, seconds, error)
MESSAGE(Superseded, by, by_label, code)
MESSAGE(TakeoverReport, hello)
FIELDS(RelayPart, to, body)
MESSAGE(Relay, parts)
FIELDS(Carried, rank, what, body, error, silent)
MESSAGE(Relayed, parts, door_strangers)
MESSAGE(Finding, kind, host, rank, local_rank, pid, comm, seen_from, detail, evidence, dumps, excluded, host_evidence)
FIELDS(CallPosition, seq, op, input, state)
FIELDS(GroupPosition, id, desc, enqueued, started, completed, waiting_seq, waiting_op, waiting_state, waiting_input,
       recent)
MESSAGE(Position, host, rank, local_rank, comm, gpu, pid, still, cpu, groups, gpu_events, dump)

// ---- the challenge: key=value lines, as every build since protocol 2 reads them --

template <>
wire::Body encode(const Challenge& m) {
    return "op=challenge\nv=" + std::to_string(m.version) + "\nnonce=" + m.nonce + "\n" +
           (m.release.empty() ? "" : "release=" + m.release + "\n");
}

template <>
Outcome<Challenge> decode<Challenge>(const wire::Body& body) {
    std::map<std::string, std::string> f;
    for (const std::string& line : split_list(body, '\n'))
        if (const std::size_t eq = line.find('='); eq != std::string::npos) f[line.substr(0, eq)] = line.substr(eq + 1);
    Challenge m;
    const std::string& v = f["v"];
    const auto [rest, err] = std::from_chars(v.data(), v.data() + v.size(), m.version);
    if (f["op"] != "challenge" || v.empty() || err != std::errc() || rest != v.data() + v.size() || !f.count("nonce"))
        return Problem{"Challenge: what came is not a challenge (lines op=challenge, v=N, nonce=...)", ""};
    m.nonce = f["nonce"];
    // Unproven words of whoever answered: a release is kept only as one
    // (a short version string), never as text to print.
    if (release_word(f["release"])) m.release = f["release"];
    return m;
}

// ---- the control connection's messages, either way ------------------------------

wire::Body encode(const FromLead& m) {
    return std::visit([](const auto& x) { return encode(x); }, m);
}

wire::Body encode(const FromRank& m) {
    return std::visit([](const auto& x) { return encode(x); }, m);
}

Outcome<FromLead> decode_from_lead(const wire::Body& body) {
    return decode_one_of<FromLead>(body, "rank 0 never sends");
}

Outcome<FromRank> decode_from_rank(const wire::Body& body) {
    return decode_one_of<FromRank>(body, "a rank never sends rank 0");
}

const char* stage_word(Stage s) { return kStageWords[static_cast<int>(s)]; }

const char* stage_name(Stage s) {
    static const char* const names[] = {"the rendezvous", "readiness", "the all-reduce", "the pair tests", "the verdict"};
    return names[static_cast<int>(s)];
}

bool operator==(const Ready& a, const Ready& b) {
    return a.error == b.error && Wire(a.health) == Wire(b.health) && a.fingerprint == b.fingerprint &&
           Wire(a.node_fingerprint) == Wire(b.node_fingerprint);
}

std::string superseded_refusal(const Superseded& m, const std::vector<uint32_t>& standbys) {
    if (std::find(standbys.begin(), standbys.end(), m.by) == standbys.end())
        return "it said rank " + std::to_string(m.by) + " gave the verdict in rank 0's place, which is no standby of "
               "the roster";
    if (m.code == 0) return "it said a verdict in rank 0's place passed, which none does (it names rank 0's node)";
    return "";
}

}  // namespace mn::check::msg
