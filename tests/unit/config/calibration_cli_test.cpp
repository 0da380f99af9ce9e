// `trainsim kernel` end to end: answers for every calibrated GPU; unknown GPU or op is exit 2.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

#include "sim/config/calibration_loader.h"

namespace {

// The trainsim program: $TRAINSIM_BINARY when set, else the one this build produced.
std::string binary() {
  if (const char* env = std::getenv("TRAINSIM_BINARY"); env != nullptr && *env != '\0') return env;
  return TRAINSIM_BINARY;
}

struct Run {
  int code = -1;
  std::string out;  // stdout and stderr
};

Run run(const std::string& args) {
  Run r;
  const std::string cmd = "'" + binary() + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) r.out += buf;
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST_CASE("trainsim kernel answers for every calibrated GPU, with time_s, tflops and gbps") {
  REQUIRE(std::filesystem::exists(binary()));
  for (const auto& g : ts::config::known_calibrations()) {
    INFO(g.name);
    const Run gemm = run("kernel --gpu " + g.name + " --op gemm --m 8192 --n 8192 --k 8192 --dtype bf16 --format json");
    REQUIRE(gemm.code == 0);
    const auto j = nlohmann::json::parse(gemm.out);
    CHECK(j["gpu"] == g.name);
    // 2·8192³ FLOPs at the reported rate take the reported time.
    CHECK(j["tflops"].get<double>() * 1e12 * j["time_s"].get<double>() == Approx(2.0 * 8192.0 * 8192 * 8192));
    CHECK(j["gbps"].get<double>() > 0);
    const Run att = run("kernel --gpu " + g.name +
                        " --op attention --batch 2 --heads 32 --kv-heads 8 --seq 4096 --head-dim 128 --causal"
                        " --direction bwd --format json");
    REQUIRE(att.code == 0);
    CHECK(nlohmann::json::parse(att.out)["tflops"].get<double>() > 0);
    const Run mem = run("kernel --gpu " + g.name + " --op memory --bytes 1GiB --format json");
    REQUIRE(mem.code == 0);
    const auto m = nlohmann::json::parse(mem.out);
    CHECK(m["gbps"].get<double>() * 1e9 * m["time_s"].get<double>() == Approx(1073741824.0));
    CHECK(m["tflops"].get<double>() == 0);
  }
  // Aliases as in the CLI contract.
  CHECK(run("kernel --gpu h100-sxm --op gemm --m 4096 --n 4096 --k 4096").code == 0);
}

TEST_CASE("trainsim kernel: unknown GPU or op, or fp8 on an A100, is exit 2 naming the flag") {
  REQUIRE(std::filesystem::exists(binary()));
  const Run gpu = run("kernel --gpu mi300x --op gemm --m 1 --n 1 --k 1");
  CHECK(gpu.code == 2);
  CHECK(gpu.out.find("--gpu") != std::string::npos);
  CHECK(gpu.out.find("H100-SXM5-80GB") != std::string::npos);
  CHECK(gpu.out.find("A100-SXM4-40GB") != std::string::npos);
  const Run op = run("kernel --gpu h100 --op conv");
  CHECK(op.code == 2);
  CHECK(op.out.find("--op") != std::string::npos);
  CHECK(op.out.find("gemm, attention, memory") != std::string::npos);
  const Run fp8 = run("kernel --gpu a100 --op gemm --m 4096 --n 4096 --k 4096 --dtype fp8");
  CHECK(fp8.code == 2);
  CHECK(fp8.out.find("--dtype") != std::string::npos);
  const Run missing = run("kernel --gpu h100 --op gemm --m 4096 --n 4096");
  CHECK(missing.code == 2);
  CHECK(missing.out.find("--k") != std::string::npos);
}
