#include "helper/check/messages.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace mn::check::msg {
namespace {

using wire::Fields;

// Lists travel as KEY=count and KEY.0, KEY.1, ...: any item survives,
// separators included. A list longer than this is not ours.
constexpr uint64_t kMaxItems = 1u << 16;

std::string real_text(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);  // exact: strtod reads back the same double
    return buf;
}

template <typename T>
std::string joined(const std::vector<T>& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        if constexpr (std::is_floating_point_v<T>) out += real_text(v[i]);
        else out += std::to_string(v[i]);
    }
    return out;
}

// Builds a message's fields, typed; within(P, ...) writes a part of the
// message (a nested hello, a list's items) under keys "P.".
class Writer {
public:
    explicit Writer(const char* op) { f_["op"] = op; }
    Writer& text(const std::string& k, const std::string& v) { return set(k, v); }
    Writer& whole(const std::string& k, uint64_t v) { return set(k, std::to_string(v)); }
    Writer& integer(const std::string& k, int64_t v) { return set(k, std::to_string(v)); }
    Writer& real(const std::string& k, double v) { return set(k, real_text(v)); }
    Writer& flag(const std::string& k, bool v) { return set(k, v ? "1" : "0"); }
    Writer& wholes(const std::string& k, const std::vector<uint32_t>& v) { return set(k, joined(v)); }
    Writer& texts(const std::string& k, const std::vector<std::string>& v) {
        whole(k, v.size());
        for (std::size_t i = 0; i < v.size(); ++i) text(k + "." + std::to_string(i), v[i]);
        return *this;
    }
    template <typename T>
    Writer& rows(const std::string& k, const std::vector<std::vector<T>>& v) {
        whole(k, v.size());
        for (std::size_t i = 0; i < v.size(); ++i) text(k + "." + std::to_string(i), joined(v[i]));
        return *this;
    }
    template <typename Fn>
    Writer& within(const std::string& k, Fn fn) {
        const std::string saved = prefix_;
        prefix_ += k + ".";
        fn(*this);
        prefix_ = saved;
        return *this;
    }
    template <typename T, typename Fn>
    Writer& list(const std::string& k, const std::vector<T>& v, Fn fn) {
        whole(k, v.size());
        for (std::size_t i = 0; i < v.size(); ++i) within(k + "." + std::to_string(i), [&](Writer& w) { fn(w, v[i]); });
        return *this;
    }
    Fields done() { return std::move(f_); }

private:
    Writer& set(const std::string& k, std::string v) {
        f_[prefix_ + k] = std::move(v);
        return *this;
    }
    Fields f_;
    std::string prefix_;
};

