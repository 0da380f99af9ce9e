// trainsim run / inspect.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/driver/plan_hw.h"
#include "sim/driver/intervals.h"
#include "sim/driver/report.h"
#include "sim/driver/simulate.h"
#include "sim/driver/time_to_train.h"
#include "tools/trainsim/cli.h"
#include "tools/trainsim/scenario_flags.h"
#include "tools/trainsim/train_flags.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

// A positive number of a flag, or InputError naming it.
double positive_flag(const po::variables_map& vm, const char* name) {
  const std::string s = vm[name].as<std::string>();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0) || !std::isfinite(v)) {
    throw InputError(Diagnostic{"", 0, std::string("--") + name,
                                "expected a positive finite number (got '" + s + "')"});
  }
  return v;
}

// The time-to-train settings of `run`: the goal, the shared flags and the price (--price, else the
// price table's row for the cluster file). Nothing without --train-days or --train-tokens.
std::optional<driver::TrainSettings> run_train_settings(const po::variables_map& vm,
                                                        const config::Scenario& sc) {
  DiagnosticList problems;
  bool any = false;
  driver::TrainSettings s;
  problems.collect([&] { s = train_settings_from_flags(vm, any); });
  if (vm.count("train-days")) problems.collect([&] { s.days = positive_flag(vm, "train-days"); });
  if (vm.count("train-tokens")) {
    problems.collect([&] { s.tokens = positive_flag(vm, "train-tokens"); });
  }
  if (vm.count("price")) {
    any = true;
    problems.collect([&] { s.usd_per_gpu_hour = positive_flag(vm, "price"); });
  }
  if (!s.any_goal()) {
    if (any) {
      problems.add({"", 0, "--train-days",
                    "the time-to-train flags need --train-days D or --train-tokens T"});
    }
    problems.throw_if_any();
    return std::nullopt;
  }
  problems.collect([&] { driver::check_train_settings(s); });
  problems.throw_if_any();
  if (!s.usd_per_gpu_hour) {
    for (const auto& offer : driver::load_prices(driver::default_prices_path())) {
      if (offer.cluster == sc.cluster.cluster.name) s.usd_per_gpu_hour = offer.usd_per_gpu_hour;
    }
  }
  return s;
}

}  // namespace

