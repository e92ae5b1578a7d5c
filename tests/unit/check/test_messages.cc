// SPDX-License-Identifier: Apache-2.0
// The messages between ranks (helper/check/messages): CBOR both ways, and
// decoders as strict as the fields they fill: a number out of its field's
// range, a word not of its set, a missing field, a message of another name
// or what is not CBOR at all is a problem naming the message and the field,
// never an exception; the challenge stays text that protocol 2 reads.
#include <nlohmann/json.hpp>

#include "helper/check/control/messages.h"
#include "tests/unit/unit.h"

using namespace mn;
using namespace mn::check;
using nlohmann::json;

namespace {

std::string cbor(const json& j) {
    const std::vector<uint8_t> v = json::to_cbor(j);
    return std::string(v.begin(), v.end());
}

json as_json(const std::string& body) { return json::from_cbor(body); }

msg::Hello a_hello() {
    msg::Hello h;
    h.rank = 3;
    h.label = "node1";
    h.lanes = 2;
    h.lane_gpus = {"GPU0 (0000:19:00.0)", "GPU1 (0000:3b:00.0)"};
    h.data_port = 41234;
    h.sig = {"ib", "mlx5_0:1", 400, 4096};
    h.problems = {"a\nb", std::string("\xff\x00 bytes", 8)};
    return h;
}

// The problem decoding `m` with one field set to `value` (at `path`).
template <typename M>
std::string with(const M& m, const json::json_pointer& path, const json& value) {
    json j = as_json(msg::encode(m));
    j[path] = value;
    auto back = msg::decode<M>(cbor(j));
    if (back) fail_msg("%s = %s was taken", path.to_string().c_str(), value.dump().c_str());
    return back.problem().what;
}

}  // namespace

static void messages_travel_as_cbor_and_come_back_whole(void**) {
    const msg::Hello h = a_hello();
    const std::string body = msg::encode(h);
    const json j = as_json(body);
    assert_int_equal(j.at("Hello").at("data_port").get<int>(), 41234);
    assert_str(j.at("Hello").at("sig").at("fabric").get<std::string>(), "ib");
    assert_true(msg::decode<msg::Hello>(body).value() == h);
    msg::Result r;
    r.kind = msg::Result::Kind::Peer;
    r.passes = 4.5;
    r.pair_seconds = {{0.001, -1}, {}};
    assert_true(msg::decode<msg::Result>(msg::encode(r)).value() == r);
    r.passes.reset();
    assert_true(msg::decode<msg::Result>(msg::encode(r)).value() == r);
    // The strangers at a rank's data port while it waited for its ring.
    r.strangers = "40 connections from 10.250.0.11 (40 held a connection without a word)";
    assert_true(msg::decode<msg::Result>(msg::encode(r)).value() == r);
    r.strangers = std::string(msg::kStrangersText + 1, 'x');
    assert_false(msg::decode<msg::Result>(msg::encode(r)).ok());
    r.strangers.reset();
    msg::Ready ready;
    GpuReadings g;
    g.gpu = "GPU0 (0000:19:00.0)";
    g.processes = {{4242, "mn-preflight", 512}};
    g.remap_pending = true;
    ready.health = {g};
    assert_true(msg::decode<msg::Ready>(msg::encode(ready)).value() == ready);
    // A pair report with the strangers at the rank's data port.
    const msg::PairReport pair{"retest:1:0", 0.0176, "", 12, "12 connections from 10.250.0.11 (12 held ...)", 0.25, 3u, 41.5, std::nullopt};
    assert_true(msg::decode<msg::PairReport>(msg::encode(pair)).value() == pair);
    assert_int_equal(as_json(msg::encode(pair)).at("PairReport").at("strangers").get<int>(), 12);
    auto lead = msg::decode_from_lead(msg::encode(msg::FromLead(msg::Word{true, 0, "ok"})));
    assert_true(lead && std::get<msg::Word>(lead.value()) == (msg::Word{true, 0, "ok"}));
}

