#include "tools/trainsim/scenario_flags.h"

#include <optional>
#include <sstream>

#include "sim/base/diagnostic.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

template <class E>
struct Named {
  const char* name;
  E value;
};

// Looks `value` up in `table`; unknown names are reported naming the flag and the known names.
template <class E, std::size_t N>
std::optional<E> lookup(const std::string& flag, const std::string& value, const Named<E> (&table)[N],
                        DiagnosticList& problems) {
  std::string known;
  for (const auto& n : table) {
    if (value == n.name) return n.value;
    known += known.empty() ? "" : ", ";
    known += n.name;
  }
  problems.add({"", 0, flag, "unknown value '" + value + "' (known: " + known + ")"});
  return std::nullopt;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

constexpr Named<ir::Dtype> kDtypes[] = {{"bf16", ir::Dtype::kBf16}, {"fp16", ir::Dtype::kFp16}, {"fp8", ir::Dtype::kFp8}};
constexpr Named<parallel::Recompute> kRecompute[] = {{"none", parallel::Recompute::kNone},
                                                     {"selective", parallel::Recompute::kSelective},
                                                     {"full", parallel::Recompute::kFull}};
constexpr Named<parallel::Schedule> kSchedules[] = {{"gpipe", parallel::Schedule::kGpipe},
                                                    {"1f1b", parallel::Schedule::k1F1B},
                                                    {"interleaved", parallel::Schedule::kInterleaved}};
constexpr Named<parallel::CpAlgo> kCpAlgos[] = {{"ring", parallel::CpAlgo::kRing},
                                                {"allgather", parallel::CpAlgo::kAllGather},
                                                {"ulysses", parallel::CpAlgo::kUlysses}};
constexpr Named<parallel::OptimizerStates> kOptimizerStates[] = {{"fp32", parallel::OptimizerStates::kFp32},
                                                                 {"bf16", parallel::OptimizerStates::kBf16}};
constexpr Named<parallel::Axis> kAxes[] = {{"tp", parallel::Axis::kTp}, {"cp", parallel::Axis::kCp},
                                           {"dp", parallel::Axis::kDp}, {"pp", parallel::Axis::kPp}};

}  // namespace

void add_scenario_flags(po::options_description& o) {
  o.add_options()
      ("model", po::value<std::string>()->required(), "model: zoo name (llama3-70b) or file path")
      ("cluster", po::value<std::string>()->required(), "cluster: zoo name (dgx-h100) or file path")
      ("gpus", po::value<std::int64_t>()->required(), "number of GPUs")
      ("tp", po::value<std::int64_t>()->default_value(1), "tensor-parallel degree")
      ("pp", po::value<std::int64_t>()->default_value(1), "pipeline-parallel degree")
      ("dp", po::value<std::int64_t>(), "data-parallel degree (default: gpus / (tp·pp·cp))")
      ("cp", po::value<std::int64_t>()->default_value(1), "context-parallel degree")
      ("vpp", po::value<std::int64_t>()->default_value(1), "virtual pipeline stages per rank")
      ("micro-batch", po::value<std::int64_t>()->default_value(1), "sequences per micro-batch")
      ("global-batch", po::value<std::int64_t>()->required(), "sequences per iteration")
      ("seq", po::value<std::int64_t>()->default_value(2048), "sequence length (tokens)")
      ("dtype", po::value<std::string>()->default_value("bf16"), "GEMM precision: bf16, fp16 or fp8")
      ("zero", po::value<int>()->default_value(0), "ZeRO stage 0-3 (1 = distributed optimizer)")
      ("sequence-parallel", po::bool_switch(), "Megatron sequence parallelism with TP")
      ("recompute", po::value<std::string>()->default_value("none"), "none, selective or full")
      ("schedule", po::value<std::string>()->default_value("1f1b"), "gpipe, 1f1b or interleaved")
      ("pp-layers", po::value<std::string>(), "layers per pipeline stage, e.g. 15,16,16,15")
      ("order", po::value<std::string>()->default_value("tp,cp,dp,pp"), "rank order, innermost first")
      ("cp-algo", po::value<std::string>()->default_value("ring"), "ring, allgather or ulysses")
      ("mst-chunks", po::value<std::int64_t>()->default_value(1), "Mini-Sequence Transformer chunks")
      ("optimizer-states", po::value<std::string>()->default_value("fp32"), "fp32 or bf16")
      ("optimizer-in-backward", po::bool_switch(), "apply the optimizer per parameter during backward");
}

