// Loading of calibration/*.textproto into compute::Calibration, and the simulator's compute model.
#include "sim/config/calibration_loader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/compute/calibrated_model.h"
#include "sim/config/loader.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/calibration.pb.h"

namespace ts::config {
namespace {

namespace fs = std::filesystem;
namespace sch = trainsim::schema;
using compute::Calibration;
using detail::Checker;
using detail::FieldLines;

constexpr std::array<std::pair<std::string_view, ir::Dtype>, 6> kKernelDtypes{
    {{"bf16", ir::Dtype::kBf16},
     {"fp16", ir::Dtype::kFp16},
     {"fp8", ir::Dtype::kFp8},
     {"fp32", ir::Dtype::kFp32},
     {"mxfp8", ir::Dtype::kMxfp8},
     {"nvfp4", ir::Dtype::kNvfp4}}};

fs::path calibration_dir() { return data_dir() / "calibration"; }

// "fit" (or absent) | "check".
std::optional<compute::TableRole> parse_role(bool has, const std::string& s, const Checker& c) {
  if (!has || s == "fit") return compute::TableRole::kFit;
  if (s == "check") return compute::TableRole::kCheck;
  c.fail("role", "unknown role '" + s + "' (known: fit, check)");
  return std::nullopt;
}

compute::Provenance convert_provenance(bool has, const sch::Provenance& p, const Checker& parent) {
  compute::Provenance out;
  if (!parent.require(has, "provenance")) return out;
  const Checker c = parent.nested("provenance");
  c.non_empty(p.has_source(), p.source(), "source");
  c.non_empty(p.has_date(), p.date(), "date");
  c.non_empty(p.has_software(), p.software(), "software");
  c.non_empty(p.has_method(), p.method(), "method");
  out.source = p.source();
  out.date = p.date();
  out.software = p.software();
  out.method = p.method();
  out.notes = p.notes();
  return out;
}

compute::PointOrigin origin(const Checker& c, std::string_view field) {
  return compute::PointOrigin{c.file(), c.line_of(field)};
}

std::string item(std::string_view field, int i) { return std::string(field) + "[" + std::to_string(i) + "]"; }

// A parsed and validated file, before imports are resolved.
struct Parsed {
  std::shared_ptr<Calibration> cal;
  sch::Calibration msg;
  FieldLines lines;
  std::string display;
};

void convert_datasheet(const sch::Calibration& m, const Checker& root, Calibration& cal) {
  if (!root.require(m.has_datasheet(), "datasheet")) return;
  const auto& d = m.datasheet();
  const Checker c = root.nested("datasheet");
  c.positive(d.has_peak_bf16_tflops(), d.peak_bf16_tflops(), "peak_bf16_tflops");
  c.positive(d.has_peak_fp16_tflops(), d.peak_fp16_tflops(), "peak_fp16_tflops");
  c.non_negative(d.has_peak_fp8_tflops(), d.peak_fp8_tflops(), "peak_fp8_tflops");
  if (d.has_peak_fp4_tflops()) c.non_negative(true, d.peak_fp4_tflops(), "peak_fp4_tflops");
  c.non_negative(d.has_peak_tf32_tflops(), d.peak_tf32_tflops(), "peak_tf32_tflops");
  c.positive(d.has_peak_fp32_tflops(), d.peak_fp32_tflops(), "peak_fp32_tflops");
  c.positive(d.has_memory_gb(), d.memory_gb(), "memory_gb");
  c.positive(d.has_memory_bandwidth_gbps(), d.memory_bandwidth_gbps(), "memory_bandwidth_gbps");
  c.positive(d.has_num_sms(), d.num_sms(), "num_sms");
  auto& g = cal.gpu;
  g.name = m.gpu();
  g.peak_bf16 = FlopRate::tflops(d.peak_bf16_tflops());
  g.peak_fp16 = FlopRate::tflops(d.peak_fp16_tflops());
  g.peak_fp8 = FlopRate::tflops(d.peak_fp8_tflops());
  g.peak_fp4 = FlopRate::tflops(d.peak_fp4_tflops());
  g.peak_tf32 = FlopRate::tflops(d.peak_tf32_tflops());
  g.peak_fp32 = FlopRate::tflops(d.peak_fp32_tflops());
  g.memory_capacity = Bytes::gb(d.memory_gb());
  g.memory_bandwidth = Bandwidth::gbytes_per_s(d.memory_bandwidth_gbps());
  g.num_sms = d.num_sms();
  cal.datasheet_provenance = convert_provenance(d.has_provenance(), d.provenance(), c);
}

// A measured throughput: > 0 and at most the datasheet peak (a point above it is a typo or a
// sparse peak).
void check_throughput(const Checker& c, bool has, double value, double peak, std::string_view field,
                      std::string_view what) {
  c.positive(has, value, field);
  if (has && peak > 0 && value > peak) {
    c.fail(field, "exceeds the datasheet " + std::string(what) + " (" + detail::format_number(value) + " > " +
                      detail::format_number(peak) + ")");
  }
}

void convert_gemm(const sch::Calibration& m, const Checker& root, Calibration& cal) {
  if (m.has_gemm_model()) {
    const Checker c = root.nested("gemm_model");
    for (int i = 0; i < m.gemm_model().tile_size(); ++i) {
      const auto& t = m.gemm_model().tile(i);
      const Checker tc = c.nested(item("tile", i));
      tc.positive(t.has_m(), t.m(), "m");
      tc.positive(t.has_n(), t.n(), "n");
      cal.gemm_tiles.push_back(compute::GemmTile{t.m(), t.n()});
    }
    cal.gemm_model_provenance = convert_provenance(m.gemm_model().has_provenance(), m.gemm_model().provenance(), c);
  }
  for (int i = 0; i < m.gemm_size(); ++i) {
    const auto& t = m.gemm(i);
    const Checker c = root.nested(item("gemm", i));
    compute::GemmTable table;
    c.non_empty(t.has_name(), t.name(), "name");
    table.name = t.name();
    table.role = parse_role(t.has_role(), t.role(), c).value_or(compute::TableRole::kFit);
    if (t.has_kernel()) {
      if (t.kernel() == "grouped") {
        table.kernel = compute::GemmKernel::kGrouped;
      } else if (t.kernel() != "dense") {
        c.fail("kernel", "unknown GEMM kernel '" + t.kernel() + "' (known: dense, grouped)");
      }
    }
    table.provenance = convert_provenance(t.has_provenance(), t.provenance(), c);
    if (t.point_size() == 0) c.fail("point", "a table needs at least one point");
    for (int j = 0; j < t.point_size(); ++j) {
      const auto& p = t.point(j);
      const Checker pc = c.nested(item("point", j));
      compute::GemmPoint pt;
      pc.positive(p.has_m(), static_cast<double>(p.m()), "m");
      pc.positive(p.has_n(), static_cast<double>(p.n()), "n");
      pc.positive(p.has_k(), static_cast<double>(p.k()), "k");
      if (p.has_batch()) pc.positive(true, static_cast<double>(p.batch()), "batch");
      pt.m = p.m();
      pt.n = p.n();
      pt.k = p.k();
      pt.batch = p.has_batch() ? p.batch() : 1;
      double peak = 0;
      if (pc.require(p.has_dtype(), "dtype")) {
        if (auto d = try_parse_kernel_dtype(p.dtype())) {
          pt.dtype = *d;
          peak = cal.gpu.peak(*d).tflops();
          if (peak <= 0 && cal.gpu.peak_bf16.per_s() > 0) {
            pc.fail("dtype", cal.gpu.name + " has no " + p.dtype() + " tensor cores (datasheet peak 0)");
          }
        } else {
          pc.fail("dtype", "unknown dtype '" + p.dtype() + "' (known: " + kernel_dtype_choices() + ")");
        }
      }
      check_throughput(pc, p.has_tflops(), p.tflops(), peak, "tflops", "peak");
      pt.tflops = p.tflops();
      pt.origin = origin(c, item("point", j));
      table.points.push_back(pt);
    }
    cal.gemm.push_back(std::move(table));
  }
  if (m.gemm_size() > 0 && cal.gemm_tiles.empty()) {
    root.fail("gemm_model", "GEMM points need a gemm_model with at least one tile");
  }
}

std::optional<compute::AttentionPass> parse_pass(const std::string& s) {
  if (s == "fwd") return compute::AttentionPass::kForward;
  if (s == "bwd") return compute::AttentionPass::kBackward;
  if (s == "fwd+bwd") return compute::AttentionPass::kForwardBackward;
  return std::nullopt;
}

void convert_attention(const sch::Calibration& m, const Checker& root, Calibration& cal) {
  if (m.has_attention_model()) {
    const auto& am = m.attention_model();
    const Checker c = root.nested("attention_model");
    c.positive(am.has_block(), am.block(), "block");
    c.non_empty(am.has_kernel(), am.kernel(), "kernel");
    cal.attention_block = am.block();
    cal.attention_kernel = am.kernel();
    cal.attention_model_provenance = convert_provenance(am.has_provenance(), am.provenance(), c);
    if (am.has_direction_split()) {
      const Checker sc = c.nested("direction_split");
      const auto& s = am.direction_split();
      sc.non_empty(s.has_gpu(), s.gpu(), "gpu");
      sc.non_empty(s.has_kernel(), s.kernel(), "kernel");
      sc.non_empty(s.has_reason(), s.reason(), "reason");
    }
  }
  for (int i = 0; i < m.attention_size(); ++i) {
    const auto& t = m.attention(i);
    const Checker c = root.nested(item("attention", i));
    compute::AttentionTable table;
    c.non_empty(t.has_name(), t.name(), "name");
    c.non_empty(t.has_kernel(), t.kernel(), "kernel");
    table.name = t.name();
    table.kernel = t.kernel();
    table.role = parse_role(t.has_role(), t.role(), c).value_or(compute::TableRole::kFit);
    table.provenance = convert_provenance(t.has_provenance(), t.provenance(), c);
    if (t.has_dtype()) {
      if (t.dtype() == "fp8") {
        table.dtype = ir::Dtype::kFp8;
        if (!cal.gpu.supports(ir::Dtype::kFp8)) c.fail("dtype", cal.gpu.name + " has no fp8 tensor cores");
      } else if (t.dtype() != "bf16") {
        c.fail("dtype", "unknown attention dtype '" + t.dtype() + "' (known: bf16, fp8)");
      }
    }
    if (t.has_window()) {
      c.positive(true, static_cast<double>(t.window()), "window");
      table.window = t.window();
    }
    if (t.point_size() == 0) c.fail("point", "a table needs at least one point");
    for (int j = 0; j < t.point_size(); ++j) {
      const auto& p = t.point(j);
      const Checker pc = c.nested(item("point", j));
      compute::AttentionPoint pt;
      pt.window = table.window;
      if (table.window > 0 && !p.causal()) pc.fail("causal", "a sliding-window table's points are causal");
      if (pc.require(p.has_direction(), "direction")) {
        if (auto pass = parse_pass(p.direction())) {
          pt.pass = *pass;
        } else {
          pc.fail("direction", "unknown direction '" + p.direction() + "' (known: fwd, bwd, fwd+bwd)");
        }
      }
      pc.require(p.has_causal(), "causal");
      pt.causal = p.causal();
      pc.positive(p.has_head_dim(), static_cast<double>(p.head_dim()), "head_dim");
      pc.positive(p.has_seq(), static_cast<double>(p.seq()), "seq");
      pc.positive(p.has_batch(), static_cast<double>(p.batch()), "batch");
      pc.positive(p.has_heads(), static_cast<double>(p.heads()), "heads");
      pt.head_dim = p.head_dim();
      pt.seq = p.seq();
      pt.batch = p.batch();
      pt.heads = p.heads();
      if (p.has_kv_heads()) {
        pc.positive(true, static_cast<double>(p.kv_heads()), "kv_heads");
        if (p.kv_heads() > 0 && p.heads() % p.kv_heads() != 0) pc.fail("kv_heads", "must divide heads");
        pt.kv_heads = p.kv_heads();
      }
      if (p.has_head_dim_v()) {
        pc.positive(true, static_cast<double>(p.head_dim_v()), "head_dim_v");
        pt.head_dim_v = p.head_dim_v();
      }
      // A table's points share their value width (narrower ones are fitted as a kernel of their own).
      if (j > 0 && p.head_dim_v() != t.point(0).head_dim_v()) {
        pc.fail("head_dim_v", "differs from the table's first point (one value width per table)");
      }
      const bool fp8 = table.dtype == ir::Dtype::kFp8 && cal.gpu.supports(ir::Dtype::kFp8);
      check_throughput(pc, p.has_tflops(), p.tflops(),
                       fp8 ? cal.gpu.peak(ir::Dtype::kFp8).tflops() : cal.gpu.peak_bf16.tflops(), "tflops",
                       fp8 ? "fp8 peak" : "bf16 peak");
      pt.tflops = p.tflops();
      pt.origin = origin(c, item("point", j));
      table.points.push_back(pt);
    }
    cal.attention.push_back(std::move(table));
  }
  if (m.attention_size() > 0 && !m.has_attention_model()) {
    root.fail("attention_model", "attention points need an attention_model (block, kernel)");
  }
}

std::optional<compute::MemoryPattern> parse_pattern(const std::string& s) {
  if (s == "load_store") return compute::MemoryPattern::kLoadStore;
  if (s == "load") return compute::MemoryPattern::kLoad;
  if (s == "store") return compute::MemoryPattern::kStore;
  if (s == "norm_forward") return compute::MemoryPattern::kNormForward;
  if (s == "norm_forward_backward") return compute::MemoryPattern::kNormForwardBackward;
  if (s == "fused_norm_forward") return compute::MemoryPattern::kFusedNormForward;
  if (s == "fused_norm_backward") return compute::MemoryPattern::kFusedNormBackward;
  if (s == "moe_gather") return compute::MemoryPattern::kMoeGather;
  if (s == "moe_combine") return compute::MemoryPattern::kMoeCombine;
  if (s == "moe_router") return compute::MemoryPattern::kMoeRouter;
  return std::nullopt;
}

void convert_memory(const sch::Calibration& m, const Checker& root, Calibration& cal) {
  for (int i = 0; i < m.memory_size(); ++i) {
    const auto& t = m.memory(i);
    const Checker c = root.nested(item("memory", i));
    compute::MemoryTable table;
    c.non_empty(t.has_name(), t.name(), "name");
    table.name = t.name();
    table.role = parse_role(t.has_role(), t.role(), c).value_or(compute::TableRole::kFit);
    table.provenance = convert_provenance(t.has_provenance(), t.provenance(), c);
    if (t.point_size() == 0) c.fail("point", "a table needs at least one point");
    for (int j = 0; j < t.point_size(); ++j) {
      const auto& p = t.point(j);
      const Checker pc = c.nested(item("point", j));
      compute::MemoryPoint pt;
      pc.non_empty(p.has_kernel(), p.kernel(), "kernel");
      pt.kernel = p.kernel();
      if (pc.require(p.has_pattern(), "pattern")) {
        if (auto pat = parse_pattern(p.pattern())) {
          pt.pattern = *pat;
        } else {
          pc.fail("pattern",
                  "unknown pattern '" + p.pattern() +
                      "' (known: load_store, load, store, norm_forward, norm_forward_backward, fused_norm_forward, fused_norm_backward, moe_gather, moe_combine, moe_router)");
        }
      }
      // Streaming kernels can slightly exceed the spec (H100 PCIe store-only: 100.8%), never by 10%.
      check_throughput(pc, p.has_achieved_gbps(), p.achieved_gbps(),
                       1.1 * cal.gpu.memory_bandwidth.gbytes_per_s(), "achieved_gbps",
                       "HBM bandwidth (+10%)");
      pt.gbps = p.achieved_gbps();
      pt.origin = origin(c, item("point", j));
      table.points.push_back(pt);
    }
    cal.memory.push_back(std::move(table));
  }
  if (m.has_launch_overhead()) {
    const Checker c = root.nested("launch_overhead");
    const auto& l = m.launch_overhead();
    c.non_negative(l.has_overhead_us(), l.overhead_us(), "overhead_us");
    cal.launch_overhead = Duration::from_us(l.overhead_us());
    cal.launch_overhead_provenance = convert_provenance(l.has_provenance(), l.provenance(), c);
  }
  for (int i = 0; i < m.block_scaled_gemm_size(); ++i) {
    const auto& b = m.block_scaled_gemm(i);
    const Checker c = root.nested(item("block_scaled_gemm", i));
    const auto dt = try_parse_kernel_dtype(b.dtype());
    if (!dt || (*dt != ir::Dtype::kMxfp8 && *dt != ir::Dtype::kNvfp4)) {
      c.fail("dtype", "must be mxfp8 or nvfp4 (got '" + b.dtype() + "')");
    } else if (!cal.gpu.supports(*dt)) {
      c.fail("dtype", cal.gpu.name + " has no " + b.dtype() + " tensor cores");
    } else if (cal.block_scaled_gemm.count(*dt) > 0) {
      c.fail("dtype", b.dtype() + " given twice");
    }
    c.positive(b.has_ratio(), b.ratio(), "ratio");
    if (b.ratio() > 2) c.fail("ratio", "must be at most 2 (got " + detail::format_number(b.ratio()) + ")");
    c.non_empty(b.has_source(), b.source(), "source");
    if (dt) cal.block_scaled_gemm[*dt] = compute::BlockScaledGemm{b.ratio(), b.source()};
  }
  if (m.has_memory_overheads()) {
    const Checker c = root.nested("memory_overheads");
    const auto& o = m.memory_overheads();
    c.non_negative(o.has_cuda_context_gb(), o.cuda_context_gb(), "cuda_context_gb");
    c.non_negative(o.has_nccl_buffers_gb_per_communicator(), o.nccl_buffers_gb_per_communicator(),
                   "nccl_buffers_gb_per_communicator");
    c.non_negative(o.has_allocator_fragmentation(), o.allocator_fragmentation(), "allocator_fragmentation");
    if (o.allocator_fragmentation() > 0.9) c.fail("allocator_fragmentation", "must be at most 0.9");
    cal.memory_overheads.cuda_context = Bytes::gb(o.cuda_context_gb());
    cal.memory_overheads.nccl_buffers_per_communicator = Bytes::gb(o.nccl_buffers_gb_per_communicator());
    cal.memory_overheads.allocator_fragmentation = o.allocator_fragmentation();
    cal.memory_overheads_provenance = convert_provenance(o.has_provenance(), o.provenance(), c);
  }
}

void check_imports(const sch::Calibration& m, const Checker& root) {
  for (int i = 0; i < m.imports_size(); ++i) {
    const auto& im = m.imports(i);
    const Checker c = root.nested(item("imports", i));
    c.non_empty(im.has_gpu(), im.gpu(), "gpu");
    c.non_empty(im.has_relationship(), im.relationship(), "relationship");
    if (c.require(im.has_family(), "family") && im.family() != "gemm" &&
        im.family() != "attention" && im.family() != "memory" && im.family() != "normalization") {
      c.fail("family", "unknown family '" + im.family() +
                           "' (known: gemm, attention, memory, normalization)");
    }
    for (int j = 0; j < im.dtypes_size(); ++j) {
      if (!try_parse_kernel_dtype(im.dtypes(j))) {
        c.fail(item("dtypes", j), "unknown dtype '" + im.dtypes(j) + "' (known: " + kernel_dtype_choices() + ")");
      }
    }
    if (im.dtypes_size() > 0 && im.family() != "gemm") c.fail("dtypes", "dtypes apply to family gemm only");
    if (im.has_kernel() && im.family() != "attention") c.fail("kernel", "kernel applies to family attention only");
    if (im.ceilings_size() > 0 && im.family() != "gemm")
      c.fail("ceilings", "ceilings apply to family gemm only");
    std::set<ir::Dtype> seen;
    for (int j = 0; j < im.ceilings_size(); ++j) {
      const auto& ce = im.ceilings(j);
      const Checker cc = c.nested(item("ceilings", j));
      if (cc.require(ce.has_dtype(), "dtype")) {
        if (auto dt = try_parse_kernel_dtype(ce.dtype())) {
          if (!seen.insert(*dt).second) cc.fail("dtype", "'" + ce.dtype() + "' is given twice");
        } else {
          cc.fail("dtype",
                  "unknown dtype '" + ce.dtype() + "' (known: " + kernel_dtype_choices() + ")");
        }
      }
      cc.fraction(ce.has_target_fraction(), ce.target_fraction(), "target_fraction");
      cc.fraction(ce.has_source_fraction(), ce.source_fraction(), "source_fraction");
      cc.non_empty(ce.has_source(), ce.source(), "source");
    }
  }
}

std::optional<Parsed> parse_file(const fs::path& path, const std::string& display, DiagnosticList& diags) {
  Parsed p;
  p.display = display;
  if (!detail::read_message(path, display, p.msg, p.lines, diags)) return std::nullopt;
  p.cal = std::make_shared<Calibration>();
  p.cal->file = display;
  const Checker c(display, p.lines, diags);
  const auto& m = p.msg;
  c.non_empty(m.has_gpu(), m.gpu(), "gpu");
  for (const auto& a : m.aliases()) p.cal->aliases.push_back(a);
  convert_datasheet(m, c, *p.cal);
  convert_gemm(m, c, *p.cal);
  convert_attention(m, c, *p.cal);
  convert_memory(m, c, *p.cal);
  check_imports(m, c);
  return p;
}

// The calibration files (data_dir()/calibration/*.textproto), sorted by name.
std::vector<fs::path> calibration_files() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(calibration_dir(), ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".textproto") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end(),
            [](const fs::path& a, const fs::path& b) { return a.stem().string() < b.stem().string(); });
  return out;
}

