#include "sim/base/format.h"
#include "sim/driver/report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/config/names.h"
#include "sim/driver/sweep.h"

namespace ts::driver {
namespace {

using nlohmann::ordered_json;
using runtime::TimeCategory;

ordered_json plan_json(const config::Scenario& sc) {
  const auto& p = sc.plan;
  ordered_json j;
  j["tp"] = p.tp;
  j["pp"] = p.pp;
  j["dp"] = p.dp;
  j["cp"] = p.cp;
  j["vpp"] = p.vpp;
  if (!p.pp_layers.empty()) j["pp_layers"] = p.pp_layers;
  if (!p.pp_layout.empty()) j["pp_layout"] = p.pp_layout;
  j["micro_batch"] = p.micro_batch;
  j["global_batch"] = p.global_batch;
  j["seq_len"] = p.seq_len;
  j["dtype"] = ir::dtype_name(p.dtype);
  j["zero_stage"] = p.zero_stage;
  j["zero_shard_group"] = p.zero_shard_group;
  j["fsdp_in_pipeline"] = p.fsdp_in_pipeline();
  j["grad_reduce"] = std::string(config::name(p.grad_reduce));
  j["sequence_parallel"] = p.sequence_parallel;
  j["recompute"] = std::string(config::name(p.recompute));
  if (p.recompute_modules != 0) j["recompute_modules"] = config::recompute_modules_name(p.recompute_modules);
  j["recompute_layers"] = p.recompute_layers;
  j["schedule"] = std::string(config::name(p.schedule));
  j["cp_algo"] = std::string(config::name(p.cp_algo));
  j["attention"] = p.attention_label();
  j["tp_comm_overlap"] = p.tp_comm_overlap;
  j["fp8_weight_cache"] = p.fp8_weight_cache;
  j["elementwise"] = std::string(config::name(p.elementwise));
  j["order"] = config::format_order(p.order);
  if (p.launch_blocking) j["launch_blocking"] = true;  // only when set: older outputs unchanged
  if (p.fp8_attention) j["fp8_attention"] = true;
  return j;
}

ordered_json memory_json(const MemoryBreakdown& m) {
  ordered_json j;
  j["weights_bytes"] = m.weights.count();
  j["gradients_bytes"] = m.gradients.count();
  j["optimizer_states_bytes"] = m.optimizer_states.count();
  j["activations_bytes"] = m.activations.count();
  j["cuda_context_bytes"] = m.cuda_context.count();
  j["nccl_buffers_bytes"] = m.nccl_buffers.count();
  j["fragmentation_bytes"] = m.fragmentation.count();
  return j;
}

ordered_json time_json(const runtime::TimeBreakdown& t) {
  ordered_json j;
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
    j[std::string(runtime::time_category_name(static_cast<TimeCategory>(c))) + "_s"] = t.time[c].seconds();
  }
  return j;
}

// A text table: the first `left` columns left-aligned, the others right-aligned, two spaces between.
class Table {
 public:
  explicit Table(std::size_t left = 1) : left_(left) {}
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string str(const std::string& indent) const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_) {
      if (width.size() < r.size()) width.resize(r.size(), 0);
      for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], display_width(r[c]));
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line = indent;
      for (std::size_t c = 0; c < r.size(); ++c) {
        const std::string pad(width[c] - display_width(r[c]), ' ');
        if (c) line += "  ";
        line += c < left_ ? r[c] + pad : pad + r[c];
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  // Characters on screen: UTF-8 continuation bytes take no column.
  static std::size_t display_width(const std::string& s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
  }
  std::size_t left_;
  std::vector<std::vector<std::string>> rows_;
};

