// trainsim run / inspect.
#include <iostream>

#include "sim/base/diagnostic.h"
#include "sim/driver/report.h"
#include "sim/driver/simulate.h"
#include "tools/trainsim/cli.h"
#include "tools/trainsim/scenario_flags.h"

namespace po = boost::program_options;

namespace ts::cli {

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
      ("fit", po::value<double>()->default_value(0.8), "fraction of GPU memory a plan may safely use");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim run --model M --cluster C --gpus N [flags]")) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), true);
  const config::Scenario sc = scenario_from_flags(vm);
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
  const driver::RunResult r = driver::simulate(sc, ro);
  // The size report goes to stderr so that stdout stays one report in the chosen format.
  if (r.trace_size) std::cerr << trace::describe_trace_size(*ro.trace, *r.trace_size) << "\n";
  switch (format) {
    case Format::kText: std::cout << driver::report_text(sc, r, r.stats); break;
    case Format::kJson: std::cout << driver::report_json(sc, r, r.stats); break;
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
