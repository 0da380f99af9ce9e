// libFuzzer target: the CSV readers (RFC 4180 records, published-run tables of `trainsim
// validate`, sweep shard files of `trainsim merge`). Any input must end in a value or an
// InputError.
//
// The first byte picks the reader, the rest is the file's text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/driver/csv.h"
#include "sim/driver/sweep.h"
#include "sim/driver/validate.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned selector = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (selector % 3) {
      case 0: {
        const auto table = ts::driver::csv::parse_table(text, "input.csv");
        // Writing back what was read must parse again to the same fields.
        std::string again;
        for (const auto& r : table.rows) again += ts::driver::csv::line(r.fields);
        const auto records = ts::driver::csv::parse(again, "again.csv");
        if (records.size() > table.rows.size()) __builtin_trap();
        break;
      }
      case 1: (void)ts::driver::parse_published_runs(text, "runs.csv"); break;
      case 2: (void)ts::driver::merge_sweep_files({ts::fuzz::write_file("shard.csv", text)}); break;
    }
  } catch (const ts::InputError&) {
  }
  return 0;
}