std::string csv_quote(const std::string& s) {  // RFC 4180 quoting
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

bool replayed(const RunResult& r) { return r.iteration_time_s > 0; }

ordered_json or_null(const std::optional<double>& v) {
  return v ? ordered_json(*v) : ordered_json();
}

ordered_json train_json(const TrainReport& t) {
  ordered_json j;
  j["goal"] = t.tokens_goal ? "tokens" : "days";
  j["feasible"] = t.feasible;
  j["reason"] = t.reason;
  j["expected_interruptions"] = t.feasible ? ordered_json(t.wall.interruptions) : ordered_json();
  j["goodput"] = t.feasible ? ordered_json(t.wall.goodput) : ordered_json();
  j["checkpoint_interval_s"] = or_null(t.checkpoint_interval_s);
  j["wall_days"] = t.feasible ? ordered_json(t.wall_days) : ordered_json();
  j["energy_mwh"] = t.feasible && t.energy_known ? ordered_json(t.energy_mwh) : ordered_json();
  j["cost_usd"] = t.feasible ? or_null(t.cost_usd) : ordered_json();
  j["tokens"] = t.tokens;
  j["steps"] = t.steps;
  j["step_time_s"] = t.step_s;
  j["useful_days"] = t.useful_days;
  ordered_json days;
  days["useful"] = t.wall.useful_s / 86400.0;
  days["checkpoint"] = t.wall.checkpoint_s / 86400.0;
  days["restart"] = t.wall.restart_s / 86400.0;
  days["lost"] = t.wall.lost_s / 86400.0;
  j["wall_days_breakdown"] = days;
  ordered_json st;
  st["gpu_cv"] = t.gpu_cv;
  st["link_cv"] = t.link_cv;
  st["slow_gpu_speed"] = t.slow_gpu_speed;
  st["gpu_factor"] = t.gpu_factor;
  st["link_factor"] = t.link_factor;
  j["straggler"] = st;
  j["interruptions_per_day"] = t.unplanned_per_day + t.planned_per_day;
  j["unplanned_per_day"] = t.unplanned_per_day;
  j["planned_per_day"] = t.planned_per_day;
  j["mtbf_hours"] = t.mtbf_hours;
  ordered_json comps = ordered_json::array();
  for (const auto& c : t.components) {
    ordered_json cj;
    cj["name"] = c.name;
    cj["planned"] = c.planned;
    cj["per_day"] = c.per_day;
    cj["expected"] = c.per_day * t.wall.wall_s / 86400.0;
    comps.push_back(cj);
  }
  j["interruptions_by_component"] = comps;
  ordered_json ck;
  ck["mode"] = checkpoint_mode_name(t.checkpoint_mode);
  ck["bytes"] = t.checkpoint_bytes;
  ck["gbytes_per_s"] = t.checkpoint_gbytes_per_s;
  ck["write_s"] = t.checkpoint_write_s;
  ck["blocking_s"] = t.checkpoint_blocking_s;
  j["checkpoint"] = ck;
  j["restart_s"] = t.restart_s;
  j["pue"] = t.pue;
  j["energy_per_iteration_j"] =
      t.energy_known ? ordered_json(t.energy_per_iteration_j) : ordered_json();
  j["average_power_mw"] = t.energy_known ? ordered_json(t.average_power_mw) : ordered_json();
  j["gpu_hours"] = t.gpu_hours;
  j["usd_per_gpu_hour"] = or_null(t.usd_per_gpu_hour);
  return j;
}

std::string train_text(const TrainReport& t, bool by_days) {
  if (!t.feasible) return "\ntime to train\n  infeasible: " + t.reason + "\n";
  std::string out = "\ntime to train (" +
                    (by_days ? format_double("%g", t.wall_days) + " days of wall time"
                             : format_double("%.4g", t.tokens) + " tokens") +
                    ")\n";
  Table tb(2);
  tb.row({"tokens", format_double("%.4g", t.tokens) + format_double(" in %.0f steps", t.steps)});
  tb.row({"step time with stragglers", format_double("%.4f s", t.step_s) + " (slowest GPU x" +
                                           format_double("%.3f", t.gpu_factor) +
                                           ", slowest link x" +
                                           format_double("%.3f", t.link_factor) + ")"});
  tb.row({"expected interruptions",
          format_double("%.1f", t.wall.interruptions) +
              format_double(" (%.3g a day: ", t.unplanned_per_day + t.planned_per_day) +
              format_double("%.3g unplanned, ", t.unplanned_per_day) +
              format_double("%.3g planned; ", t.planned_per_day) +
              format_double("one every %.3g h)", t.mtbf_hours)});
  tb.row({"checkpoint", format_double("%.4g GB, ", t.checkpoint_bytes * 1e-9) +
                            std::string(checkpoint_mode_name(t.checkpoint_mode)) +
                            format_double(": write %.3g s", t.checkpoint_write_s) +
                            format_double(" at %g GB/s", t.checkpoint_gbytes_per_s) +
                            format_double(", training stops %.3g s", t.checkpoint_blocking_s)});
  tb.row({"checkpoint interval",
          t.checkpoint_interval_s
              ? format_double("%.1f min of training", *t.checkpoint_interval_s / 60)
              : std::string("none (no unplanned interruptions)")});
  tb.row({"restart", format_double("%.0f s per interruption", t.restart_s)});
  tb.row({"wall time", format_double("%.2f days: ", t.wall_days) +
                           format_double("%.2f useful, ", t.useful_days) +
                           format_double("%.2f checkpoints, ", t.wall.checkpoint_s / 86400.0) +
                           format_double("%.2f restarts, ", t.wall.restart_s / 86400.0) +
                           format_double("%.2f lost work", t.wall.lost_s / 86400.0)});
  tb.row({"goodput", format_double("%.2f %% of wall time trains", 100.0 * t.wall.goodput)});
  if (t.energy_known) {
    tb.row(
        {"energy", format_double("%.4g MWh (", t.energy_mwh) +
                       format_double("%.3g MW average, ", t.average_power_mw) +
                       format_double("%.4g MJ per iteration, ", t.energy_per_iteration_j * 1e-6) +
                       format_double("PUE %.2f)", t.pue)});
  } else {
    tb.row({"energy", "n/a (no power entry for this GPU)"});
  }
  tb.row({"GPU-hours", format_double("%.4g", t.gpu_hours)});
  tb.row({"cost", t.cost_usd ? format_double("$%.4g", *t.cost_usd) +
                                   format_double(" at $%.3f per GPU-hour", *t.usd_per_gpu_hour)
                             : std::string("n/a (no price: give --price)")});
  return out + tb.str("  ");
}

}  // namespace

