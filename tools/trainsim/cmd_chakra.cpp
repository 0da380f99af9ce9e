// trainsim chakra export / import: Chakra execution traces (ASTRA-sim's workload format).
#include <iostream>

#include "sim/base/diagnostic.h"
#include "sim/config/chakra_reader.h"
#include "sim/driver/replay_graph.h"
#include "sim/driver/report.h"
#include "tools/trainsim/cli.h"
#include "tools/trainsim/scenario_flags.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

constexpr const char* kUsage =
    "usage: trainsim chakra export <run flags> --prefix P\n"
    "       trainsim chakra import --prefix P --cluster C [--gpus N] [--comm-groups F] [--recost]\n"
    "                              [--trace FILE.json[.gz]] [--format text|json]";

int chakra_export(const Args& args) {
  po::options_description o("chakra export flags");
  add_scenario_flags(o);
  o.add_options()
      ("prefix", po::value<std::string>()->required(), "write P.<rank>.et for every rank and P.json (process groups)")
      ("format", po::value<std::string>()->default_value("text"), "report of the exported run: text, json or csv");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim chakra export --model M --cluster C --gpus N [run flags] --prefix P")) {
    return kExitOk;
  }
  const Format format = parse_format(vm["format"].as<std::string>(), true);
  const config::Scenario sc = scenario_from_flags(vm);
  driver::Resources resources;
  const driver::ExportResult r = driver::export_chakra(sc, vm["prefix"].as<std::string>(), resources);
  switch (format) {
    case Format::kText: std::cout << driver::report_text(sc, r.run); break;
    case Format::kJson: std::cout << driver::report_json(sc, r.run); break;
    case Format::kCsv: std::cout << driver::report_csv_header() << driver::report_csv_row(sc, r.run); break;
  }
  if (r.files.empty()) {
    std::cerr << "error: nothing exported: " << r.run.reason << '\n';
    return kExitInfeasible;
  }
  if (format == Format::kText) {
    std::cout << "chakra trace              " << r.files.size() - 1 << " files " << vm["prefix"].as<std::string>()
              << ".<rank>.et and " << r.files.back().string() << '\n';
  }
  return kExitOk;
}

int chakra_import(const Args& args) {
  po::options_description o("chakra import flags");
  o.add_options()
      ("prefix", po::value<std::string>()->required(), "read P.0.et, P.1.et, … (one file per rank)")
      ("cluster", po::value<std::string>()->required(), "cluster: zoo name (dgx-h100) or file path")
      ("gpus", po::value<std::int64_t>(), "number of GPUs (default and only allowed value: the ranks in the trace)")
      ("comm-groups", po::value<std::string>(), "process groups JSON (group → ranks; default P.json when present)")
      ("recost", po::bool_switch(), "cost compute nodes with op shapes or FLOPs by the compute model, "
                                    "even when they record a duration")
      ("trace", po::value<std::string>(), "write a Chrome trace (FILE.json or FILE.json.gz)")
      ("format", po::value<std::string>()->default_value("text"), "text or json");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim chakra import --prefix P --cluster C [flags]")) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), false);
  const config::Cluster cluster = config::load_cluster(vm["cluster"].as<std::string>());
  std::optional<std::filesystem::path> groups;
  if (vm.count("comm-groups")) groups = vm["comm-groups"].as<std::string>();
  const config::ChakraTrace trace = config::read_chakra(vm["prefix"].as<std::string>(), groups);
  const auto ranks = static_cast<std::int64_t>(trace.ranks.size());
  if (vm.count("gpus") && vm["gpus"].as<std::int64_t>() != ranks) {
    throw InputError(Diagnostic{"", 0, "--gpus",
                                "the trace has " + std::to_string(ranks) + " ranks, one per GPU; got --gpus " +
                                    std::to_string(vm["gpus"].as<std::int64_t>())});
  }
  driver::Resources resources;
  const auto num_gpus = static_cast<std::int32_t>(ranks);
  driver::ImportOptions io;
  io.recost = vm["recost"].as<bool>();
  // A trainsim trace carries its plan, whose host dispatch time recosting keeps.
  const compute::ComputeModel& compute =
      trace.plan ? resources.compute(cluster.gpu, *trace.plan) : resources.compute(cluster.gpu);
  const driver::GraphWorkload w = driver::import_chakra(trace, compute, resources.network(cluster, num_gpus), io);
  driver::RunOptions ro;
  ro.full = true;
  if (vm.count("trace")) ro.trace = vm["trace"].as<std::string>();
  const driver::GraphRunResult r = driver::simulate_graph(w, cluster, ro, resources);
  std::cout << (format == Format::kJson ? driver::graph_report_json(w, cluster, r)
                                        : driver::graph_report_text(w, cluster, r));
  return kExitOk;
}

}  // namespace

int cmd_chakra(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? std::cerr : std::cout) << kUsage << '\n';
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "export") return chakra_export(rest);
  if (args[0] == "import") return chakra_import(rest);
  throw InputError(Diagnostic{"", 0, "chakra", "unknown subcommand '" + args[0] + "' (known: export, import)"});
}

}  // namespace ts::cli
