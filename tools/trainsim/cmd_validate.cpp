// trainsim validate: simulates published training runs (CSV) and reports the prediction errors.
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/config/interval_loader.h"
#include "sim/config/names.h"
#include "sim/driver/validate.h"
#include "tools/trainsim/cli.h"

namespace po = boost::program_options;

namespace ts::cli {

int cmd_validate(const Args& args) {
  po::options_description o("validate flags");
  o.add_options()
      ("runs", po::value<std::vector<std::string>>()->multitoken(),
       "published runs, CSV files (tests/validation/README.md); may be repeated")
      ("held-out", po::value<std::vector<std::string>>()->multitoken(),
       "published runs of the frozen held-out set (tests/validation/held-out.csv), reported apart "
       "from the --runs rows; may be repeated")
      ("out", po::value<std::string>(), "also write one CSV line per row to FILE")
      ("emit-scenarios", po::value<std::string>(),
       "write the scenario each row's reading proposes, with its rules and overrides, to FILE "
       "(protobuf text format) and stop: no simulation")
      ("format", po::value<std::string>()->default_value("text"), "text or json")
      ("threads", po::value<int>()->default_value(1), "rows simulated concurrently")
      ("no-intervals", po::bool_switch(), "skip the rows' prediction intervals (docs/intervals.md)")
      ("nic-sharing", po::bool_switch(),
       "network tasks of different kinds in flight on one NIC share its bandwidth "
       "(docs/network-model.md); needs --no-intervals")
      ("host-dispatch-us", po::value<double>(),
       "host time per modeled operation for every row, microseconds (default: the plan default)");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim validate --runs FILE.csv... [--held-out FILE.csv...] [--out FILE.csv] "
                  "[--format text|json] [--emit-scenarios FILE]")) {
    return kExitOk;
  }
  const Format format = parse_format(vm["format"].as<std::string>(), false);
  const int threads = vm["threads"].as<int>();
  if (threads < 1) throw InputError(Diagnostic{"", 0, "--threads", "must be >= 1"});
  if (vm.count("runs") == 0 && vm.count("held-out") == 0) {
    throw InputError(Diagnostic{"", 0, "--runs", "give at least one CSV file (--runs or --held-out)"});
  }
  std::vector<driver::PublishedRun> runs;
  for (const char* flag : {"runs", "held-out"}) {
    if (vm.count(flag) == 0) continue;
    for (const auto& path : vm[flag].as<std::vector<std::string>>()) {
      auto rows = driver::read_published_runs(path);
      for (auto& r : rows) r.held_out = std::string_view(flag) == "held-out";
      runs.insert(runs.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
    }
  }
  if (vm.count("emit-scenarios")) {
    write_file_atomic(vm["emit-scenarios"].as<std::string>(), driver::validation_scenarios(runs), "--emit-scenarios");
    return kExitOk;
  }
  driver::ValidateOptions options;
  options.threads = threads;
  options.nic_sharing = vm["nic-sharing"].as<bool>();
  if (options.nic_sharing && !vm["no-intervals"].as<bool>()) {
    throw InputError(Diagnostic{"", 0, "--nic-sharing",
                                "needs --no-intervals (the rows' interval replays do not share NICs)"});
  }
  if (vm.count("host-dispatch-us")) {
    options.host_dispatch = config::parse_host_dispatch_us(vm["host-dispatch-us"].as<double>(), "--host-dispatch-us");
  }
  std::optional<config::IntervalCalibration> intervals;
  if (!vm["no-intervals"].as<bool>()) {
    intervals = config::load_interval_calibration();
    options.intervals = &*intervals;
  }
  const driver::ValidationReport report = driver::validate(runs, options);
  if (vm.count("out")) {
    const std::string path = vm["out"].as<std::string>();
    write_file_atomic(path, driver::validation_csv(report), "--out");
  }
  std::cout << (format == Format::kJson ? driver::validation_json(report) : driver::validation_text(report));
  return kExitOk;
}

}  // namespace ts::cli
