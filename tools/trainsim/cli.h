// Shared pieces of the trainsim subcommands: the command table, flag parsing, output helpers.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ts::cli {

// Exit codes of the CLI contract (docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInfeasible = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInternal = 3;

using Args = std::vector<std::string>;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);  // args after the subcommand name
};

// Parses `args` against `options`; a bad flag or value throws InputError naming the flag.
// Returns false (after printing help to stdout) when --help was given.
bool parse_flags(const Args& args, const boost::program_options::options_description& options,
                 boost::program_options::variables_map& vm, const char* usage);

// Writes `data` to `path` through a temporary file in the same folder renamed over it, so that
// a failed or interrupted write leaves no partial file. Throws InputError naming `flag`.
void write_file_atomic(const std::string& path, std::string_view data, const char* flag);

enum class Format { kText, kJson, kCsv };
Format parse_format(const std::string& value, bool allow_csv);

// The subcommands (one file each).
int cmd_run(const Args& args);
int cmd_inspect(const Args& args);
int cmd_kernel(const Args& args);
int cmd_collective(const Args& args);
int cmd_chakra(const Args& args);
int cmd_sweep(const Args& args);
int cmd_merge(const Args& args);
int cmd_plan(const Args& args);
int cmd_validate(const Args& args);

}  // namespace ts::cli
