// Flags shared by `trainsim run` and `trainsim plan` for the time to train: checkpoints, restarts,
// stragglers, PUE and the data file.
#pragma once

#include <boost/program_options.hpp>

#include "sim/driver/time_to_train.h"
#include "sim/longrun/time_to_train.h"

namespace ts::cli {

// Adds --checkpoint-gbps, --checkpoint-interval-min, --checkpoint-mode, --restart-min,
// --straggler, --pue and --train-calibration.
void add_train_flags(boost::program_options::options_description& options);

// The settings those flags give (goal and price left unset); every bad value is reported at once
// (InputError naming its flag). `any_given` tells whether one of them was on the command line.
driver::TrainSettings train_settings_from_flags(const boost::program_options::variables_map& vm,
                                                bool& any_given);

// The data file named by --train-calibration, else the default one.
longrun::TrainData train_data_from_flags(const boost::program_options::variables_map& vm);

}  // namespace ts::cli