// The aliases of a calibration file; none for a file that does not parse (it reports its
// problems when loaded).
std::vector<std::string> calibration_aliases(const fs::path& file) {
  std::vector<std::string> out;
  sch::Calibration msg;
  FieldLines lines;
  DiagnosticList ignored;
  if (detail::read_message(file, file.string(), msg, lines, ignored)) {
    for (const auto& a : msg.aliases()) out.push_back(a);
  }
  return out;
}

// A name, alias or path → the file (nullopt and a diagnostic on `flag` when unknown).
std::optional<fs::path> resolve(const std::string& name_or_path, std::string_view flag, DiagnosticList& diags,
                                const std::string& where_file = "", int where_line = 0) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return fs::path(name_or_path);
  const std::string want = to_lower(name_or_path);
  // The first file by name whose name or alias matches, as in known_calibrations(); a file is
  // parsed for its aliases only when its name does not match (the measured H100 and H200 files
  // are 250 KB: parsing every file on each import was a quarter of a small sweep's time).
  for (const auto& file : calibration_files()) {
    if (to_lower(file.stem().string()) == want) return file;
    for (const auto& a : calibration_aliases(file)) {
      if (to_lower(a) == want) return file;
    }
  }
  diags.add(Diagnostic{where_file, where_line, std::string(flag),
                       "unknown GPU '" + name_or_path + "': not a file, and no calibration in " +
                           calibration_dir().string() + " (known: " + known_calibrations_text() + ")"});
  return std::nullopt;
}

