// trainsim collective: time of one NCCL-style collective on a cluster, with concurrent groups.
#include <cctype>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/base/diagnostic.h"
#include "sim/config/loader.h"
#include "sim/config/network_calibration_loader.h"
#include "sim/network/network_model.h"
#include "tools/trainsim/cli.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

[[noreturn]] void bad_flag(const std::string& flag, const std::string& message) {
  throw InputError(Diagnostic{"", 0, flag, message});
}

// "1GiB", "512MB", "4096", "1e9": decimal suffixes (kB, MB, GB, TB) are powers of 1000, binary
// ones (KiB, MiB, GiB, TiB) powers of 1024; a bare number is bytes.
Bytes parse_collective_size(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    bad_flag(flag, "not a size: '" + text + "' (examples: 1GiB, 512MB, 4096)");
  }
  std::string unit;
  for (const char ch : text.substr(used)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else bad_flag(flag, "unknown size unit '" + text.substr(used) + "' (known: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  if (!std::isfinite(value) || value <= 0) bad_flag(flag, "must be > 0 (got '" + text + "')");
  if (value * scale > 0x1p50) bad_flag(flag, "must be at most 1 PiB (got '" + text + "')");
  return Bytes::from_real(value * scale);
}

std::string choices_text(const char* const* names, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

std::string human_time(Duration d) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3);
  if (d.seconds() >= 1) o << d.seconds() << " s";
  else if (d.seconds() >= 1e-3) o << d.seconds() * 1e3 << " ms";
  else o << d.us() << " us";
  return o.str();
}

constexpr const char* kUsage =
    "usage: trainsim collective --cluster C --gpus N --op OP --bytes SIZE [--algo A] [--groups K]\n"
    "                           [--layout contiguous|strided] [--calibration FILE] [--format text|json]\n"
    "Time of one collective of N GPUs, run by K groups at once (GPUs 0..N·K-1). contiguous: group g\n"
    "is GPUs g·N .. g·N+N-1 (tensor-parallel groups); strided: group g is GPUs g, g+K, g+2K, ...\n"
    "(data-parallel groups). Bandwidths follow nccl-tests: algbw = bytes / time, busbw = algbw ·\n"
    "2(N-1)/N for all_reduce, (N-1)/N for all_gather, reduce_scatter and all_to_all, 1 otherwise.";

}  // namespace

