// Reading of Chakra execution traces (config::read_chakra).
#include "sim/config/chakra_reader.h"

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "sim/base/diagnostic.h"
#include "sim/compute/compute_model.h"
#include "sim/config/names.h"
#include "sim/schema/chakra.pb.h"

namespace ts::config {
namespace {

namespace pb = ::trainsim::chakra;
using parallel::CommOp;
using namespace std::string_view_literals;

// Problems reported per file before giving up on it (a corrupt file would repeat one problem
// for every node).
constexpr std::size_t kMaxProblemsPerFile = 20;

std::optional<std::string> read_bytes(const std::filesystem::path& path, DiagnosticList& diags) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    diags.add({path.string(), 0, "", "cannot open the Chakra trace file"});
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Integer value of an attribute, whichever integer encoding it uses.
std::optional<std::int64_t> attr_int(const pb::AttributeProto& a) {
  switch (a.value_case()) {
    case pb::AttributeProto::kInt32Val: return a.int32_val();
    case pb::AttributeProto::kInt64Val: return a.int64_val();
    case pb::AttributeProto::kUint32Val: return a.uint32_val();
    case pb::AttributeProto::kUint64Val: return static_cast<std::int64_t>(a.uint64_val());
    case pb::AttributeProto::kSint32Val: return a.sint32_val();
    case pb::AttributeProto::kSint64Val: return a.sint64_val();
    case pb::AttributeProto::kFixed32Val: return a.fixed32_val();
    case pb::AttributeProto::kFixed64Val: return static_cast<std::int64_t>(a.fixed64_val());
    case pb::AttributeProto::kSfixed32Val: return a.sfixed32_val();
    case pb::AttributeProto::kSfixed64Val: return a.sfixed64_val();
    case pb::AttributeProto::kBoolVal: return a.bool_val() ? 1 : 0;
    case pb::AttributeProto::kDoubleVal: return static_cast<std::int64_t>(a.double_val());
    case pb::AttributeProto::kFloatVal: return static_cast<std::int64_t>(a.float_val());
    default: return std::nullopt;  // lists, strings, bytes, unset
  }
}

std::optional<double> attr_double(const pb::AttributeProto& a) {
  if (a.value_case() == pb::AttributeProto::kDoubleVal) return a.double_val();
  if (a.value_case() == pb::AttributeProto::kFloatVal) return a.float_val();
  if (auto v = attr_int(a)) return static_cast<double>(*v);
  return std::nullopt;
}

std::optional<ir::Dtype> parse_dtype_name(std::string_view s) {
  for (auto d : {ir::Dtype::kBf16, ir::Dtype::kFp16, ir::Dtype::kFp8, ir::Dtype::kFp32,
                 ir::Dtype::kMxfp8, ir::Dtype::kNvfp4}) {
    if (s == ir::dtype_name(d)) return d;
  }
  return std::nullopt;
}

template <class E>
std::optional<E> parse_enum(std::string_view s, std::initializer_list<E> values, const char* (*name)(E)) {
  for (E v : values) {
    if (s == name(v)) return v;
  }
  return std::nullopt;
}

std::optional<parallel::Stream> parse_stream(std::string_view s) {
  for (std::size_t i = 0; i < parallel::kNumStreams; ++i) {
    const auto st = static_cast<parallel::Stream>(i);
    if (s == parallel::stream_name(st)) return st;
  }
  return std::nullopt;
}

// One op of the trainsim_ops attribute (format in trace/chakra_writer.cpp):
//   gemm <dtype> <bwd> m n k batch
//   attention <dtype> <bwd> batch heads kv_heads seq_q seq_kv head_dim causal [window [head_dim_v]]
//   memory <dtype> <bwd> bytes
std::optional<ir::Op> parse_op(std::string_view text) {
  // Space-separated tokens: kind, dtype, backward flag, then integers.
  std::vector<std::string_view> tokens;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = std::min(text.find(' ', pos), text.size());
    if (end > pos) tokens.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  if (tokens.size() < 3) return std::nullopt;
  const std::string_view kind = tokens[0];
  const auto dt = parse_dtype_name(tokens[1]);
  if (!dt || (tokens[2] != "0" && tokens[2] != "1")) return std::nullopt;
  ir::Op op;
  op.dtype = *dt;
  op.backward = tokens[2] == "1";
  std::vector<std::int64_t> v;
  for (std::size_t i = 3; i < tokens.size(); ++i) {
    std::int64_t x = 0;
    const auto [end, ec] = std::from_chars(tokens[i].data(), tokens[i].data() + tokens[i].size(), x);
    if (ec != std::errc() || end != tokens[i].data() + tokens[i].size() || x < 0) return std::nullopt;
    v.push_back(x);
  }
  if (kind == "gemm" && v.size() == 4) {
    op.name = "gemm";
    op.kind = ir::OpKind::kGemm;
    op.gemm = {v[0], v[1], v[2], v[3]};
    op.flops = compute::GemmShape{v[0], v[1], v[2], v[3], op.dtype}.flops();
  } else if (kind == "attention" && (v.size() == 7 || (v.size() == 8 && v[7] > 0) || (v.size() == 9 && v[8] > 0)) &&
             v[6] <= 1) {
    op.name = "attention";
    op.kind = ir::OpKind::kAttention;
    op.attn.batch = v[0];
    op.attn.heads = v[1];
    op.attn.kv_heads = v[2];
    op.attn.seq_q = v[3];
    op.attn.seq_kv = v[4];
    op.attn.head_dim = v[5];
    op.attn.causal = v[6] == 1;
    op.attn.window = v.size() >= 8 ? v[7] : 0;
    op.attn.head_dim_v = v.size() == 9 ? v[8] : 0;
    compute::AttentionShape a;
    a.batch = v[0];
    a.heads = v[1];
    a.kv_heads = v[2];
    a.seq_q = v[3];
    a.seq_kv = v[4];
    a.head_dim = v[5];
    a.causal = v[6] == 1;
    a.window = op.attn.window;
    a.head_dim_v = op.attn.head_dim_v;
    a.direction = op.backward ? compute::Direction::kBackward : compute::Direction::kForward;
    op.flops = a.flops();
  } else if (kind == "memory" && v.size() == 1) {
    op.name = "memory";
    op.kind = ir::OpKind::kMemoryBound;
    op.moved = Bytes(v[0]);
  } else {
    return std::nullopt;
  }
  return op;
}

// Reads a varint at `pos`; nullopt when the data ends inside it or it is over 10 bytes long.
std::optional<std::uint64_t> read_varint(const std::string& data, std::size_t& pos) {
  std::uint64_t v = 0;
  for (unsigned shift = 0; shift < 64 && pos < data.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(data[pos++]);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  return std::nullopt;
}

class FileReader {
 public:
  FileReader(const std::filesystem::path& file, std::int32_t rank, std::vector<std::string>* pg_names,
             DiagnosticList& diags)
      : file_(file.string()), rank_(rank), pg_names_(pg_names), diags_(diags) {
    out_.file = file;
  }

  ChakraRank read() {
    const auto contents = read_bytes(out_.file, diags_);
    if (!contents) return std::move(out_);
    const std::string& data = *contents;
    if (data.empty()) {
      fail(0, "", "empty file: a Chakra trace starts with a GlobalMetadata message");
      return std::move(out_);
    }
    std::size_t pos = 0;
    bool first = true;
    pb::Node node;
    // A damaged message is reported below with its file and offset; protobuf's own log lines
    // ("String field ... contains invalid UTF-8 data") would only repeat it without the place.
    const google::protobuf::LogSilencer quiet;
    while (pos < data.size() && problems_ < kMaxProblemsPerFile) {
      const std::size_t start = pos;
      const auto length = read_varint(data, pos);
      if (!length) {
        fail(start, "", "truncated or malformed length prefix (the file ends inside it)");
        break;
      }
      if (*length > data.size() - pos) {
        fail(start, "", "message declares " + std::to_string(*length) + " bytes but only " +
                            std::to_string(data.size() - pos) + " remain (truncated file?)");
        break;
      }
      const char* bytes = data.data() + pos;
      const int size = static_cast<int>(*length);
      pos += static_cast<std::size_t>(*length);
      if (first) {
        first = false;
        pb::GlobalMetadata meta;
        if (!meta.ParseFromArray(bytes, size)) {
          fail(start, "", "the first message is not a valid Chakra GlobalMetadata");
          break;
        }
        read_metadata(meta);
        continue;
      }
      if (!node.ParseFromArray(bytes, size)) {
        fail(start, "", "message is not a valid Chakra Node");
        break;
      }
      read_node(node, static_cast<std::int64_t>(start));
    }
    if (first && problems_ == 0) fail(0, "", "no GlobalMetadata message");
    if (problems_ == 0) resolve_deps();
    return std::move(out_);
  }

 private:
  void fail(std::size_t offset, const std::string& node, const std::string& message) {
    ++problems_;
    diags_.add({file_, 0, "byte " + std::to_string(offset) + (node.empty() ? "" : ", " + node), message});
  }

  static std::string describe(const pb::Node& n) {
    return "node " + std::to_string(n.id()) + (n.name().empty() ? "" : " (" + n.name() + ")");
  }

  void read_metadata(const pb::GlobalMetadata& meta) {
    for (const auto& a : meta.attr()) {
      if (a.value_case() == pb::AttributeProto::kStringVal) {
        out_.metadata.emplace_back(a.name(), a.string_val());
      } else if (auto v = attr_double(a)) {
        std::ostringstream s;
        s.precision(17);
        s << *v;
        out_.metadata.emplace_back(a.name(), s.str());
      }
      static constexpr std::array<const char*, kMemoryFields> kMemory = {
          "trainsim_weights_bytes",      "trainsim_gradients_bytes",    "trainsim_optimizer_states_bytes",
          "trainsim_activations_bytes",  "trainsim_cuda_context_bytes", "trainsim_nccl_buffers_bytes",
          "trainsim_fragmentation_bytes"};
      for (std::size_t i = 0; i < kMemory.size(); ++i) {
        if (a.name() != kMemory[i]) continue;
        if (!out_.memory) out_.memory = std::array<Bytes, kMemoryFields>{};
        (*out_.memory)[i] = Bytes(attr_int(a).value_or(0));
      }
      if (a.name() == "trainsim_stage") out_.stage = attr_int(a).value_or(0);
    }
  }

  void read_node(const pb::Node& n, std::int64_t offset) {
    ChakraNode c;
    c.id = n.id();
    c.name = n.name();
    c.offset = offset;
    const std::string who = describe(n);
    auto bad = [&](const std::string& m) { fail(static_cast<std::size_t>(offset), who, m); };
    switch (n.type()) {
      case pb::COMP_NODE: c.kind = ChakraKind::kCompute; break;
      case pb::COMM_COLL_NODE: c.kind = ChakraKind::kCollective; break;
      case pb::COMM_SEND_NODE: c.kind = ChakraKind::kSend; break;
      case pb::COMM_RECV_NODE: c.kind = ChakraKind::kRecv; break;
      case pb::METADATA_NODE:
      case pb::MEM_LOAD_NODE:
      case pb::MEM_STORE_NODE:
      case pb::STORAGE_NODE:
      case pb::BATCH_NODE:
      case pb::CHECKPOINT_NODE: c.kind = ChakraKind::kNone; break;
      case pb::INVALID_NODE:
      default: bad("invalid node type " + std::to_string(static_cast<int>(n.type()))); return;
    }
    if (n.duration_micros() > 0) c.duration = Duration::from_us(static_cast<double>(n.duration_micros()));

    std::optional<std::int64_t> comm_type, comm_size, comm_src, comm_dst;
    std::string pg_name;
    bool ring_shift = false;                   // a send that is one member's part of a ring shift
    std::optional<std::int64_t> shift_send;    // a receive of a ring shift: the id of its send
    for (const auto& a : n.attr()) {
      const std::string_view k = a.name();
      if (k == "num_ops"sv) {
        c.flops = Flops(attr_double(a).value_or(0));
      } else if (k == "tensor_size"sv) {
        c.tensor_bytes = Bytes(attr_int(a).value_or(0));
      } else if (k == "op_type"sv) {
        c.op_type = a.string_val();
      } else if (k == "comm_type"sv) {
        comm_type = attr_int(a);
      } else if (k == "comm_size"sv) {
        comm_size = attr_int(a);
      } else if (k == "comm_src"sv) {
        comm_src = attr_int(a);
      } else if (k == "comm_dst"sv) {
        comm_dst = attr_int(a);
      } else if (k == "comm_tag"sv) {
        c.tag = attr_int(a).value_or(0);
      } else if (k == "pg_name"sv) {
        pg_name = a.value_case() == pb::AttributeProto::kStringVal ? a.string_val()
                                                                    : std::to_string(attr_int(a).value_or(0));
      } else if (k == "trainsim_duration_ps"sv) {
        if (auto v = attr_int(a); v && *v >= 0) c.duration = Duration::from_ps(*v);
      } else if (k == "trainsim_ops"sv) {
        for (const auto& text : a.string_list().values()) {
          if (auto op = parse_op(text)) {
            c.ops.push_back(*op);
          } else {
            bad("trainsim_ops: cannot read op '" + text + "'");
          }
        }
      } else if (k == "trainsim_stream"sv) {
        c.stream = parse_stream(a.string_val());
      } else if (k == "trainsim_pass"sv) {
        c.pass = parse_enum(a.string_val(),
                            {parallel::Pass::kForward, parallel::Pass::kBackward, parallel::Pass::kRecompute,
                             parallel::Pass::kOptimizer, parallel::Pass::kWeightGrad},
                            parallel::pass_name);
      } else if (k == "trainsim_part"sv) {
        c.part = parse_enum(a.string_val(),
                            {parallel::Part::kEmbedding, parallel::Part::kAttention, parallel::Part::kMlp,
                             parallel::Part::kLmHead, parallel::Part::kGradients, parallel::Part::kOptimizer,
                             parallel::Part::kActivations},
                            parallel::part_name);
      } else if (k == "trainsim_layer"sv) {
        c.layer = static_cast<std::int32_t>(attr_int(a).value_or(-1));
      } else if (k == "trainsim_micro_batch"sv) {
        c.micro_batch = static_cast<std::int32_t>(attr_int(a).value_or(-1));
      } else if (k == "trainsim_alloc_bytes"sv) {
        c.alloc = Bytes(attr_int(a).value_or(0));
      } else if (k == "trainsim_free_bytes"sv) {
        c.release = Bytes(attr_int(a).value_or(0));
      } else if (k == "trainsim_axes"sv) {
        c.axes = static_cast<unsigned>(attr_int(a).value_or(0) & 0xf);
      } else if (k == "trainsim_comm"sv) {
        c.comm_id = attr_int(a).value_or(0);
      } else if (k == "trainsim_ring_shift"sv) {
        ring_shift = attr_int(a).value_or(0) != 0;
      } else if (k == "trainsim_ring_shift_send"sv) {
        shift_send = attr_int(a);
      }
    }
    if (c.flops.value() < 0 || c.tensor_bytes.count() < 0) bad("num_ops and tensor_size must not be negative");

    switch (c.kind) {
      case ChakraKind::kCollective: {
        if (!comm_type) {
          bad("collective without a comm_type attribute");
          return;
        }
        switch (*comm_type) {
          case pb::ALL_REDUCE: c.comm = CommOp::kAllReduce; break;
          case pb::ALL_GATHER: c.comm = CommOp::kAllGather; break;
          case pb::REDUCE_SCATTER:
          case pb::REDUCE_SCATTER_BLOCK: c.comm = CommOp::kReduceScatter; break;
          case pb::ALL_TO_ALL: c.comm = CommOp::kAllToAll; break;
          case pb::REDUCE:
          case pb::GATHER:
          case pb::SCATTER:
          case pb::BROADCAST:
          case pb::BARRIER:
            bad(std::string("collective ") + pb::CollectiveCommType_Name(static_cast<pb::CollectiveCommType>(*comm_type)) +
                " is not simulated (all-reduce, all-gather, reduce-scatter and all-to-all are)");
            return;
          default: bad("unknown comm_type " + std::to_string(*comm_type)); return;
        }
        break;
      }
      case ChakraKind::kSend:
      case ChakraKind::kRecv: {
        const bool send = c.kind == ChakraKind::kSend;
        const auto peer = send ? comm_dst : comm_src;
        const auto self = send ? comm_src : comm_dst;
        if (!peer) {
          bad(std::string(send ? "send without comm_dst" : "receive without comm_src"));
          return;
        }
        if (self && *self != rank_) {
          bad(std::string(send ? "comm_src " : "comm_dst ") + std::to_string(*self) + " is not this file's rank " +
              std::to_string(rank_));
          return;
        }
        if (*peer < 0 || *peer > std::numeric_limits<std::int32_t>::max()) {
          bad("peer rank " + std::to_string(*peer) + " out of range");
          return;
        }
        c.comm = CommOp::kSendRecv;
        c.src = send ? rank_ : static_cast<std::int32_t>(*peer);
        c.dst = send ? static_cast<std::int32_t>(*peer) : rank_;
        break;
      }
      case ChakraKind::kCompute:
      case ChakraKind::kNone: break;
    }
    if (c.kind == ChakraKind::kCollective || c.kind == ChakraKind::kSend || c.kind == ChakraKind::kRecv) {
      const std::int64_t size = comm_size.value_or(0);
      if (size < 0) {
        bad("negative comm_size");
        return;
      }
      c.bytes = Bytes(size);
    }
    // A ring shift written by trainsim (every member of a group sends to the next one) is read
    // back as one collective: the send stands for it, the receive only waits for the send.
    if (c.kind == ChakraKind::kSend && ring_shift && !pg_name.empty()) {
      c.kind = ChakraKind::kCollective;
      c.src = -1;
      c.dst = -1;
    }
    if (c.kind == ChakraKind::kRecv && shift_send) c.kind = ChakraKind::kNone;
    if (!index_.emplace(c.id, static_cast<std::uint32_t>(out_.nodes.size())).second) {
      bad("duplicate node id " + std::to_string(c.id));
      return;
    }
    raw_deps_.emplace_back();
    for (auto d : n.data_deps()) raw_deps_.back().push_back(d);
    for (auto d : n.ctrl_deps()) raw_deps_.back().push_back(d);
    if (c.kind == ChakraKind::kNone && shift_send) raw_deps_.back().push_back(static_cast<std::uint64_t>(*shift_send));
    if (pg_names_) pg_names_->push_back(pg_name);
    out_.nodes.push_back(std::move(c));
  }

  // Ids → indices, then a topological order that prefers the smallest id among ready nodes (the
  // order in which Chakra's feeder hands out ready nodes); a cycle is an error.
  void resolve_deps() {
    const std::size_t n = out_.nodes.size();
    for (std::size_t i = 0; i < n; ++i) {
      auto& node = out_.nodes[i];
      std::vector<std::uint32_t> deps;
      for (auto id : raw_deps_[i]) {
        const auto it = index_.find(id);
        if (it == index_.end()) {
          fail(static_cast<std::size_t>(node.offset), "node " + std::to_string(node.id),
               "depends on node " + std::to_string(id) + ", which is not in the file");
          continue;
        }
        if (it->second == i) {
          fail(static_cast<std::size_t>(node.offset), "node " + std::to_string(node.id), "depends on itself");
          continue;
        }
        deps.push_back(it->second);
      }
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      node.deps = std::move(deps);
    }
    if (problems_ > 0) return;
    std::vector<std::uint32_t> remaining(n);
    std::vector<std::vector<std::uint32_t>> dependents(n);
    for (std::size_t i = 0; i < n; ++i) {
      remaining[i] = static_cast<std::uint32_t>(out_.nodes[i].deps.size());
      for (auto d : out_.nodes[i].deps) dependents[d].push_back(static_cast<std::uint32_t>(i));
    }
    using Item = std::pair<std::uint64_t, std::uint32_t>;  // (id, index)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
    for (std::size_t i = 0; i < n; ++i) {
      if (remaining[i] == 0) ready.emplace(out_.nodes[i].id, static_cast<std::uint32_t>(i));
    }
    out_.order.reserve(n);
    while (!ready.empty()) {
      const auto i = ready.top().second;
      ready.pop();
      out_.order.push_back(i);
      for (auto d : dependents[i]) {
        if (--remaining[d] == 0) ready.emplace(out_.nodes[d].id, d);
      }
    }
    if (out_.order.size() != n) {
      for (std::size_t i = 0; i < n; ++i) {
        if (remaining[i] == 0) continue;
        fail(static_cast<std::size_t>(out_.nodes[i].offset), "node " + std::to_string(out_.nodes[i].id),
             "is part of a dependency cycle (" + std::to_string(n - out_.order.size()) +
                 " nodes can never run)");
        break;
      }
    }
  }

  std::string file_;
  std::int32_t rank_;
  std::vector<std::string>* pg_names_;
  DiagnosticList& diags_;
  ChakraRank out_;
  std::size_t problems_ = 0;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;
  std::vector<std::vector<std::uint64_t>> raw_deps_;
};

std::string rank_file_name(const std::filesystem::path& prefix, std::size_t r) {
  return prefix.string() + "." + std::to_string(r) + ".et";
}

// The ranks present as `<prefix>.<rank>.et`.
std::vector<std::int64_t> find_ranks(const std::filesystem::path& prefix) {
  std::vector<std::int64_t> ranks;
  std::filesystem::path dir = prefix.parent_path();
  if (dir.empty()) dir = ".";
  const std::string stem = prefix.filename().string() + ".";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= stem.size() + 3 || name.compare(0, stem.size(), stem) != 0 ||
        name.compare(name.size() - 3, 3, ".et") != 0) {
      continue;
    }
    const std::string middle = name.substr(stem.size(), name.size() - stem.size() - 3);
    if (middle.empty() || middle.size() > 9 ||
        !std::all_of(middle.begin(), middle.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      continue;
    }
    ranks.push_back(std::stoll(middle));
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<ChakraGroup> read_groups(const std::filesystem::path& path, std::size_t num_ranks,
                                     DiagnosticList& diags) {
  std::vector<ChakraGroup> groups;
  std::ifstream f(path);
  if (!f) {
    diags.add({path.string(), 0, "", "cannot open the process group file"});
    return groups;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  google::protobuf::Struct root;
  const auto status = google::protobuf::util::JsonStringToMessage(ss.str(), &root);
  if (!status.ok()) {
    diags.add({path.string(), 0, "", "not a JSON object of process groups (name → list of ranks): " +
                                         std::string(status.message())});
    return groups;
  }
  std::map<std::string, const google::protobuf::Value*> sorted;
  for (const auto& [name, value] : root.fields()) sorted.emplace(name, &value);
  for (const auto& [name, value] : sorted) {
    ChakraGroup g;
    g.name = name;
    if (!value->has_list_value() || value->list_value().values().empty()) {
      diags.add({path.string(), 0, name, "a process group is a non-empty list of ranks"});
      continue;
    }
    std::set<std::int32_t> seen;
    for (const auto& v : value->list_value().values()) {
      const double r = v.number_value();
      if (!v.has_number_value() || r < 0 || r != static_cast<double>(static_cast<std::int64_t>(r)) ||
          r >= static_cast<double>(num_ranks)) {
        diags.add({path.string(), 0, name,
                   "ranks must be integers from 0 to " + std::to_string(num_ranks - 1) + " (the trace has " +
                       std::to_string(num_ranks) + " ranks)"});
        g.ranks.clear();
        break;
      }
      const auto rank = static_cast<std::int32_t>(r);
      if (!seen.insert(rank).second) {
        diags.add({path.string(), 0, name, "rank " + std::to_string(rank) + " listed twice"});
      }
      g.ranks.push_back(rank);
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::optional<parallel::ParallelPlan> plan_from_metadata(const ChakraRank& r, std::size_t num_ranks) {
  std::map<std::string, std::string> m(r.metadata.begin(), r.metadata.end());
  for (const char* k : {"trainsim_tp", "trainsim_pp", "trainsim_dp", "trainsim_cp", "trainsim_order"}) {
    if (!m.count(k)) return std::nullopt;
  }
  parallel::ParallelPlan p;
  try {
    p.tp = std::stoll(m["trainsim_tp"]);
    p.pp = std::stoll(m["trainsim_pp"]);
    p.dp = std::stoll(m["trainsim_dp"]);
    p.cp = std::stoll(m["trainsim_cp"]);
    p.order = parse_order(m["trainsim_order"], "trainsim_order");
    if (m.count("trainsim_ep")) p.ep = std::stoll(m["trainsim_ep"]);
    if (m.count("trainsim_etp")) p.etp = std::stoll(m["trainsim_etp"]);
    // Traces written before the key existed were timed without a host floor.
    p.host_dispatch = m.count("trainsim_host_dispatch_us")
                          ? parse_host_dispatch_us(std::stod(m["trainsim_host_dispatch_us"]), "trainsim_host_dispatch_us")
                          : Duration::zero();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (p.tp <= 0 || p.pp <= 0 || p.dp <= 0 || p.cp <= 0 || p.num_gpus() != static_cast<std::int64_t>(num_ranks)) {
    return std::nullopt;
  }
  if (p.ep <= 0 || p.etp <= 0 || (p.tp * p.cp * p.dp) % (p.ep * p.etp) != 0) return std::nullopt;
  std::set<parallel::Axis> axes(p.order.begin(), p.order.end());
  if (axes.size() != parallel::kNumOrderAxes || p.order.size() != parallel::kNumOrderAxes) return std::nullopt;
  return p;
}

}  // namespace

ChakraRank read_chakra_file(const std::filesystem::path& file, std::int32_t rank,
                            std::vector<std::string>* pg_names) {
  DiagnosticList diags;
  ChakraRank r = FileReader(file, rank, pg_names, diags).read();
  diags.throw_if_any();
  return r;
}

ChakraTrace read_chakra(const std::filesystem::path& prefix, const std::optional<std::filesystem::path>& comm_groups) {
  ChakraTrace t;
  t.prefix = prefix;
  DiagnosticList diags;
  const auto found = find_ranks(prefix);
  if (found.empty()) {
    throw InputError(Diagnostic{"", 0, "--prefix",
                                "no Chakra trace files " + prefix.string() + ".<rank>.et (e.g. " +
                                    rank_file_name(prefix, 0) + ")"});
  }
  for (std::size_t r = 0; r < found.size(); ++r) {
    if (found[r] != static_cast<std::int64_t>(r)) {
      throw InputError(Diagnostic{rank_file_name(prefix, r), 0, "",
                                  "missing: ranks must be numbered 0.." + std::to_string(found.size() - 1) +
                                      " without gaps"});
    }
  }
  const std::size_t n = found.size();
  std::vector<std::vector<std::string>> pg_names(n);
  for (std::size_t r = 0; r < n; ++r) {
    t.ranks.push_back(FileReader(rank_file_name(prefix, r), static_cast<std::int32_t>(r), &pg_names[r], diags).read());
  }
  diags.throw_if_any();

  // Peers of point-to-point nodes must be ranks of the trace.
  for (const auto& rank : t.ranks) {
    for (const auto& node : rank.nodes) {
      if ((node.kind == ChakraKind::kSend || node.kind == ChakraKind::kRecv) &&
          (static_cast<std::size_t>(node.src) >= n || static_cast<std::size_t>(node.dst) >= n || node.src == node.dst)) {
        diags.add({rank.file.string(), 0, "byte " + std::to_string(node.offset) + ", node " + std::to_string(node.id),
                   "peer rank " + std::to_string(node.kind == ChakraKind::kSend ? node.dst : node.src) +
                       " is not another rank of the trace (ranks 0.." + std::to_string(n - 1) + ")"});
      }
    }
  }

  // Process groups: every pg_name used must be defined; "" is the group of every rank.
  std::optional<std::filesystem::path> groups_file = comm_groups;
  if (!groups_file) {
    std::filesystem::path def(prefix.string() + ".json");
    if (std::filesystem::exists(def)) groups_file = def;
  }
  if (groups_file) t.groups = read_groups(*groups_file, n, diags);
  std::map<std::string, std::int32_t> group_index;
  for (std::size_t g = 0; g < t.groups.size(); ++g) group_index[t.groups[g].name] = static_cast<std::int32_t>(g);
  for (std::size_t r = 0; r < n; ++r) {
    auto& rank = t.ranks[r];
    for (std::size_t i = 0; i < rank.nodes.size(); ++i) {
      auto& node = rank.nodes[i];
      if (node.kind != ChakraKind::kCollective) continue;
      const std::string& pg = pg_names[r][i];
      const std::string where = "byte " + std::to_string(node.offset) + ", node " + std::to_string(node.id);
      if (pg.empty()) {
        if (!group_index.count("")) {
          ChakraGroup all;
          for (std::size_t k = 0; k < n; ++k) all.ranks.push_back(static_cast<std::int32_t>(k));
          group_index[""] = static_cast<std::int32_t>(t.groups.size());
          t.groups.push_back(std::move(all));
        }
      } else if (!group_index.count(pg)) {
        diags.add({rank.file.string(), 0, where,
                   groups_file ? "process group '" + pg + "' is not defined in " + groups_file->string()
                               : "uses process group '" + pg + "' but there is no group file (" + prefix.string() +
                                     ".json or --comm-groups)"});
        continue;
      }
      node.group = group_index[pg];
      const auto& members = t.groups[static_cast<std::size_t>(node.group)].ranks;
      if (std::find(members.begin(), members.end(), static_cast<std::int32_t>(r)) == members.end()) {
        diags.add({rank.file.string(), 0, where,
                   "rank " + std::to_string(r) + " is not a member of its process group '" + pg + "'"});
        continue;
      }
      // Chakra sizes an all-gather by the shard each rank contributes; nccl-tests (and the network
      // model) by the gathered output.
      if (node.comm == CommOp::kAllGather) node.bytes = node.bytes * static_cast<std::int64_t>(members.size());
    }
  }
  diags.throw_if_any();

  std::map<std::string, std::string> meta(t.ranks[0].metadata.begin(), t.ranks[0].metadata.end());
  t.schema = meta.count("schema") ? meta["schema"] : "";
  t.gpu = meta.count("trainsim_gpu") ? meta["trainsim_gpu"] : "";
  try {
    if (meta.count("trainsim_model_flops")) t.model_flops = std::stod(meta["trainsim_model_flops"]);
    if (meta.count("trainsim_tokens")) t.tokens = std::stod(meta["trainsim_tokens"]);
  } catch (const std::exception&) {
    t.model_flops = 0;
    t.tokens = 0;
  }
  t.plan = plan_from_metadata(t.ranks[0], n);
  return t;
}

}  // namespace ts::config
