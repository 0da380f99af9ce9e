// trainsim merge: joins the CSV files of a sharded sweep into one file in plan order and prints
// the ranked table.
#include <fstream>
#include <iostream>

#include "sim/base/diagnostic.h"
#include "sim/driver/sweep.h"
#include "tools/trainsim/cli.h"

namespace po = boost::program_options;

namespace ts::cli {

int cmd_merge(const Args& args) {
  po::options_description o("merge flags");
  o.add_options()
      ("help,h", "show this help")
      ("out", po::value<std::string>(), "write the merged CSV here (rows in plan order)")
      ("top", po::value<std::int64_t>()->default_value(10), "print the best K plans by tokens/s (0: all)");
  po::options_description hidden;
  hidden.add_options()("inputs", po::value<std::vector<std::string>>(), "shard CSV files");
  po::options_description all;
  all.add(o).add(hidden);
  po::positional_options_description positional;
  positional.add("inputs", -1);
  po::variables_map vm;
  const char* usage = "usage: trainsim merge SHARD.csv... [--out MERGED.csv] [--top K]";
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << o << '\n';
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error_with_option_name& e) {
    throw InputError(Diagnostic{"", 0, e.get_option_name(), e.what()});
  } catch (const po::error& e) {
    throw InputError(Diagnostic{"", 0, "", e.what()});
  }
  if (!vm.count("inputs")) throw InputError(Diagnostic{"", 0, "", std::string("no input files; ") + usage});
  const auto top_k = vm["top"].as<std::int64_t>();
  if (top_k < 0) throw InputError(Diagnostic{"", 0, "--top", "must be >= 0"});
  std::vector<std::filesystem::path> inputs;
  for (const auto& s : vm["inputs"].as<std::vector<std::string>>()) inputs.emplace_back(s);

  const driver::MergeResult m = driver::merge_sweep_files(inputs);
  if (vm.count("out")) {
    const std::string path = vm["out"].as<std::string>();
    write_file_atomic(path, m.csv, "--out");
  }
  std::cout << "merged " << inputs.size() << " files: " << m.records.size() << " plans";
  if (m.duplicates > 0) std::cout << " (" << m.duplicates << " identical rows found twice)";
  std::cout << "\n";
  if (m.missing_count > 0) {
    std::cout << "warning: " << m.missing_count << " plan ids missing below the largest present (";
    for (std::size_t i = 0; i < m.missing.size(); ++i) std::cout << (i ? ", " : "") << m.missing[i];
    std::cout << (m.missing_count > static_cast<std::int64_t>(m.missing.size()) ? ", …" : "")
              << "): a shard is missing or unfinished\n";
  }
  const auto top = driver::top_records(m.records, static_cast<std::size_t>(top_k));
  if (top.empty()) {
    std::cout << "no plan fits in memory\n";
  } else {
    std::cout << "top " << top.size() << " by tokens/s (peak memory of the fullest GPU):\n"
              << driver::format_top_table(top);
  }
  return kExitOk;
}

}  // namespace ts::cli