HardwareUtilization hardware_utilization(const config::Scenario& sc, const RunResult& r,
                                         const trace::RunStats& stats) {
  HardwareUtilization u;
  if (!stats.computed || !replayed(r) || sc.num_gpus <= 0) return u;
  u.tflops_per_gpu = stats.hardware_flops.value() / r.iteration_time_s / static_cast<double>(sc.num_gpus) * 1e-12;
  u.hfu = u.tflops_per_gpu / sc.cluster.gpu.peak_bf16.tflops();
  return u;
}

std::string report_json(const config::Scenario& sc, const RunResult& r,
                        const trace::RunStats& stats, const TrainReport* train) {
  const HardwareUtilization hw = hardware_utilization(sc, r, stats);
  const bool have_stats = stats.computed && replayed(r);
  ordered_json j;
  j["status"] = status_name(r.status);
  j["reason"] = r.reason;
  j["model"] = sc.model.name;
  j["cluster"] = sc.cluster.cluster.name;
  j["gpu"] = sc.cluster.gpu.name;
  j["num_gpus"] = sc.num_gpus;
  j["plan"] = plan_json(sc);
  j["parameters"] = r.parameters;
  j["model_flops_per_iteration"] = r.model_flops;
  j["hardware_flops_per_iteration"] = have_stats ? ordered_json(stats.hardware_flops.value()) : ordered_json();
  j["iteration_time_s"] = r.iteration_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_per_gpu"] = sc.num_gpus > 0 ? r.tokens_per_s / static_cast<double>(sc.num_gpus) : 0.0;
  // The prediction interval (driver/intervals.h); null when not computed.
  if (r.interval) {
    const double tokens = r.tokens_per_s * r.iteration_time_s;
    j["iteration_time_interval_s"] = {r.interval->low_s, r.interval->high_s};
    j["tokens_per_s_interval"] = {tokens / r.interval->high_s, tokens / r.interval->low_s};
  } else {
    j["iteration_time_interval_s"] = nullptr;
    j["tokens_per_s_interval"] = nullptr;
  }
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["hardware_tflops_per_gpu"] = have_stats ? ordered_json(hw.tflops_per_gpu) : ordered_json();
  j["hfu"] = have_stats ? ordered_json(hw.hfu) : ordered_json();
  j["peak_memory_bytes"] = r.peak_memory.count();
  j["memory_capacity_bytes"] = r.memory_capacity.count();
  j["memory_breakdown"] = memory_json(r.memory);
  j["peak_memory_at"] = r.peak_at;
  j["time_breakdown"] = time_json(r.time);
  ordered_json exposed = ordered_json::array();
  for (const auto& e : stats.exposed_comm) {
    ordered_json ej;
    ej["name"] = e.name;
    ej["stream"] = e.stream;
    ej["count"] = e.count;
    ej["time_s"] = e.time.seconds();
    ej["exposed_s"] = e.exposed.seconds();
    exposed.push_back(ej);
  }
  j["exposed_comm_rank"] = have_stats ? ordered_json(stats.exposed_comm_rank) : ordered_json();
  j["exposed_comm"] = exposed;
  ordered_json devices = ordered_json::array();
  for (const auto& d : r.devices) {
    ordered_json dj;
    dj["rank"] = d.rank;
    dj["stage"] = d.stage;
    dj["represents"] = d.represents;
    dj["peak_memory_bytes"] = d.memory.total().count();
    dj["memory_breakdown"] = memory_json(d.memory);
    dj["time_breakdown"] = time_json(d.time);
    devices.push_back(dj);
  }
  j["devices"] = devices;
  j["tasks"] = r.tasks;
  j["events"] = r.events;
  if (train) j["time_to_train"] = train_json(*train);
  return j.dump(2) + "\n";
}