static void a_number_goes_only_into_a_field_that_holds_it(void**) {
    const msg::Hello h = a_hello();
    assert_str(with(h, "/Hello/data_port"_json_pointer, 70000),
               "Hello: 'data_port' is 70000, not a whole number from 0 to 65535");
    assert_str(with(h, "/Hello/rank"_json_pointer, -1), "Hello: 'rank' is -1, not a whole number from 0 to 4294967295");
    assert_str(with(h, "/Hello/rank"_json_pointer, 1.5), "Hello: 'rank' is 1.5, not a whole number from 0 to 4294967295");
    assert_str(with(h, "/Hello/lanes"_json_pointer, 0), "Hello: 'lanes' is 0, not a whole number from 1 to 65536");
    assert_str(with(h, "/Hello/sig/rate_gbps"_json_pointer, "fast"), "Hello: 'sig.rate_gbps' is a string, not a finite number");
    assert_str(with(h, "/Hello/label"_json_pointer, 7), "Hello: 'label' type must be string, but is number");
    assert_str(with(msg::Word{false, 1, ""}, "/Word/code"_json_pointer, 256),
               "Word: 'code' is 256, not a whole number from 0 to 255");
    assert_str(with(msg::Beat{}, "/Beat/stage"_json_pointer, "lunch"),
               "Beat: 'stage' is not one of 'rendezvous', 'readiness', 'collective', 'pairs', 'verdict'");
    msg::Plan p;
    p.colors = {{0, -1}};
    assert_str(with(p, "/Plan/iters"_json_pointer, -5), "Plan: 'iters' is -5, not a whole number from 0 to 2147483647");
    assert_str(with(p, "/Plan/colors/0/1"_json_pointer, 1ll << 40),
               "Plan: 'colors' is 1099511627776, not a whole number from -2147483648 to 2147483647");
    msg::Roster roster{h, {}};
    assert_str(with(roster, "/Roster/lead/data_port"_json_pointer, 65536),
               "Roster: 'lead.data_port' is 65536, not a whole number from 0 to 65535");
    msg::PairReport rep{"pair:0:0", 0.5, "", 0, "", std::nullopt, std::nullopt, std::nullopt, std::nullopt};
    json j = as_json(msg::encode(rep));
    j["PairReport"]["seconds"] = std::numeric_limits<double>::infinity();
    assert_str(msg::decode<msg::PairReport>(cbor(j)).problem().what, "PairReport: 'seconds' is Infinity, not a finite number");
    assert_str(with(rep, "/PairReport/strangers"_json_pointer, -1),
               "PairReport: 'strangers' is -1, not a whole number from 0 to 4294967295");
    assert_str(with(rep, "/PairReport/strangers_seen"_json_pointer, std::string(msg::kStrangersText + 1, 'x')),
               "PairReport: 'strangers_seen' is 513 bytes, more than 512");
    assert_str(with(rep, "/PairReport/cpu_wait"_json_pointer, 1.5), "PairReport: 'cpu_wait' is 1.500000, not a share from 0 to 1");
    assert_str(with(h, "/Hello/machine"_json_pointer, std::string(65, 'f')), "Hello: 'machine' is 65 bytes, more than 64");
}