// Reads a message's fields, typed; the first missing or malformed field
// is kept as the error and every later read gives a default.
class Reader {
public:
    Reader(const Fields& f, const char* what) : f_(f), what_(what) {
        auto it = f.find("op");
        if (it == f.end()) fail("'op' is missing");
        else if (it->second != what) fail("'op' is '" + it->second + "'");
    }
    std::string text(const std::string& k) {
        auto it = f_.find(prefix_ + k);
        if (it == f_.end()) {
            fail("'" + prefix_ + k + "' is missing");
            return "";
        }
        return it->second;
    }
    bool has(const std::string& k) const { return f_.count(prefix_ + k) > 0; }
    template <typename Fn>
    auto within(const std::string& k, Fn fn) {
        const std::string saved = prefix_;
        prefix_ += k + ".";
        auto v = fn(*this);
        prefix_ = saved;
        return v;
    }
    template <typename Fn>
    auto list(const std::string& k, Fn fn) {
        std::vector<decltype(fn(*this))> out(whole(k, 0, kMaxItems));
        for (std::size_t i = 0; i < out.size() && err_.empty(); ++i) out[i] = within(k + "." + std::to_string(i), fn);
        return err_.empty() ? out : decltype(out){};
    }
    uint64_t whole(const std::string& k, uint64_t lo, uint64_t hi) {
        const std::string v = text(k);
        if (!err_.empty()) return lo;
        uint64_t x = 0;
        if (!parse_whole(v, x) || x < lo || x > hi) {
            fail("'" + prefix_ + k + "'='" + v + "' is not a whole number from " + std::to_string(lo) + " to " +
                 std::to_string(hi));
            return lo;
        }
        return x;
    }
    int integer(const std::string& k, int lo, int hi) {
        const std::string v = text(k);
        int x = lo;
        if (err_.empty() && (!parse_int(v, x) || x < lo || x > hi)) {
            fail("'" + prefix_ + k + "'='" + v + "' is not a whole number from " + std::to_string(lo) + " to " +
                 std::to_string(hi));
            return lo;
        }
        return x;
    }
    double real(const std::string& k) {
        const std::string v = text(k);
        double x = 0;
        if (err_.empty() && !parse_real(v, x)) fail("'" + prefix_ + k + "'='" + v + "' is not a finite number");
        return x;
    }
    bool flag(const std::string& k) {
        const std::string v = text(k);
        if (err_.empty() && v != "0" && v != "1") fail("'" + prefix_ + k + "'='" + v + "' is not 0 or 1");
        return v == "1";
    }
    // Which of `words` the field is.
    std::size_t one_of(const std::string& k, std::initializer_list<const char*> words) {
        const std::string v = text(k);
        std::size_t i = 0;
        for (const char* w : words) {
            if (v == w) return i;
            ++i;
        }
        std::string list;
        for (const char* w : words) list += std::string(list.empty() ? "'" : ", '") + w + "'";
        fail("'" + prefix_ + k + "'='" + v + "' is not one of " + list);
        return 0;
    }
    std::vector<std::string> texts(const std::string& k) {
        std::vector<std::string> out(whole(k, 0, kMaxItems));
        for (std::size_t i = 0; i < out.size() && err_.empty(); ++i) out[i] = text(k + "." + std::to_string(i));
        return err_.empty() ? out : std::vector<std::string>{};
    }
    // A comma-separated list of whole numbers up to `hi` ("" is none).
    std::vector<uint32_t> wholes(const std::string& k, uint64_t hi) {
        const std::string v = text(k);
        std::vector<uint32_t> out;
        std::size_t at = 0;
        while (err_.empty() && !v.empty() && at <= v.size() && out.size() < kMaxItems) {
            const std::size_t comma = std::min(v.find(',', at), v.size());
            uint64_t x = 0;
            if (!parse_whole(v.substr(at, comma - at), x) || x > hi) {
                fail("'" + prefix_ + k + "'='" + v + "' is not a list of whole numbers up to " + std::to_string(hi));
                return {};
            }
            out.push_back(static_cast<uint32_t>(x));
            at = comma + 1;
        }
        return err_.empty() ? out : std::vector<uint32_t>{};
    }
    std::vector<std::vector<double>> real_rows(const std::string& k) {
        return rows<double>(k, [](const std::string& s, double& x) { return parse_real(s, x); }, "finite numbers");
    }
    std::vector<std::vector<int>> int_rows(const std::string& k) {
        return rows<int>(k, [](const std::string& s, int& x) { return parse_int(s, x); }, "whole numbers");
    }
    template <typename T>
    Outcome<T> result(T m) const {
        if (!err_.empty()) return Problem{err_, ""};
        return m;
    }

private:
    void fail(const std::string& why) {
        if (err_.empty()) err_ = std::string(what_) + ": " + why;
    }
    static bool parse_whole(const std::string& s, uint64_t& x) {
        if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
        errno = 0;
        x = std::strtoull(s.c_str(), nullptr, 10);
        return errno == 0;
    }
    static bool parse_int(const std::string& s, int& x) {
        const bool neg = !s.empty() && s[0] == '-';
        uint64_t u = 0;
        const uint64_t most = uint64_t(std::numeric_limits<int>::max()) + (neg ? 1 : 0);
        if (!parse_whole(neg ? s.substr(1) : s, u) || u > most) return false;
        x = static_cast<int>(neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u));
        return true;
    }
    static bool parse_real(const std::string& s, double& x) {
        if (s.empty() || s.find_first_of(" \t\n\r\f\v") != std::string::npos) return false;
        char* end = nullptr;
        x = std::strtod(s.c_str(), &end);
        return end == s.c_str() + s.size() && std::isfinite(x);
    }
    template <typename T, typename Parse>
    std::vector<std::vector<T>> rows(const std::string& k, Parse parse, const char* kind) {
        std::vector<std::vector<T>> out(whole(k, 0, kMaxItems));
        for (std::size_t i = 0; i < out.size() && err_.empty(); ++i) {
            const std::string key = k + "." + std::to_string(i), v = text(key);
            // "" is an empty row; otherwise items between commas, none empty.
            for (std::size_t at = 0; err_.empty() && !v.empty() && at <= v.size();) {
                const std::size_t comma = std::min(v.find(',', at), v.size());
                T x{};
                if (!parse(v.substr(at, comma - at), x))
                    fail("'" + prefix_ + key + "'='" + v + "' is not a list of " + kind);
                out[i].push_back(x);
                at = comma + 1;
            }
        }
        return err_.empty() ? out : std::vector<std::vector<T>>{};
    }
    const Fields& f_;
    const char* what_;
    std::string err_;
    std::string prefix_;
};