std::string display_name(const fs::path& file) {
  std::error_code ec;
  const fs::path rel = fs::relative(file, data_dir(), ec);
  if (!ec && !rel.empty() && rel.native().rfind("..", 0) != 0) return rel.string();
  return file.string();
}

// Loads files once each. Imports take the source's own tables only (never what it imports in
// turn), so two GPUs may import from each other; a direction split loads its reference fully,
// and a cycle of direction splits is an error.
class Resolver {
 public:
  std::shared_ptr<const Calibration> load(const fs::path& file, DiagnosticList& diags) {
    const std::string display = display_name(file);
    if (auto it = done_.find(display); it != done_.end()) return it->second;
    if (std::find(stack_.begin(), stack_.end(), display) != stack_.end()) {
      std::string cycle;
      for (const auto& s : stack_) cycle += s + " -> ";
      diags.add(Diagnostic{display, 0, "attention_model.direction_split", "cycle: " + cycle + display});
      return nullptr;
    }
    stack_.push_back(display);
    std::shared_ptr<const Calibration> out;
    if (const Parsed* parsed = own(file, diags)) out = resolve_imports(*parsed, file, diags);
    stack_.pop_back();
    done_[display] = out;
    return out;
  }

 private:
  // The file parsed and validated, without its imports.
  const Parsed* own(const fs::path& file, DiagnosticList& diags) {
    const std::string display = display_name(file);
    auto it = parsed_.find(display);
    if (it == parsed_.end()) it = parsed_.emplace(display, parse_file(file, display, diags)).first;
    return it->second ? &*it->second : nullptr;
  }