// Fields added within protocol 6 (a node's machine, a pair's wait for a
// CPU) are optional: a build of protocol 6 from before them sends no such
// key, and its message is read as not saying it; any other missing field
// is still a problem.
static void a_field_added_within_the_protocol_may_be_missing(void**) {
    msg::Hello h = a_hello();
    h.machine = "0f2c1a3e-8d4b-4c9a-9f7e-1b2c3d4e5f60";
    json j = as_json(msg::encode(h));
    j["Hello"].erase("machine");
    auto back = msg::decode<msg::Hello>(cbor(j));
    assert_true(back.ok());
    assert_false(back.value().machine.has_value());
    assert_str(back.value().label, h.label);
    msg::PairReport rep{"pair:0:0", 0.5, "", 0, "", 0.125, std::nullopt, std::nullopt, std::nullopt};
    j = as_json(msg::encode(rep));
    assert_true(*msg::decode<msg::PairReport>(cbor(j)).value().cpu_wait == 0.125);
    j["PairReport"].erase("cpu_wait");
    auto r = msg::decode<msg::PairReport>(cbor(j));
    assert_true(r.ok());
    assert_false(r.value().cpu_wait.has_value());
    j["PairReport"].erase("seconds");
    assert_str(msg::decode<msg::PairReport>(cbor(j)).problem().what, "PairReport: 'seconds' is missing");
    // Retests on fresh ports: a build before them says no fresh_ports in
    // its hello (rank 0 then retests it on its data port) and reads a cue's
    // fresh_port as no key it knows.
    h.fresh_ports = true;
    j = as_json(msg::encode(h));
    assert_true(*msg::decode<msg::Hello>(cbor(j)).value().fresh_ports);
    j["Hello"].erase("fresh_ports");
    assert_false(msg::decode<msg::Hello>(cbor(j)).value().fresh_ports.has_value());
    msg::PairCue cue;
    cue.tag = "retest:0:1";
    cue.fresh_port = true;
    assert_true(msg::decode<msg::PairCue>(msg::encode(cue)).value() == cue);
    msg::PairReport said;
    said.tag = "retest:0:1";
    said.listening = 40123;
    assert_true(msg::decode<msg::PairReport>(msg::encode(said)).value() == said);
    assert_str(with(said, "/PairReport/listening"_json_pointer, 0), "PairReport: 'listening' is 0, not a port");
    assert_str(with(said, "/PairReport/listening"_json_pointer, 70000),
               "PairReport: 'listening' is 70000, not a whole number from 0 to 65535");
    // The fingerprint as fields, where rank 0 asks for them; a build before
    // them reads the text alone and asks for nothing.
    msg::Prepare prep;
    prep.fingerprint_fields = true;
    assert_true(*msg::decode<msg::Prepare>(msg::encode(prep)).value().fingerprint_fields);
    j = as_json(msg::encode(prep));
    j["Prepare"].erase("fingerprint_fields");
    assert_false(msg::decode<msg::Prepare>(cbor(j)).value().fingerprint_fields.has_value());
    msg::Ready ready;
    Fingerprint f;
    f.host = "node1";
    f.nccl = "2.28.9";
    f.net.known = true;
    f.pcie.push_back({"0000:2a:00.0", 8, 16, 2.5, 32});
    f.hca_firmware = {"mlx5_0 28.39.1002"};
    f.nccl_env_known = true;
    f.nccl_env = {"NCCL_IB_TIMEOUT=22"};
    f.image = "3f2a9c1b7e40";
    ready.node_fingerprint = f;
    const auto got = msg::decode<msg::Ready>(msg::encode(ready));
    assert_true(got.ok());
    assert_true(got.value() == ready);
    assert_int_equal(got.value().node_fingerprint->pcie[0].width, 8);
    assert_str(got.value().node_fingerprint->nccl_env[0], "NCCL_IB_TIMEOUT=22");
    assert_true(got.value().fingerprint.empty());  // no text beside it
    j = as_json(msg::encode(ready));
    j["Ready"]["node_fingerprint"]["pcie"][0]["width"] = "x8";
    assert_false(msg::decode<msg::Ready>(cbor(j)).ok());
    j = as_json(msg::encode(ready));
    j["Ready"].erase("node_fingerprint");
    assert_false(msg::decode<msg::Ready>(cbor(j)).value().node_fingerprint.has_value());
}

static void a_message_that_is_not_one_is_a_problem_naming_it(void**) {
    json j = as_json(msg::encode(a_hello()));
    j["Hello"].erase("label");
    assert_str(msg::decode<msg::Hello>(cbor(j)).problem().what, "Hello: 'label' is missing");
    assert_str(msg::decode<msg::Hello>(msg::encode(msg::Beat{})).problem().what, "Hello: a message 'Beat' came");
    assert_str(msg::decode_from_lead(msg::encode(msg::Superseded{})).problem().what,
               "a message 'Superseded', which rank 0 never sends");
    assert_str(msg::decode<msg::Hello>(cbor({{"Hello", {1, 2}}})).problem().what,
               "Hello: is an array, not an object of fields");
    // Garbage, truncated CBOR, bytes after the message, a length claimed
    // and never sent, nesting deeper than any message: problems, not crashes.
    const std::string good = msg::encode(a_hello());
    for (const std::string& bad : {std::string("GET / HTTP/1.0\r\n\r\n"), std::string(), good.substr(0, good.size() / 2),
                                   good + "x", std::string("\x9b\xff\xff\xff\xff\xff\xff\xff\xff", 9),
                                   std::string("\xbb\x7f\xff\xff\xff\xff\xff\xff\xff", 9),
                                   std::string("\xa1\x65Hello") + std::string(100000, '\x81')}) {
        auto m = msg::decode<msg::Hello>(bad);
        assert_false(m.ok());
        assert_contains(m.problem().what, "Hello: what came is not a message");
        assert_false(msg::decode_from_rank(bad).ok());
    }
}