constexpr const char* kStageWords[] = {"rendezvous", "readiness", "collective", "pairs", "verdict"};

Stage read_stage(Reader& r, const std::string& k) {
    const auto& w = kStageWords;
    return static_cast<Stage>(r.one_of(k, {w[0], w[1], w[2], w[3], w[4]}));
}

void put_hello(Writer& w, const Hello& m) {
    w.whole("rank", m.rank)
        .whole("node", m.node)
        .text("label", m.label)
        .text("slurm_node", m.slurm_node)
        .text("host", m.host)
        .whole("pid", m.pid)
        .flag("gpu_ok", m.gpu_ok)
        .text("gpu_why", m.gpu_why)
        .whole("gpus", m.gpus)
        .whole("lanes", m.lanes)
        .texts("lane_gpus", m.lane_gpus)
        .text("data_addr", m.data_addr)
        .whole("data_port", m.data_port)
        .whole("standby_port", m.standby_port)
        .text("fabric", m.sig.fabric)
        .text("hcas", m.sig.hcas)
        .real("rate", m.sig.rate_gbps)
        .whole("mtu", m.sig.mtu)
        .text("ifname", m.ifname)
        .texts("problems", m.problems);
}

const char* kind_word(Result::Kind k) {
    return k == Result::Kind::Peer ? "peer" : k == Result::Kind::Fault ? "fault" : "";
}

}  // namespace

// ---- encoders ----------------------------------------------------------------

Fields encode(const Challenge& m) { return Writer("challenge").whole("v", m.version).text("nonce", m.nonce).done(); }

Fields encode(const Knock& m) {
    return Writer("knock").whole("v", m.version).text("purpose", m.purpose).whole("rank", m.rank).text("nonce", m.nonce).done();
}

Fields encode(const Welcome& m) { return Writer("welcome").whole("rank", m.rank).done(); }

Fields encode(const Refused& m) { return Writer("refused").text("reason", m.reason).done(); }

Fields encode(const Hello& m) {
    Writer w("hello");
    put_hello(w, m);
    return w.done();
}

Fields encode(const Prepare& m) {
    return Writer("prepare").text("path", m.gpu ? "gpu" : "cpu").whole("bytes", m.bytes).done();
}

Fields encode(const Plan& m) {
    return Writer("plan")
        .text("path", m.gpu ? "gpu" : "cpu")
        .whole("bytes", m.bytes)
        .integer("iters", m.iters)
        .integer("warmup", m.warmup)
        .real("budget", m.budget)
        .real("pair_budget", m.pair_budget)
        .whole("pair_bytes", m.pair_bytes)
        .integer("nranks", m.nranks)
        .integer("first_rank", m.first_rank)
        .text("id", m.id)
        .text("next_addr", m.next_addr)
        .whole("next_port", m.next_port)
        .whole("leader", m.leader)
        .wholes("members", m.members)
        .whole("ring_pos", m.ring_pos)
        .whole("ring_size", m.ring_size)
        .whole("prev", m.prev)
        .whole("next", m.next)
        .rows("colors", m.colors)
        .done();
}

Fields encode(const PairCue& m) {
    return Writer("pair_cue")
        .text("tag", m.tag)
        .whole("peer", m.peer)
        .text("peer_addr", m.peer_addr)
        .whole("peer_port", m.peer_port)
        .flag("connect", m.connect)
        .whole("bytes", m.bytes)
        .integer("iters", m.iters)
        .real("budget", m.budget)
        .real("time_bound", m.time_bound)
        .done();
}

