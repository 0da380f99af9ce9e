#include "tools/trainsim/sweep_flags.h"

#include <functional>

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "all" → every spelling in `choices` ("a|b|c"); else the comma-separated items, each parsed.
template <class T>
std::vector<T> enum_list(const std::string& text, const std::string& choices,
                         const std::function<T(std::string_view)>& parse) {
  std::vector<T> out;
  for (const auto& item : text == "all" ? split(choices, '|') : split(text, ',')) out.push_back(parse(item));
  return out;
}

}  // namespace

void add_axis_flags(po::options_description& o, const AxisDefaults& d) {
  o.add_options()
      ("tp", po::value<std::string>()->default_value(d.tp), "tensor-parallel degrees, e.g. 4,8 (all: divisors of --gpus)")
      ("pp", po::value<std::string>()->default_value(d.pp), "pipeline-parallel degrees (all: divisors of --gpus)")
      ("dp", po::value<std::string>()->default_value(d.dp), "data-parallel degrees kept (all: whatever gpus/(tp·pp·cp) is)")
      ("cp", po::value<std::string>()->default_value(d.cp), "context-parallel degrees (all: divisors of --gpus)")
      ("ep", po::value<std::string>()->default_value(d.ep),
       "expert-parallel degrees of an MoE model (all: divisors of the routed experts)")
      ("etp", po::value<std::string>()->default_value(d.etp), "expert tensor-parallel degrees of an MoE model")
      ("vpp", po::value<std::string>()->default_value(d.vpp),
       "model chunks per rank for the interleaved schedule (all: divisors >= 2 of layers/pp)")
      ("micro-batch", po::value<std::string>()->default_value(d.micro_batch),
       "micro-batch sizes (all: divisors of global_batch/dp)")
      ("schedule", po::value<std::string>()->default_value(d.schedule), "pipeline schedules: gpipe, 1f1b, interleaved, zb-h1, dualpipev, zb-v, all")
      ("zero", po::value<std::string>()->default_value(d.zero), "ZeRO stages 0-3 (all: 0,1,2,3)")
      ("zero-shard-group", po::value<std::string>()->default_value(d.zero_shard_group),
       "ZeRO-3 shard group sizes, FSDP HYBRID_SHARD (0: all data-parallel ranks; all: 0 and every "
       "divisor of dp·cp between 2 and dp·cp)")
      ("sequence-parallel", po::value<std::string>()->default_value(d.sequence_parallel)->implicit_value("on"),
       "sequence parallelism: on, off or both (off,on)")
      ("recompute", po::value<std::string>()->default_value(d.recompute), "none, selective, selective-op, full, all")
      ("cp-algo", po::value<std::string>()->default_value(d.cp_algo), "ring, allgather, ulysses, all (only with cp > 1)")
      ("mst-chunks", po::value<std::string>()->default_value(d.mst_chunks), "Mini-Sequence Transformer chunks")
      ("pp-split", po::value<std::string>()->default_value(d.pp_split),
       "layers over pipeline stages: even (pp·vpp divides the layers), balanced (any pp·vpp up to the "
       "layers, balanced by the cost of a layer, the embedding and the LM head), all (both)");
}

driver::SweepAxes axes_from_flags(const po::variables_map& vm) {
  DiagnosticList problems;
  driver::SweepAxes a;
  const auto ints = [&](const char* name, std::vector<std::int64_t>& out, bool allow_all) {
    problems.collect([&] {
      const std::string flag = std::string("--") + name;
      const std::string text = vm[name].as<std::string>();
      if (text == "all") {
        if (!allow_all) throw InputError(Diagnostic{"", 0, flag, "takes a list of values, not 'all'"});
        out.clear();
        return;
      }
      out = config::parse_int_list(text, flag);
      for (auto v : out) {
        if (v <= 0) throw InputError(Diagnostic{"", 0, flag, "values must be > 0 (got " + std::to_string(v) + ")"});
      }
    });
  };
  ints("tp", a.tp, true);
  ints("pp", a.pp, true);
  ints("dp", a.dp, true);
  ints("cp", a.cp, true);
  ints("vpp", a.vpp, true);
  ints("micro-batch", a.micro_batch, true);
  ints("mst-chunks", a.mst_chunks, false);
  ints("ep", a.ep, true);
  ints("etp", a.etp, false);
  problems.collect([&] {
    const std::string text = vm["zero-shard-group"].as<std::string>();
    a.zero_shard_group.clear();
    if (text == "all") return;
    a.zero_shard_group = config::parse_int_list(text, "--zero-shard-group");
    for (auto v : a.zero_shard_group) {
      if (v < 0) {
        throw InputError(
            Diagnostic{"", 0, "--zero-shard-group", "values must be >= 0 (got " + std::to_string(v) + ")"});
      }
    }
  });
  problems.collect([&] {
    a.schedule = enum_list<parallel::Schedule>(vm["schedule"].as<std::string>(), config::schedule_choices(),
                                               [](std::string_view s) { return config::parse_schedule(s, "--schedule"); });
  });
  problems.collect([&] {
    a.recompute = enum_list<parallel::Recompute>(vm["recompute"].as<std::string>(), config::recompute_choices(),
                                                 [](std::string_view s) { return config::parse_recompute(s, "--recompute"); });
  });
  problems.collect([&] {
    a.cp_algo = enum_list<parallel::CpAlgo>(vm["cp-algo"].as<std::string>(), config::cp_algo_choices(),
                                            [](std::string_view s) { return config::parse_cp_algo(s, "--cp-algo"); });
  });
  problems.collect([&] {
    a.pp_split = enum_list<parallel::PipelineSplit>(vm["pp-split"].as<std::string>(), "even|balanced",
                                                    [](std::string_view s) {
      if (s == "even") return parallel::PipelineSplit::kEven;
      if (s == "balanced") return parallel::PipelineSplit::kBalanced;
      throw InputError(Diagnostic{"", 0, "--pp-split",
                                  "unknown split '" + std::string(s) + "' (expected even, balanced or all)"});
    });
  });
  problems.collect([&] {
    a.zero = enum_list<int>(vm["zero"].as<std::string>(), "0|1|2|3", [](std::string_view s) {
      if (s.size() == 1 && s[0] >= '0' && s[0] <= '3') return s[0] - '0';
      throw InputError(Diagnostic{"", 0, "--zero", "unknown stage '" + std::string(s) + "' (expected 0, 1, 2, 3 or all)"});
    });
  });
  problems.collect([&] {
    const std::string text = vm["sequence-parallel"].as<std::string>();
    a.sequence_parallel = enum_list<bool>(text == "both" ? "all" : text, "off|on", [](std::string_view s) {
      if (s == "on" || s == "true" || s == "1") return true;
      if (s == "off" || s == "false" || s == "0") return false;
      throw InputError(Diagnostic{"", 0, "--sequence-parallel",
                                  "unknown value '" + std::string(s) + "' (expected on, off, both)"});
    });
  });
  problems.throw_if_any();
  return a;
}

}  // namespace ts::cli
