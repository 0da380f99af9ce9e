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
#include "tools/trainsim/scenario_flags.h"
#include "tools/trainsim/sweep_flags.h"
#include "tools/trainsim/train_flags.h"

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

// "4Mi", "16M", "4194304", "8e6": a token count; k, M, G are powers of 1000, Ki, Mi, Gi of 1024.
double token_count(const std::string& s, const char* flag) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  const std::string unit = end != nullptr ? std::string(end) : std::string();
  double scale = 0;
  if (unit.empty()) scale = 1;
  else if (unit == "k") scale = 1e3;
  else if (unit == "M") scale = 1e6;
  else if (unit == "G") scale = 1e9;
  else if (unit == "Ki") scale = 1024.0;
  else if (unit == "Mi") scale = 1048576.0;
  else if (unit == "Gi") scale = 1073741824.0;
  if (s.empty() || end == s.c_str() || scale == 0 || !(v > 0) || !std::isfinite(v)) {
    throw InputError(Diagnostic{"", 0, flag, "expected a positive token count such as 4Mi, 8M or 4194304 (got '" + s + "')"});
  }
  return v * scale;
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
  o.add_options()
      ("model", po::value<std::string>()->required(), "model: zoo name (llama3-70b) or file path")
      ("tokens", po::value<std::string>()->required(), "training tokens, e.g. 15e12")
      ("days", po::value<std::string>()->required(), "deadline in days of training")
      ("budget", po::value<std::string>(), "budget in USD; each choice is marked within or over it")
      ("gpus-from", po::value<std::string>()->default_value("a100,h100,h200"), "GPU kinds (names in the price table)")
      ("prices", po::value<std::string>(), "price table CSV (default: calibration/prices.csv)")
      ("price", po::value<std::vector<std::string>>()->composing(),
       "override a price: KIND=USD_PER_GPU_HOUR (repeatable, or comma-separated)")
      ("gpus", po::value<std::string>()->default_value("8,16,32,64,128,192,256,384,512,768,1024,1536,2048,3072,4096,6144,8192,12288,16384,24576,32768"),
       "candidate cluster sizes (GPUs)")
      ("nic-gbits", po::value<std::string>(), "fabric axis: NIC line rates to try, Gb/s (default: the cluster file's)")
      ("oversubscription", po::value<std::string>(), "fabric axis: leaf oversubscription ratios to try, e.g. 1,2")
      ("seq", po::value<std::int64_t>(), "sequence length (default: the model's max_seq_len, else 4096)")
      ("batch-tokens", po::value<std::string>()->default_value("4Mi-16Mi"),
       "range of global batches in tokens, MIN-MAX (suffixes k M G: 1e3.., Ki Mi Gi: 2^10..): at each "
       "size the smallest batch of 2^k or 3·2^k sequences in it that meets the deadline")
      ("global-batch", po::value<std::int64_t>(), "sequences per iteration: pins the batch (instead of --batch-tokens)")
      ("dtype", po::value<std::string>()->default_value("bf16"), "GEMM precision: bf16, fp16, fp8, mxfp8 or nvfp4 (Blackwell)")
      ("placement", po::value<std::string>()->default_value("segment"),
       "GPUs per scale-up domain of several hosts (NVL72 racks): segment (the largest whole number of "
       "hosts per domain that divides the job's, as NVIDIA's launchers place jobs) or fill (every GPU)")
      ("framework", po::value<std::string>(),
       "framework profile (frameworks/NAME.textproto or a path): its settings for every plan, its ZeRO "
       "stage, sequence parallelism and recompute modes as the axes whose flags are not given");
  AxisDefaults axis_defaults;
  // "domain": powers of two up to the GPUs of one NVLink domain, per cluster (SizingSpec).
  axis_defaults.tp = "domain";
  axis_defaults.cp = "1";
  axis_defaults.micro_batch = "1,2";
  axis_defaults.zero = "1";
  axis_defaults.sequence_parallel = "on";
  axis_defaults.cp_algo = "ring";
  axis_defaults.pp_split = "balanced";
  add_axis_flags(o, axis_defaults);
  add_moe_token_flags(o);
  o.add_options()
      ("threads", po::value<int>()->default_value(0), "worker threads (0: every core)")
      ("format", po::value<std::string>()->default_value("text"), "text or json")
      ("json", po::value<std::string>(), "also write the JSON document to this file")
      ("csv", po::value<std::string>(), "also write one CSV row per GPU kind, fabric and size")
      ("all-sizes", po::bool_switch(), "also simulate the sizes above the chosen one");
  po::options_description train("time to train (interruptions, checkpoints, stragglers, energy)");
  add_train_flags(train);
  o.add(train);
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
  read_moe_token_flags(vm, b, problems);
  b.seq_len = vm.count("seq") ? vm["seq"].as<std::int64_t>()
                              : (spec.model.max_seq_len > 0 ? spec.model.max_seq_len : 4096);
  if (b.seq_len <= 0) problems.add({"", 0, "--seq", "must be > 0"});
  // The default batch range: Llama 2 and the start of Llama 3 pre-training used batches of about
  // 4M tokens (Touvron et al. 2023 §2.2); Llama 3 405B doubled it to 8M and then 16M tokens
  // during pre-training (Dubey et al. 2024 §3.4.1).
  double batch_min = 0, batch_max = 0;
  if (vm.count("global-batch")) {
    if (!vm["batch-tokens"].defaulted()) {
      problems.add({"", 0, "--global-batch", "pins the batch: give it or --batch-tokens, not both"});
    }
    b.global_batch = vm["global-batch"].as<std::int64_t>();
    if (b.global_batch <= 0) problems.add({"", 0, "--global-batch", "must be > 0"});
  } else {
    problems.collect([&] {
      const std::string text = vm["batch-tokens"].as<std::string>();
      const auto dash = text.find('-');
      const std::string lo = dash == std::string::npos ? text : text.substr(0, dash);
      const std::string hi = dash == std::string::npos ? text : text.substr(dash + 1);
      batch_min = token_count(lo, "--batch-tokens");
      batch_max = token_count(hi, "--batch-tokens");
      if (batch_min > batch_max) {
        throw InputError(Diagnostic{"", 0, "--batch-tokens", "MIN is larger than MAX (got '" + text + "')"});
      }
      if (b.seq_len <= 0) return;
      spec.batch_choices = driver::batch_choices(batch_min, batch_max, b.seq_len);
      if (spec.batch_choices.empty()) {
        throw InputError(Diagnostic{"", 0, "--batch-tokens",
                                    "no batch of 2^k or 3·2^k sequences of " + std::to_string(b.seq_len) +
                                        " tokens lies in '" + text + "'; widen the range or pin --global-batch"});
      }
      b.global_batch = spec.batch_choices.back();
      if (spec.batch_choices.size() == 1) spec.batch_choices.clear();
    });
  }
  problems.collect([&] { b.dtype = config::parse_dtype(vm["dtype"].as<std::string>(), "--dtype"); });
  {
    const std::string placement = vm["placement"].as<std::string>();
    if (placement == "segment") {
      spec.placement = driver::Placement::kSegment;
    } else if (placement == "fill") {
      spec.placement = driver::Placement::kFill;
    } else {
      problems.add({"", 0, "--placement", "expected segment or fill (got '" + placement + "')"});
    }
  }
  if (vm["tp"].as<std::string>() == "domain") {
    spec.tp_within_domain = true;
    vm.at("tp").value() = std::string("1");  // replaced per cluster by plan_hardware
  }
  problems.collect([&] { spec.axes = axes_from_flags(vm); });
  problems.collect([&] {
    if (const auto profile = framework_from_flags(vm)) {
      apply_framework(vm, *profile, b);
      apply_framework(vm, *profile, spec.axes);
    }
  });
  spec.threads = vm["threads"].as<int>();
  spec.all_sizes = vm["all-sizes"].as<bool>();
  problems.collect([&] {
    bool any = false;
    spec.train = train_settings_from_flags(vm, any);
  });
  problems.collect([&] { spec.train_data = train_data_from_flags(vm); });
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
  if (vm.count("csv")) {
    write_file_atomic(vm["csv"].as<std::string>(), driver::sizing_csv(spec, choices), "--csv");
  }
  if (format == Format::kJson) {
    std::cout << json;
    return kExitOk;
  }
  char head[256];
  std::snprintf(head, sizeof head, "%s: %.3g tokens in %g days, sequences of %lld tokens, %s\n",
                spec.model.name.c_str(), spec.tokens, spec.days, static_cast<long long>(b.seq_len),
                std::string(config::name(b.dtype)).c_str());
  std::cout << head;
  if (spec.batch_choices.empty()) {
    std::cout << "global batch: " << b.global_batch << " sequences (pinned)\n";
  } else {
    std::cout << "global batch: at each size the smallest of";
    for (auto x : spec.batch_choices) std::cout << " " << x;
    std::cout << " sequences (" << vm["batch-tokens"].as<std::string>()
              << " tokens) that meets the deadline (column batch)\n"
              << "  a larger batch is a training choice, not a free speed-up: beyond the critical batch size\n"
              << "  more tokens are needed for the same loss (McCandlish et al. 2018, \"An Empirical Model of\n"
              << "  Large-Batch Training\"); pin it with --global-batch, narrow it with --batch-tokens\n";
  }
  if (spec.budget_usd) std::cout << "budget: $" << *spec.budget_usd << "\n";
  std::cout << driver::sizing_table(spec, choices)
            << "(days: wall-clock, with interruptions, checkpoints, restarts and stragglers;\n"
               " goodput: the share of it spent training; MWh: facility energy; see README\n"
               " \"Time to train\")\n\nsizes tried:\n";
  for (const auto& c : choices) {
    std::cout << "  " << c.kind << " [" << c.fabric << "]:";
    if (!c.unsupported.empty()) std::cout << "  none: " << c.unsupported << ";";
    for (const auto& t : c.trials) {
      std::cout << "  " << t.num_gpus << " " << t.outcome;
      if (t.gpus_per_domain > 0 && t.gpus_per_domain != c.gpus_per_domain) {
        std::cout << " [" << t.gpus_per_domain << " of " << c.gpus_per_domain << " GPUs per domain]";
      }
      if (t.best_tokens_per_s > 0) {
        char buf[64];
        if (std::isfinite(t.days)) {
          std::snprintf(buf, sizeof buf, " (%.1f days at batch %lld, %lld plans)", t.days,
                        static_cast<long long>(t.global_batch), static_cast<long long>(t.plans));
        } else {
          std::snprintf(buf, sizeof buf, " (%lld plans)", static_cast<long long>(t.plans));
        }
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