Fields encode(const Word& m) {
    return Writer("word").text("end", m.done ? "done" : "stop").integer("code", m.code).text("why", m.why).done();
}

Fields encode(const Ready& m) {
    return Writer("ready")
        .text("error", m.error)
        .text("health", encode_readings(m.health))
        .text("fingerprint", m.fingerprint)
        .done();
}

Fields encode(const Result& m) {
    Writer w("result");
    w.flag("ran", m.ran)
        .flag("correct", m.correct)
        .text("error", m.error)
        .text("kind", kind_word(m.kind))
        .real("seconds", m.seconds)
        .real("init", m.init)
        .texts("transports", m.transports)
        .rows("pair_seconds", m.pair_seconds)
        .text("pair_error", m.pair_error);
    if (m.passes) w.real("passes", *m.passes);
    return w.done();
}

Fields encode(const PairReport& m) {
    return Writer("pair_report").text("tag", m.tag).real("seconds", m.seconds).text("error", m.error).done();
}

Fields encode(const GpuRetest& m) { return Writer("gpu_retest").rows("colors", m.colors).done(); }

Fields encode(const GpuRetestReport& m) {
    return Writer("gpu_retest_report").rows("seconds", m.seconds).text("error", m.error).done();
}


Fields encode(const FromLead& m) {
    return std::visit([](const auto& x) { return encode(x); }, m);
}

Fields encode(const FromRank& m) {
    return std::visit([](const auto& x) { return encode(x); }, m);
}

Fields encode(const Beat& m) {
    return Writer("beat").text("stage", kStageWords[static_cast<int>(m.stage)]).done();
}

Fields encode(const Roster& m) {
    return Writer("roster")
        .within("lead", [&](Writer& w) { put_hello(w, m.lead); })
        .list("standbys", m.standbys,
              [](Writer& w, const Standby& s) {
                  w.whole("rank", s.rank).text("label", s.label).text("addr", s.addr).whole("port", s.port);
              })
        .done();
}

Fields encode(const Superseded& m) {
    return Writer("superseded").whole("by", m.by).text("by_label", m.by_label).integer("code", m.code).done();
}

Fields encode(const TakeoverReport& m) {
    return Writer("takeover").within("hello", [&](Writer& w) { put_hello(w, m.hello); }).done();
}


// ---- decoders ----------------------------------------------------------------

namespace {

constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kU64 = std::numeric_limits<uint64_t>::max();
constexpr int kIntMax = std::numeric_limits<int>::max();

Hello get_hello(Reader& r) {
    Hello m;
    m.rank = static_cast<uint32_t>(r.whole("rank", 0, kU32));
    m.node = static_cast<uint32_t>(r.whole("node", 0, kU32));
    m.label = r.text("label");
    m.slurm_node = r.text("slurm_node");
    m.host = r.text("host");
    m.pid = static_cast<unsigned>(r.whole("pid", 0, kU32));
    m.gpu_ok = r.flag("gpu_ok");
    m.gpu_why = r.text("gpu_why");
    m.gpus = static_cast<uint32_t>(r.whole("gpus", 0, kU32));
    m.lanes = static_cast<uint32_t>(r.whole("lanes", 1, 1u << 16));
    m.lane_gpus = r.texts("lane_gpus");
    m.data_addr = r.text("data_addr");
    m.data_port = static_cast<uint16_t>(r.whole("data_port", 0, 65535));
    m.standby_port = static_cast<uint16_t>(r.whole("standby_port", 0, 65535));
    m.sig.fabric = r.text("fabric");
    m.sig.hcas = r.text("hcas");
    m.sig.rate_gbps = r.real("rate");
    m.sig.mtu = static_cast<unsigned>(r.whole("mtu", 0, kU32));
    m.ifname = r.text("ifname");
    m.problems = r.texts("problems");
    return m;
}

}  // namespace

const char* stage_name(Stage s) {
    static const char* const names[] = {"the rendezvous", "readiness", "the all-reduce", "the pair tests", "the verdict"};
    return names[static_cast<int>(s)];
}

Outcome<Beat> decode_beat(const Fields& f) {
    Reader r(f, "beat");
    return r.result(Beat{read_stage(r, "stage")});
}

