// Flags shared by `trainsim sweep` and `trainsim plan`: the plan axes as lists ("4,8" or "all").
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "sim/driver/sweep.h"

namespace ts::cli {

// Default value of each axis flag, as it would be typed ("all", "1,2,4,8", "off,on", …).
struct AxisDefaults {
  std::string tp = "all", pp = "all", dp = "all", cp = "1", vpp = "all";
  std::string micro_batch = "1,2,4,8";
  std::string schedule = "1f1b,interleaved";
  std::string zero = "all";
  std::string zero_shard_group = "0";
  std::string sequence_parallel = "off,on";
  // Megatron's modes; "all" adds PyTorch's op-policy selective checkpointing (selective-op).
  std::string recompute = "none,selective,full";
  std::string cp_algo = "all";
  std::string mst_chunks = "1";
  std::string pp_split = "even";
  // Expert and expert-tensor parallelism (MoE models only); "all": every divisor of the routed
  // experts (ep) or of the expert width (etp) that the plan's ranks allow. Expert parallelism is
  // how MoE models are trained (without it every rank holds every expert: DeepSeek-V3 fits no
  // H100 plan), so it is swept by default; a dense model's only value is 1.
  std::string ep = "all", etp = "1";
};

// Adds --tp, --pp, --dp, --cp, --vpp, --micro-batch, --schedule, --zero, --zero-shard-group,
// --sequence-parallel, --recompute, --cp-algo, --mst-chunks and --pp-split, each taking a
// comma-separated list or "all".
void add_axis_flags(boost::program_options::options_description& options, const AxisDefaults& defaults);

// The axes given by those flags; every malformed list is reported at once (InputError naming
// its flag).
driver::SweepAxes axes_from_flags(const boost::program_options::variables_map& vm);

}  // namespace ts::cli
