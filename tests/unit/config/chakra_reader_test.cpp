// Reading Chakra execution traces: the ASTRA-sim samples, files encoded here by hand from the
// Chakra specification's field numbers, and malformed or truncated files (errors with file and
// byte offset, never a crash).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/config/chakra_reader.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;
using config::ChakraKind;
using config::test::diagnostics_of;
using config::test::dump;
using config::test::TempDir;

namespace {

// ---- Protobuf wire encoding, written from the Chakra et_def.proto field numbers -------------

std::string varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string field_varint(std::uint32_t field, std::uint64_t v) { return varint(field << 3 | 0) + varint(v); }
std::string field_bytes(std::uint32_t field, const std::string& b) { return varint(field << 3 | 2) + varint(b.size()) + b; }

// AttributeProto: name = 1, int64_val = 9, string_val = 29; Node.attr = 10.
std::string attr_int(const std::string& name, std::int64_t v) {
  return field_bytes(10, field_bytes(1, name) + field_varint(9, static_cast<std::uint64_t>(v)));
}
std::string attr_str(const std::string& name, const std::string& v) {
  return field_bytes(10, field_bytes(1, name) + field_bytes(29, v));
}
std::string attr_strings(const std::string& name, const std::vector<std::string>& values) {
  std::string list;
  for (const auto& v : values) list += field_bytes(1, v);  // StringList.values = 1
  return field_bytes(10, field_bytes(1, name) + field_bytes(30, list));  // string_list = 30
}

// NodeType values of et_def.proto.
constexpr std::uint64_t kMetadataNode = 1;
constexpr std::uint64_t kCompNode = 4;
constexpr std::uint64_t kSendNode = 5;
constexpr std::uint64_t kRecvNode = 6;
constexpr std::uint64_t kCollNode = 7;

// Node: id = 1, name = 2, type = 3, ctrl_deps = 4, data_deps = 5, duration_micros = 7.
std::string node(std::uint64_t id, std::uint64_t type, const std::vector<std::uint64_t>& data_deps = {},
                 const std::string& attrs = "", std::uint64_t duration_us = 0,
                 const std::vector<std::uint64_t>& ctrl_deps = {}) {
  std::string n = field_varint(1, id) + field_bytes(2, "n" + std::to_string(id)) + field_varint(3, type);
  for (auto d : ctrl_deps) n += field_varint(4, d);
  std::string packed;
  for (auto d : data_deps) packed += varint(d);
  if (!packed.empty()) n += field_bytes(5, packed);  // packed encoding, as proto3 writes it
  if (duration_us) n += field_varint(7, duration_us);
  return n + attrs;
}

std::string framed(const std::string& message) { return varint(message.size()) + message; }
std::string metadata() { return framed(field_bytes(1, "0.0.4") + attr_str("schema", "hand")); }

std::string file_of(const std::vector<std::string>& nodes) {
  std::string f = metadata();
  for (const auto& n : nodes) f += framed(n);
  return f;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Byte offsets of every length prefix of a framed file.
std::vector<std::size_t> message_offsets(const std::string& data) {
  std::vector<std::size_t> offsets;
  std::size_t pos = 0;
  while (pos < data.size()) {
    offsets.push_back(pos);
    std::uint64_t len = 0;
    unsigned shift = 0;
    while (true) {
      const auto b = static_cast<unsigned char>(data[pos++]);
      len |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    pos += len;
  }
  return offsets;
}

const std::filesystem::path kSamples = std::filesystem::path(TRAINSIM_SOURCE_DIR) / "traces/chakra/llama-dp2-tp2-pp2";

// A copy of the sample folder that a test may damage.
std::filesystem::path copy_samples(const TempDir& dir) {
  for (const auto& e : std::filesystem::directory_iterator(kSamples)) {
    std::filesystem::copy_file(e.path(), dir.path() / e.path().filename());
    std::filesystem::permissions(dir.path() / e.path().filename(), std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  }
  return dir.path() / "workload";
}

const config::ChakraNode* by_name(const config::ChakraRank& r, const std::string& name) {
  for (const auto& n : r.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

bool mentions(const std::vector<Diagnostic>& ds, const std::string& text) {
  for (const auto& d : ds) {
    if (d.to_string().find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("chakra: the ASTRA-sim samples read with their groups, sizes and attributes") {
  const config::ChakraTrace t = config::read_chakra(kSamples / "workload");
  REQUIRE(t.ranks.size() == 8);
  CHECK(t.schema == "symbolic_tensor_network");
  CHECK_FALSE(t.plan.has_value());
  REQUIRE(t.groups.size() == 16);  // workload.json: pairs "1".."8", singletons "9".."16"

  const auto& r0 = t.ranks[0];
  std::map<ChakraKind, int> kinds;
  for (const auto& n : r0.nodes) ++kinds[n.kind];
  // Counted with protoc --decode on workload.0.et: 348 nodes.
  CHECK(r0.nodes.size() == 348);
  CHECK(kinds[ChakraKind::kCompute] == 250);
  CHECK(kinds[ChakraKind::kCollective] == 90);
  CHECK(kinds[ChakraKind::kSend] == 4);
  CHECK(kinds[ChakraKind::kRecv] == 4);

  // A compute node: FLOPs and bytes, no duration (ASTRA-sim's roofline costs it).
  const auto* norm = by_name(r0, "mb0.transformer.0.input_norm.y@0_COMP");
  REQUIRE(norm);
  CHECK(norm->id == 2);
  CHECK(norm->flops.value() == 41943040.0);
  CHECK(norm->tensor_bytes.count() == 8388608);
  CHECK(norm->op_type == "E");
  CHECK_FALSE(norm->duration.has_value());

  // All-gather: comm_size is each rank's shard (8 MiB); the network model counts the gathered
  // output, shard × group size (2).
  const auto* ag = by_name(r0, "mb0.transformer.0.mha.qkv@0_X1COMM");
  REQUIRE(ag);
  CHECK(ag->kind == ChakraKind::kCollective);
  CHECK(ag->comm == parallel::CommOp::kAllGather);
  CHECK(ag->bytes.count() == 2 * 8388608);
  REQUIRE(ag->group >= 0);
  CHECK(t.groups[static_cast<std::size_t>(ag->group)].name == "5");
  CHECK(t.groups[static_cast<std::size_t>(ag->group)].ranks == std::vector<std::int32_t>{0, 2});
  // Reduce-scatter and all-reduce keep the full buffer.
  const auto* rs = by_name(r0, "mb0.transformer.0.mha.o@0_X1COMM");
  REQUIRE(rs);
  CHECK(rs->comm == parallel::CommOp::kReduceScatter);
  CHECK(rs->bytes.count() == 16777216);

  // Pipeline send: the sender is the file's rank, the peer comm_dst.
  const auto* send = by_name(r0, "mb0.transformer.1.ffn_res.y@0_Y_SEND");
  REQUIRE(send);
  CHECK(send->kind == ChakraKind::kSend);
  CHECK(send->src == 0);
  CHECK(send->dst == 4);
  CHECK(send->tag == 7159);
  CHECK(send->bytes.count() == 8388608);

  // The program order is topological: every dependency comes first.
  for (const auto& rank : t.ranks) {
    REQUIRE(rank.order.size() == rank.nodes.size());
    std::vector<std::size_t> pos(rank.nodes.size());
    for (std::size_t i = 0; i < rank.order.size(); ++i) pos[rank.order[i]] = i;
    for (std::size_t i = 0; i < rank.nodes.size(); ++i) {
      for (auto d : rank.nodes[i].deps) CHECK(pos[d] < pos[i]);
    }
  }
}

TEST_CASE("chakra: hand-encoded nodes decode field by field") {
  TempDir dir;
  const std::string ops_attr = attr_strings("trainsim_ops", {"gemm bf16 0 128 256 64 1", "memory bf16 1 4096"});
  const std::string f0 = file_of({
      node(10, kCompNode, {}, attr_int("num_ops", 1000) + attr_int("tensor_size", 64), 7),
      node(11, kCompNode, {10}, ops_attr + attr_int("trainsim_duration_ps", 1234567) + attr_str("trainsim_pass", "bwd") +
                                    attr_str("trainsim_stream", "compute") + attr_int("trainsim_layer", 3)),
      node(12, kCollNode, {11}, attr_int("comm_type", 2) + attr_int("comm_size", 100)),  // all-gather, all ranks
      node(13, kMetadataNode, {12}),
      node(14, kSendNode, {13}, attr_int("comm_dst", 1) + attr_int("comm_tag", 9) + attr_int("comm_size", 4096)),
  });
  const std::string f1 = file_of({
      node(1, kRecvNode, {}, attr_int("comm_src", 0) + attr_int("comm_tag", 9) + attr_int("comm_size", 4096)),
      node(2, kCollNode, {}, attr_int("comm_type", 2) + attr_int("comm_size", 100), 0, {1}),
  });
  dir.write("t.0.et", f0);
  dir.write("t.1.et", f1);
  const auto t = config::read_chakra(dir.path() / "t");
  REQUIRE(t.ranks.size() == 2);
  const auto& n = t.ranks[0].nodes;
  REQUIRE(n.size() == 5);
  CHECK(n[0].duration == Duration::from_us(7));
  CHECK(n[0].flops.value() == 1000.0);
  CHECK(n[0].tensor_bytes.count() == 64);
  // trainsim_duration_ps overrides the rounded microseconds.
  CHECK(n[1].duration == Duration::from_ps(1234567));
  CHECK(n[1].pass == parallel::Pass::kBackward);
  CHECK(n[1].stream == parallel::Stream::kCompute);
  CHECK(n[1].layer == 3);
  REQUIRE(n[1].ops.size() == 2);
  CHECK(n[1].ops[0].kind == ir::OpKind::kGemm);
  CHECK(n[1].ops[0].gemm.m == 128);
  CHECK(n[1].ops[0].gemm.n == 256);
  CHECK(n[1].ops[0].gemm.k == 64);
  CHECK(n[1].ops[0].flops.value() == 2.0 * 128 * 256 * 64);  // 2·m·n·k
  CHECK(n[1].ops[1].kind == ir::OpKind::kMemoryBound);
  CHECK(n[1].ops[1].backward);
  CHECK(n[1].ops[1].moved.count() == 4096);
  // No pg_name: the group of every rank; the all-gather shard times 2 ranks.
  CHECK(n[2].deps == std::vector<std::uint32_t>{1});
  REQUIRE(n[2].group >= 0);
  CHECK(t.groups[static_cast<std::size_t>(n[2].group)].ranks == std::vector<std::int32_t>{0, 1});
  CHECK(n[2].bytes.count() == 200);
  CHECK(n[3].kind == ChakraKind::kNone);
  CHECK(n[4].kind == ChakraKind::kSend);
  CHECK(n[4].src == 0);
  CHECK(n[4].dst == 1);
  const auto& m = t.ranks[1].nodes;
  CHECK(m[0].kind == ChakraKind::kRecv);
  CHECK(m[0].src == 0);
  CHECK(m[0].dst == 1);
  CHECK(m[1].deps == std::vector<std::uint32_t>{0});  // a control dependency
}

TEST_CASE("chakra: program order takes the ready node with the smallest id first") {
  TempDir dir;
  // Nodes 5 and 3 are ready at once; 4 needs 5. Chakra's feeder issues 3, then 5, then 4.
  dir.write("o.0.et", file_of({node(5, kCompNode), node(3, kCompNode), node(4, kCompNode, {5})}));
  const auto r = config::read_chakra_file(dir.path() / "o.0.et", 0);
  std::vector<std::uint64_t> ids;
  for (auto i : r.order) ids.push_back(r.nodes[i].id);
  CHECK(ids == std::vector<std::uint64_t>{3, 5, 4});
}

TEST_CASE("chakra: bad nodes are reported with file, byte offset and node id") {
  TempDir dir;
  auto errors = [&](const std::vector<std::string>& nodes) {
    const std::string path = dir.write("bad.0.et", file_of(nodes));
    return diagnostics_of([&] { config::read_chakra_file(path, 0); });
  };
  SECTION("unknown dependency") {
    const auto ds = errors({node(1, kCompNode), node(7, kCompNode, {99})});
    INFO(dump(ds));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].file.find("bad.0.et") != std::string::npos);
    CHECK(ds[0].field.find("node 7") != std::string::npos);
    CHECK(ds[0].field.find("byte ") == 0);
    CHECK(ds[0].message.find("node 99") != std::string::npos);
  }
  SECTION("the byte offset is that of the node's length prefix") {
    const std::string data = file_of({node(1, kCompNode), node(2, kCollNode)});
    const auto offsets = message_offsets(data);
    REQUIRE(offsets.size() == 3);
    const std::string path = dir.write("off.0.et", data);
    const auto ds = diagnostics_of([&] { config::read_chakra_file(path, 0); });
    INFO(dump(ds));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].field == "byte " + std::to_string(offsets[2]) + ", node 2 (n2)");
    CHECK(ds[0].message.find("comm_type") != std::string::npos);
  }
  SECTION("cycle") {
    const auto ds = errors({node(1, kCompNode, {2}), node(2, kCompNode, {1}), node(3, kCompNode)});
    INFO(dump(ds));
    CHECK(mentions(ds, "dependency cycle"));
  }
  SECTION("self dependency and duplicate id") {
    CHECK(mentions(errors({node(1, kCompNode, {1})}), "depends on itself"));
    CHECK(mentions(errors({node(1, kCompNode), node(1, kCompNode)}), "duplicate node id 1"));
  }
  SECTION("collectives trainsim does not simulate") {
    CHECK(mentions(errors({node(1, kCollNode, {}, attr_int("comm_type", 5))}), "BROADCAST is not simulated"));
    CHECK(mentions(errors({node(1, kCollNode, {}, attr_int("comm_type", 42))}), "unknown comm_type 42"));
  }
  SECTION("send and receive without peer or from another rank") {
    CHECK(mentions(errors({node(1, kSendNode)}), "send without comm_dst"));
    CHECK(mentions(errors({node(1, kRecvNode)}), "receive without comm_src"));
    CHECK(mentions(errors({node(1, kSendNode, {}, attr_int("comm_dst", 1) + attr_int("comm_src", 3))}),
                   "is not this file's rank"));
  }
  SECTION("invalid node type and bad op text") {
    CHECK(mentions(errors({node(1, 0)}), "invalid node type"));
    CHECK(mentions(errors({node(1, kCompNode, {}, attr_strings("trainsim_ops", {"gemm bf16 0 1 2"}))}),
                   "cannot read op"));
  }
  SECTION("empty file and missing metadata") {
    const std::string path = dir.write("empty.0.et", "");
    CHECK(mentions(diagnostics_of([&] { config::read_chakra_file(path, 0); }), "empty file"));
    const std::string missing = (dir.path() / "none.0.et").string();
    CHECK(mentions(diagnostics_of([&] { config::read_chakra_file(missing, 0); }), "cannot open"));
  }
}

TEST_CASE("chakra: truncated sample files name the file and the byte offset") {
  TempDir dir;
  const auto prefix = copy_samples(dir);
  const auto file = dir.path() / "workload.5.et";
  const std::string data = read_file(file);
  const auto offsets = message_offsets(data);
  REQUIRE(offsets.size() > 100);
  SECTION("inside a message") {
    const std::size_t cut = offsets[100] + 5;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << data.substr(0, cut);
    const auto ds = diagnostics_of([&] { config::read_chakra(prefix); });
    INFO(dump(ds));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].file == file.string());
    CHECK(ds[0].field == "byte " + std::to_string(offsets[100]));
    CHECK(ds[0].message.find("truncated") != std::string::npos);
  }
  SECTION("inside a length prefix") {
    // A message of 128 bytes or more has a two-byte prefix; cut after its first byte.
    std::size_t k = 1;
    while (k + 1 < offsets.size() && offsets[k + 1] - offsets[k] < 130) ++k;
    REQUIRE(k + 1 < offsets.size());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << data.substr(0, offsets[k] + 1);
    const auto ds = diagnostics_of([&] { config::read_chakra(prefix); });
    INFO(dump(ds));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].field == "byte " + std::to_string(offsets[k]));
    CHECK(ds[0].message.find("length prefix") != std::string::npos);
  }
}

TEST_CASE("chakra: damaged bytes give InputError or a valid read, never a crash") {
  const std::string data = read_file(kSamples / "workload.0.et");
  const auto offsets = message_offsets(data);
  TempDir dir;
  const auto path = dir.path() / "d.0.et";
  int errors = 0;
  int reads = 0;
  // Cuts that are not message boundaries are always errors.
  for (std::size_t cut = 1; cut < data.size(); cut += 997) {
    if (std::find(offsets.begin(), offsets.end(), cut) != offsets.end()) continue;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data.substr(0, cut);
    CHECK_THROWS_AS(config::read_chakra_file(path, 0), InputError);
  }
  // Overwritten bytes: any outcome but a crash or another exception.
  for (std::size_t at = 0; at < data.size(); at += 331) {
    for (const int value : {0x00, 0x7f, 0x80, 0xff}) {
      std::string bad = data;
      bad[at] = static_cast<char>(value);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
      try {
        config::read_chakra_file(path, 0);
        ++reads;
      } catch (const InputError& e) {
        ++errors;
        CHECK_FALSE(e.diagnostics().empty());
        CHECK(e.diagnostics()[0].file == path.string());
      }
    }
  }
  CHECK(errors > 0);
  CHECK(errors + reads == static_cast<int>(4 * ((data.size() + 330) / 331)));
}

TEST_CASE("chakra: process groups and rank files are checked") {
  TempDir dir;
  const std::string coll = node(1, kCollNode, {}, attr_int("comm_type", 0) + attr_int("comm_size", 64) + attr_str("pg_name", "7"));
  SECTION("no group file") {
    dir.write("g.0.et", file_of({coll}));
    dir.write("g.1.et", file_of({coll}));
    const auto ds = diagnostics_of([&] { config::read_chakra(dir.path() / "g"); });
    INFO(dump(ds));
    CHECK(mentions(ds, "process group '7'"));
    CHECK(mentions(ds, "no group file"));
  }
  SECTION("group not defined, rank outside its group, bad ranks in the file") {
    dir.write("g.0.et", file_of({coll}));
    dir.write("g.1.et", file_of({coll}));
    dir.write("g.json", R"({"7": [0, 5], "8": [1]})");
    const auto ds = diagnostics_of([&] { config::read_chakra(dir.path() / "g"); });
    INFO(dump(ds));
    CHECK(mentions(ds, "ranks must be integers from 0 to 1"));
    dir.write("g.json", R"({"7": [0], "8": [1]})");
    const auto ds2 = diagnostics_of([&] { config::read_chakra(dir.path() / "g"); });
    INFO(dump(ds2));
    CHECK(mentions(ds2, "rank 1 is not a member of its process group '7'"));
    dir.write("other.json", R"({"9": [0, 1]})");
    const auto ds3 = diagnostics_of([&] { config::read_chakra(dir.path() / "g", dir.path() / "other.json"); });
    CHECK(mentions(ds3, "is not defined in"));
    dir.write("g.json", "[1, 2");
    CHECK(mentions(diagnostics_of([&] { config::read_chakra(dir.path() / "g"); }), "not a JSON object"));
  }
  SECTION("an explicit group file") {
    dir.write("g.0.et", file_of({coll}));
    dir.write("g.1.et", file_of({coll}));
    const auto groups = dir.write("groups.json", R"({"7": [0, 1]})");
    const auto t = config::read_chakra(dir.path() / "g", std::filesystem::path(groups));
    REQUIRE(t.groups.size() == 1);
    CHECK(t.groups[0].ranks == std::vector<std::int32_t>{0, 1});
  }
  SECTION("missing rank files") {
    dir.write("h.0.et", file_of({}));
    dir.write("h.2.et", file_of({}));
    const auto ds = diagnostics_of([&] { config::read_chakra(dir.path() / "h"); });
    INFO(dump(ds));
    CHECK(mentions(ds, "h.1.et"));
    CHECK(mentions(ds, "without gaps"));
    CHECK(mentions(diagnostics_of([&] { config::read_chakra(dir.path() / "nothing"); }), "no Chakra trace files"));
  }
  SECTION("a send to a rank outside the trace") {
    dir.write("p.0.et", file_of({node(1, kSendNode, {}, attr_int("comm_dst", 4))}));
    CHECK(mentions(diagnostics_of([&] { config::read_chakra(dir.path() / "p"); }), "is not another rank"));
  }
}