config::Scenario scenario_from_flags(const po::variables_map& vm) {
  DiagnosticList problems;
  config::Scenario sc;
  // Files first: their problems carry file and line.
  std::optional<ir::ModelSpec> model;
  std::optional<config::Cluster> cluster;
  try {
    model = config::load_model(vm["model"].as<std::string>());
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) problems.add(d);
  }
  try {
    cluster = config::load_cluster(vm["cluster"].as<std::string>());
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) problems.add(d);
  }

  auto& p = sc.plan;
  const auto gpus = vm["gpus"].as<std::int64_t>();
  p.tp = vm["tp"].as<std::int64_t>();
  p.pp = vm["pp"].as<std::int64_t>();
  p.cp = vm["cp"].as<std::int64_t>();
  p.vpp = vm["vpp"].as<std::int64_t>();
  p.micro_batch = vm["micro-batch"].as<std::int64_t>();
  p.global_batch = vm["global-batch"].as<std::int64_t>();
  p.seq_len = vm["seq"].as<std::int64_t>();
  p.zero_stage = vm["zero"].as<int>();
  p.sequence_parallel = vm["sequence-parallel"].as<bool>();
  p.optimizer_in_backward = vm["optimizer-in-backward"].as<bool>();
  p.mst_chunks = vm["mst-chunks"].as<std::int64_t>();
  if (vm.count("dp")) {
    p.dp = vm["dp"].as<std::int64_t>();
  } else {
    const std::int64_t mp = p.tp * p.pp * p.cp;
    p.dp = mp > 0 && gpus % mp == 0 ? gpus / mp : 0;
    if (p.dp == 0) {
      problems.add({"", 0, "--dp", "cannot derive: --gpus " + std::to_string(gpus) +
                                       " is not a multiple of tp·pp·cp = " + std::to_string(mp)});
    }
  }
  if (auto v = lookup("--dtype", vm["dtype"].as<std::string>(), kDtypes, problems)) p.dtype = *v;
  if (auto v = lookup("--recompute", vm["recompute"].as<std::string>(), kRecompute, problems)) p.recompute = *v;
  if (auto v = lookup("--schedule", vm["schedule"].as<std::string>(), kSchedules, problems)) p.schedule = *v;
  if (auto v = lookup("--cp-algo", vm["cp-algo"].as<std::string>(), kCpAlgos, problems)) p.cp_algo = *v;
  if (auto v = lookup("--optimizer-states", vm["optimizer-states"].as<std::string>(), kOptimizerStates, problems)) {
    p.optimizer_states = *v;
  }
  p.order.clear();
  for (const auto& a : split(vm["order"].as<std::string>())) {
    if (auto v = lookup("--order", a, kAxes, problems)) p.order.push_back(*v);
  }
  if (vm.count("pp-layers")) {
    for (const auto& item : split(vm["pp-layers"].as<std::string>())) {
      try {
        std::size_t used = 0;
        p.pp_layers.push_back(std::stoll(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } catch (const std::logic_error&) {
        problems.add({"", 0, "--pp-layers", "'" + item + "' is not an integer"});
      }
    }
  }
  if (gpus <= 0 || gpus > (std::int64_t{1} << 30)) {
    problems.add({"", 0, "--gpus", "must be between 1 and 2^30, got " + std::to_string(gpus)});
  }
  sc.num_gpus = static_cast<std::int32_t>(gpus > 0 && gpus <= (std::int64_t{1} << 30) ? gpus : 1);
  if (model && cluster && problems.empty()) {
    for (auto& d : config::check_plan(p, *model, *cluster, gpus)) problems.add(std::move(d));
  }
  problems.throw_if_any();
  sc.model = std::move(*model);
  sc.cluster = std::move(*cluster);
  return sc;
}

}  // namespace ts::cli
