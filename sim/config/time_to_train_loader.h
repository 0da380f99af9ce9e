// Loading of calibration/longrun/time_to_train.textproto into longrun::TrainData.
#pragma once

#include <filesystem>
#include <string>

#include "sim/longrun/time_to_train.h"

namespace ts::config {

// data_dir()/calibration/longrun/time_to_train.textproto.
std::filesystem::path default_time_to_train_file();

// Loads the time-to-train data (empty path: the default file). Throws InputError listing every
// problem with file, line and field path: missing or out-of-range values, an unknown unit, a
// component or GPU given twice, a value without its source.
longrun::TrainData load_time_to_train_data(const std::string& path = "");

}  // namespace ts::config
