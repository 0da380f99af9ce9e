// Reports of a run: aligned text, one JSON object (keys documented in README), one CSV line.
#pragma once

#include <string>

#include "sim/config/loader.h"
#include "sim/driver/simulate.h"

namespace ts::driver {

std::string report_text(const config::Scenario& scenario, const RunResult& result);
std::string report_json(const config::Scenario& scenario, const RunResult& result);
std::string report_csv_header();
std::string report_csv_row(const config::Scenario& scenario, const RunResult& result);

std::string inspect_text(const config::Scenario& scenario, const InspectResult& result);
std::string inspect_json(const config::Scenario& scenario, const InspectResult& result);

}  // namespace ts::driver