  std::shared_ptr<const Calibration> resolve_imports(const Parsed& p, const fs::path& file,
                                                     DiagnosticList& diags) {
    auto out = std::make_shared<Calibration>(*p.cal);
    Calibration& cal = *out;
    const Checker root(p.display, p.lines, diags);
    // make_compute_model finds a GPU's file by its name: in the calibration folder they agree.
    std::error_code ec;
    const bool in_folder = fs::equivalent(fs::path(file).parent_path(), calibration_dir(), ec);
    if (in_folder && fs::path(file).stem().string() != cal.gpu.name && !cal.gpu.name.empty()) {
      root.fail("gpu", "the file of GPU '" + cal.gpu.name + "' must be named " + cal.gpu.name + ".textproto");
    }
    for (int i = 0; i < p.msg.imports_size(); ++i) {
      const auto& im = p.msg.imports(i);
      const Checker c = root.nested(item("imports", i));
      auto src_file = resolve(im.gpu(), c.path("gpu"), diags, p.display, c.line_of("gpu"));
      if (!src_file) continue;
      const Parsed* src_parsed = own(*src_file, diags);
      if (src_parsed == nullptr) continue;
      const Calibration* src = src_parsed->cal.get();
      // Points moved to another GPU generation are derived, not measured: their tables say so.
      const bool derived = im.derived() || im.ceilings_size() > 0;
      const std::string suffix = derived ? " [derived from " + src->gpu.name + ", not measured]"
                                         : " [from " + src->gpu.name + "]";
      const std::string note = std::string(derived ? "derived, not measured: " : "") +
                               "imported from " + src->gpu.name + ": " + im.relationship();
      const auto with_note = [&](compute::Provenance prov) {
        prov.notes = prov.notes.empty() ? note : prov.notes + "; " + note;
        return prov;
      };
      const std::set<std::string> named(im.tables().begin(), im.tables().end());
      std::set<std::string> found;
      // Whether the import takes the source table of this name (all of them without `tables`).
      const auto takes = [&](const std::string& table) {
        if (named.empty()) return true;
        if (named.count(table) == 0) return false;
        found.insert(table);
        return true;
      };
      if (im.family() == "gemm") {
        std::set<ir::Dtype> only;
        for (const auto& d : im.dtypes()) {
          if (auto dt = try_parse_kernel_dtype(d)) {
            only.insert(*dt);
            if (!cal.gpu.supports(*dt)) c.fail("dtypes", cal.gpu.name + " has no " + d + " tensor cores");
          }
        }
        // Published ceilings: the target's plateau over the source's, per dtype (1 without).
        std::map<ir::Dtype, double> ceiling;
        std::string ceiling_note;
        for (const auto& ce : im.ceilings()) {
          if (auto dt = try_parse_kernel_dtype(ce.dtype())) {
            ceiling[*dt] = ce.target_fraction() / ce.source_fraction();
            ceiling_note += (ceiling_note.empty() ? "" : "; ") + ce.dtype() + " x " +
                            detail::format_number(ce.target_fraction()) + "/" +
                            detail::format_number(ce.source_fraction()) + " (" + ce.source() + ")";
          }
        }
        std::size_t imported = 0;
        for (const auto& t : src->gemm) {
          if (!takes(t.name)) continue;
          compute::Provenance prov = with_note(t.provenance);
          if (!ceiling.empty())
            prov.notes += "; peak ratio times published ceiling ratio, " + ceiling_note;
          compute::GemmTable nt{t.name + suffix, t.role, t.kernel, prov, derived, {}};
          for (auto pt : t.points) {
            if (!only.empty() && only.count(pt.dtype) == 0) continue;
            if (!cal.gpu.supports(pt.dtype)) continue;
            pt.tflops *= cal.gpu.peak(pt.dtype).per_s() / src->gpu.peak(pt.dtype).per_s();
            if (const auto it = ceiling.find(pt.dtype); it != ceiling.end())
              pt.tflops *= it->second;
            nt.points.push_back(pt);
          }
          imported += nt.points.size();
          if (!nt.points.empty()) cal.gemm.push_back(std::move(nt));
        }
        if (imported == 0) c.fail("gpu", "imports no GEMM point from " + src->gpu.name);
        if (cal.gemm_tiles.empty()) {
          cal.gemm_tiles = src->gemm_tiles;
          cal.gemm_model_provenance = src->gemm_model_provenance;
        }
      } else if (im.family() == "attention") {
        std::size_t imported = 0;
        for (const auto& t : src->attention) {
          if (im.has_kernel() && t.kernel != im.kernel()) continue;
          if (!takes(t.name)) continue;
          if (t.dtype != ir::Dtype::kBf16 && !cal.gpu.supports(t.dtype)) continue;
          compute::AttentionTable nt{t.name + suffix,         t.kernel, t.role,
                                     with_note(t.provenance), derived,  t.points, t.dtype, t.window};
          // TFLOP/s move by the ratio of the peaks of the table's precision.
          const double ratio = cal.gpu.peak(t.dtype).per_s() / src->gpu.peak(t.dtype).per_s();
          for (auto& pt : nt.points) pt.tflops *= ratio;
          imported += nt.points.size();
          cal.attention.push_back(std::move(nt));
        }
        if (imported == 0) c.fail("gpu", "imports no attention point from " + src->gpu.name);
        if (cal.attention_block == 0) {
          cal.attention_block = src->attention_block;
          cal.attention_kernel = src->attention_kernel;
          cal.attention_model_provenance = src->attention_model_provenance;
        }
        // The source's direction split comes with its forward+backward points.
        const auto& sm = src_parsed->msg;
        if (!cal.direction_split && !p.msg.attention_model().has_direction_split() &&
            sm.attention_model().has_direction_split()) {
          const auto& s = sm.attention_model().direction_split();
          if (auto ref_file = resolve(s.gpu(), "attention_model.direction_split.gpu", diags, src->file)) {
            // The source's split names a kernel of the source (loaded whole) or of another file.
            if (auto ref = load(*ref_file, diags)) {
              cal.direction_split = compute::DirectionSplit{s.reason(), ref, s.kernel()};
            }
          }
        }
      } else if (im.family() == "memory" || im.family() == "normalization") {
        // Memory GB/s scale by the ratio of the spec bandwidths; "normalization" takes only the
        // native LayerNorm's points.
        const bool norms_only = im.family() == "normalization";
        std::size_t imported = 0;
        for (const auto& t : src->memory) {
          if (!takes(t.name)) continue;
          compute::MemoryTable nt{t.name + suffix, t.role, with_note(t.provenance), derived, {}};
          for (auto pt : t.points) {
            if (norms_only && !compute::is_norm_pattern(pt.pattern)) continue;
            pt.gbps *= cal.gpu.memory_bandwidth.bytes_per_s() / src->gpu.memory_bandwidth.bytes_per_s();
            nt.points.push_back(std::move(pt));
          }
          imported += nt.points.size();
          if (!nt.points.empty()) cal.memory.push_back(std::move(nt));
        }
        if (imported == 0) {
          c.fail("gpu", "imports no " + im.family() + " point from " + src->gpu.name);
        }
        if (!norms_only && !cal.launch_overhead && src->launch_overhead) {
          cal.launch_overhead = src->launch_overhead;
          cal.launch_overhead_provenance = with_note(src->launch_overhead_provenance);
        }
      }
      for (int j = 0; j < im.tables_size(); ++j) {
        if (found.count(im.tables(j)) == 0) {
          c.fail(item("tables", j), "no " + im.family() + " table named '" + im.tables(j) +
                                        "' in " + src->gpu.name);
        }
      }
    }
    if (p.msg.has_attention_model() && p.msg.attention_model().has_direction_split()) {
      const auto& s = p.msg.attention_model().direction_split();
      const Checker c = root.nested("attention_model.direction_split");
      if (auto ref_file = resolve(s.gpu(), c.path("gpu"), diags, p.display, c.line_of("gpu"))) {
        if (display_name(*ref_file) == p.display) {
          // A kernel of this same file (null reference).
          cal.direction_split = compute::DirectionSplit{s.reason(), nullptr, s.kernel()};
        } else if (auto ref = load(*ref_file, diags)) {
          cal.direction_split = compute::DirectionSplit{s.reason(), ref, s.kernel()};
        }
      }
    }
    // Every family the model needs must have points (own or imported).
    std::size_t gemm_points = 0, attention_points = 0, memory_points = 0;
    for (const auto& t : cal.gemm) gemm_points += t.points.size();
    for (const auto& t : cal.attention) attention_points += t.points.size();
    for (const auto& t : cal.memory) memory_points += t.points.size();
    if (gemm_points == 0) root.fail("gemm", "no GEMM points (measured or imported)");
    if (attention_points == 0) root.fail("attention", "no attention points (measured or imported)");
    if (memory_points == 0) root.fail("memory", "no memory points (measured or imported)");
    return out;
  }