int cmd_collective(const Args& args) {
  static constexpr const char* kOps[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                                         "send_recv"};
  static constexpr const char* kAlgos[] = {"auto", "ring", "tree", "nvls", "direct", "hierarchical"};
  po::options_description o("collective flags");
  o.add_options()
      ("cluster", po::value<std::string>(), "cluster zoo name or file (required)")
      ("gpus", po::value<std::int64_t>(), "GPUs per group (required)")
      ("op", po::value<std::string>(), "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv (required)")
      ("bytes", po::value<std::string>(), "size as nccl-tests counts it: 1GiB, 512MB, 4096 (required)")
      ("algo", po::value<std::string>()->default_value("auto"), "auto, ring, tree, nvls, direct or hierarchical")
      ("groups", po::value<std::int64_t>()->default_value(1), "concurrent groups of the same shape")
      ("layout", po::value<std::string>()->default_value("contiguous"), "contiguous or strided groups")
      ("calibration", po::value<std::string>(), "network calibration file (default calibration/network/nccl.textproto)")
      ("format", po::value<std::string>()->default_value("text"), "text or json");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, kUsage)) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), false);

  DiagnosticList missing;
  for (const char* f : {"cluster", "gpus", "op", "bytes"}) {
    if (!vm.count(f)) missing.add(Diagnostic{"", 0, std::string("--") + f, "required"});
  }
  missing.throw_if_any();
  const auto op = network::parse_collective(vm["op"].as<std::string>());
  if (!op) bad_flag("--op", "unknown collective '" + vm["op"].as<std::string>() + "' (known: " + choices_text(kOps, 6) + ")");
  const auto algo = network::parse_algorithm(vm["algo"].as<std::string>());
  if (!algo) bad_flag("--algo", "unknown algorithm '" + vm["algo"].as<std::string>() + "' (known: " + choices_text(kAlgos, 6) + ")");
  const std::int64_t n = vm["gpus"].as<std::int64_t>();
  const std::int64_t k = vm["groups"].as<std::int64_t>();
  if (n < 1) bad_flag("--gpus", "must be >= 1 (got " + std::to_string(n) + ")");
  if (k < 1) bad_flag("--groups", "must be >= 1 (got " + std::to_string(k) + ")");
  if (n * k > (std::int64_t{1} << 20)) bad_flag("--groups", "--gpus x --groups is more than 1048576 GPUs");
  if (*op == network::CollectiveOp::kSendRecv && n < 2) bad_flag("--gpus", "send_recv needs at least 2 GPUs");
  const std::string layout = vm["layout"].as<std::string>();
  if (layout != "contiguous" && layout != "strided") {
    bad_flag("--layout", "unknown layout '" + layout + "' (known: contiguous, strided)");
  }
  const Bytes bytes = parse_collective_size(vm["bytes"].as<std::string>(), "--bytes");

  const config::Cluster cluster = config::load_cluster(vm["cluster"].as<std::string>());
  const network::NetworkCalibration calibration =
      config::load_network_calibration(vm.count("calibration") ? vm["calibration"].as<std::string>() : "");
  const auto total = static_cast<std::int32_t>(n * k);
  const topology::Topology topo(cluster.cluster, total);
  const network::NetworkModel net(topo, calibration);

  network::CollectiveRequest r;
  r.op = *op;
  r.bytes = bytes;
  r.algorithm = *algo;
  for (std::int64_t g = 0; g < k; ++g) {
    network::Group group;
    for (std::int64_t i = 0; i < n; ++i) group.push_back(static_cast<std::int32_t>(layout == "strided" ? g + i * k : g * n + i));
    r.groups.push_back(std::move(group));
  }
  if (*algo != network::Algorithm::kAuto) {
    const auto shape = net.shape_of(r.groups.front());
    const auto ok = network::applicable_algorithms(*op, shape, net.nvls_available());
    if (n > 1 && std::find(ok.begin(), ok.end(), *algo) == ok.end()) {
      std::string known;
      for (const auto a : ok) known += (known.empty() ? "" : ", ") + std::string(network::algorithm_name(a));
      bad_flag("--algo", "'" + vm["algo"].as<std::string>() + "' does not apply to " + vm["op"].as<std::string>() +
                             " on " + std::to_string(n) + " GPUs over " + std::to_string(shape.nodes) +
                             " node(s) of " + cluster.cluster.name + " (applicable: " + known + ")");
    }
  }
  const network::CollectiveCost c = net.collective(r);
  const double t = c.time.seconds();
  const double algbw = t > 0 ? bytes.real() / t * 1e-9 : 0.0;
  const double busbw = algbw * network::bus_bandwidth_factor(*op, static_cast<std::int32_t>(n));
  std::string algo_name(network::algorithm_name(c.algorithm));
  if (!c.variant.empty()) algo_name += ":" + std::string(c.variant);

  if (format == Format::kJson) {
    nlohmann::json j;
    j["cluster"] = cluster.cluster.name;
    j["op"] = vm["op"].as<std::string>();
    j["bytes"] = bytes.count();
    j["gpus"] = n;
    j["groups"] = k;
    j["layout"] = layout;
    j["algo"] = algo_name;
    j["protocol"] = std::string(network::protocol_name(c.protocol));
    j["time_s"] = t;
    j["latency_s"] = c.latency.seconds();
    j["algbw_gbps"] = algbw;
    j["busbw_gbps"] = busbw;
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  const auto shape = net.shape_of(r.groups.front());
  // A DGX-class node is its own NVLink domain; a rack-scale domain (NVL72) holds many hosts.
  const bool nodes = cluster.cluster.scale_up.gpus_per_domain == cluster.cluster.host.gpus_per_host;
  const std::string unit = nodes ? " node" : " NVLink domain";
  std::cout << std::fixed << std::setprecision(2);
  std::cout << "collective  " << vm["op"].as<std::string>() << ", " << bytes.count() << " bytes, "
            << k << " group" << (k > 1 ? "s" : "") << " of " << n << " GPUs (" << shape.nodes
            << unit << (shape.nodes > 1 ? "s" : "") << " each, " << layout << ") on "
            << cluster.cluster.name << '\n';
  std::cout << "algorithm   " << algo_name << " (" << network::protocol_name(c.protocol) << " protocol)\n";
  std::cout << "time        " << human_time(c.time) << "  (latency " << human_time(c.latency) << ")\n";
  std::cout << "algbw       " << algbw << " GB/s\n";
  std::cout << "busbw       " << busbw << " GB/s\n";
  return kExitOk;
}

}  // namespace ts::cli
