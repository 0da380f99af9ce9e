// Helpers for the config and driver tests: a scratch folder for input files, and diagnostic lookup.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/diagnostic.h"

namespace ts::config::test {

// The source tree: $TRAINSIM_SOURCE_DIR when set (ctest sets it), else the one the tests were
// configured from.
inline std::filesystem::path source_dir() {
  if (const char* env = std::getenv("TRAINSIM_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  return TRAINSIM_SOURCE_DIR;
}

// A fresh folder under the system temp directory, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("trainsim-config-test-" + std::to_string(stamp) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to `name` (folders created) and returns the full path as a string.
  std::string write(const std::string& name, std::string_view text) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The diagnostics of the InputError `f` throws; fails the test when it throws none.
inline std::vector<Diagnostic> diagnostics_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  FAIL("expected an InputError");
  return {};
}

// The first diagnostic of the InputError `f` throws; fails the test when it throws none.
inline Diagnostic first_diagnostic(const std::function<void()>& f) {
  const auto ds = diagnostics_of(f);
  REQUIRE_FALSE(ds.empty());
  return ds.front();
}

// The first diagnostic naming `field`, or null.
inline const Diagnostic* find_field(const std::vector<Diagnostic>& ds, std::string_view field) {
  for (const auto& d : ds) {
    if (d.field == field) return &d;
  }
  return nullptr;
}

inline std::string dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.to_string() + "\n";
  return out;
}

// A complete, valid model file (text format); each field on its own line, numbered in comments.
inline constexpr std::string_view kValidModel =
    "name: \"tiny\"\n"              // 1
    "num_layers: 4\n"               // 2
    "hidden: 256\n"                 // 3
    "num_heads: 8\n"                // 4
    "num_kv_heads: 2\n"             // 5
    "ffn_hidden: 1024\n"            // 6
    "vocab: 1000\n"                 // 7
    "max_seq_len: 512\n"            // 8
    "norm: \"rmsnorm\"\n"           // 9
    "activation: \"swiglu\"\n"      // 10
    "position: \"rope\"\n"          // 11
    "tied_embeddings: false\n"      // 12
    "linear_bias: false\n";         // 13

// A complete, valid cluster file (text format).
inline constexpr std::string_view kValidCluster =
    "name: \"test-cluster\"\n"             // 1
    "gpu {\n"                              // 2
    "  name: \"TestGPU\"\n"                // 3
    "  peak_bf16_tflops: 100\n"            // 4
    "  peak_fp16_tflops: 100\n"            // 5
    "  peak_fp8_tflops: 0\n"               // 6
    "  peak_tf32_tflops: 50\n"             // 7
    "  peak_fp32_tflops: 10\n"             // 8
    "  memory_gib: 16\n"                   // 9
    "  memory_bandwidth_gbps: 1000\n"      // 10
    "  num_sms: 10\n"                      // 11
    "  matmul_efficiency: 0.8\n"           // 12
    "  memory_efficiency: 0.9\n"           // 13
    "  kernel_launch_overhead_us: 2\n"     // 14
    "}\n"                                  // 15
    "node {\n"                             // 16
    "  gpus_per_node: 4\n"                 // 17
    "  nvlink_bandwidth_gbps: 100\n"       // 18
    "  nvlink_latency_ns: 500\n"           // 19
    "  nics_per_node: 4\n"                 // 20
    "  nic_bandwidth_gbits: 100\n"         // 21
    "  nic_latency_ns: 1000\n"             // 22
    "}\n"                                  // 23
    "fabric {\n"                           // 24
    "  kind: \"fat_tree\"\n"               // 25
    "  tiers: 2\n"                         // 26
    "  oversubscription: 1\n"              // 27
    "  switch_latency_ns: 300\n"           // 28
    "  switch_radix: 32\n"                 // 29
    "}\n";                                 // 30

// `text` with the line that starts with `prefix` (after indentation) replaced by `line`
// (an empty `line` deletes it). The test fails when no line matches.
inline std::string replace_line(std::string_view text, std::string_view prefix, std::string_view line) {
  std::string out;
  bool found = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    std::string_view trimmed = l;
    while (!trimmed.empty() && trimmed.front() == ' ') trimmed.remove_prefix(1);
    if (!found && trimmed.substr(0, prefix.size()) == prefix) {
      found = true;
      if (!line.empty()) out.append(line).append("\n");
    } else {
      out.append(l).append("\n");
    }
    start = end + 1;
  }
  REQUIRE(found);
  return out;
}

}  // namespace ts::config::test
