// Prediction intervals of validated rows: the interval of a row's throughput metric, and the
// coverage of a set of rows (validate's summary).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/config/interval_loader.h"
#include "sim/driver/intervals.h"
#include "sim/driver/resources.h"
#include "sim/driver/validate.h"

namespace ts::driver {

// Sets row.interval (and row.result->interval) for a compared row whose throughput metric comes
// from its simulated iteration time; leaves it empty otherwise (memory-only rows, rows whose
// plan could not be replayed, rows compared at their largest fitting sequence).
void add_row_interval(RowResult& row, const config::IntervalCalibration& cal, Resources& resources);

// The coverage of the rows with an interval (calibrated, or the inputs' alone with `input`), by
// set: "all", and "public" and "held-out" where such rows exist.
std::map<std::string, Coverage> interval_coverage(const std::vector<RowResult>& rows, bool input);

}  // namespace ts::driver
