// Chakra export: the files are decoded here with a wire-format reader that knows only the field
// numbers of Chakra's et_def.proto, so that what ASTRA-sim would read is what is checked.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/base/diagnostic.h"
#include "sim/trace/chakra_writer.h"

using namespace ts;
using parallel::CommOp;
using parallel::Stream;
using parallel::TaskKind;

namespace {

// ---- A minimal protobuf wire reader ----------------------------------------------------------

struct Field {
  std::uint32_t number;
  std::uint32_t wire;
  std::uint64_t value;  // varint / fixed
  std::string bytes;    // length-delimited
};

std::uint64_t read_varint(const std::string& s, std::size_t& pos) {
  std::uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    REQUIRE(pos < s.size());
    const auto b = static_cast<unsigned char>(s[pos++]);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

std::vector<Field> fields(const std::string& msg) {
  std::vector<Field> out;
  std::size_t pos = 0;
  while (pos < msg.size()) {
    const std::uint64_t key = read_varint(msg, pos);
    Field f{static_cast<std::uint32_t>(key >> 3), static_cast<std::uint32_t>(key & 7), 0, {}};
    switch (f.wire) {
      case 0: f.value = read_varint(msg, pos); break;
      case 1: f.value = 0; pos += 8; break;
      case 2: {
        const auto len = read_varint(msg, pos);
        f.bytes = msg.substr(pos, len);
        pos += len;
        break;
      }
      case 5: pos += 4; break;
      default: FAIL("unexpected wire type " << f.wire);
    }
    out.push_back(f);
  }
  return out;
}

// Values of a repeated uint64 field, packed or not.
std::vector<std::uint64_t> repeated(const std::vector<Field>& fs, std::uint32_t number) {
  std::vector<std::uint64_t> out;
  for (const auto& f : fs) {
    if (f.number != number) continue;
    if (f.wire == 0) {
      out.push_back(f.value);
    } else {
      std::size_t pos = 0;
      while (pos < f.bytes.size()) out.push_back(read_varint(f.bytes, pos));
    }
  }
  return out;
}

// A Chakra Node as et_def.proto numbers it: id 1, name 2, type 3, ctrl_deps 4, data_deps 5,
// start_time_micros 6, duration_micros 7, attr 10 (AttributeProto: name 1, int32_val 7,
// int64_val 9, uint64_val 13, bool_val 27, string_val 29, string_list 30).
struct Attr {
  std::uint32_t value_field = 0;
  std::int64_t number = 0;
  std::string text;
  std::vector<std::string> list;
};
struct Node {
  std::uint64_t id = 0;
  std::string name;
  std::uint64_t type = 0;
  std::vector<std::uint64_t> ctrl, data;
  std::uint64_t start_us = 0, duration_us = 0;
  std::map<std::string, Attr> attrs;
};

Attr attr_of(const std::string& msg, std::string& name) {
  Attr a;
  for (const auto& f : fields(msg)) {
    if (f.number == 1) {
      name = f.bytes;
    } else if (f.number == 30) {
      a.value_field = 30;
      for (const auto& v : fields(f.bytes)) a.list.push_back(v.bytes);
    } else if (f.wire == 2) {
      a.value_field = f.number;
      a.text = f.bytes;
    } else {
      a.value_field = f.number;
      a.number = static_cast<std::int64_t>(f.value);
    }
  }
  return a;
}

Node node_of(const std::string& msg) {
  Node n;
  const auto fs = fields(msg);
  for (const auto& f : fs) {
    switch (f.number) {
      case 1: n.id = f.value; break;
      case 2: n.name = f.bytes; break;
      case 3: n.type = f.value; break;
      case 6: n.start_us = f.value; break;
      case 7: n.duration_us = f.value; break;
      case 10: {
        std::string name;
        const Attr a = attr_of(f.bytes, name);
        n.attrs[name] = a;
        break;
      }
      default: break;
    }
  }
  n.ctrl = repeated(fs, 4);
  n.data = repeated(fs, 5);
  return n;
}

struct File {
  std::string version;
  std::map<std::string, Attr> metadata;
  std::vector<Node> nodes;
};

File read_et(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  File f;
  std::size_t pos = 0;
  bool first = true;
  while (pos < data.size()) {
    const auto len = read_varint(data, pos);
    REQUIRE(pos + len <= data.size());
    const std::string msg = data.substr(pos, len);
    pos += len;
    if (first) {  // GlobalMetadata: version 1, attr 2
      first = false;
      for (const auto& fd : fields(msg)) {
        if (fd.number == 1) f.version = fd.bytes;
        if (fd.number == 2) {
          std::string name;
          const Attr a = attr_of(fd.bytes, name);
          f.metadata[name] = a;
        }
      }
      continue;
    }
    f.nodes.push_back(node_of(msg));
  }
  return f;
}

// NodeType and CollectiveCommType values of et_def.proto.
constexpr std::uint64_t kCompNode = 4, kSendNode = 5, kRecvNode = 6, kCollNode = 7;
constexpr std::int64_t kAllGather = 2;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("trainsim-chakra-test-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
             "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Two ranks: a GEMM and an all-gather on rank 0, then a pipeline send to rank 1; rank 1 computes
// (recorded duration), all-gathers, receives, computes; both run a ring shift.
struct Fixture {
  parallel::TaskGraph g;
  runtime::Execution ex;

  void add(parallel::Task t, std::vector<std::uint32_t> deps, std::int64_t start_ps, std::int64_t end_ps) {
    t.dep_begin = static_cast<std::uint32_t>(g.deps.size());
    t.dep_count = static_cast<std::uint32_t>(deps.size());
    g.deps.insert(g.deps.end(), deps.begin(), deps.end());
    g.tasks.push_back(t);
    ex.timings.push_back({SimTime::from_ps(start_ps), SimTime::from_ps(end_ps)});
  }

  Fixture() {
    for (std::int32_t r = 0; r < 2; ++r) {
      parallel::SimDevice d;
      d.rank = r;
      d.stage = r;
      g.devices.push_back(d);
    }
    ir::Op gemm;
    gemm.kind = ir::OpKind::kGemm;
    gemm.gemm = {128, 256, 64, 1};
    gemm.flops = Flops(2.0 * 128 * 256 * 64);
    g.op_lists.push_back({gemm});
    // 0: collectives, 1: pipeline 0 → 1, 2: ring shift.
    g.communicators.push_back({parallel::axis_bit(parallel::Axis::kTp), {0, 1}, 0, {}});
    g.communicators.push_back({parallel::axis_bit(parallel::Axis::kPp), {0, 1}, 0, {}});
    g.communicators.push_back({0, {0, 1}, 0, {}});

    parallel::Task c;  // compute
    c.kind = TaskKind::kCompute;
    c.stream = Stream::kCompute;
    parallel::Task ag;  // all-gather of 1000 bytes (gathered output)
    ag.kind = TaskKind::kCollective;
    ag.stream = Stream::kTpComm;
    ag.comm = CommOp::kAllGather;
    ag.bytes = Bytes(1000);
    ag.communicator = 0;
    parallel::Task p2p;
    p2p.kind = TaskKind::kP2p;
    p2p.comm = CommOp::kSendRecv;
    p2p.bytes = Bytes(4096);
    p2p.communicator = 1;
    parallel::Task shift;
    shift.kind = TaskKind::kCollective;
    shift.stream = Stream::kCpComm;
    shift.comm = CommOp::kSendRecv;
    shift.bytes = Bytes(2048);
    shift.communicator = 2;

    c.device = 0;
    c.ops = 0;
    c.layer = 5;
    c.alloc_at_start = Bytes(777);
    add(c, {}, 0, 2'600'000);  // t0: 2.6 µs
    ag.device = 0;
    add(ag, {0}, 2'600'000, 9'000'000);  // t1
    p2p.device = 0;
    p2p.stream = Stream::kPpSendNext;
    add(p2p, {1}, 9'000'000, 10'000'000);  // t2
    c.device = 1;
    c.ops = -1;
    c.duration = Duration::from_ps(1'500'001);
    c.alloc_at_start = Bytes();
    add(c, {}, 0, 1'500'001);  // t3
    ag.device = 1;
    add(ag, {3}, 2'600'000, 9'000'000);  // t4
    p2p.device = 1;
    p2p.stream = Stream::kPpRecvPrev;
    add(p2p, {}, 9'000'000, 10'000'000);  // t5
    c.pass = parallel::Pass::kBackward;
    add(c, {5}, 10'000'000, 11'500'001);  // t6: after the receive; its stream predecessor is t3
    shift.device = 0;
    add(shift, {2}, 11'000'000, 12'000'000);  // t7
    shift.device = 1;
    add(shift, {}, 11'000'000, 12'000'000);   // t8
    c.device = 0;
    c.pass = parallel::Pass::kForward;
    add(c, {7}, 12'000'000, 13'500'001);  // t9: needs the ring shift
    ex.end = SimTime::from_ps(13'500'001);
  }
};

const Attr& attr(const Node& n, const std::string& name) {
  const auto it = n.attrs.find(name);
  REQUIRE(it != n.attrs.end());
  return it->second;
}

}  // namespace

TEST_CASE("chakra export: per-rank files decode with Chakra's field numbers") {
  Fixture fx;
  TempDir dir;
  trace::ChakraExportInfo info;
  info.gpu = "test-gpu";
  info.metadata = {{"trainsim_model", "tiny"}};
  const auto files = trace::write_chakra(dir.path() / "w", fx.g, fx.ex, info);
  REQUIRE(files.size() == 3);
  CHECK(files[0] == dir.path() / "w.0.et");
  CHECK(files[1] == dir.path() / "w.1.et");
  CHECK(files[2] == dir.path() / "w.json");

  const File f0 = read_et(files[0]);
  const File f1 = read_et(files[1]);
  CHECK(f0.version == "0.0.4");
  CHECK(f0.metadata.at("schema").text == "trainsim");
  CHECK(f0.metadata.at("trainsim_model").text == "tiny");
  CHECK(f0.metadata.at("trainsim_gpu").text == "test-gpu");
  // Rank 0: GEMM, all-gather, send, ring shift (send + receive), compute; rank 1: compute,
  // all-gather, receive, compute, ring shift (send + receive).
  REQUIRE(f0.nodes.size() == 6);
  REQUIRE(f1.nodes.size() == 6);

  SECTION("compute: rounded microseconds, exact picoseconds, FLOPs, bytes and op shapes") {
    const Node& gemm = f0.nodes[0];
    CHECK(gemm.type == kCompNode);
    CHECK(gemm.id == 0);
    CHECK(gemm.duration_us == 3);  // 2.6 µs rounded
    CHECK(attr(gemm, "trainsim_duration_ps").number == 2'600'000);
    CHECK(attr(gemm, "num_ops").value_field == 9);  // int64_val, as ASTRA-sim reads it
    CHECK(attr(gemm, "num_ops").number == 2LL * 128 * 256 * 64);
    // tensor_size: bf16 operands and result, (m·k + k·n + m·n)·2 bytes.
    CHECK(attr(gemm, "tensor_size").value_field == 13);  // uint64_val
    CHECK(attr(gemm, "tensor_size").number == (128 * 64 + 64 * 256 + 128 * 256) * 2);
    CHECK(attr(gemm, "trainsim_ops").list == std::vector<std::string>{"gemm bf16 0 128 256 64 1"});
    CHECK(attr(gemm, "is_cpu_op").value_field == 27);
    CHECK(attr(gemm, "is_cpu_op").number == 0);
    CHECK(attr(gemm, "trainsim_layer").number == 5);
    CHECK(attr(gemm, "trainsim_alloc_bytes").number == 777);
    CHECK(f1.nodes[0].duration_us == 2);  // 1.500001 µs
    CHECK(attr(f1.nodes[0], "trainsim_duration_ps").number == 1'500'001);
  }

  SECTION("collective: comm_type, all-gather sized by its shard, process group") {
    const Node& ag = f0.nodes[1];
    CHECK(ag.type == kCollNode);
    CHECK(attr(ag, "comm_type").number == kAllGather);
    CHECK(attr(ag, "comm_size").number == 500);  // 1000 gathered bytes over 2 ranks
    CHECK(attr(ag, "pg_name").text == "1");
    CHECK(attr(f1.nodes[1], "pg_name").text == "1");
    CHECK(ag.data == std::vector<std::uint64_t>{0});
    CHECK(attr(ag, "trainsim_stream").text == "tp comm");
    CHECK(attr(ag, "trainsim_axes").number == static_cast<std::int64_t>(parallel::axis_bit(parallel::Axis::kTp)));
  }

  SECTION("send and receive: peers and one tag per message") {
    const Node& send = f0.nodes[2];
    const Node& recv = f1.nodes[2];
    CHECK(send.type == kSendNode);
    CHECK(recv.type == kRecvNode);
    CHECK(attr(send, "comm_dst").value_field == 7);  // int32_val
    CHECK(attr(send, "comm_dst").number == 1);
    CHECK(attr(send, "comm_src").number == 0);
    CHECK(attr(recv, "comm_src").number == 0);
    CHECK(attr(send, "comm_tag").number == attr(recv, "comm_tag").number);
    CHECK(attr(send, "comm_size").number == 4096);
  }

  SECTION("dependencies: data deps as given, control deps on the stream's previous task") {
    const Node& after_recv = f1.nodes[3];
    CHECK(after_recv.type == kCompNode);
    CHECK(after_recv.data == std::vector<std::uint64_t>{f1.nodes[2].id});
    CHECK(after_recv.ctrl == std::vector<std::uint64_t>{f1.nodes[0].id});
    CHECK(attr(after_recv, "trainsim_pass").text == "bwd");
    // The first task of each stream has no control dependency.
    CHECK(f0.nodes[0].ctrl.empty());
    CHECK(f0.nodes[1].ctrl.empty());
  }

  SECTION("ring shift: a send to the next member and a receive from the previous one") {
    const Node& send0 = f0.nodes[3];
    const Node& recv0 = f0.nodes[4];
    CHECK(send0.type == kSendNode);
    CHECK(recv0.type == kRecvNode);
    CHECK(recv0.id == send0.id + 1);
    const Node& send1 = f1.nodes[4];
    const Node& recv1 = f1.nodes[5];
    CHECK(send1.type == kSendNode);
    CHECK(recv1.type == kRecvNode);
    CHECK(attr(send0, "comm_dst").number == 1);
    CHECK(attr(recv1, "comm_src").number == 0);
    CHECK(attr(send0, "comm_tag").number == attr(recv1, "comm_tag").number);
    CHECK(attr(send1, "comm_tag").number == attr(recv0, "comm_tag").number);
    CHECK(attr(send0, "comm_tag").number != attr(send1, "comm_tag").number);
    CHECK(attr(send0, "pg_name").text == "3");
    CHECK(attr(recv0, "trainsim_ring_shift_send").number == static_cast<std::int64_t>(send0.id));
    // Both depend on the pipeline send; the next compute depends on both.
    CHECK(send0.data == std::vector<std::uint64_t>{f0.nodes[2].id});
    CHECK(recv0.data == std::vector<std::uint64_t>{f0.nodes[2].id});
    CHECK(f0.nodes.back().data == std::vector<std::uint64_t>{send0.id, recv0.id});
  }

  SECTION("process groups: collective communicators only") {
    std::ifstream in(files[2]);
    const auto j = nlohmann::json::parse(in);
    CHECK(j == nlohmann::json::parse(R"({"1": [0, 1], "3": [0, 1]})"));
  }
}

TEST_CASE("chakra export: a graph without every rank is refused, a failed write leaves nothing") {
  Fixture fx;
  TempDir dir;
  auto symmetric = fx;
  symmetric.g.devices[1].rank = 3;  // stands for other ranks: not a full graph
  CHECK_THROWS_AS(trace::write_chakra(dir.path() / "s", symmetric.g, symmetric.ex, {}), InternalError);
  const auto missing = dir.path() / "no-such-folder" / "w";
  CHECK_THROWS_AS(trace::write_chakra(missing, fx.g, fx.ex, {}), InputError);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "no-such-folder"));
  CHECK(std::filesystem::is_empty(dir.path()));
}
