// Time-to-train data file: parse, validate (all problems at once), convert to plain structs.
#include "sim/config/time_to_train_loader.h"

#include <set>

#include "sim/base/format.h"
#include "sim/config/loader.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/time_to_train.pb.h"

namespace ts::config {
namespace {

namespace sch = trainsim::schema;
using detail::Checker;
using detail::FieldLines;

void convert_failure(const sch::FailureComponentData& f, const Checker& c, longrun::TrainData& out,
                     std::set<std::string>& names) {
  longrun::FailureComponent fc;
  c.non_empty(f.has_name(), f.name(), "name");
  fc.name = f.name();
  if (!fc.name.empty() && !names.insert(fc.name).second) {
    c.fail("name", "component '" + fc.name + "' given twice");
  }
  if (c.require(f.has_per(), "per")) {
    if (f.per() == "gpu") {
      fc.per = longrun::FailureUnit::kGpu;
    } else if (f.per() == "node") {
      fc.per = longrun::FailureUnit::kNode;
    } else if (f.per() == "nic") {
      fc.per = longrun::FailureUnit::kNic;
    } else {
      c.fail("per", "must be gpu, node or nic (got '" + f.per() + "')");
    }
  }
  fc.planned = f.planned();
  c.non_negative(f.has_observed_interruptions(), f.observed_interruptions(),
                 "observed_interruptions");
  c.positive(f.has_observed_units(), f.observed_units(), "observed_units");
  c.positive(f.has_observed_days(), f.observed_days(), "observed_days");
  c.non_empty(f.has_source(), f.source(), "source");
  if (f.observed_units() > 0 && f.observed_days() > 0) {
    fc.rate_per_unit_day = f.observed_interruptions() / (f.observed_units() * f.observed_days());
  }
  fc.source = f.source();
  out.failures.push_back(std::move(fc));
}

void convert_power(const sch::GpuPowerData& p, const Checker& c, longrun::TrainData& out,
                   std::set<std::string>& gpus) {
  longrun::PowerProfile pp;
  if (p.gpus_size() == 0) c.fail("gpus", "required: the GPU names this entry applies to");
  for (const auto& g : p.gpus()) {
    if (!gpus.insert(to_lower(g)).second) c.fail("gpus", "GPU '" + g + "' is in two power entries");
    pp.gpus.push_back(g);
  }
  c.non_negative(p.has_busy_w(), p.busy_w(), "busy_w");
  c.non_negative(p.has_comm_w(), p.comm_w(), "comm_w");
  c.non_negative(p.has_idle_w(), p.idle_w(), "idle_w");
  c.non_negative(p.has_node_overhead_w(), p.node_overhead_w(), "node_overhead_w");
  c.non_empty(p.has_source(), p.source(), "source");
  pp.busy_w = p.busy_w();
  pp.comm_w = p.comm_w();
  pp.idle_w = p.idle_w();
  pp.node_overhead_w = p.node_overhead_w();
  pp.source = p.source();
  out.power.push_back(std::move(pp));
}

}  // namespace

std::filesystem::path default_time_to_train_file() {
  return data_dir() / "calibration" / "longrun" / "time_to_train.textproto";
}

longrun::TrainData load_time_to_train_data(const std::string& path) {
  const std::filesystem::path file =
      path.empty() ? default_time_to_train_file() : std::filesystem::path(path);
  const std::string display = file.string();
  DiagnosticList diags;
  sch::TimeToTrainFile msg;
  FieldLines lines;
  if (!detail::read_message(file, display, msg, lines, diags)) diags.throw_if_any();
  const Checker c(display, lines, diags);
  longrun::TrainData out;
  out.file = display;
  std::set<std::string> names;
  for (int i = 0; i < msg.failures_size(); ++i) {
    convert_failure(msg.failures(i), c.nested("failures[" + std::to_string(i) + "]"), out, names);
  }
  std::set<std::string> gpus;
  for (int i = 0; i < msg.power_size(); ++i) {
    convert_power(msg.power(i), c.nested("power[" + std::to_string(i) + "]"), out, gpus);
  }
  // A value and its source are required together.
  const auto sourced = [&](bool has_source, const std::string& source, const char* field) {
    c.non_empty(has_source, source, field);
  };
  c.non_negative(msg.has_fabric_w_per_gpu(), msg.fabric_w_per_gpu(), "fabric_w_per_gpu");
  sourced(msg.has_fabric_source(), msg.fabric_source(), "fabric_source");
  c.at_least(msg.has_pue(), msg.pue(), 1.0, "pue");
  sourced(msg.has_pue_source(), msg.pue_source(), "pue_source");
  c.positive(msg.has_checkpoint_gbytes_per_s(), msg.checkpoint_gbytes_per_s(),
             "checkpoint_gbytes_per_s");
  sourced(msg.has_checkpoint_source(), msg.checkpoint_source(), "checkpoint_source");
  c.positive(msg.has_snapshot_gbytes_per_s_per_gpu(), msg.snapshot_gbytes_per_s_per_gpu(),
             "snapshot_gbytes_per_s_per_gpu");
  sourced(msg.has_snapshot_source(), msg.snapshot_source(), "snapshot_source");
  c.non_negative(msg.has_restart_overhead_s(), msg.restart_overhead_s(), "restart_overhead_s");
  sourced(msg.has_restart_source(), msg.restart_source(), "restart_source");
  c.non_negative(msg.has_gpu_speed_cv(), msg.gpu_speed_cv(), "gpu_speed_cv");
  sourced(msg.has_straggler_source(), msg.straggler_source(), "straggler_source");
  out.fabric_w_per_gpu = msg.fabric_w_per_gpu();
  out.pue = msg.pue();
  out.checkpoint_gbytes_per_s = msg.checkpoint_gbytes_per_s();
  out.snapshot_gbytes_per_s_per_gpu = msg.snapshot_gbytes_per_s_per_gpu();
  out.restart_overhead_s = msg.restart_overhead_s();
  out.gpu_speed_cv = msg.gpu_speed_cv();
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
