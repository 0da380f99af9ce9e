// libFuzzer target: the config loader (model, cluster, scenario and calibration files, protobuf
// text format and JSON). Any input must end in a value or an InputError; anything else (a crash,
// a sanitizer report, another exception) is a finding.
//
// The first byte picks the loader and the format, the rest is the file's text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/base/diagnostic.h"
#include "sim/config/calibration_loader.h"
#include "sim/config/loader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool json = (selector & 1) != 0;
  const auto path = ts::fuzz::write_file(json ? "input.json" : "input.textproto", text).string();
  try {
    switch ((selector >> 1) % 4) {
      case 0: (void)ts::config::load_model(path); break;
      case 1: (void)ts::config::load_cluster(path); break;
      case 2: (void)ts::config::load_scenario(path); break;
      case 3:
        if (!json) (void)ts::config::load_calibration(path);
        break;
    }
  } catch (const ts::InputError&) {
    // Rejected with a diagnostic: the expected outcome for bad input.
  }
  return 0;
}