int cmd_run(const Args& args) {
  po::options_description o("run flags");
  add_scenario_flags(o);
  o.add_options()
      ("full", po::bool_switch(), "simulate every rank (default: one rank per pipeline stage)")
      ("trace", po::value<std::string>(), "write a Chrome trace (FILE.json or FILE.json.gz)")
      ("trace-devices", po::value<std::string>(),
       "ranks written to the trace, e.g. 0-7,32 (default: every simulated rank)")
      ("format", po::value<std::string>()->default_value("text"), "text, json or csv")
      ("fail-infeasible", po::bool_switch(), "exit 1 when the plan does not fit in memory")
      ("no-interval", po::bool_switch(),
       "skip the prediction interval (two replays at perturbed calibrations, docs/intervals.md)")
      ("nic-sharing", po::bool_switch(),
       "network tasks of different kinds in flight on one NIC share its bandwidth "
       "(docs/network-model.md); replays every task on the event engine, slower")
      ("fit", po::value<double>()->default_value(0.8, "0.8"), "fraction of GPU memory a plan may safely use");
  po::options_description train_flags("time to train (with --train-days or --train-tokens)");
  train_flags.add_options()
      ("train-days", po::value<std::string>(), "wall-clock days of training")
      ("train-tokens", po::value<std::string>(), "training tokens, e.g. 15.6e12")
      ("price", po::value<std::string>(), "USD per GPU-hour (default: the price table's)");
  add_train_flags(train_flags);
  o.add(train_flags);
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim run --model M --cluster C --gpus N [flags]")) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), true);
  const config::Scenario sc = scenario_from_flags(vm);
  const std::optional<driver::TrainSettings> train_settings = run_train_settings(vm, sc);
  std::optional<longrun::TrainData> train_data;
  if (train_settings) train_data = train_data_from_flags(vm);
  driver::RunOptions ro;
  ro.full = vm["full"].as<bool>();
  ro.fit = vm["fit"].as<double>();
  if (!(ro.fit > 0 && ro.fit <= 1)) {
    throw InputError(Diagnostic{"", 0, "--fit", "must be in (0, 1], got " + std::to_string(ro.fit)});
  }
  if (vm.count("trace")) ro.trace = vm["trace"].as<std::string>();
  if (vm.count("trace-devices")) {
    if (!ro.trace) throw InputError(Diagnostic{"", 0, "--trace-devices", "needs --trace FILE"});
    ro.trace_ranks = trace::parse_rank_list(vm["trace-devices"].as<std::string>(), sc.num_gpus,
                                            "--trace-devices");
  }
  ro.stats = true;
  ro.nic_sharing = vm["nic-sharing"].as<bool>();
  driver::Resources resources;
  driver::RunResult r = driver::simulate(sc, ro, resources);
  if (!vm["no-interval"].as<bool>()) {
    driver::add_interval(sc, r, config::load_interval_calibration(), resources, ro);
  }
  // The size report goes to stderr so that stdout stays one report in the chosen format.
  if (r.trace_size) std::cerr << trace::describe_trace_size(*ro.trace, *r.trace_size) << "\n";
  std::optional<driver::TrainReport> train;
  if (train_settings && !(r.iteration_time_s > 0)) {
    // Rejected before the replay (out of memory): no step to train with.
    train = driver::TrainReport{};
    train->feasible = false;
    train->tokens_goal = train_settings->tokens.has_value();
    train->reason = "the plan was not simulated (" + std::string(driver::status_name(r.status)) + ")";
  } else if (train_settings) {
    train = driver::time_to_train(driver::train_inputs(sc.model, sc.cluster, sc.num_gpus, sc.plan,
                                                       driver::step_parts(r.time)),
                                  *train_settings, *train_data);
  }
  const driver::TrainReport* tr = train ? &*train : nullptr;
  // With --framework: the settings in effect and where each came from (flag, profile, default).
  const auto profile = framework_from_flags(vm);
  std::vector<SettingInEffect> settings;
  if (profile) settings = settings_in_effect(vm, *profile, sc.plan);
  switch (format) {
    case Format::kText:
      std::cout << driver::report_text(sc, r, r.stats, tr);
      if (profile) std::cout << settings_text(*profile, settings);
      break;
    case Format::kJson:
      if (profile) {
        auto j = nlohmann::ordered_json::parse(driver::report_json(sc, r, r.stats, tr));
        j["framework"] = profile->name;
        auto& arr = j["settings"] = nlohmann::ordered_json::array();
        for (const auto& s : settings) {
          arr.push_back(
              {{"name", s.name}, {"value", s.value}, {"origin", s.origin}, {"source", s.source}});
        }
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << driver::report_json(sc, r, r.stats, tr);
      }
      break;
    case Format::kCsv: std::cout << driver::report_csv_header() << driver::report_csv_row(sc, r, r.stats); break;
  }
  if (vm["fail-infeasible"].as<bool>() && r.status != driver::Status::kOk) return kExitInfeasible;
  return kExitOk;
}

}  // namespace ts::cli

namespace ts::cli {

int cmd_inspect(const Args& args) {
  po::options_description o("inspect flags");
  add_scenario_flags(o);
  o.add_options()
      ("full", po::bool_switch(), "count tasks for every rank (default: one rank per stage)")
      ("format", po::value<std::string>()->default_value("text"), "text or json");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim inspect --model M --cluster C --gpus N [flags]")) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), false);
  const config::Scenario sc = scenario_from_flags(vm);
  const driver::InspectResult r = driver::inspect(sc, vm["full"].as<bool>());
  std::cout << (format == Format::kJson ? driver::inspect_json(sc, r) : driver::inspect_text(sc, r));
  return kExitOk;
}

}  // namespace ts::cli
