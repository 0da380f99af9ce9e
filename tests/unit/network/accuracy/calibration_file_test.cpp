// The network calibration file: the shipped one loads; broken ones are rejected with file, line
// and field path for every problem at once.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/config/network_calibration_loader.h"

using namespace ts;

namespace {

std::string shipped() {
  std::ifstream in(config::default_network_calibration_file());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes `text` to a temporary .textproto and loads it; returns the diagnostics (empty if none).
std::vector<Diagnostic> problems(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / "trainsim_network_calibration_test.textproto";
  {
    std::ofstream out(path);
    out << text;
  }
  try {
    (void)config::load_network_calibration(path.string());
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  return {};
}

bool has(const std::vector<Diagnostic>& ds, const std::string& field, const std::string& words) {
  for (const auto& d : ds) {
    if (d.field == field && d.message.find(words) != std::string::npos && d.line > 0) return true;
  }
  return false;
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("the shipped network calibration loads with every generation", "[network][calibration]") {
  const auto cal = config::load_network_calibration();
  REQUIRE(cal.profiles.size() == 3);
  const auto* a100 = network::find_profile(cal, "A100-SXM4-80GB");
  const auto* h100 = network::find_profile(cal, "H100-SXM5-80GB");
  REQUIRE(a100 != nullptr);
  REQUIRE(h100 != nullptr);
  CHECK(network::find_profile(cal, "h200-sxm-141gb") == h100);
  // A100 has no NVLS; H100's NVLS efficiency is NCCL's 0.85 of its ring efficiency.
  CHECK(a100->nvls_efficiency == 0);
  CHECK(h100->nvls_efficiency == Approx(0.85 * h100->nvlink_efficiency).epsilon(1e-3));
  CHECK(a100->ring_nvlink_factor(2) < a100->ring_nvlink_factor(8));
  CHECK(h100->protocol(network::Protocol::kSimple).bandwidth_fraction == 1.0);
  CHECK(h100->protocol(network::Protocol::kLL).ring.nvlink.us() == Approx(0.6));
  // Blackwell: NCCL's NVLS efficiency 0.74 of the ring's; rings of any length in an NVL72
  // domain at the 8-GPU plateau (no per-count factor).
  const auto* b200 = network::find_profile(cal, "B200-SXM-180GB");
  REQUIRE(b200 != nullptr);
  CHECK(network::find_profile(cal, "GB200-NVL-186GB") == b200);
  CHECK(network::find_profile(cal, "GB300-NVL-279GB") == b200);
  CHECK(b200->nvls_efficiency == Approx(0.74 * b200->nvlink_efficiency).epsilon(1e-3));
  CHECK(b200->ring_nvlink_factor(72) == 1.0);
}

TEST_CASE("broken network calibrations list every problem with its line", "[network][calibration]") {
  std::string text = shipped();
  text = replace_once(text, "nvlink_efficiency: 0.783", "nvlink_efficiency: 1.5");
  text = replace_once(text, "protocol: \"ll128\"", "protocol: \"ll256\"");
  text = replace_once(text, "  network_efficiency: 0.96\n", "");
  text = replace_once(text, "gpus: \"H200-SXM-141GB\"", "gpus: \"A100-SXM4-80GB\"");
  const auto ds = problems(text);
  CHECK(has(ds, "profiles[0].nvlink_efficiency", "(0, 1]"));
  CHECK(has(ds, "profiles[0].protocols[1].protocol", "unknown protocol 'll256'"));
  CHECK(has(ds, "profiles[0].protocols", "'ll128' is missing"));
  CHECK(has(ds, "profiles[0].network_efficiency", "missing"));
  // The source entry of the removed value now documents nothing.
  bool orphan = false;
  for (const auto& d : ds) {
    orphan = orphan || (d.field.rfind("profiles[0].sources[", 0) == 0 && d.message.find("'network_efficiency'") != std::string::npos);
  }
  CHECK(orphan);
  CHECK(has(ds, "profiles[1].gpus", "already in profile 'ampere'"));
}

TEST_CASE("every calibration value needs a source", "[network][calibration]") {
  std::string text = shipped();
  // Drop the source of the A100 NVLink efficiency.
  const auto at = text.find("field: \"nvlink_efficiency\"");
  REQUIRE(at != std::string::npos);
  const auto begin = text.rfind("sources {", at);
  const auto end = text.find("}\n", at) + 2;
  text.erase(begin, end - begin);
  CHECK(has(problems(text), "profiles[0].sources", "no source for 'nvlink_efficiency'"));
}

TEST_CASE("a missing calibration file is an input error naming it", "[network][calibration]") {
  try {
    (void)config::load_network_calibration("/nonexistent/network.textproto");
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(e.diagnostics().front().file.find("/nonexistent/network.textproto") != std::string::npos);
  }
}
