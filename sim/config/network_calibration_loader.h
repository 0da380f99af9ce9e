// Loading of calibration/network/*.textproto into network::NetworkCalibration.
#pragma once

#include <filesystem>
#include <string>

#include "sim/network/calibration.h"

namespace ts::config {

// The network calibration file shipped with trainsim: data_dir()/calibration/network/nccl.textproto.
std::filesystem::path default_network_calibration_file();

// Loads a network calibration (empty path: the default file). Throws InputError listing every
// problem with file, line and field path: missing or out-of-range values, unknown protocol
// names, a protocol missing or given twice, a GPU in two profiles, a value without a source.
network::NetworkCalibration load_network_calibration(const std::string& path = "");

}  // namespace ts::config
