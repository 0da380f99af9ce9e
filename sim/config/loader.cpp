// Loading and validation of model, cluster and scenario files.
#include "sim/config/loader.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "sim/config/names.h"
#include "sim/config/plan_rules.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/cluster.pb.h"
#include "sim/schema/model.pb.h"
#include "sim/schema/scenario.pb.h"

namespace ts::config {
namespace {

namespace fs = std::filesystem;
namespace sch = trainsim::schema;
using detail::Checker;
using detail::FieldLines;

enum class Zoo { kModels, kTopologies };

const char* zoo_folder(Zoo z) {
  switch (z) {
    case Zoo::kModels: return "models";
    case Zoo::kTopologies: return "topologies";
  }
  return "";
}

const char* zoo_kind(Zoo z) {
  switch (z) {
    case Zoo::kModels: return "model";
    case Zoo::kTopologies: return "cluster";
  }
  return "";
}

bool has_suffix(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_input_file_name(const std::string& s) {
  return has_suffix(s, ".textproto") || has_suffix(s, ".txtpb") || has_suffix(s, ".pbtxt") ||
         has_suffix(s, ".json");
}

std::vector<std::string> zoo_names(Zoo zoo) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data_dir() / zoo_folder(zoo), ec)) {
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file(ec) && is_input_file_name(file)) {
      names.insert(entry.path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

// Where a model or cluster name was given: a flag, or a field of a scenario file.
struct Origin {
  std::string file;
  int line = 0;
  std::string field;
};

// A zoo name or a path → the file to read. A path is anything with a '/' or an input-file
// extension; relative paths are taken from `base` (the scenario's folder; empty = working
// directory). Adds a diagnostic at `origin` when there is no such file or zoo entry.
std::optional<fs::path> resolve(Zoo zoo, const std::string& s, const Origin& origin,
                                const fs::path& base, DiagnosticList& diags) {
  const auto fail = [&](std::string message) {
    diags.add(Diagnostic{origin.file, origin.line, origin.field, std::move(message)});
    return std::nullopt;
  };
  if (s.empty()) return fail(std::string("no ") + zoo_kind(zoo) + " given");
  std::error_code ec;
  if (s.find('/') != std::string::npos || is_input_file_name(s)) {
    fs::path p(s);
    if (p.is_relative() && !base.empty()) p = base / p;
    if (!fs::is_regular_file(p, ec)) return fail("no such file '" + p.string() + "'");
    return p;
  }
  const fs::path folder = data_dir() / zoo_folder(zoo);
  for (const char* ext : {".textproto", ".json"}) {
    fs::path p = folder / (s + ext);
    if (fs::is_regular_file(p, ec)) return p;
  }
  std::string known;
  for (const auto& n : zoo_names(zoo)) known += (known.empty() ? "" : ", ") + n;
  return fail("unknown " + std::string(zoo_kind(zoo)) + " '" + s + "': not a file, and not in the zoo at " +
              folder.string() + " (known: " + (known.empty() ? "none" : known) + ")");
}

// Checks a spelled (enumerated) field and returns its value.
template <class E, class Parse>
std::optional<E> spelled(const Checker& c, bool has, const std::string& value,
                         std::string_view field, Parse parse, const std::string& choices,
                         bool required) {
  if (!has) {
    if (required) c.require(false, field);
    return std::nullopt;
  }
  std::optional<E> v = parse(value);
  if (!v) c.fail(field, "unknown value '" + value + "' (expected " + choices + ")");
  return v;
}

// --- Models ---------------------------------------------------------------------------------

std::optional<ir::ModelSpec> convert_model(const sch::Model& m, const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  std::set<std::string, std::less<>> missing;
  const auto need = [&](bool has, std::string_view field) {
    if (!c.require(has, field)) missing.emplace(field);
  };
  need(m.has_name(), "name");
  need(m.has_num_layers(), "num_layers");
  need(m.has_hidden(), "hidden");
  need(m.has_num_heads(), "num_heads");
  need(m.has_ffn_hidden(), "ffn_hidden");
  need(m.has_vocab(), "vocab");
  need(m.has_max_seq_len(), "max_seq_len");
  need(m.has_tied_embeddings(), "tied_embeddings");
  need(m.has_linear_bias(), "linear_bias");

  ir::ModelSpec s;
  s.name = m.name();
  s.num_layers = m.num_layers();
  s.hidden = m.hidden();
  s.num_heads = m.num_heads();
  s.num_kv_heads = m.has_num_kv_heads() ? m.num_kv_heads() : m.num_heads();
  if (!m.has_num_kv_heads() && !m.has_num_heads()) missing.emplace("num_kv_heads");
  s.ffn_hidden = m.ffn_hidden();
  s.vocab = m.vocab();
  const auto norm = spelled<ir::Norm>(c, m.has_norm(), m.norm(), "norm", try_parse_norm,
                                      norm_choices(), true);
  const auto act = spelled<ir::Activation>(c, m.has_activation(), m.activation(), "activation",
                                           try_parse_activation, activation_choices(), true);
  const auto pos = spelled<ir::Position>(c, m.has_position(), m.position(), "position",
                                         try_parse_position, position_choices(), true);
  if (norm) s.norm = *norm;
  if (act) s.activation = *act;
  if (pos) s.position = *pos;
  s.tied_embeddings = m.tied_embeddings();
  s.linear_bias = m.linear_bias();
  if (m.has_dropout()) s.dropout = m.dropout();
  if (m.has_head_dim()) {
    if (m.head_dim() <= 0) c.fail("head_dim", "must be > 0 (got " + std::to_string(m.head_dim()) + ")");
    s.kv_channels = m.head_dim();
  }
  if (m.has_mtp_layers()) s.mtp_layers = m.mtp_layers();
  if (m.has_sliding_window()) {
    const Checker wc = c.nested("sliding_window");
    wc.require(m.sliding_window().has_tokens(), "tokens");
    s.sliding_window = m.sliding_window().tokens();
    if (m.sliding_window().has_tokens() && s.sliding_window <= 0) {
      wc.fail("tokens", "must be > 0 (got " + std::to_string(s.sliding_window) + ")");
    }
    s.full_attention_every = m.sliding_window().full_every();
  }
  if (m.has_moe()) {
    const sch::Moe& e = m.moe();
    const Checker mc = c.nested("moe");
    mc.require(e.has_num_experts(), "num_experts");
    mc.require(e.has_top_k(), "top_k");
    mc.require(e.has_expert_ffn_hidden(), "expert_ffn_hidden");
    ir::MoeSpec moe;
    moe.num_experts = e.num_experts();
    moe.top_k = e.top_k();
    moe.expert_ffn_hidden = e.expert_ffn_hidden();
    moe.shared_experts = e.shared_experts();
    moe.shared_ffn_hidden = e.shared_ffn_hidden();
    moe.dense_layers = e.dense_layers();
    moe.expert_groups = e.expert_groups();
    moe.group_limit = e.group_limit();
    const auto score = spelled<ir::RouterScore>(mc, e.has_router_score(), e.router_score(), "router_score",
                                                try_parse_router_score, router_score_choices(), true);
    if (score) moe.router_score = *score;
    s.moe = moe;
  }
  if (m.has_mla()) {
    const sch::Mla& a = m.mla();
    const Checker ac = c.nested("mla");
    ac.require(a.has_kv_lora_rank(), "kv_lora_rank");
    ac.require(a.has_rope_head_dim(), "rope_head_dim");
    s.mla = ir::MlaSpec{a.q_lora_rank(), a.kv_lora_rank(), a.rope_head_dim()};
  }
  // The file always gives the context length; ModelSpec keeps it only as the size of a learned
  // position table (0 for rotary positions, which have no table).
  if (m.has_max_seq_len() && m.max_seq_len() <= 0) {
    c.fail("max_seq_len", "must be > 0 (got " + std::to_string(m.max_seq_len()) + ")");
    missing.emplace("max_seq_len");  // reported; keep the model rules quiet about it
  }
  s.max_seq_len = s.position == ir::Position::kLearned && pos ? m.max_seq_len() : 0;
  if (!pos) missing.emplace("max_seq_len");

  detail::model_rules(s, [&](std::string_view field, std::string message) {
    if (missing.find(field) == missing.end()) c.fail(field, std::move(message));
  });
  if (c.diagnostics().items().size() != before) return std::nullopt;
  return s;
}

std::optional<ir::ModelSpec> model_from_file(const fs::path& file, DiagnosticList& diags) {
  sch::Model msg;
  FieldLines lines;
  const std::string display = file.string();
  if (!detail::read_message(file, display, msg, lines, diags)) return std::nullopt;
  return convert_model(msg, Checker(display, lines, diags));
}

// --- Clusters -------------------------------------------------------------------------------

std::optional<compute::GpuSpec> convert_gpu(const sch::Cluster::Gpu& g, const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  c.non_empty(g.has_name(), g.name(), "name");
  c.positive(g.has_peak_bf16_tflops(), g.peak_bf16_tflops(), "peak_bf16_tflops");
  c.positive(g.has_peak_fp16_tflops(), g.peak_fp16_tflops(), "peak_fp16_tflops");
  c.non_negative(g.has_peak_fp8_tflops(), g.peak_fp8_tflops(), "peak_fp8_tflops");
  c.non_negative(g.has_peak_tf32_tflops(), g.peak_tf32_tflops(), "peak_tf32_tflops");
  c.positive(g.has_peak_fp32_tflops(), g.peak_fp32_tflops(), "peak_fp32_tflops");
  compute::GpuSpec s;
  switch (g.memory_case()) {
    case sch::Cluster::Gpu::kMemoryGib:
      c.positive(true, g.memory_gib(), "memory_gib");
      s.memory_capacity = Bytes::gib(g.memory_gib());
      break;
    case sch::Cluster::Gpu::kMemoryGb:
      c.positive(true, g.memory_gb(), "memory_gb");
      s.memory_capacity = Bytes::gb(g.memory_gb());
      break;
    case sch::Cluster::Gpu::kMemoryMib:
      c.positive(true, g.memory_mib(), "memory_mib");
      s.memory_capacity = Bytes::mib(g.memory_mib());
      break;
    case sch::Cluster::Gpu::MEMORY_NOT_SET:
      c.fail("memory_gib", "required value is missing (give one of memory_gib, memory_gb, memory_mib)");
      break;
  }
  c.positive(g.has_memory_bandwidth_gbps(), g.memory_bandwidth_gbps(), "memory_bandwidth_gbps");
  c.positive(g.has_num_sms(), g.num_sms(), "num_sms");
  c.fraction(g.has_matmul_efficiency(), g.matmul_efficiency(), "matmul_efficiency");
  c.fraction(g.has_memory_efficiency(), g.memory_efficiency(), "memory_efficiency");
  c.non_negative(g.has_kernel_launch_overhead_us(), g.kernel_launch_overhead_us(),
                 "kernel_launch_overhead_us");
  if (g.has_compute_slowdown_under_comm()) {
    const double v = g.compute_slowdown_under_comm();
    if (!std::isfinite(v) || v < 0 || v >= 1) {
      c.fail("compute_slowdown_under_comm", "must be in [0, 1) (got " + detail::format_number(v) + ")");
    }
  }
  if (g.has_power_watts()) c.positive(true, g.power_watts(), "power_watts");
  if (g.has_peak_fp4_tflops()) c.non_negative(true, g.peak_fp4_tflops(), "peak_fp4_tflops");
  if (c.diagnostics().items().size() != before) return std::nullopt;
  s.name = g.name();
  s.peak_bf16 = FlopRate::tflops(g.peak_bf16_tflops());
  s.peak_fp16 = FlopRate::tflops(g.peak_fp16_tflops());
  s.peak_fp8 = FlopRate::tflops(g.peak_fp8_tflops());
  s.peak_fp4 = FlopRate::tflops(g.peak_fp4_tflops());
  s.peak_tf32 = FlopRate::tflops(g.peak_tf32_tflops());
  s.peak_fp32 = FlopRate::tflops(g.peak_fp32_tflops());
  s.memory_bandwidth = Bandwidth::gbytes_per_s(g.memory_bandwidth_gbps());
  s.num_sms = g.num_sms();
  s.matmul_efficiency = g.matmul_efficiency();
  s.memory_efficiency = g.memory_efficiency();
  s.kernel_launch_overhead = Duration::from_us(g.kernel_launch_overhead_us());
  s.compute_slowdown_under_comm = g.compute_slowdown_under_comm();
  s.power_watts = g.power_watts();
  return s;
}

// NVLink and NIC fields shared by the node shorthand and the scale_up/host pair.
void check_nvlink(bool has_bw, double bw_gbps, bool has_lat, double lat_ns, std::int32_t gpus,
                  const Checker& c) {
  // A single-GPU domain has no NVLink; any larger one needs its bandwidth.
  if (gpus > 1) {
    c.positive(has_bw, bw_gbps, "nvlink_bandwidth_gbps");
  } else {
    c.non_negative(has_bw, bw_gbps, "nvlink_bandwidth_gbps");
  }
  c.non_negative(has_lat, lat_ns, "nvlink_latency_ns");
  // A link slower than 1 Mb/s would push a collective beyond the simulated clock's range.
  if (bw_gbps > 0 && bw_gbps < 1e-3) {
    c.fail("nvlink_bandwidth_gbps",
           "must be >= 0.001 (got " + detail::format_number(bw_gbps) + ")");
  }
}

void check_nic(bool has_bw, double bw_gbits, bool has_lat, double lat_ns, const Checker& c) {
  c.positive(has_bw, bw_gbits, "nic_bandwidth_gbits");
  c.non_negative(has_lat, lat_ns, "nic_latency_ns");
  if (bw_gbits > 0 && bw_gbits < 1e-3) {
    c.fail("nic_bandwidth_gbits", "must be >= 0.001 (got " + detail::format_number(bw_gbits) + ")");
  }
}

// Bounds far beyond real systems: the topology has a vertex per GPU and NIC.
constexpr std::int32_t kMaxGpusPerDomain = 1 << 20;
constexpr std::int32_t kMaxNics = 4096;

struct DomainAndHost {
  topology::ScaleUpSpec scale_up;
  topology::HostSpec host;
};

// The node shorthand: a host that is its whole NVLink domain.
std::optional<DomainAndHost> convert_node(const sch::Cluster::Node& n, const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  c.positive(n.has_gpus_per_node(), n.gpus_per_node(), "gpus_per_node");
  check_nvlink(n.has_nvlink_bandwidth_gbps(), n.nvlink_bandwidth_gbps(), n.has_nvlink_latency_ns(),
               n.nvlink_latency_ns(), n.gpus_per_node(), c);
  c.positive(n.has_nics_per_node(), n.nics_per_node(), "nics_per_node");
  check_nic(n.has_nic_bandwidth_gbits(), n.nic_bandwidth_gbits(), n.has_nic_latency_ns(),
            n.nic_latency_ns(), c);
  if (n.gpus_per_node() > kMaxGpusPerDomain)
    c.fail("gpus_per_node", "must be <= 1048576 (got " + std::to_string(n.gpus_per_node()) + ")");
  if (n.nics_per_node() > kMaxNics)
    c.fail("nics_per_node", "must be <= 4096 (got " + std::to_string(n.nics_per_node()) + ")");
  if (c.diagnostics().items().size() != before) return std::nullopt;
  DomainAndHost s;
  s.scale_up.gpus_per_domain = n.gpus_per_node();
  s.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(n.nvlink_bandwidth_gbps());
  s.scale_up.nvlink_latency = Duration::from_ns(n.nvlink_latency_ns());
  s.scale_up.nvlink_sharp = n.nvlink_sharp();
  s.host.gpus_per_host = n.gpus_per_node();
  s.host.nics_per_host = n.nics_per_node();
  s.host.nic_bandwidth = Bandwidth::gbits_per_s(n.nic_bandwidth_gbits());
  s.host.nic_latency = Duration::from_ns(n.nic_latency_ns());
  return s;
}

// Why `used` GPUs of each scale-up domain cannot hold a job ("" when they can): at least one,
// at most the domain, and whole hosts (a job takes a tray or a node entirely); 0 hosts means
// the host size is not known yet. The cluster file's gpus_used_per_domain and the per-run
// placement (--gpus-per-domain, validation overrides) share this rule.
std::string per_domain_error(std::int64_t used, std::int64_t per_domain, std::int64_t per_host) {
  if (used < 1 || used > per_domain) {
    return "must be in [1, " + std::to_string(per_domain) +
           "], the GPUs of one scale-up domain (got " + std::to_string(used) + ")";
  }
  if (per_host > 0 && used % per_host != 0) {
    return "must be whole hosts: a multiple of " + std::to_string(per_host) + " GPUs (got " +
           std::to_string(used) + ")";
  }
  return "";
}

std::optional<topology::ScaleUpSpec> convert_scale_up(const sch::Cluster::ScaleUp& d,
                                                      const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  c.positive(d.has_gpus_per_domain(), d.gpus_per_domain(), "gpus_per_domain");
  if (d.gpus_per_domain() > kMaxGpusPerDomain) {
    c.fail("gpus_per_domain",
           "must be <= 1048576 (got " + std::to_string(d.gpus_per_domain()) + ")");
  }
  if (d.has_gpus_used_per_domain()) {
    const std::string why = per_domain_error(d.gpus_used_per_domain(), d.gpus_per_domain(), 0);
    if (!why.empty()) c.fail("gpus_used_per_domain", why);
  }
  if (d.has_nvlink_generation() && d.nvlink_generation() < 1) {
    c.fail("nvlink_generation", "must be >= 1 (got " + std::to_string(d.nvlink_generation()) + ")");
  }
  check_nvlink(d.has_nvlink_bandwidth_gbps(), d.nvlink_bandwidth_gbps(), d.has_nvlink_latency_ns(),
               d.nvlink_latency_ns(), d.gpus_per_domain(), c);
  if (c.diagnostics().items().size() != before) return std::nullopt;
  topology::ScaleUpSpec s;
  s.gpus_per_domain = d.gpus_per_domain();
  s.gpus_used_per_domain = d.gpus_used_per_domain();
  s.nvlink_generation = d.nvlink_generation();
  s.nvlink_bandwidth = Bandwidth::gbytes_per_s(d.nvlink_bandwidth_gbps());
  s.nvlink_latency = Duration::from_ns(d.nvlink_latency_ns());
  s.nvlink_sharp = d.nvlink_sharp();
  return s;
}

std::optional<topology::HostSpec> convert_host(const sch::Cluster::Host& h, const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  c.positive(h.has_gpus_per_host(), h.gpus_per_host(), "gpus_per_host");
  c.positive(h.has_nics_per_host(), h.nics_per_host(), "nics_per_host");
  check_nic(h.has_nic_bandwidth_gbits(), h.nic_bandwidth_gbits(), h.has_nic_latency_ns(),
            h.nic_latency_ns(), c);
  if (h.nics_per_host() > kMaxNics)
    c.fail("nics_per_host", "must be <= 4096 (got " + std::to_string(h.nics_per_host()) + ")");
  if (c.diagnostics().items().size() != before) return std::nullopt;
  topology::HostSpec s;
  s.gpus_per_host = h.gpus_per_host();
  s.nics_per_host = h.nics_per_host();
  s.nic_bandwidth = Bandwidth::gbits_per_s(h.nic_bandwidth_gbits());
  s.nic_latency = Duration::from_ns(h.nic_latency_ns());
  return s;
}

std::optional<topology::FabricSpec> convert_fabric(const sch::Cluster::Fabric& f, const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  const auto kind = spelled<topology::FabricKind>(c, f.has_kind(), f.kind(), "kind",
                                                  try_parse_fabric_kind, fabric_kind_choices(), true);
  c.at_least(f.has_tiers(), f.tiers(), 1, "tiers");
  if (f.tiers() > 3) c.fail("tiers", "must be 1, 2 or 3 (got " + std::to_string(f.tiers()) + ")");
  c.at_least(f.has_oversubscription(), f.oversubscription(), 1, "oversubscription");
  c.non_negative(f.has_switch_latency_ns(), f.switch_latency_ns(), "switch_latency_ns");
  c.at_least(f.has_switch_radix(), f.switch_radix(), 2, "switch_radix");
  if (c.diagnostics().items().size() != before || !kind) return std::nullopt;
  topology::FabricSpec s;
  s.kind = *kind;
  s.tiers = f.tiers();
  s.oversubscription = f.oversubscription();
  s.switch_latency = Duration::from_ns(f.switch_latency_ns());
  s.switch_radix = f.switch_radix();
  s.adaptive_routing = f.adaptive_routing();
  return s;
}

std::optional<Cluster> convert_cluster(const sch::Cluster& m, const Checker& c) {
  const std::size_t before = c.diagnostics().items().size();
  c.non_empty(m.has_name(), m.name(), "name");
  std::optional<compute::GpuSpec> gpu;
  std::optional<DomainAndHost> parts;
  std::optional<topology::FabricSpec> fabric;
  if (c.require(m.has_gpu(), "gpu")) gpu = convert_gpu(m.gpu(), c.nested("gpu"));
  if (m.has_node()) {
    // The shorthand, or the split form: never both.
    if (m.has_scale_up()) c.fail("scale_up", "give either node or scale_up and host, not both");
    if (m.has_host()) c.fail("host", "give either node or scale_up and host, not both");
    parts = convert_node(m.node(), c.nested("node"));
  } else if (m.has_scale_up() || m.has_host()) {
    std::optional<topology::ScaleUpSpec> domain;
    std::optional<topology::HostSpec> host;
    if (c.require(m.has_scale_up(), "scale_up"))
      domain = convert_scale_up(m.scale_up(), c.nested("scale_up"));
    if (c.require(m.has_host(), "host")) host = convert_host(m.host(), c.nested("host"));
    if (domain && host) {
      // A domain holds whole hosts (an NVL72 rack: 18 trays of 4 GPUs), and so does the part
      // of it a job uses.
      const std::int32_t per_host = host->gpus_per_host;
      if (domain->gpus_per_domain % per_host != 0) {
        c.nested("scale_up")
            .fail("gpus_per_domain",
                  "must be a multiple of host.gpus_per_host = " + std::to_string(per_host) +
                      " (got " + std::to_string(domain->gpus_per_domain) + ")");
      } else if (const std::string why = per_domain_error(domain->placed_per_domain(),
                                                          domain->gpus_per_domain, per_host);
                 !why.empty()) {
        c.nested("scale_up").fail("gpus_used_per_domain", why);
      } else {
        parts = DomainAndHost{*domain, *host};
      }
    }
  } else {
    c.require(false, "node");
  }
  if (c.require(m.has_fabric(), "fabric")) fabric = convert_fabric(m.fabric(), c.nested("fabric"));
  if (c.diagnostics().items().size() != before || !gpu || !parts || !fabric) return std::nullopt;
  Cluster out;
  out.gpu = std::move(*gpu);
  out.cluster.name = m.name();
  out.cluster.gpu = out.gpu.name;
  out.cluster.scale_up = parts->scale_up;
  out.cluster.host = parts->host;
  out.cluster.fabric = *fabric;
  return out;
}

std::optional<Cluster> cluster_from_file(const fs::path& file, DiagnosticList& diags) {
  sch::Cluster msg;
  FieldLines lines;
  const std::string display = file.string();
  if (!detail::read_message(file, display, msg, lines, diags)) return std::nullopt;
  return convert_cluster(msg, Checker(display, lines, diags));
}

// --- Scenarios ------------------------------------------------------------------------------

// check_plan names flags; in a scenario file the same rule names the field.
constexpr std::pair<std::string_view, std::string_view> kFlagFields[] = {
    {"--gpus", "num_gpus"},
    {"--tp", "tp"},
    {"--pp", "pp"},
    {"--dp", "dp"},
    {"--cp", "cp"},
    {"--vpp", "vpp"},
    {"--micro-batch", "micro_batch"},
    {"--global-batch", "global_batch"},
    {"--seq", "seq_len"},
    {"--dtype", "dtype"},
    {"--zero", "zero_stage"},
    {"--zero-shard-group", "zero_shard_group"},
    {"--sequence-parallel", "sequence_parallel"},
    {"--recompute", "recompute"},
    {"--recompute-layers", "recompute_layers"},
    {"--schedule", "schedule"},
    {"--pp-layers", "pp_layers"},
    {"--pp-layout", "pp_layout"},
    {"--order", "order"},
    {"--cp-algo", "cp_algo"},
    {"--mst-chunks", "mst_chunks"},
    {"--optimizer-states", "optimizer_states"},
    {"--grad-reduce", "grad_reduce"},
    {"--cross-entropy", "cross_entropy"},
    {"--elementwise", "elementwise"},
    {"--optimizer-in-backward", "optimizer_in_backward"},
    {"--unfused-attention", "unfused_attention"},
    {"--attention-kernel", "attention_kernel"},
    {"--tp-comm-overlap", "tp_comm_overlap"},
    {"--no-fp8-weight-cache", "no_fp8_weight_cache"},
    {"--host-dispatch-us", "host_dispatch_us"},
    {"--launch-blocking", "launch_blocking"},
    {"--fp8-attention", "fp8_attention"},
};

std::string field_of_flag(const std::string& flag) {
  for (const auto& [f, field] : kFlagFields) {
    if (f == flag) return std::string(field);
  }
  return flag;
}

// `message` with every flag it mentions ("give --pp-layers") replaced by the scenario field.
std::string fields_for_flags(std::string message) {
  std::vector<std::pair<std::string_view, std::string_view>> flags(std::begin(kFlagFields),
                                                                   std::end(kFlagFields));
  // Longest first, so that "--pp-layers" is not read as "--pp" followed by "-layers".
  std::sort(flags.begin(), flags.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [flag, field] : flags) {
    for (std::size_t at = message.find(flag); at != std::string::npos;
         at = message.find(flag, at + field.size())) {
      message.replace(at, flag.size(), field);
    }
  }
  return message;
}

}  // namespace

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("TRAINSIM_DATA_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return TRAINSIM_SOURCE_DIR;
}

std::vector<std::string> zoo_models() { return zoo_names(Zoo::kModels); }
std::vector<std::string> zoo_clusters() { return zoo_names(Zoo::kTopologies); }

ir::ModelSpec load_model(const std::string& name_or_path) {
  DiagnosticList diags;
  std::optional<ir::ModelSpec> spec;
  if (auto file = resolve(Zoo::kModels, name_or_path, Origin{"", 0, "--model"}, {}, diags)) {
    spec = model_from_file(*file, diags);
  }
  diags.throw_if_any();
  SIM_ASSERT(spec.has_value(), "a model that failed to load left no diagnostic");
  return *spec;
}

Cluster load_cluster(const std::string& name_or_path) {
  DiagnosticList diags;
  std::optional<Cluster> cluster;
  if (auto file = resolve(Zoo::kTopologies, name_or_path, Origin{"", 0, "--cluster"}, {}, diags)) {
    cluster = cluster_from_file(*file, diags);
  }
  diags.throw_if_any();
  SIM_ASSERT(cluster.has_value(), "a cluster that failed to load left no diagnostic");
  return *cluster;
}

std::string place_per_domain(topology::ClusterSpec& cluster, std::int64_t used) {
  const std::string why =
      per_domain_error(used, cluster.scale_up.gpus_per_domain, cluster.host.gpus_per_host);
  if (!why.empty()) return why + " (cluster " + cluster.name + ")";
  cluster.scale_up.gpus_used_per_domain = static_cast<std::int32_t>(used);
  return "";
}

std::int64_t segment_gpus(std::int64_t num_gpus, std::int64_t gpus_per_host,
                          std::int64_t gpus_per_domain) {
  SIM_ASSERT(gpus_per_host > 0 && gpus_per_domain % gpus_per_host == 0,
             "a scale-up domain holds whole hosts");
  if (num_gpus <= gpus_per_domain || num_gpus % gpus_per_host != 0) return gpus_per_domain;
  const std::int64_t hosts = num_gpus / gpus_per_host;
  for (std::int64_t fit = gpus_per_domain / gpus_per_host; fit > 1; --fit) {
    if (hosts % fit == 0) return fit * gpus_per_host;
  }
  return gpus_per_host;
}

std::int64_t place_in_segments(topology::ClusterSpec& cluster, std::int64_t num_gpus) {
  if (cluster.scale_up.gpus_used_per_domain > 0) return cluster.scale_up.gpus_used_per_domain;
  const std::int64_t used =
      segment_gpus(num_gpus, cluster.host.gpus_per_host, cluster.scale_up.gpus_per_domain);
  const std::string why = place_per_domain(cluster, used);
  SIM_ASSERT(why.empty(), "a segment placement broke the domain rule: " + why);
  return used;
}

Scenario load_scenario(const std::string& path) {
  DiagnosticList diags;
  sch::Scenario msg;
  FieldLines lines;
  if (!detail::read_message(path, path, msg, lines, diags)) diags.throw_if_any();
  const Checker c(path, lines, diags);
  const fs::path base = fs::path(path).parent_path();

  std::optional<ir::ModelSpec> model;
  switch (msg.model_source_case()) {
    case sch::Scenario::kModel:
      if (auto f = resolve(Zoo::kModels, msg.model(), Origin{path, c.line_of("model"), "model"},
                           base, diags)) {
        model = model_from_file(*f, diags);
      }
      break;
    case sch::Scenario::kInlineModel:
      model = convert_model(msg.inline_model(), c.nested("inline_model"));
      break;
    case sch::Scenario::MODEL_SOURCE_NOT_SET:
      c.fail("model", "required: a zoo name, a path to a model file, or inline_model { ... }");
      break;
  }
  std::optional<Cluster> cluster;
  switch (msg.cluster_source_case()) {
    case sch::Scenario::kCluster:
      if (auto f = resolve(Zoo::kTopologies, msg.cluster(),
                           Origin{path, c.line_of("cluster"), "cluster"}, base, diags)) {
        cluster = cluster_from_file(*f, diags);
      }
      break;
    case sch::Scenario::kInlineCluster:
      cluster = convert_cluster(msg.inline_cluster(), c.nested("inline_cluster"));
      break;
    case sch::Scenario::CLUSTER_SOURCE_NOT_SET:
      c.fail("cluster", "required: a zoo name, a path to a cluster file, or inline_cluster { ... }");
      break;
  }

  // Fields reported here are not reported again by the plan rules.
  std::set<std::string, std::less<>> reported;
  const auto need = [&](bool has, std::string_view field) {
    if (!c.require(has, field)) reported.emplace(field);
  };
  need(msg.has_num_gpus(), "num_gpus");
  need(msg.has_global_batch(), "global_batch");

  parallel::ParallelPlan plan;
  if (msg.has_tp()) plan.tp = msg.tp();
  if (msg.has_pp()) plan.pp = msg.pp();
  if (msg.has_cp()) plan.cp = msg.cp();
  if (msg.has_vpp()) plan.vpp = msg.vpp();
  if (msg.has_micro_batch()) plan.micro_batch = msg.micro_batch();
  if (msg.has_global_batch()) plan.global_batch = msg.global_batch();
  if (msg.has_seq_len()) plan.seq_len = msg.seq_len();
  if (msg.has_zero_stage()) plan.zero_stage = msg.zero_stage();
  if (msg.has_sequence_parallel()) plan.sequence_parallel = msg.sequence_parallel();
  if (msg.has_mst_chunks()) plan.mst_chunks = msg.mst_chunks();
  if (msg.has_recompute_layers()) plan.recompute_layers = msg.recompute_layers();
  if (msg.has_zero_shard_group()) plan.zero_shard_group = msg.zero_shard_group();
  if (msg.has_optimizer_in_backward()) plan.optimizer_in_backward = msg.optimizer_in_backward();
  if (msg.has_unfused_attention()) plan.flash_attention = !msg.unfused_attention();
  if (msg.has_attention_kernel()) plan.attention_kernel = msg.attention_kernel();
  if (msg.has_tp_comm_overlap()) plan.tp_comm_overlap = msg.tp_comm_overlap();
  if (msg.has_no_fp8_weight_cache()) plan.fp8_weight_cache = !msg.no_fp8_weight_cache();
  if (msg.has_launch_blocking()) plan.launch_blocking = msg.launch_blocking();
  if (msg.has_fp8_attention()) plan.fp8_attention = msg.fp8_attention();
  // A parse that throws InputError: its messages go to `field`, which is then reported.
  const auto parse_field = [&](const char* field, const auto& parse) {
    try {
      parse();
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) c.fail(field, d.message);
      reported.emplace(field);
    }
  };
  if (msg.has_host_dispatch_us()) {
    parse_field("host_dispatch_us", [&] {
      plan.host_dispatch = parse_host_dispatch_us(msg.host_dispatch_us(), "host_dispatch_us");
    });
  }
  plan.pp_layers.assign(msg.pp_layers().begin(), msg.pp_layers().end());
  plan.pp_layout = msg.pp_layout();
  const auto set_spelled = [&](auto parsed, auto& out, std::string_view field) {
    if (parsed) {
      out = *parsed;
    } else if (c.line_of(field) > 0) {
      reported.emplace(field);
    }
  };
  set_spelled(spelled<ir::Dtype>(c, msg.has_dtype(), msg.dtype(), "dtype", try_parse_dtype,
                                 dtype_choices(), false),
              plan.dtype, "dtype");
  set_spelled(spelled<parallel::Recompute>(c, msg.has_recompute(), msg.recompute(), "recompute",
                                           try_parse_recompute, recompute_choices(), false),
              plan.recompute, "recompute");
  set_spelled(spelled<parallel::Schedule>(c, msg.has_schedule(), msg.schedule(), "schedule",
                                          try_parse_schedule, schedule_choices(), false),
              plan.schedule, "schedule");
  set_spelled(spelled<parallel::CpAlgo>(c, msg.has_cp_algo(), msg.cp_algo(), "cp_algo",
                                        try_parse_cp_algo, cp_algo_choices(), false),
              plan.cp_algo, "cp_algo");
  set_spelled(spelled<parallel::OptimizerStates>(c, msg.has_optimizer_states(),
                                                 msg.optimizer_states(), "optimizer_states",
                                                 try_parse_optimizer_states,
                                                 optimizer_states_choices(), false),
              plan.optimizer_states, "optimizer_states");
  set_spelled(spelled<parallel::GradReduce>(c, msg.has_grad_reduce(), msg.grad_reduce(), "grad_reduce",
                                            try_parse_grad_reduce, grad_reduce_choices(), false),
              plan.grad_reduce, "grad_reduce");
  set_spelled(spelled<parallel::CrossEntropy>(c, msg.has_cross_entropy(), msg.cross_entropy(), "cross_entropy",
                                              try_parse_cross_entropy, cross_entropy_choices(), false),
              plan.cross_entropy, "cross_entropy");
  set_spelled(spelled<parallel::Elementwise>(c, msg.has_elementwise(), msg.elementwise(), "elementwise",
                                             try_parse_elementwise, elementwise_choices(), false),
              plan.elementwise, "elementwise");
  if (msg.has_order()) parse_field("order", [&] { plan.order = parse_order(msg.order(), "order"); });

  // dp left out: whatever the other degrees leave of the GPUs.
  bool dp_known = true;
  if (msg.has_dp()) {
    plan.dp = msg.dp();
  } else if (msg.has_num_gpus() && msg.num_gpus() > 0 && plan.tp > 0 && plan.pp > 0 && plan.cp > 0) {
    std::int64_t rest = 0, a = 0;
    const bool fits = !__builtin_mul_overflow(plan.tp, plan.pp, &a) &&
                      !__builtin_mul_overflow(a, plan.cp, &rest);
    if (fits && msg.num_gpus() % rest == 0) {
      plan.dp = msg.num_gpus() / rest;
    } else {
      c.fail("dp", "not given, and num_gpus (" + std::to_string(msg.num_gpus()) +
                       ") is not divisible by tp·pp·cp" +
                       (fits ? " = " + std::to_string(rest) : std::string()));
      dp_known = false;
    }
  }

  const bool gpus_fit = msg.num_gpus() <= std::numeric_limits<std::int32_t>::max();
  if (!gpus_fit) {
    c.fail("num_gpus", "too large (got " + std::to_string(msg.num_gpus()) + ")");
    reported.emplace("num_gpus");
  }
  if (model && cluster && msg.has_num_gpus()) {
    for (auto d : detail::check_plan(plan, *model, *cluster, msg.num_gpus(), dp_known)) {
      d.field = field_of_flag(d.field);
      d.message = fields_for_flags(std::move(d.message));
      if (reported.find(d.field) != reported.end()) continue;
      d.file = path;
      d.line = c.line_of(d.field);
      diags.add(std::move(d));
    }
  }
  diags.throw_if_any();
  SIM_ASSERT(model && cluster, "a scenario that failed to load left no diagnostic");
  return Scenario{std::move(*model), std::move(*cluster), static_cast<std::int32_t>(msg.num_gpus()),
                  std::move(plan)};
}

Scenario make_scenario(ir::ModelSpec model, Cluster cluster, std::int64_t num_gpus,
                       parallel::ParallelPlan plan) {
  auto problems = check_plan(plan, model, cluster, num_gpus);
  if (num_gpus > std::numeric_limits<std::int32_t>::max()) {
    problems.push_back(Diagnostic{"", 0, "--gpus", "too large (got " + std::to_string(num_gpus) + ")"});
  }
  if (!problems.empty()) throw InputError(std::move(problems));
  return Scenario{std::move(model), std::move(cluster), static_cast<std::int32_t>(num_gpus),
                  std::move(plan)};
}

}  // namespace ts::config