Outcome<Roster> decode_roster(const Fields& f) {
    Reader r(f, "roster");
    Roster m;
    m.lead = r.within("lead", get_hello);
    m.standbys = r.list("standbys", [](Reader& in) {
        Standby s;
        s.rank = static_cast<uint32_t>(in.whole("rank", 0, kU32));
        s.label = in.text("label");
        s.addr = in.text("addr");
        s.port = static_cast<uint16_t>(in.whole("port", 0, 65535));
        return s;
    });
    return r.result(m);
}

Outcome<Superseded> decode_superseded(const Fields& f) {
    Reader r(f, "superseded");
    Superseded m;
    m.by = static_cast<uint32_t>(r.whole("by", 0, kU32));
    m.by_label = r.text("by_label");
    m.code = r.integer("code", 0, 255);
    return r.result(m);
}

Outcome<TakeoverReport> decode_takeover_report(const Fields& f) {
    Reader r(f, "takeover");
    return r.result(TakeoverReport{r.within("hello", get_hello)});
}

Outcome<Challenge> decode_challenge(const Fields& f) {
    Reader r(f, "challenge");
    Challenge m;
    m.version = static_cast<uint32_t>(r.whole("v", 0, kU32));
    m.nonce = r.text("nonce");
    return r.result(m);
}

Outcome<Knock> decode_knock(const Fields& f) {
    Reader r(f, "knock");
    Knock m;
    m.version = static_cast<uint32_t>(r.whole("v", 0, kU32));
    m.purpose = r.text("purpose");
    m.rank = static_cast<uint32_t>(r.whole("rank", 0, kU32));
    m.nonce = r.text("nonce");
    return r.result(m);
}

Outcome<Refused> decode_refused(const Fields& f) {
    Reader r(f, "refused");
    Refused m;
    m.reason = r.text("reason");
    return r.result(m);
}

Outcome<Welcome> decode_welcome(const Fields& f) {
    Reader r(f, "welcome");
    return r.result(Welcome{static_cast<uint32_t>(r.whole("rank", 0, kU32))});
}

Outcome<Hello> decode_hello(const Fields& f) {
    Reader r(f, "hello");
    return r.result(get_hello(r));
}

Outcome<Prepare> decode_prepare(const Fields& f) {
    Reader r(f, "prepare");
    Prepare m;
    m.gpu = r.one_of("path", {"cpu", "gpu"}) == 1;
    m.bytes = r.whole("bytes", 0, kU64);
    return r.result(m);
}

Outcome<Plan> decode_plan(const Fields& f) {
    Reader r(f, "plan");
    Plan m;
    m.gpu = r.one_of("path", {"cpu", "gpu"}) == 1;
    m.bytes = r.whole("bytes", 0, kU64);
    m.iters = r.integer("iters", 0, kIntMax);
    m.warmup = r.integer("warmup", 0, kIntMax);
    m.budget = r.real("budget");
    m.pair_budget = r.real("pair_budget");
    m.pair_bytes = r.whole("pair_bytes", 0, kU64);
    m.nranks = r.integer("nranks", 0, kIntMax);
    m.first_rank = r.integer("first_rank", 0, kIntMax);
    m.id = r.text("id");
    m.next_addr = r.text("next_addr");
    m.next_port = static_cast<uint16_t>(r.whole("next_port", 0, 65535));
    m.leader = static_cast<uint32_t>(r.whole("leader", 0, kU32));
    m.members = r.wholes("members", kU32);
    m.ring_pos = static_cast<uint32_t>(r.whole("ring_pos", 0, kU32));
    m.ring_size = static_cast<uint32_t>(r.whole("ring_size", 0, kU32));
    m.prev = static_cast<uint32_t>(r.whole("prev", 0, kU32));
    m.next = static_cast<uint32_t>(r.whole("next", 0, kU32));
    m.colors = r.int_rows("colors");
    return r.result(m);
}

Outcome<PairCue> decode_pair_cue(const Fields& f) {
    Reader r(f, "pair_cue");
    PairCue m;
    m.tag = r.text("tag");
    m.peer = static_cast<uint32_t>(r.whole("peer", 0, kU32));
    m.peer_addr = r.text("peer_addr");
    m.peer_port = static_cast<uint16_t>(r.whole("peer_port", 0, 65535));
    m.connect = r.flag("connect");
    m.bytes = r.whole("bytes", 0, kU64);
    m.iters = r.integer("iters", 0, kIntMax);
    m.budget = r.real("budget");
    m.time_bound = r.real("time_bound");
    return r.result(m);
}

