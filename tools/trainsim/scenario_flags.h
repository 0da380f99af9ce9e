// The flags that describe one scenario (model, cluster, GPUs, plan), shared by run and inspect.
#pragma once

#include <boost/program_options.hpp>

#include "sim/config/loader.h"

namespace ts::cli {

// Adds --model, --cluster, --gpus, --tp, … to `options`.
void add_scenario_flags(boost::program_options::options_description& options);

// Builds and validates the scenario; every problem of the flags and files is reported at once
// (InputError). --dp defaults to gpus / (tp · pp · cp).
config::Scenario scenario_from_flags(const boost::program_options::variables_map& vm);

}  // namespace ts::cli
