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

// The base settings of a sweep that shape every row's result but are no column of its CSV
// (the --framework profile, launch_blocking, the MoE all-to-all overlap, the gradient bucket
// size, the cross-entropy precision, the GPUs used per NVLink domain), kept beside the CSV in
// `sweep_settings_path(csv)`, one `name=value` a line, so that a resumed sweep can be checked
// against them.
std::filesystem::path sweep_settings_path(const std::filesystem::path& csv);
std::string sweep_settings_text(const SweepSpec& spec);
// Before resuming `csv` (a file with rows): throws InputError (exit 2) naming the flag of the
// first setting whose value differs from the one in the settings file beside it. A file without
// one (written before settings were kept) is not checked.
void check_sweep_settings(const SweepSpec& spec, const std::filesystem::path& csv);
// Writes the settings file of a sweep starting `csv` afresh.
void write_sweep_settings(const SweepSpec& spec, const std::filesystem::path& csv);

}  // namespace ts::driver