  std::map<std::string, std::optional<Parsed>> parsed_;
  std::map<std::string, std::shared_ptr<const Calibration>> done_;
  std::vector<std::string> stack_;
};

}  // namespace

std::optional<ir::Dtype> try_parse_kernel_dtype(std::string_view s) {
  for (const auto& [name, d] : kKernelDtypes) {
    if (name == s) return d;
  }
  return std::nullopt;
}

std::string kernel_dtype_choices() {
  std::string out;
  for (const auto& [name, d] : kKernelDtypes) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::vector<CalibratedGpu> known_calibrations() {
  std::vector<CalibratedGpu> out;
  for (const auto& file : calibration_files()) {
    out.push_back(CalibratedGpu{file.stem().string(), calibration_aliases(file), file});
  }
  return out;
}

std::string known_calibrations_text() {
  std::string out;
  for (const auto& g : known_calibrations()) {
    if (!out.empty()) out += ", ";
    out += g.name;
    if (!g.aliases.empty()) {
      out += " (";
      for (std::size_t i = 0; i < g.aliases.size(); ++i) out += (i ? ", " : "") + g.aliases[i];
      out += ")";
    }
  }
  return out.empty() ? "none" : out;
}

std::optional<fs::path> calibration_file(const std::string& gpu_name) {
  std::error_code ec;
  const fs::path p = calibration_dir() / (gpu_name + ".textproto");
  if (fs::is_regular_file(p, ec)) return p;
  return std::nullopt;
}

std::shared_ptr<const Calibration> load_calibration(const std::string& name_or_path, std::string_view flag) {
  DiagnosticList diags;
  const auto file = resolve(name_or_path, flag, diags);
  diags.throw_if_any();
  Resolver resolver;
  auto cal = resolver.load(*file, diags);
  diags.throw_if_any();
  SIM_ASSERT(cal != nullptr, "a calibration that failed to load left no diagnostic");
  return cal;
}

std::unique_ptr<compute::ComputeModel> make_compute_model(const compute::GpuSpec& gpu,
                                                          const std::string& attention_kernel) {
  const auto file = calibration_file(gpu.name);
  return make_compute_model(gpu, file ? load_calibration(file->string()) : nullptr, attention_kernel);
}

std::unique_ptr<compute::ComputeModel> make_compute_model(const compute::GpuSpec& gpu,
                                                          std::shared_ptr<const compute::Calibration> cal,
                                                          const std::string& attention_kernel) {
  if (!cal && !attention_kernel.empty()) {
    throw InputError(Diagnostic{"", 0, "--attention-kernel",
                                gpu.name + " has no calibration file, so no named attention kernel"});
  }
  if (!cal) return compute::make_roofline_model(gpu);
  // The cluster and the calibration describe the same GPU kind: their datasheets must agree.
  DiagnosticList diags;
  const auto near = [](double a, double b) { return std::fabs(a - b) <= 0.05 * std::max(std::fabs(a), std::fabs(b)); };
  const auto check = [&](const char* field, double cluster, double calibrated) {
    if (!near(cluster, calibrated)) {
      diags.add(Diagnostic{cal->file, 0, std::string("datasheet.") + field,
                           "differs from the cluster's gpu " + gpu.name + " (" + detail::format_number(calibrated) +
                               " vs " + detail::format_number(cluster) + ")"});
    }
  };
  check("peak_bf16_tflops", gpu.peak_bf16.tflops(), cal->gpu.peak_bf16.tflops());
  check("peak_fp16_tflops", gpu.peak_fp16.tflops(), cal->gpu.peak_fp16.tflops());
  check("peak_fp8_tflops", gpu.peak_fp8.tflops(), cal->gpu.peak_fp8.tflops());
  check("peak_fp4_tflops", gpu.peak_fp4.tflops(), cal->gpu.peak_fp4.tflops());
  check("peak_fp32_tflops", gpu.peak_fp32.tflops(), cal->gpu.peak_fp32.tflops());
  check("memory_bandwidth_gbps", gpu.memory_bandwidth.gbytes_per_s(), cal->gpu.memory_bandwidth.gbytes_per_s());
  if (gpu.num_sms != cal->gpu.num_sms) {
    diags.add(Diagnostic{cal->file, 0, "datasheet.num_sms",
                         "differs from the cluster's gpu " + gpu.name + " (" + std::to_string(cal->gpu.num_sms) +
                             " vs " + std::to_string(gpu.num_sms) + ")"});
  }
  diags.throw_if_any();
  return compute::make_calibrated_model(cal, gpu, attention_kernel);
}

std::shared_ptr<const compute::ComputeModel> ComputeModelCache::get(const compute::GpuSpec& gpu,
                                                                    const std::string& attention_kernel) {
  // The roofline depends on every field of the spec, the calibrated model reports the spec it
  // was given: the key is the whole spec.
  char key[512];
  std::snprintf(key, sizeof key,
                "%s|%.17g|%.17g|%.17g|%.17g|%.17g|%.17g|%lld|%.17g|%d|%.17g|%.17g|%lld",
                gpu.name.c_str(), gpu.peak_bf16.per_s(), gpu.peak_fp16.per_s(),
                gpu.peak_fp8.per_s(), gpu.peak_fp4.per_s(), gpu.peak_tf32.per_s(),
                gpu.peak_fp32.per_s(), static_cast<long long>(gpu.memory_capacity.count()),
                gpu.memory_bandwidth.bytes_per_s(), gpu.num_sms, gpu.matmul_efficiency,
                gpu.memory_efficiency, static_cast<long long>(gpu.kernel_launch_overhead.ps()));
  const std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = models_[std::string(key) + "|" + attention_kernel];
  if (!slot) slot = make_compute_model(gpu, calibration_locked(gpu.name), attention_kernel);
  return slot;
}

std::shared_ptr<const compute::Calibration> ComputeModelCache::calibration(const std::string& gpu_name) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return calibration_locked(gpu_name);
}

std::shared_ptr<const compute::Calibration> ComputeModelCache::calibration_locked(const std::string& gpu_name) {
  auto it = calibrations_.find(gpu_name);
  if (it == calibrations_.end()) {
    const auto file = calibration_file(gpu_name);
    it = calibrations_.emplace(gpu_name, file ? load_calibration(file->string()) : nullptr).first;
  }
  return it->second;
}

}  // namespace ts::config
