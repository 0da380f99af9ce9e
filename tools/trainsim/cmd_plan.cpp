// trainsim plan: hardware sizing — per GPU kind and fabric, the smallest cluster whose best plan
// trains the token budget before the deadline, with GPU-hours and cost.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"
#include "sim/driver/plan_hw.h"
#include "tools/trainsim/cli.h"
#include "tools/trainsim/sweep_flags.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

double positive_number(const std::string& s, const char* flag) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0) || !std::isfinite(v)) {
    throw InputError(Diagnostic{"", 0, flag, "expected a positive finite number (got '" + s + "')"});
  }
  return v;
}

std::vector<double> number_list(const po::variables_map& vm, const char* name) {
  std::vector<double> out;
  if (!vm.count(name)) return out;
  for (const auto& item : split(vm[name].as<std::string>(), ',')) {
    out.push_back(positive_number(item, (std::string("--") + name).c_str()));
  }
  return out;
}

}  // namespace

int cmd_plan(const Args& args) {
  po::options_description o("plan flags");
  o.add_options()("model", po::value<std::string>()->required(),
                  "model: zoo name (llama3-70b) or file path")(
      "tokens", po::value<std::string>()->required(), "training tokens, e.g. 15e12")(
      "days", po::value<std::string>()->required(), "deadline in days of training")(
      "budget", po::value<std::string>(), "budget in USD; each choice is marked within or over it")(
      "gpus-from", po::value<std::string>()->default_value("a100,h100,h200"),
      "GPU kinds (names in the price table)")("prices", po::value<std::string>(),
                                              "price table CSV (default: calibration/prices.csv)")(
      "price", po::value<std::vector<std::string>>()->composing(),
      "override a price: KIND=USD_PER_GPU_HOUR (repeatable, or comma-separated)")(
      "gpus",
      po::value<std::string>()->default_value(
          "256,512,1024,1536,2048,3072,4096,6144,8192,12288,16384,24576,32768"),
      "candidate cluster sizes (GPUs)")(
      "nic-gbits", po::value<std::string>(),
      "fabric axis: NIC line rates to try, Gb/s (default: the cluster file's)")(
      "oversubscription", po::value<std::string>(),
      "fabric axis: leaf oversubscription ratios to try, e.g. 1,2")(
      "seq", po::value<std::int64_t>(),
      "sequence length (default: the model's max_seq_len, else 4096)")(
      "global-batch", po::value<std::int64_t>(),
      "sequences per iteration (default: 4Mi tokens / seq)")(
      "dtype", po::value<std::string>()->default_value("bf16"),
      "GEMM precision: bf16, fp16, fp8, mxfp8 or nvfp4 (Blackwell)");
  AxisDefaults axis_defaults;
  // "domain": powers of two up to the GPUs of one NVLink domain, per cluster (SizingSpec).
  axis_defaults.tp = "domain";
  axis_defaults.cp = "1";
  axis_defaults.micro_batch = "1,2";
  axis_defaults.zero = "1";
  axis_defaults.sequence_parallel = "on";
  axis_defaults.cp_algo = "ring";
  add_axis_flags(o, axis_defaults);
  o.add_options()
      ("threads", po::value<int>()->default_value(0), "worker threads (0: every core)")
      ("format", po::value<std::string>()->default_value("text"), "text or json")
      ("json", po::value<std::string>(), "also write the JSON document to this file");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, "usage: trainsim plan --model M --tokens T --days D [--budget USD] [flags]")) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), false);

  DiagnosticList problems;
  driver::SizingSpec spec;
  problems.collect([&] { spec.model = config::load_model(vm["model"].as<std::string>()); });
  problems.collect([&] { spec.tokens = positive_number(vm["tokens"].as<std::string>(), "--tokens"); });
  problems.collect([&] { spec.days = positive_number(vm["days"].as<std::string>(), "--days"); });
  if (vm.count("budget")) problems.collect([&] { spec.budget_usd = positive_number(vm["budget"].as<std::string>(), "--budget"); });
  std::vector<driver::GpuOffer> table;
  problems.collect([&] {
    table = driver::load_prices(vm.count("prices") ? std::filesystem::path(vm["prices"].as<std::string>())
                                                   : driver::default_prices_path());
  });
  if (vm.count("price")) {
    for (const auto& arg : vm["price"].as<std::vector<std::string>>()) {
      for (const auto& item : split(arg, ',')) {
        problems.collect([&] {
          const auto eq = item.find('=');
          if (eq == std::string::npos) throw InputError(Diagnostic{"", 0, "--price", "expected KIND=USD (got '" + item + "')"});
          const std::string kind = item.substr(0, eq);
          const double v = positive_number(item.substr(eq + 1), "--price");
          for (auto& offer : table) {
            if (offer.kind != kind) continue;
            offer.usd_per_gpu_hour = v;
            offer.basis = "given with --price";
            offer.source = "command line";
            return;
          }
          throw InputError(Diagnostic{"", 0, "--price", "unknown GPU kind '" + kind + "' (not in the price table)"});
        });
      }
    }
  }
  for (const auto& kind : split(vm["gpus-from"].as<std::string>(), ',')) {
    bool found = false;
    for (const auto& offer : table) {
      if (offer.kind == kind) {
        spec.offers.push_back(offer);
        found = true;
      }
    }
    if (!found && !table.empty()) {
      std::string known;
      for (const auto& offer : table) known += (known.empty() ? "" : ", ") + offer.kind;
      problems.add({"", 0, "--gpus-from", "unknown GPU kind '" + kind + "' (the price table lists " + known + ")"});
    }
  }
  problems.collect([&] { spec.cluster_sizes = config::parse_int_list(vm["gpus"].as<std::string>(), "--gpus"); });
  std::vector<double> nics, overs;
  problems.collect([&] { nics = number_list(vm, "nic-gbits"); });
  problems.collect([&] { overs = number_list(vm, "oversubscription"); });
  if (nics.empty()) nics.push_back(0);  // 0: as in the cluster file
  if (overs.empty()) overs.push_back(0);
  for (double nic : nics) {
    for (double over : overs) {
      driver::FabricOption f;
      if (nic > 0) f.nic_gbits = nic;
      if (over > 0) f.oversubscription = over;
      spec.fabrics.push_back(f);
    }
  }
  auto& b = spec.base;
  b.seq_len = vm.count("seq") ? vm["seq"].as<std::int64_t>()
                              : (spec.model.max_seq_len > 0 ? spec.model.max_seq_len : 4096);
  if (b.seq_len <= 0) problems.add({"", 0, "--seq", "must be > 0"});
  // Llama 2 and the start of Llama 3 pre-training used batches of about 4M tokens (Touvron et al.
  // 2023 §2.2; Dubey et al. 2024 §3.4.1).
  b.global_batch = vm.count("global-batch") ? vm["global-batch"].as<std::int64_t>()
                                            : std::max<std::int64_t>(1, (std::int64_t{4} << 20) / std::max<std::int64_t>(1, b.seq_len));
  if (b.global_batch <= 0) problems.add({"", 0, "--global-batch", "must be > 0"});
  problems.collect([&] { b.dtype = config::parse_dtype(vm["dtype"].as<std::string>(), "--dtype"); });
  if (vm["tp"].as<std::string>() == "domain") {
    spec.tp_within_domain = true;
    vm.at("tp").value() = std::string("1");  // replaced per cluster by plan_hardware
  }
  problems.collect([&] { spec.axes = axes_from_flags(vm); });
  spec.threads = vm["threads"].as<int>();
  problems.throw_if_any();

  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::function<void(const driver::SizingProgress&)> progress;
  if (terminal) {
    progress = [](const driver::SizingProgress& p) {
      std::fprintf(stderr, "\r%s [%s] %lld GPUs: %lld/%lld plans   ", p.kind.c_str(), p.fabric.c_str(),
                   static_cast<long long>(p.num_gpus), static_cast<long long>(p.sweep.done),
                   static_cast<long long>(p.sweep.total));
      if (p.sweep.done >= p.sweep.total) std::fputc('\n', stderr);
      std::fflush(stderr);
    };
  }
  const auto choices = driver::plan_hardware(spec, progress);
  const std::string json = driver::sizing_json(spec, choices);
  if (vm.count("json")) {
    const std::string path = vm["json"].as<std::string>();
    write_file_atomic(path, json, "--json");
  }
  if (format == Format::kJson) {
    std::cout << json;
    return kExitOk;
  }
  char head[256];
  std::snprintf(head, sizeof head, "%s: %.3g tokens in %g days; global batch %lld x %lld tokens, %s\n",
                spec.model.name.c_str(), spec.tokens, spec.days, static_cast<long long>(b.global_batch),
                static_cast<long long>(b.seq_len), std::string(config::name(b.dtype)).c_str());
  std::cout << head;
  if (spec.budget_usd) std::cout << "budget: $" << *spec.budget_usd << "\n";
  std::cout << driver::sizing_table(spec, choices) << "\nsizes tried:\n";
  for (const auto& c : choices) {
    std::cout << "  " << c.kind << " [" << c.fabric << "]:";
    for (const auto& t : c.trials) {
      std::cout << "  " << t.num_gpus << " " << t.outcome;
      if (t.best_tokens_per_s > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " (%.1f days, %lld plans)", t.days, static_cast<long long>(t.plans));
        std::cout << buf;
      }
      std::cout << ";";
    }
    std::cout << "\n";
  }
  std::cout << "prices:\n";
  for (const auto& offer : spec.offers) {
    std::cout << "  " << offer.kind << " (" << offer.cluster << "): "
              << (offer.usd_per_gpu_hour ? "$" + std::to_string(*offer.usd_per_gpu_hour) + "/GPU-hour" : std::string("no price"))
              << (offer.basis.empty() ? "" : ", " + offer.basis) << (offer.source.empty() ? "" : " — " + offer.source) << "\n";
  }
  std::cout << "(prices are defaults from the price table; override with --price KIND=USD or --prices FILE)\n";
  return kExitOk;
}

}  // namespace ts::cli
