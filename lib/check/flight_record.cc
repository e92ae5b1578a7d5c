// SPDX-License-Identifier: Apache-2.0
#include "lib/check/flight_record.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mn {
namespace {

// Bounds far above a dump of 2,000 entries (a few MB) and far below harm.
constexpr std::size_t kMaxBytes = 256u << 20;
constexpr std::size_t kMaxStack = 1u << 22;  // values and marks at once
constexpr std::size_t kMaxMemo = 1u << 22;
constexpr std::size_t kMaxMarks = 256;       // marks open at once
constexpr unsigned kMaxDepth = 64;            // values within values (a dump's are 5 deep)

// A pickled value. Lists and dicts are shared (the memo refers to the
// same object that later opcodes fill, as pickle's own reader does). A
// container once placed in another is not filled again, and never holds
// itself: no cycle can form (none would be freed), and `depth` stays
// true, so that freeing a value never recurses deeper than kMaxDepth.
struct Value;
using Ref = std::shared_ptr<Value>;
struct Value {
    enum class Kind { None, Bool, Int, Float, Text, List, Tuple, Dict };
    Kind kind = Kind::None;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::vector<Ref> items;  // a dict's: key, value, key, value...
    unsigned depth = 1;
    bool contained = false;
};

Ref make(Value::Kind k) {
    auto v = std::make_shared<Value>();
    v->kind = k;
    return v;
}

class Reader {
public:
    explicit Reader(const std::string& b) : b_(b) {}

    Outcome<Ref> run() {
        if (b_.size() > kMaxBytes) return bad("larger than " + std::to_string(kMaxBytes >> 20) + " MiB");
        while (at_ < b_.size()) {
            const std::size_t op_at = at_;
            const unsigned char op = static_cast<unsigned char>(b_[at_++]);
            std::string why = step(op);
            if (why == "stop") {
                if (stack_.size() != 1 || !marks_.empty()) return bad("the stack does not end with one value");
                return stack_.back();
            }
            if (!why.empty()) return Problem{"Flight Recorder dump: byte " + std::to_string(op_at) + ": " + why, kFix};
            if (stack_.size() > kMaxStack) return bad("more values at once than a dump holds");
        }
        return bad("it ends without STOP (cut short?)");
    }

private:
    static constexpr const char* kFix = "the watch reads no position from it; the file stays for torch's own reader";
    const std::string& b_;
    std::size_t at_ = 0;
    std::vector<Ref> stack_;
    std::vector<std::size_t> marks_;
    std::map<uint64_t, Ref> memo_;

    Problem bad(const std::string& why) const { return Problem{"Flight Recorder dump: " + why, kFix}; }

    bool take(std::size_t n, const char** p) {
        if (b_.size() - at_ < n) return false;
        *p = b_.data() + at_;
        at_ += n;
        return true;
    }
    bool unsigned_le(std::size_t n, uint64_t& out) {
        const char* p = nullptr;
        if (!take(n, &p)) return false;
        out = 0;
        for (std::size_t k = 0; k < n; ++k) out |= uint64_t(static_cast<unsigned char>(p[k])) << (8 * k);
        return true;
    }
    void push(Ref v) { stack_.push_back(std::move(v)); }
    Ref integer(int64_t x) {
        auto v = make(Value::Kind::Int);
        v->i = x;
        return v;
    }
    // The values above the last mark, taken off with it.
    bool since_mark(std::vector<Ref>& out) {
        if (marks_.empty()) return false;
        const std::size_t m = marks_.back();
        marks_.pop_back();
        if (m > stack_.size()) return false;
        out.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        return true;
    }
    std::string text(std::size_t n) {
        const char* p = nullptr;
        if (!take(n, &p)) return "a string runs past the end";
        auto v = make(Value::Kind::Text);
        v->s.assign(p, n);
        push(v);
        return "";
    }
    // Places `items` in `c`: deeper by them, each of them contained.
    std::string place(Value& c, const std::vector<Ref>& items) {
        for (const Ref& x : items) {
            if (x.get() == &c) return "a container placed in itself";
            if (x->depth + 1 > kMaxDepth) return "values nested deeper than a dump's";
        }
        for (const Ref& x : items) {
            c.depth = std::max(c.depth, x->depth + 1);
            x->contained = true;
        }
        c.items.insert(c.items.end(), items.begin(), items.end());
        return "";
    }
    std::string tuple(std::size_t n) {
        if (stack_.size() < n) return "a tuple of more values than the stack holds";
        auto v = make(Value::Kind::Tuple);
        const std::vector<Ref> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        if (std::string why = place(*v, items); !why.empty()) return why;
        push(v);
        return "";
    }
    std::string memo_put(uint64_t key) {
        if (stack_.empty()) return "a memo of nothing";
        if (memo_.size() >= kMaxMemo && !memo_.count(key)) return "more memo entries than a dump holds";
        memo_[key] = stack_.back();
        return "";
    }
    // Items into the container below them: a list's values, a dict's pairs.
    std::string fill(const std::vector<Ref>& items) {
        if (stack_.empty()) return "items with no container below them";
        Value& c = *stack_.back();
        if (c.kind == Value::Kind::List) {
            if (c.items.size() + items.size() > kMaxStack) return "a list longer than a dump holds";
        } else if (c.kind == Value::Kind::Dict) {
            if (items.size() % 2) return "a dict's items are not key and value pairs";
            if (c.items.size() + items.size() > kMaxStack) return "a dict larger than a dump holds";
        } else {
            return "items for something that is neither a list nor a dict";
        }
        if (c.contained) return "items for a container already placed in another";
        return place(c, items);
    }

