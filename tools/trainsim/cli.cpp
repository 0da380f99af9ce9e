#include "tools/trainsim/cli.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
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

void write_file_atomic(const std::string& path, std::string_view data, const char* flag) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    ok = static_cast<bool>(out);
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    throw InputError(Diagnostic{path, 0, flag, "cannot write the file"});
  }
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
