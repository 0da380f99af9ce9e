// Chrome trace (Trace Event Format) of a replay: one process per simulated device, one thread per
// stream, complete events in µs, flow arrows for pipeline sends, a memory counter per device.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/parallel/task_graph.h"
#include "sim/runtime/executor.h"

namespace ts::trace {

struct TraceInfo {
  std::int32_t gpus_per_node = 8;
  std::vector<Bytes> static_memory;  // per simulated device, added to its dynamic memory counter
  // Scenario description written as trace metadata (key, value), e.g. ("model", "llama3-70b").
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Writes the trace to `path` (gzip-compressed when it ends in .gz). The file is written to a
// temporary name and renamed, so a failure leaves nothing half-written. Throws InputError naming
// the path when it cannot be written.
void write_chrome_trace(const std::filesystem::path& path, const parallel::TaskGraph& graph,
                        const runtime::Execution& execution, const TraceInfo& info);

// The trace as a string (what write_chrome_trace writes, uncompressed).
std::string chrome_trace_json(const parallel::TaskGraph& graph, const runtime::Execution& execution,
                              const TraceInfo& info);

}  // namespace ts::trace
