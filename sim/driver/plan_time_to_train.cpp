// Hardware sizing by time to train: the quickest plan of a size by wall-clock time, the plan CSV.
#include <cmath>
#include <map>

#include "sim/base/format.h"
#include "sim/driver/plan_hw.h"

namespace ts::driver {
namespace {

// Columns of a sweep row by name.
class Columns {
 public:
  Columns() {
    const auto cols = split_csv_line(sweep_csv_header());
    for (std::size_t i = 0; i < cols.size(); ++i) at_[cols[i]] = i;
  }
  const std::string& get(const std::vector<std::string>& f, const std::string& col) const {
    return f[at_.at(col)];
  }
  double num(const std::vector<std::string>& f, const std::string& col) const {
    const auto& s = get(f, col);
    return s.empty() ? 0.0 : std::stod(s);
  }

 private:
  std::map<std::string, std::size_t> at_;
};

// The time breakdown of a sweep row (device finishing last).
runtime::TimeBreakdown row_breakdown(const Columns& c, const std::vector<std::string>& f) {
  runtime::TimeBreakdown t;
  for (std::size_t k = 0; k < runtime::kNumTimeCategories; ++k) {
    const auto cat = static_cast<runtime::TimeCategory>(k);
    t[cat] = Duration::from_seconds(c.num(f, std::string(runtime::time_category_name(cat)) + "_s"));
  }
  return t;
}

std::string quote(const std::string& s) {  // RFC 4180
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"') o += '"';
    o += ch;
  }
  return o + "\"";
}

std::string g(double v) {
  return format_double("%.6g", v);
}

}  // namespace

QuickestPlan quickest_plan(const SizingSpec& spec, const config::Cluster& cluster,
                           std::int64_t gpus, const std::vector<SweepRecord>& ranked,
                           const TrainSettings& settings) {
  const Columns c;
  QuickestPlan best;
  bool have = false;
  for (const auto& r : ranked) {
    const auto f = split_csv_line(r.line);
    parallel::ParallelPlan plan = spec.base;
    plan.global_batch = std::stoll(c.get(f, "global_batch"));
    plan.seq_len = std::stoll(c.get(f, "seq_len"));
    const TrainReport t = time_to_train(
        train_inputs(spec.model, cluster, gpus, plan, step_parts(row_breakdown(c, f))), settings,
        spec.train_data);
    const bool better =
        !have || (t.feasible && (!best.train.feasible || t.wall.wall_s < best.train.wall.wall_s));
    if (better) {
      best = QuickestPlan{r, t};
      have = true;
    }
  }
  return best;
}

std::string sizing_csv(const SizingSpec& spec, const std::vector<SizingChoice>& choices) {
  (void)spec;
  const Columns c;
  std::string out =
      "kind,cluster,gpu,fabric,num_gpus,nodes,outcome,chosen,plans_simulated,tp,pp,dp,cp,vpp,micro_"
      "batch,global_batch,"
      "tokens_per_s,mfu,iteration_time_s,step_time_s,ideal_days,wall_days,goodput,expected_"
      "interruptions,"
      "checkpoint_interval_s,energy_mwh,gpu_hours,usd_per_gpu_hour,cost_usd\n";
  for (const auto& ch : choices) {
    if (!ch.unsupported.empty()) {  // no size tried: the GPU cannot run the dtype
      out += quote(ch.kind) + "," + quote(ch.cluster) + "," + quote(ch.gpu) + "," + quote(ch.fabric) +
             ",,," + quote("skipped: " + ch.unsupported) + ",false,0" + std::string(20, ',') + "\n";
    }
    for (const auto& t : ch.trials) {
      const std::int64_t nodes =
          ch.gpus_per_node > 0 ? (t.num_gpus + ch.gpus_per_node - 1) / ch.gpus_per_node : 0;
      out += quote(ch.kind) + "," + quote(ch.cluster) + "," + quote(ch.gpu) + "," +
             quote(ch.fabric) + "," + std::to_string(t.num_gpus) + "," + std::to_string(nodes) +
             "," + quote(t.outcome) + "," +
             (ch.found && ch.num_gpus == t.num_gpus ? "true" : "false") + "," +
             std::to_string(t.plans);
      if (!t.train) {
        out += std::string(20, ',') + "\n";
        continue;
      }
      const auto f = split_csv_line(t.best.line);
      for (const char* k : {"tp", "pp", "dp", "cp", "vpp", "micro_batch", "global_batch"}) {
        out += "," + c.get(f, k);
      }
      const TrainReport& r = *t.train;
      out += "," + g(t.best_tokens_per_s) + "," + g(c.num(f, "mfu")) + "," +
             g(c.num(f, "iteration_time_s")) + "," + g(r.step_s) + "," + g(t.ideal_days);
      if (!r.feasible) {
        out += std::string(7, ',') + (ch.usd_per_gpu_hour ? g(*ch.usd_per_gpu_hour) : "") + ",\n";
        continue;
      }
      out += "," + g(r.wall_days) + "," + g(r.wall.goodput) + "," + g(r.wall.interruptions) + "," +
             (r.checkpoint_interval_s ? g(*r.checkpoint_interval_s) : "") + "," +
             (r.energy_known ? g(r.energy_mwh) : "") + "," + g(r.gpu_hours) + "," +
             (r.usd_per_gpu_hour ? g(*r.usd_per_gpu_hour) : "") + "," +
             (r.cost_usd ? g(*r.cost_usd) : "") + "\n";
    }
  }
  return out;
}

}  // namespace ts::driver
