// Chrome trace (Trace Event Format) of a replay: one process per simulated device, one thread per
// stream, complete events in µs with op arguments, flow arrows for pipeline transfers and for the
// members of a collective, a memory counter per device, and run metadata.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/parallel/task_graph.h"
#include "sim/runtime/executor.h"

namespace ts::trace {

struct TraceInfo {
  std::int32_t gpus_per_host = 1;    // names a device "node <rank / this> · gpu <rank % this>"
  std::vector<Bytes> static_memory;  // per simulated device, added to its dynamic memory counter
  // Scenario description written as trace metadata (key, value), e.g. ("model", "llama3-70b").
  std::vector<std::pair<std::string, std::string>> metadata;
  // Global ranks whose simulated devices are written; empty = every simulated device. Ranks that
  // are not simulated (symmetric mode simulates one rank per pipeline stage) are skipped; a list
  // that selects no simulated device is an InputError naming --trace-devices.
  std::vector<std::int32_t> ranks;
};

// What a trace holds and weighs, for the size report of large runs.
struct TraceSize {
  std::int64_t devices_simulated = 0;
  std::int64_t devices_written = 0;
  std::int64_t slices = 0;    // complete events (tasks)
  std::int64_t flows = 0;     // flow arrows (pipeline transfers and collective members)
  std::int64_t counters = 0;  // memory counter samples
  std::int64_t events = 0;    // every event, metadata included
  std::int64_t json_bytes = 0;  // uncompressed JSON
  std::int64_t file_bytes = 0;  // on disk (compressed when .gz); 0 until written
};

// Writes the trace to `path` (gzip-compressed when it ends in .gz). The file is written to a
// temporary name and renamed, so a failure leaves nothing half-written. Throws InputError naming
// the path when it cannot be written.
TraceSize write_chrome_trace(const std::filesystem::path& path, const parallel::TaskGraph& graph,
                             const runtime::Execution& execution, const TraceInfo& info);

// The trace as a string (what write_chrome_trace writes, uncompressed); `size` (optional)
// receives its counts.
std::string chrome_trace_json(const parallel::TaskGraph& graph, const runtime::Execution& execution,
                              const TraceInfo& info, TraceSize* size = nullptr);

// One line for the user, e.g. "trace t.json: 2 of 2 simulated devices, 15653 slices, 130 flows,
// 3.1 MB".
std::string describe_trace_size(const std::filesystem::path& path, const TraceSize& size);

// Rank list of --trace-devices: comma-separated ranks and inclusive ranges ("0-7,64,120-127"),
// each below `num_ranks`; sorted, without duplicates. Throws InputError naming `flag`.
std::vector<std::int32_t> parse_rank_list(std::string_view text, std::int64_t num_ranks,
                                          std::string_view flag);

// Display name of a simulated device: "node 3 · gpu 5 · tp2 pp1 dp0" (cp added when the
// plan has context parallelism among the simulated devices).
std::string device_name(const parallel::SimDevice& device, std::int32_t gpus_per_host,
                        bool with_cp);

}  // namespace ts::trace