Outcome<Word> decode_word(const Fields& f) {
    Reader r(f, "word");
    Word m;
    m.done = r.one_of("end", {"stop", "done"}) == 1;
    m.code = r.integer("code", 0, 255);
    m.why = r.text("why");
    return r.result(m);
}

Outcome<Ready> decode_ready(const Fields& f) {
    Reader r(f, "ready");
    Ready m;
    m.error = r.text("error");
    m.health = decode_readings(r.text("health"));
    // A rank of an older mn-preflight sends none: its node is then not compared.
    if (r.has("fingerprint")) m.fingerprint = r.text("fingerprint");
    return r.result(m);
}

Outcome<Result> decode_result(const Fields& f) {
    Reader r(f, "result");
    Result m;
    m.ran = r.flag("ran");
    m.correct = r.flag("correct");
    m.error = r.text("error");
    m.kind = static_cast<Result::Kind>(r.one_of("kind", {"", "peer", "fault"}));
    m.seconds = r.real("seconds");
    m.init = r.real("init");
    if (r.has("passes")) m.passes = r.real("passes");
    m.transports = r.texts("transports");
    m.pair_seconds = r.real_rows("pair_seconds");
    m.pair_error = r.text("pair_error");
    return r.result(m);
}

Outcome<PairReport> decode_pair_report(const Fields& f) {
    Reader r(f, "pair_report");
    PairReport m;
    m.tag = r.text("tag");
    m.seconds = r.real("seconds");
    m.error = r.text("error");
    return r.result(m);
}

Outcome<GpuRetest> decode_gpu_retest(const Fields& f) {
    Reader r(f, "gpu_retest");
    GpuRetest m;
    m.colors = r.int_rows("colors");
    return r.result(m);
}

Outcome<GpuRetestReport> decode_gpu_retest_report(const Fields& f) {
    Reader r(f, "gpu_retest_report");
    GpuRetestReport m;
    m.seconds = r.real_rows("seconds");
    m.error = r.text("error");
    return r.result(m);
}


namespace {

template <typename Variant, typename M>
Outcome<Variant> widen(Outcome<M> m) {
    if (!m) return m.problem();
    return Variant(std::move(m.value()));
}

std::string op_of(const Fields& f) {
    auto it = f.find("op");
    return it == f.end() ? "" : it->second;
}

std::string unknown(const std::string& op, const char* who) {
    return op.empty() ? "a message without 'op'" : "a message with op '" + op + "', which " + who;
}

}  // namespace

Outcome<FromLead> decode_from_lead(const Fields& f) {
    const std::string op = op_of(f);
    if (op == "beat") return widen<FromLead>(decode_beat(f));
    if (op == "roster") return widen<FromLead>(decode_roster(f));
    if (op == "prepare") return widen<FromLead>(decode_prepare(f));
    if (op == "plan") return widen<FromLead>(decode_plan(f));
    if (op == "pair_cue") return widen<FromLead>(decode_pair_cue(f));
    if (op == "gpu_retest") return widen<FromLead>(decode_gpu_retest(f));
    if (op == "word") return widen<FromLead>(decode_word(f));
    return Problem{unknown(op, "rank 0 never sends"), ""};
}

Outcome<FromRank> decode_from_rank(const Fields& f) {
    const std::string op = op_of(f);
    if (op == "beat") return widen<FromRank>(decode_beat(f));
    if (op == "superseded") return widen<FromRank>(decode_superseded(f));
    if (op == "ready") return widen<FromRank>(decode_ready(f));
    if (op == "result") return widen<FromRank>(decode_result(f));
    if (op == "pair_report") return widen<FromRank>(decode_pair_report(f));
    if (op == "gpu_retest_report") return widen<FromRank>(decode_gpu_retest_report(f));
    return Problem{unknown(op, "a rank never sends rank 0"), ""};
}

bool operator==(const Ready& a, const Ready& b) {
    return a.error == b.error && encode_readings(a.health) == encode_readings(b.health) &&
           a.fingerprint == b.fingerprint;
}

}  // namespace mn::check::msg
