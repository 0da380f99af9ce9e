// The sweep CSV inside the driver: rows of any status and the rows an earlier run left in an
// output file (the public CSV functions are declared in sweep.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/driver/sweep.h"

namespace ts::driver {

// The row of a plan with `status` written in place of the result's (sweep_csv_row).
std::string csv_row(std::int64_t plan_id, const SweepSpec& spec, const parallel::ParallelPlan& plan,
                    const RunResult& result, std::string_view status);

// The rows of an output file written by an earlier run of the same sweep and shard, by plan id,
// and whether the file still needs its header (it is missing or empty). A last line without its
// newline (left by a killed writer) is cut off the file. Throws InputError for a file of another
// sweep or shard.
struct ResumedRows {
  std::map<std::int64_t, SweepRecord> rows;
  bool write_header = true;
};
ResumedRows read_resumed_rows(const SweepSpec& spec,
                              const std::vector<parallel::ParallelPlan>& plans,
                              const std::filesystem::path& path, const Shard& shard);

}  // namespace ts::driver
