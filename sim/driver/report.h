// Reports of a run: aligned text, one JSON object (keys documented in docs/cli.md), one CSV line.
#pragma once

#include <string>

#include "sim/config/loader.h"
#include "sim/driver/simulate.h"
#include "sim/driver/time_to_train.h"
#include "sim/trace/run_stats.h"

namespace ts::driver {

// Hardware FLOPs utilization of a run: every FLOP the GPUs execute (recompute included) per second
// and GPU, over the GPU's dense bf16 peak, the peak MFU uses too. Zero when `stats` was not
// computed or the run was not replayed.
struct HardwareUtilization {
  double tflops_per_gpu = 0;
  double hfu = 0;
};
HardwareUtilization hardware_utilization(const config::Scenario& scenario, const RunResult& result,
                                         const trace::RunStats& stats);

// `stats` adds what RunResult does not hold (HFU, the most exposed communication ops); a default
// RunStats leaves them out (JSON null, empty CSV fields). `train`, when given, adds the time to
// train (a text section, the JSON object "time_to_train").
std::string report_text(const config::Scenario& scenario, const RunResult& result,
                        const trace::RunStats& stats = {}, const TrainReport* train = nullptr);
std::string report_json(const config::Scenario& scenario, const RunResult& result,
                        const trace::RunStats& stats = {}, const TrainReport* train = nullptr);
std::string report_csv_header();
std::string report_csv_row(const config::Scenario& scenario, const RunResult& result,
                           const trace::RunStats& stats = {});

std::string inspect_text(const config::Scenario& scenario, const InspectResult& result);
std::string inspect_json(const config::Scenario& scenario, const InspectResult& result);

}  // namespace ts::driver