std::string report_text(const config::Scenario& sc, const RunResult& r,
                        const trace::RunStats& stats, const TrainReport* train) {
  const auto& p = sc.plan;
  const HardwareUtilization hw = hardware_utilization(sc, r, stats);
  const bool have_stats = stats.computed && replayed(r);
  std::string out;
  {
    Table t(2);
    t.row({"model", sc.model.name + " (" + format_double("%.2f", static_cast<double>(r.parameters) * 1e-9) +
                        " B parameters)"});
    t.row({"cluster", sc.cluster.cluster.name + ", " + std::to_string(sc.num_gpus) + " × " + sc.cluster.gpu.name});
    t.row({"plan", "tp " + std::to_string(p.tp) + ", pp " + std::to_string(p.pp) + ", dp " + std::to_string(p.dp) +
                       ", cp " + std::to_string(p.cp) + ", micro-batch " + std::to_string(p.micro_batch) +
                       ", global batch " + std::to_string(p.global_batch) + ", seq " + std::to_string(p.seq_len)});
    // The layers of each (virtual) stage, where not an even split, and a layout.
    std::string split = p.pp_layers.empty() ? "" : ", layers per stage " + fold_layer_counts(join_layers(p.pp_layers));
    if (!p.pp_layout.empty()) split += ", layout " + p.pp_layout;
    t.row({"", std::string(config::name(p.schedule)) + (p.vpp > 1 ? " (vpp " + std::to_string(p.vpp) + ")" : "") + split +
                   ", ZeRO " + std::to_string(p.zero_stage) +
                   (p.zero_shard_group > 0 ? " (shard groups of " + std::to_string(p.zero_shard_group) + ")" : "") +
                   (p.fsdp_in_pipeline() ? " (FSDP in a pipeline: gathered once per step, reduced after the last backward)" : "") +
                   (p.sequence_parallel ? ", sequence parallel" : "") + ", recompute " +
                   std::string(config::name(p.recompute)) +
                   (p.recompute_layers > 0 ? " (" + std::to_string(p.recompute_layers) + " layers per chunk)" : "") +
                   (p.recompute_modules != 0 ? " (modules " + config::recompute_modules_name(p.recompute_modules) + ")" : "") +
                   ", " + std::string(config::name(p.dtype)) +
                   (p.launch_blocking ? ", launch blocking" : "") +
                   (p.fp8_attention ? ", fp8 attention" : "")});
    t.row({"status", std::string(status_name(r.status)) + (r.reason.empty() ? "" : " (" + r.reason + ")")});
    out += t.str("");
  }
  if (replayed(r)) {
    out += "\nperformance\n";
    Table t;
    // The prediction interval in a fourth column: the other rows keep their alignment.
    const double tokens = r.tokens_per_s * r.iteration_time_s;
    if (r.interval) {
      std::string time_iv =
          "interval " + format_double("%.4f", r.interval->low_s) + " - " + format_double("%.4f", r.interval->high_s);
      std::string rate_iv = "interval " + format_double("%.0f", tokens / r.interval->high_s) + " - " +
                            format_double("%.0f", tokens / r.interval->low_s);
      // Left-aligned: the shorter padded at its end (the table trims trailing blanks).
      const std::size_t w = std::max(time_iv.size(), rate_iv.size());
      time_iv.resize(w, ' ');
      rate_iv.resize(w, ' ');
      t.row({"iteration time", format_double("%.4f", r.iteration_time_s), "s", time_iv});
      t.row({"throughput", format_double("%.0f", r.tokens_per_s), "tokens/s", rate_iv});
    } else {
      t.row({"iteration time", format_double("%.4f", r.iteration_time_s), "s"});
      t.row({"throughput", format_double("%.0f", r.tokens_per_s), "tokens/s"});
    }
    t.row({"throughput per GPU", format_double("%.1f", r.tokens_per_s / static_cast<double>(sc.num_gpus)), "tokens/s"});
    t.row({"model FLOPs per GPU", format_double("%.1f", r.tflops_per_gpu), "TFLOP/s"});
    t.row({"MFU", format_double("%.1f", 100.0 * r.mfu), "%"});
    if (have_stats) {
      t.row({"hardware FLOPs per GPU", format_double("%.1f", hw.tflops_per_gpu), "TFLOP/s"});
      t.row({"HFU", format_double("%.1f", 100.0 * hw.hfu), "%"});
    }
    out += t.str("  ");
  }
  {
    out += "\nmemory (device with the largest peak)\n";
    Table t;
    auto mem = [&](const char* name, Bytes b) {
      const double share = r.peak_memory.count() > 0 ? 100.0 * b.real() / r.peak_memory.real() : 0.0;
      t.row({name, format_double("%.2f", b.in_gib()), "GiB", format_double("%.1f %%", share)});
    };
    mem("weights", r.memory.weights);
    mem("gradients", r.memory.gradients);
    mem("optimizer states", r.memory.optimizer_states);
    mem("activations", r.memory.activations);
    mem("CUDA context", r.memory.cuda_context);
    mem("NCCL buffers", r.memory.nccl_buffers);
    mem("fragmentation", r.memory.fragmentation);
    mem("peak", r.peak_memory);
    t.row({"capacity", format_double("%.2f", r.memory_capacity.in_gib()), "GiB",
           format_double("%.1f %%", r.memory_capacity.count() > 0 ? 100.0 * r.peak_memory.real() / r.memory_capacity.real() : 0.0) +
               " used"});
    out += t.str("  ");
    if (!r.peak_at.empty()) out += "  peak reached during " + r.peak_at + "\n";
  }
  if (replayed(r)) {
    out += "\ntime breakdown (device finishing last)\n";
    Table t;
    for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
      const Duration d = r.time.time[c];
      t.row({runtime::time_category_name(static_cast<TimeCategory>(c)), format_double("%.4f", d.seconds()), "s",
             format_double("%.1f %%", 100.0 * d.seconds() / r.iteration_time_s)});
    }
    out += t.str("  ");
  }
  if (have_stats && !stats.exposed_comm.empty()) {
    out += "\nmost exposed communication (rank " + std::to_string(stats.exposed_comm_rank) + ")\n";
    Table t;
    t.row({"op", "count", "time s", "exposed s", "of iteration"});
    for (const auto& e : stats.exposed_comm) {
      t.row({e.name, std::to_string(e.count), format_double("%.4f", e.time.seconds()), format_double("%.4f", e.exposed.seconds()),
             format_double("%.1f %%", 100.0 * e.exposed.seconds() / r.iteration_time_s)});
    }
    out += t.str("  ");
  }
  if (train) out += train_text(*train, !train->tokens_goal);
  return out;
}

