// Time-to-train flags: parsing and validation into driver::TrainSettings.
#include "tools/trainsim/train_flags.h"

#include <cmath>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/config/time_to_train_loader.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

// A finite number, or a diagnostic naming `flag`.
double number(const std::string& s, const std::string& flag, DiagnosticList& problems) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    problems.add({"", 0, flag, "expected a number (got '" + s + "')"});
    return 0;
  }
  return v;
}

// "gpu_cv=0.02,link_cv=0.01,slow_gpu=80".
void parse_straggler(const std::string& spec, driver::TrainSettings& s, DiagnosticList& problems) {
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const auto comma = spec.find(',', pos);
    const std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      problems.add({"", 0, "--straggler",
                    "expected KEY=VALUE (gpu_cv, link_cv, slow_gpu), got '" + item + "'"});
      continue;
    }
    const std::string key = item.substr(0, eq);
    const double v = number(item.substr(eq + 1), "--straggler", problems);
    if (key == "gpu_cv") {
      s.gpu_cv = v;
    } else if (key == "link_cv") {
      s.link_cv = v;
    } else if (key == "slow_gpu") {
      s.slow_gpu_speed = v / 100.0;
    } else {
      problems.add({"", 0, "--straggler", "unknown key '" + key + "' (gpu_cv, link_cv, slow_gpu)"});
    }
  }
}

}  // namespace

void add_train_flags(po::options_description& o) {
  o.add_options()
      ("checkpoint-gbps", po::value<std::string>(),
       "checkpoint storage bandwidth of the job, GB/s (default: the data file's)")
      ("checkpoint-interval-min", po::value<std::string>(),
       "minutes of training between checkpoints (default: Daly's optimum)")
      ("checkpoint-mode", po::value<std::string>()->default_value("async"),
       "async (training stops for a copy to host memory) or sync (for the write)")
      ("restart-min", po::value<std::string>(),
       "minutes from an interruption to training again, read excluded (default: data file)")
      ("straggler", po::value<std::string>(),
       "gpu_cv=F (per-GPU speed spread), link_cv=F (per link), slow_gpu=PCT (one GPU at PCT %)")
      ("pue", po::value<std::string>(), "data-centre PUE (default: the data file's)")
      ("train-calibration", po::value<std::string>(),
       "time-to-train data file (default: calibration/longrun/time_to_train.textproto)");
}

driver::TrainSettings train_settings_from_flags(const po::variables_map& vm, bool& any_given) {
  DiagnosticList problems;
  driver::TrainSettings s;
  any_given = false;
  const auto opt = [&](const char* name, double scale) -> std::optional<double> {
    if (!vm.count(name)) return std::nullopt;
    any_given = true;
    return number(vm[name].as<std::string>(), std::string("--") + name, problems) * scale;
  };
  s.checkpoint_gbytes_per_s = opt("checkpoint-gbps", 1.0);
  s.checkpoint_interval_s = opt("checkpoint-interval-min", 60.0);
  s.restart_overhead_s = opt("restart-min", 60.0);
  s.pue = opt("pue", 1.0);
  const std::string mode = vm["checkpoint-mode"].as<std::string>();
  if (!vm["checkpoint-mode"].defaulted()) any_given = true;
  if (mode == "async") {
    s.checkpoint_mode = driver::CheckpointMode::kAsync;
  } else if (mode == "sync") {
    s.checkpoint_mode = driver::CheckpointMode::kSync;
  } else {
    problems.add({"", 0, "--checkpoint-mode", "must be async or sync (got '" + mode + "')"});
  }
  if (vm.count("straggler")) {
    any_given = true;
    parse_straggler(vm["straggler"].as<std::string>(), s, problems);
  }
  if (vm.count("train-calibration")) any_given = true;
  problems.throw_if_any();
  driver::check_train_settings(s);
  return s;
}

longrun::TrainData train_data_from_flags(const po::variables_map& vm) {
  return config::load_time_to_train_data(
      vm.count("train-calibration") ? vm["train-calibration"].as<std::string>() : std::string());
}

}  // namespace ts::cli