    std::string step(unsigned char op) {
        uint64_t n = 0;
        const char* p = nullptr;
        switch (op) {
            case 0x80:  // PROTO
                return unsigned_le(1, n) && n <= 5 ? "" : "not a pickle of protocol 2 to 5";
            case 0x95:  // FRAME (protocol 4): a length to skip
                return unsigned_le(8, n) ? "" : "a frame cut short";
            case '.':
                return "stop";
            case '}': push(make(Value::Kind::Dict)); return "";
            case ']': push(make(Value::Kind::List)); return "";
            case ')': push(make(Value::Kind::Tuple)); return "";
            case 'N': push(make(Value::Kind::None)); return "";
            case 0x88:
            case 0x89: {
                auto v = make(Value::Kind::Bool);
                v->i = op == 0x88;
                push(v);
                return "";
            }
            case '(':
                if (marks_.size() >= kMaxMarks) return "nested deeper than a dump is";
                marks_.push_back(stack_.size());
                return "";
            case 'K': if (!unsigned_le(1, n)) return "an integer cut short"; push(integer(static_cast<int64_t>(n))); return "";
            case 'M': if (!unsigned_le(2, n)) return "an integer cut short"; push(integer(static_cast<int64_t>(n))); return "";
            case 'J':
                if (!unsigned_le(4, n)) return "an integer cut short";
                push(integer(static_cast<int32_t>(static_cast<uint32_t>(n))));
                return "";
            case 0x8a: {  // LONG1: little-endian two's complement of n bytes
                if (!unsigned_le(1, n)) return "a long cut short";
                const std::size_t len = static_cast<std::size_t>(n);
                if (len > 8) return "an integer wider than 64 bits";
                uint64_t x = 0;
                if (len && !unsigned_le(len, x)) return "a long cut short";
                if (len && len < 8 && (x >> (8 * len - 1)) & 1) x |= ~uint64_t(0) << (8 * len);
                push(integer(static_cast<int64_t>(x)));
                return "";
            }
            case 'G': {  // BINFLOAT: big-endian IEEE 754
                if (!take(8, &p)) return "a float cut short";
                uint64_t bits = 0;
                for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<unsigned char>(p[k]);
                auto v = make(Value::Kind::Float);
                std::memcpy(&v->f, &bits, sizeof bits);
                push(v);
                return "";
            }
            case 'X': return unsigned_le(4, n) ? text(static_cast<std::size_t>(n)) : "a string's length cut short";
            case 0x8c: return unsigned_le(1, n) ? text(static_cast<std::size_t>(n)) : "a string's length cut short";
            case 't': {
                std::vector<Ref> items;
                if (!since_mark(items)) return "a tuple with no mark";
                auto v = make(Value::Kind::Tuple);
                if (std::string why = place(*v, items); !why.empty()) return why;
                push(v);
                return "";
            }
            case 0x85: return tuple(1);
            case 0x86: return tuple(2);
            case 0x87: return tuple(3);
            case 'a':
            case 's': {  // APPEND, SETITEM: the last one or two values
                const std::size_t k = op == 'a' ? 1 : 2;
                if (stack_.size() < k + 1) return "an item with no container below it";
                std::vector<Ref> items(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
                stack_.resize(stack_.size() - k);
                return fill(items);
            }
            case 'e':
            case 'u': {  // APPENDS, SETITEMS
                std::vector<Ref> items;
                if (!since_mark(items)) return "items with no mark";
                return fill(items);
            }
            case 'q': return unsigned_le(1, n) ? memo_put(n) : "a memo key cut short";
            case 'r': return unsigned_le(4, n) ? memo_put(n) : "a memo key cut short";
            case 0x94: return memo_put(memo_.size());
            case 'h':
            case 'j': {
                if (!unsigned_le(op == 'h' ? 1 : 4, n)) return "a memo key cut short";
                const auto it = memo_.find(n);
                if (it == memo_.end()) return "a memo key never put";
                push(it->second);
                return "";
            }
            default: {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", op);
                return std::string("opcode ") + hex + ", which no Flight Recorder dump uses";
            }
        }
    }
};

const Value* field(const Value* dict, const std::string& key) {
    if (!dict || dict->kind != Value::Kind::Dict) return nullptr;
    for (std::size_t k = 0; k + 1 < dict->items.size(); k += 2) {
        const Value& kv = *dict->items[k];
        if ((kv.kind == Value::Kind::Text && kv.s == key) || (kv.kind == Value::Kind::Int && std::to_string(kv.i) == key))
            return dict->items[k + 1].get();
    }
    return nullptr;
}

std::string text_of(const Value* v) {
    if (!v) return "";
    if (v->kind == Value::Kind::Text) return v->s.substr(0, 200);
    if (v->kind == Value::Kind::Int) return std::to_string(v->i);
    return "";
}

int64_t int_of(const Value* v) { return v && v->kind == Value::Kind::Int ? v->i : -1; }

// "Float [262144]": the first input's dtype and shape.
std::string input_of(const Value* entry) {
    const Value* dtypes = field(entry, "input_dtypes");
    const Value* sizes = field(entry, "input_sizes");
    std::string out;
    if (dtypes && dtypes->kind == Value::Kind::List && !dtypes->items.empty()) out = text_of(dtypes->items[0].get());
    if (sizes && sizes->kind == Value::Kind::List && !sizes->items.empty() &&
        sizes->items[0]->kind == Value::Kind::List) {
        std::string dims;
        for (const Ref& d : sizes->items[0]->items)
            if (d->kind == Value::Kind::Int && dims.size() < 64) dims += (dims.empty() ? "" : ", ") + std::to_string(d->i);
        out += (out.empty() ? "[" : " [") + dims + "]";
    }
    return out;
}

}  // namespace

Outcome<FlightSummary> read_flight_record(const std::string& bytes) {
    auto root = Reader(bytes).run();
    if (!root) return root.problem();
    const Value* top = root->get();
    const Value* status = field(top, "pg_status");
    if (!status || status->kind != Value::Kind::Dict)
        return Problem{"Flight Recorder dump: no pg_status (another format?)",
                       "the watch reads no position from it; the file stays for torch's own reader"};
    FlightSummary s;
    s.version = text_of(field(top, "version"));
    s.comm_lib = text_of(field(top, "comm_lib_version"));
    const Value* config = field(top, "pg_config");
    for (std::size_t k = 0; k + 1 < status->items.size() && s.groups.size() < 64; k += 2) {
        FlightGroup g;
        g.id = text_of(status->items[k].get());
        const Value* st = status->items[k + 1].get();
        g.enqueued = int_of(field(st, "last_enqueued_collective"));
        g.started = int_of(field(st, "last_started_collective"));
        g.completed = int_of(field(st, "last_completed_collective"));
        g.desc = text_of(field(field(config, g.id), "desc"));
        s.groups.push_back(g);
    }
    const Value* entries = field(top, "entries");
    if (entries && entries->kind == Value::Kind::List) {
        s.entries = entries->items.size();
        for (const Ref& e : entries->items) {
            const std::string state = text_of(field(e.get(), "state"));
            const std::string pg = text_of(field(e.get(), "pg_id"));
            for (FlightGroup& g : s.groups)
                if (g.id == pg) {
                    g.recent.push_back({int_of(field(e.get(), "collective_seq_id")),
                                        text_of(field(e.get(), "profiling_name")), input_of(e.get()), state});
                    if (g.recent.size() > kRecentCalls) g.recent.erase(g.recent.begin());
                }
            if (state.empty() || state == "completed") continue;
            for (FlightGroup& g : s.groups)
                if (g.id == pg && g.waiting_seq < 0) {
                    g.waiting_seq = int_of(field(e.get(), "collective_seq_id"));
                    g.waiting_op = text_of(field(e.get(), "profiling_name"));
                    g.waiting_state = state;
                    g.waiting_input = input_of(e.get());
                }
        }
    }
    return s;
}

std::vector<std::string> flight_words(const FlightSummary& s) {
    std::vector<std::string> out;
    for (const FlightGroup& g : s.groups) {
        std::string l = (g.desc.empty() ? "process group " + g.id : g.desc) + ": completed #" +
                        std::to_string(g.completed) + ", enqueued to #" + std::to_string(g.enqueued);
        if (g.started >= 0) l += ", started #" + std::to_string(g.started);
        if (g.waiting_seq >= 0)
            l += "; waits in " + (g.waiting_op.empty() ? std::string("a collective") : g.waiting_op) + " #" +
                 std::to_string(g.waiting_seq) + " (" + (g.waiting_input.empty() ? "" : g.waiting_input + ", ") +
                 g.waiting_state + ")";
        else if (g.enqueued >= 0 && g.enqueued == g.completed)
            l += "; nothing waiting";
        out.push_back(l);
    }
    return out;
}

}  // namespace mn