std::string report_csv_header() {
  std::string h =
      "model,cluster,gpu,num_gpus,tp,pp,dp,cp,vpp,micro_batch,global_batch,seq_len,dtype,zero_stage,"
      "sequence_parallel,recompute,schedule,status,iteration_time_s,tokens_per_s,tflops_per_gpu,mfu,"
      "hardware_tflops_per_gpu,hfu,peak_memory_bytes,memory_capacity_bytes,weights_bytes,gradients_bytes,"
      "optimizer_states_bytes,activations_bytes,cuda_context_bytes,nccl_buffers_bytes,fragmentation_bytes";
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
    h += ',';
    h += runtime::time_category_name(static_cast<TimeCategory>(c));
    h += "_s";
  }
  h += ",top_exposed_comm,top_exposed_comm_s,reason\n";
  return h;
}

std::string report_csv_row(const config::Scenario& sc, const RunResult& r, const trace::RunStats& stats) {
  const auto& p = sc.plan;
  const HardwareUtilization hw = hardware_utilization(sc, r, stats);
  const bool have_stats = stats.computed && replayed(r);
  const auto i = [](std::int64_t v) { return std::to_string(v); };
  const auto g = [](double v) { return format_double("%.9g", v); };
  std::string row = csv_quote(sc.model.name) + "," + csv_quote(sc.cluster.cluster.name) + "," +
                    csv_quote(sc.cluster.gpu.name) + "," + i(sc.num_gpus) + "," + i(p.tp) + "," + i(p.pp) + "," +
                    i(p.dp) + "," + i(p.cp) + "," + i(p.vpp) + "," + i(p.micro_batch) + "," + i(p.global_batch) +
                    "," + i(p.seq_len) + "," + std::string(config::name(p.dtype)) + "," + i(p.zero_stage) + "," +
                    (p.sequence_parallel ? "true" : "false") + "," + std::string(config::name(p.recompute)) + "," +
                    std::string(config::name(p.schedule)) + "," + status_name(r.status) + "," +
                    g(r.iteration_time_s) + "," + g(r.tokens_per_s) + "," + g(r.tflops_per_gpu) + "," + g(r.mfu) +
                    "," + (have_stats ? g(hw.tflops_per_gpu) : "") + "," + (have_stats ? g(hw.hfu) : "") + "," +
                    i(r.peak_memory.count()) + "," + i(r.memory_capacity.count()) + "," +
                    i(r.memory.weights.count()) + "," + i(r.memory.gradients.count()) + "," +
                    i(r.memory.optimizer_states.count()) + "," + i(r.memory.activations.count()) + "," +
                    i(r.memory.cuda_context.count()) + "," + i(r.memory.nccl_buffers.count()) + "," +
                    i(r.memory.fragmentation.count());
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) row += "," + g(r.time.time[c].seconds());
  if (have_stats && !stats.exposed_comm.empty()) {
    row += "," + csv_quote(stats.exposed_comm.front().name) + "," + g(stats.exposed_comm.front().exposed.seconds());
  } else {
    row += ",,";
  }
  return row + "," + csv_quote(r.reason) + "\n";
}

