// Network calibration files: parse, validate (all problems at once), convert to plain structs.
#include "sim/config/network_calibration_loader.h"

#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "sim/base/format.h"
#include "sim/config/loader.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/network_calibration.pb.h"

namespace ts::config {
namespace {

namespace sch = trainsim::schema;
using detail::Checker;
using detail::FieldLines;
using network::Protocol;

std::optional<Protocol> parse_protocol(const std::string& s) {
  if (s == "ll") return Protocol::kLL;
  if (s == "ll128") return Protocol::kLL128;
  if (s == "simple") return Protocol::kSimple;
  return std::nullopt;
}

Duration us(double v) { return Duration::from_us(v); }

// Checks that every value set in `p` is documented by a source entry, and that every source
// entry documents a value that exists.
void check_sources(const sch::NetworkProfileCalibration& p, const Checker& c,
                   const std::set<std::string, std::less<>>& documented_fields) {
  std::set<std::string, std::less<>> sourced;
  for (int i = 0; i < p.sources_size(); ++i) {
    const auto& s = p.sources(i);
    const Checker sc = c.nested("sources[" + std::to_string(i) + "]");
    sc.non_empty(s.has_field(), s.field(), "field");
    sc.non_empty(s.has_source(), s.source(), "source");
    sc.non_empty(s.has_method(), s.method(), "method");
    if (!s.has_field()) continue;
    if (documented_fields.count(s.field()) == 0) {
      sc.fail("field", "names no value of this profile: '" + s.field() + "'");
    }
    sourced.insert(s.field());
  }
  for (const auto& f : documented_fields) {
    if (sourced.count(f) == 0) c.fail("sources", "no source for '" + f + "'");
  }
}

std::optional<network::NetworkProfile> convert_profile(const sch::NetworkProfileCalibration& p, const Checker& c) {
  network::NetworkProfile out;
  std::set<std::string, std::less<>> fields;  // values that need a source
  const auto note = [&](bool has, std::string_view f) {
    if (has) fields.emplace(f);
  };
  c.non_empty(p.has_name(), p.name(), "name");
  out.name = p.name();
  if (p.gpus_size() == 0) c.fail("gpus", "required: the cluster GPU names this profile applies to");
  for (const auto& g : p.gpus()) out.gpus.push_back(g);

  c.fraction(p.has_nvlink_efficiency(), p.nvlink_efficiency(), "nvlink_efficiency");
  out.nvlink_efficiency = p.nvlink_efficiency();
  note(p.has_nvlink_efficiency(), "nvlink_efficiency");
  for (int i = 0; i < p.ring_nvlink_factor_size(); ++i) {
    const auto& f = p.ring_nvlink_factor(i);
    const Checker fc = c.nested("ring_nvlink_factor[" + std::to_string(i) + "]");
    fc.at_least(f.has_ranks(), f.ranks(), 2, "ranks");
    fc.fraction(f.has_factor(), f.factor(), "factor");
    if (f.ranks() < 2 || f.ranks() > 4096) continue;
    const auto k = static_cast<std::size_t>(f.ranks());
    if (out.ring_nvlink_factor_by_ranks.size() <= k) out.ring_nvlink_factor_by_ranks.resize(k + 1, 0.0);
    if (out.ring_nvlink_factor_by_ranks[k] > 0) fc.fail("ranks", "given twice");
    out.ring_nvlink_factor_by_ranks[k] = f.factor();
  }
  note(p.ring_nvlink_factor_size() > 0, "ring_nvlink_factor");
  c.require(p.has_nvls_efficiency(), "nvls_efficiency");
  if (p.has_nvls_efficiency() && !(p.nvls_efficiency() >= 0 && p.nvls_efficiency() <= 1)) {
    c.fail("nvls_efficiency", "must be in [0, 1] (got " + detail::format_number(p.nvls_efficiency()) + ")");
  }
  out.nvls_efficiency = p.nvls_efficiency();
  note(p.has_nvls_efficiency(), "nvls_efficiency");
  c.non_negative(p.has_nvls_base_latency_us(), p.nvls_base_latency_us(), "nvls_base_latency_us");
  out.nvls_base_latency = us(p.nvls_base_latency_us());
  note(p.has_nvls_base_latency_us(), "nvls_base_latency_us");
  c.fraction(p.has_network_efficiency(), p.network_efficiency(), "network_efficiency");
  out.network_efficiency = p.network_efficiency();
  note(p.has_network_efficiency(), "network_efficiency");
  c.fraction(p.has_tree_bandwidth_fraction(), p.tree_bandwidth_fraction(), "tree_bandwidth_fraction");
  out.tree_bandwidth_fraction = p.tree_bandwidth_fraction();
  note(p.has_tree_bandwidth_fraction(), "tree_bandwidth_fraction");
  c.non_negative(p.has_p2p_latency_us(), p.p2p_latency_us(), "p2p_latency_us");
  out.p2p_latency = us(p.p2p_latency_us());
  note(p.has_p2p_latency_us(), "p2p_latency_us");

  std::set<Protocol> seen;
  for (int i = 0; i < p.protocols_size(); ++i) {
    const auto& pr = p.protocols(i);
    const Checker pc = c.nested("protocols[" + std::to_string(i) + "]");
    if (!pc.require(pr.has_protocol(), "protocol")) continue;
    const auto proto = parse_protocol(pr.protocol());
    if (!proto) {
      pc.fail("protocol", "unknown protocol '" + pr.protocol() + "' (known: ll, ll128, simple)");
      continue;
    }
    if (!seen.insert(*proto).second) pc.fail("protocol", "protocol '" + pr.protocol() + "' given twice");
    auto& o = out.protocols[static_cast<std::size_t>(*proto)];
    o.enabled = !pr.has_enabled() || pr.enabled();
    pc.fraction(pr.has_bandwidth_fraction(), pr.bandwidth_fraction(), "bandwidth_fraction");
    pc.non_negative(pr.has_base_latency_us(), pr.base_latency_us(), "base_latency_us");
    pc.non_negative(pr.has_ring_nvlink_step_us(), pr.ring_nvlink_step_us(), "ring_nvlink_step_us");
    pc.non_negative(pr.has_ring_network_step_us(), pr.ring_network_step_us(), "ring_network_step_us");
    pc.non_negative(pr.has_tree_nvlink_step_us(), pr.tree_nvlink_step_us(), "tree_nvlink_step_us");
    pc.non_negative(pr.has_tree_network_step_us(), pr.tree_network_step_us(), "tree_network_step_us");
    o.bandwidth_fraction = pr.bandwidth_fraction();
    o.base_latency = us(pr.base_latency_us());
    o.ring = {us(pr.ring_nvlink_step_us()), us(pr.ring_network_step_us())};
    o.tree = {us(pr.tree_nvlink_step_us()), us(pr.tree_network_step_us())};
    const std::string prefix = "protocols[" + pr.protocol() + "].";
    for (const char* f : {"bandwidth_fraction", "base_latency_us", "ring_nvlink_step_us", "ring_network_step_us",
                          "tree_nvlink_step_us", "tree_network_step_us"}) {
      fields.insert(prefix + f);
    }
  }
  for (const Protocol proto : network::kProtocols) {
    if (seen.count(proto) == 0) {
      c.fail("protocols", "protocol '" + to_lower(std::string(network::protocol_name(proto))) + "' is missing");
    }
  }
  check_sources(p, c, fields);
  return out;
}

}  // namespace

std::filesystem::path default_network_calibration_file() {
  return data_dir() / "calibration" / "network" / "nccl.textproto";
}

network::NetworkCalibration load_network_calibration(const std::string& path) {
  const std::filesystem::path file = path.empty() ? default_network_calibration_file() : std::filesystem::path(path);
  const std::string display = file.string();
  DiagnosticList diags;
  sch::NetworkCalibrationFile msg;
  FieldLines lines;
  if (!detail::read_message(file, display, msg, lines, diags)) diags.throw_if_any();
  const Checker c(display, lines, diags);
  network::NetworkCalibration out;
  out.file = display;
  if (msg.profiles_size() == 0) c.fail("profiles", "required: at least one profile");
  std::map<std::string, std::string> gpu_profile;
  std::set<std::string> names;
  for (int i = 0; i < msg.profiles_size(); ++i) {
    const Checker pc = c.nested("profiles[" + std::to_string(i) + "]");
    const auto& p = msg.profiles(i);
    if (auto prof = convert_profile(p, pc)) {
      if (!prof->name.empty() && !names.insert(prof->name).second) pc.fail("name", "profile '" + prof->name + "' given twice");
      for (const auto& g : prof->gpus) {
        const auto [it, fresh] = gpu_profile.emplace(to_lower(g), prof->name);
        if (!fresh) pc.fail("gpus", "GPU '" + g + "' is already in profile '" + it->second + "'");
      }
      out.profiles.push_back(std::move(*prof));
    }
  }
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
