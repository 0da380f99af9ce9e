// libFuzzer target: the Chakra ET reader (length-delimited GlobalMetadata and Node messages,
// dependencies, communication attributes, process groups). Any input must end in a trace or an
// InputError.
//
// The input is split at the first "\n--groups--\n": before it rank 0's .et file, after it the
// process-group JSON (absent: no groups file).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "sim/base/diagnostic.h"
#include "sim/config/chakra_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSeparator = "\n--groups--\n";
  const auto cut = bytes.find(kSeparator);
  const auto groups_path = ts::fuzz::scratch_dir() / "trace.json";
  std::filesystem::remove(groups_path);
  if (cut != std::string_view::npos) {
    ts::fuzz::write_file("trace.json", bytes.substr(cut + kSeparator.size()));
    bytes = bytes.substr(0, cut);
  }
  ts::fuzz::write_file("trace.0.et", bytes);
  try {
    (void)ts::config::read_chakra(ts::fuzz::scratch_dir() / "trace");
  } catch (const ts::InputError&) {
  }
  return 0;
}
