#include "sim/driver/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/config/names.h"

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
  j["micro_batch"] = p.micro_batch;
  j["global_batch"] = p.global_batch;
  j["seq_len"] = p.seq_len;
  j["dtype"] = ir::dtype_name(p.dtype);
  j["zero_stage"] = p.zero_stage;
  j["sequence_parallel"] = p.sequence_parallel;
  j["recompute"] = std::string(config::name(p.recompute));
  j["schedule"] = std::string(config::name(p.schedule));
  return j;
}

ordered_json memory_json(const MemoryBreakdown& m) {
  ordered_json j;
  j["weights_bytes"] = m.weights.count();
  j["gradients_bytes"] = m.gradients.count();
  j["optimizer_states_bytes"] = m.optimizer_states.count();
  j["activations_bytes"] = m.activations.count();
  return j;
}

ordered_json time_json(const runtime::TimeBreakdown& t) {
  ordered_json j;
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
    j[std::string(runtime::time_category_name(static_cast<TimeCategory>(c))) + "_s"] = t.time[c].seconds();
  }
  return j;
}

// One number formatted with a printf format taken from the literals of this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
#pragma GCC diagnostic pop

}  // namespace

std::string report_json(const config::Scenario& sc, const RunResult& r) {
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
  j["iteration_time_s"] = r.iteration_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["peak_memory_bytes"] = r.peak_memory.count();
  j["memory_capacity_bytes"] = r.memory_capacity.count();
  j["memory_breakdown"] = memory_json(r.memory);
  j["time_breakdown"] = time_json(r.time);
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
  return j.dump(2) + "\n";
}

std::string report_text(const config::Scenario& sc, const RunResult& r) {
  std::string out;
  auto line = [&](const std::string& k, const std::string& v) {
    out += k;
    out += std::string(k.size() < 26 ? 26 - k.size() : 1, ' ');
    out += v;
    out += '\n';
  };
  const auto& p = sc.plan;
  line("model", sc.model.name + " (" + fmt("%.2f", static_cast<double>(r.parameters) * 1e-9) + " B parameters)");
  line("cluster", sc.cluster.cluster.name + ", " + std::to_string(sc.num_gpus) + " × " + sc.cluster.gpu.name);
  line("plan", "tp " + std::to_string(p.tp) + ", pp " + std::to_string(p.pp) + ", dp " +
                   std::to_string(p.dp) + ", cp " + std::to_string(p.cp) + ", micro-batch " +
                   std::to_string(p.micro_batch) + ", global batch " + std::to_string(p.global_batch) +
                   ", seq " + std::to_string(p.seq_len) + ", " + std::string(config::name(p.schedule)) +
                   ", recompute " + std::string(config::name(p.recompute)));
  line("status", std::string(status_name(r.status)) + (r.reason.empty() ? "" : " (" + r.reason + ")"));
  if (r.iteration_time_s > 0) {
    line("iteration time", fmt("%.4f s", r.iteration_time_s));
    line("throughput", fmt("%.0f tokens/s", r.tokens_per_s));
    line("model TFLOP/s per GPU", fmt("%.1f", r.tflops_per_gpu));
    line("MFU", fmt("%.1f %%", 100.0 * r.mfu));
  }
  line("peak memory", fmt("%.2f GiB", r.peak_memory.in_gib()) + " of " +
                          fmt("%.2f GiB", r.memory_capacity.in_gib()));
  line("  weights", fmt("%.2f GiB", r.memory.weights.in_gib()));
  line("  gradients", fmt("%.2f GiB", r.memory.gradients.in_gib()));
  line("  optimizer states", fmt("%.2f GiB", r.memory.optimizer_states.in_gib()));
  line("  activations", fmt("%.2f GiB", r.memory.activations.in_gib()));
  if (r.iteration_time_s > 0) {
    out += "time breakdown (device finishing last)\n";
    for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
      const Duration t = r.time.time[c];
      line(std::string("  ") + runtime::time_category_name(static_cast<TimeCategory>(c)),
           fmt("%.4f s", t.seconds()) + fmt("  (%.1f %%)", 100.0 * t.seconds() / r.iteration_time_s));
    }
  }
  return out;
}

std::string report_csv_header() {
  return "model,cluster,gpu,num_gpus,tp,pp,dp,cp,micro_batch,global_batch,seq_len,status,"
         "iteration_time_s,tokens_per_s,tflops_per_gpu,mfu,peak_memory_bytes,reason\n";
}

std::string report_csv_row(const config::Scenario& sc, const RunResult& r) {
  const auto& p = sc.plan;
  auto q = [](const std::string& s) {  // RFC 4180 quoting
    std::string o = "\"";
    for (char c : s) {
      if (c == '"') o += '"';
      o += c;
    }
    return o + "\"";
  };
  return q(sc.model.name) + "," + q(sc.cluster.cluster.name) + "," + q(sc.cluster.gpu.name) + "," +
         std::to_string(sc.num_gpus) + "," + std::to_string(p.tp) + "," + std::to_string(p.pp) + "," +
         std::to_string(p.dp) + "," + std::to_string(p.cp) + "," + std::to_string(p.micro_batch) + "," +
         std::to_string(p.global_batch) + "," + std::to_string(p.seq_len) + "," + status_name(r.status) +
         "," + fmt("%.9g", r.iteration_time_s) + "," + fmt("%.9g", r.tokens_per_s) + "," +
         fmt("%.9g", r.tflops_per_gpu) + "," + fmt("%.9g", r.mfu) + "," +
         std::to_string(r.peak_memory.count()) + "," + q(r.reason) + "\n";
}

std::string inspect_json(const config::Scenario& sc, const InspectResult& r) {
  ordered_json j;
  j["model"] = sc.model.name;
  j["cluster"] = sc.cluster.cluster.name;
  j["num_gpus"] = sc.num_gpus;
  j["plan"] = plan_json(sc);
  j["parameters"] = r.parameters;
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
  out += "parameters                " + fmt("%.3f B", static_cast<double>(r.parameters) * 1e-9) + "\n";
  out += "model FLOPs / iteration   " + fmt("%.4g", r.model_flops) + "\n";
  out += "micro-batches / pipeline  " + std::to_string(r.micro_batches) + "\n";
  out += "activations / layer / mb  " + fmt("%.3f GiB", r.layer_activation.in_gib()) + "\n";
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