static void the_challenge_is_text_that_protocol_2_reads(void**) {
    const msg::Challenge c{msg::kProtocol, std::string(32, 'a'), ""};
    assert_str(msg::encode(c), "op=challenge\nv=6\nnonce=" + std::string(32, 'a') + "\n");
    assert_true(msg::decode<msg::Challenge>(msg::encode(c)).value() == c);
    // Protocol 2's, keys in order: its version is read.
    auto v2 = msg::decode<msg::Challenge>("nonce=" + std::string(32, 'b') + "\nop=challenge\nv=2\n");
    assert_int_equal(v2->version, 2);
    assert_str(v2->nonce, std::string(32, 'b'));
    // Protocol 1's had no version; a CBOR body is none.
    assert_false(msg::decode<msg::Challenge>("nonce=n\nop=challenge\n").ok());
    assert_false(msg::decode<msg::Challenge>("op=challenge\nv=x3\nnonce=n\n").ok());
    assert_false(msg::decode<msg::Challenge>(msg::encode(msg::Welcome{})).ok());
}

// Through a node's leader (helper/check/node.cc): rank 0's words go down
// nested in a Relay, its ranks' hellos and reports up in a Relayed, each
// nested body a CBOR byte string, kept byte for byte, and decoded apart
// where it lands; a carried part's word is one of its set.
static void a_leader_carries_nested_messages_whole(void**) {
    const std::string plan = msg::encode(msg::Plan{});
    const std::string odd("\xff\x00 not CBOR", 12);
    const msg::Relay down{{{{8, 9, 10}, {plan}}, {{11}, {odd}}}};
    const std::string body = msg::encode(msg::FromLead(down));
    assert_true(as_json(body).at("Relay").at("parts").at(0).at("body").is_binary());
    auto back = msg::decode_from_lead(body);
    assert_true(back && std::get<msg::Relay>(back.value()) == down);
    assert_str(std::get<msg::Relay>(back.value()).parts[1].body.bytes, odd);
    assert_true(msg::decode_from_lead(std::get<msg::Relay>(back.value()).parts[0].body.bytes).ok());
    const msg::Relayed up{{{9, msg::Carried::What::Hello, {msg::encode(a_hello())}, "", false},
                           {10, msg::Carried::What::Gone, {}, "nothing heard from it for 3 s", true}},
                          "12 connections from local uid 65534 (12 sent nothing in time)"};
    auto up_back = msg::decode_from_rank(msg::encode(msg::FromRank(up)));
    assert_true(up_back && std::get<msg::Relayed>(up_back.value()) == up);
    assert_true(msg::decode<msg::Hello>(std::get<msg::Relayed>(up_back.value()).parts[0].body.bytes).value() ==
                a_hello());
    // Each way only: a rank never sends a Relay, rank 0 never a Relayed.
    assert_str(msg::decode_from_rank(body).problem().what, "a message 'Relay', which a rank never sends rank 0");
    assert_str(msg::decode_from_lead(msg::encode(up)).problem().what, "a message 'Relayed', which rank 0 never sends");
    assert_str(with(up, "/Relayed/parts/0/what"_json_pointer, "lunch"),
               "Relayed: 'parts.what' is not one of 'hello', 'said', 'gone'");
    assert_str(with(up, "/Relayed/parts/0/body"_json_pointer, "text"), "Relayed: 'parts.body' is a string, not a byte string");
}

// A Superseded ends rank 0 only as a standby's word, and never as a pass.
static void a_superseded_is_taken_only_from_a_standby_and_never_as_a_pass(void**) {
    const std::vector<uint32_t> standbys{1, 2, 3};
    assert_string_equal(msg::superseded_refusal(msg::Superseded{2, "node1", 1}, standbys).c_str(), "");
    assert_contains(msg::superseded_refusal(msg::Superseded{7, "node3", 1}, standbys), "rank 7");
    assert_contains(msg::superseded_refusal(msg::Superseded{7, "node3", 1}, standbys), "no standby");
    assert_contains(msg::superseded_refusal(msg::Superseded{1, "node0", 0}, standbys), "passed, which none does");
    assert_contains(msg::superseded_refusal(msg::Superseded{1, "node0", 3}, {}), "no standby");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_leader_carries_nested_messages_whole),
        cmocka_unit_test(messages_travel_as_cbor_and_come_back_whole),
        cmocka_unit_test(a_number_goes_only_into_a_field_that_holds_it),
        cmocka_unit_test(a_message_that_is_not_one_is_a_problem_naming_it),
        cmocka_unit_test(a_field_added_within_the_protocol_may_be_missing),
        cmocka_unit_test(the_challenge_is_text_that_protocol_2_reads),
        cmocka_unit_test(a_superseded_is_taken_only_from_a_standby_and_never_as_a_pass),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
