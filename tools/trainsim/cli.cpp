#include "tools/trainsim/cli.h"

#include <iostream>

#include "sim/base/diagnostic.h"

namespace po = boost::program_options;

namespace ts::cli {

bool parse_flags(const Args& args, const po::options_description& options, po::variables_map& vm,
                 const char* usage) {
  po::options_description all;
  all.add_options()("help,h", "show this help");
  all.add(options);
  try {
    po::store(po::command_line_parser(args).options(all).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << all << '\n';
      return false;
    }
    po::notify(vm);
  } catch (const po::error_with_option_name& e) {
    throw InputError(Diagnostic{"", 0, e.get_option_name(), e.what()});
  } catch (const po::error& e) {
    throw InputError(Diagnostic{"", 0, "", e.what()});
  }
  return true;
}

Format parse_format(const std::string& value, bool allow_csv) {
  if (value == "text") return Format::kText;
  if (value == "json") return Format::kJson;
  if (value == "csv" && allow_csv) return Format::kCsv;
  throw InputError(Diagnostic{"", 0, "--format",
                              "unknown format '" + value + "' (known: text, json" +
                                  (allow_csv ? ", csv)" : ")")});
}

}  // namespace ts::cli