std::string inspect_json(const config::Scenario& sc, const InspectResult& r) {
  ordered_json j;
  j["model"] = sc.model.name;
  j["cluster"] = sc.cluster.cluster.name;
  j["num_gpus"] = sc.num_gpus;
  j["plan"] = plan_json(sc);
  j["parameters"] = r.parameters;
  if (sc.model.moe || sc.model.mtp_layers > 0) {
    j["active_parameters"] = r.active_parameters;
    j["mtp_parameters"] = r.mtp_parameters;
    j["model_flops_per_token"] = r.model_flops_per_token;
  }
  j["model_flops_per_iteration"] = r.model_flops;
  j["micro_batches"] = r.micro_batches;
  j["layer_activation_bytes"] = r.layer_activation.count();
  ordered_json stages = ordered_json::array();
  for (const auto& m : r.stage_static_memory) stages.push_back(memory_json(m));
  j["stage_memory"] = stages;
  j["tasks"] = r.tasks;
  j["simulated_devices"] = r.simulated_devices;
  return j.dump(2) + "\n";
}

std::string inspect_text(const config::Scenario& sc, const InspectResult& r) {
  std::string out;
  out += "model                     " + sc.model.name + "\n";
  out += "parameters                " + format_double("%.3f B", static_cast<double>(r.parameters) * 1e-9) + "\n";
  if (sc.model.moe || sc.model.mtp_layers > 0) {
    // Totals include the MTP modules; active parameters are those a token uses without them.
    out += "  of which MTP modules    " + format_double("%.3f B", static_cast<double>(r.mtp_parameters) * 1e-9) + "\n";
    out += "active parameters / token " + format_double("%.3f B", static_cast<double>(r.active_parameters) * 1e-9) + "\n";
    out += "model FLOPs / token       " + format_double("%.4g", r.model_flops_per_token) + "\n";
  }
  out += "model FLOPs / iteration   " + format_double("%.4g", r.model_flops) + "\n";
  out += "micro-batches / pipeline  " + std::to_string(r.micro_batches) + "\n";
  out += "activations / layer / mb  " + format_double("%.3f GiB", r.layer_activation.in_gib()) + "\n";
  out += "tasks                     " + std::to_string(r.tasks) + " on " +
         std::to_string(r.simulated_devices) + " simulated devices\n";
  out += "stage  weights GiB  grads GiB  optimizer GiB  activations (1 mb) GiB\n";
  for (std::size_t s = 0; s < r.stage_static_memory.size(); ++s) {
    const auto& m = r.stage_static_memory[s];
    char buf[160];
    std::snprintf(buf, sizeof buf, "%5zu  %11.2f  %9.2f  %13.2f  %22.2f\n", s, m.weights.in_gib(),
                  m.gradients.in_gib(), m.optimizer_states.in_gib(), m.activations.in_gib());
    out += buf;
  }
  return out;
}

}  // namespace ts::driver
