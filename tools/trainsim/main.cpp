// trainsim: command-line entry point; dispatches to the subcommands.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string_view>

#include "sim/base/diagnostic.h"
#include "tools/trainsim/cli.h"

namespace {

using ts::cli::Command;

constexpr Command kCommands[] = {
    {"run", "simulate one training iteration of a model on a cluster", ts::cli::cmd_run},
    {"inspect", "parameters, FLOPs, static memory and task counts, without replay",
     ts::cli::cmd_inspect},
    {"kernel", "time of one GEMM, attention or memory-bound kernel on a calibrated GPU", ts::cli::cmd_kernel},
    {"collective", "time and bus bandwidth of one collective, with concurrent groups", ts::cli::cmd_collective},
    {"chakra", "export a run as Chakra ET files, or import and replay Chakra ET files", ts::cli::cmd_chakra},
    {"sweep", "simulate every valid plan for a model, cluster and GPU count; ranked table", ts::cli::cmd_sweep},
    {"merge", "join the CSV files of a sharded sweep into one ranked table", ts::cli::cmd_merge},
    {"plan", "size a cluster: smallest per GPU kind and fabric meeting a token budget and deadline", ts::cli::cmd_plan},
    {"validate", "simulate published training runs (CSV) and report the prediction errors", ts::cli::cmd_validate},
};

void print_usage(std::ostream& out) {
  out << "usage: trainsim <command> [flags]   (trainsim <command> --help for its flags)\n\n"
         "commands:\n";
  for (const auto& c : kCommands) {
    out << "  " << c.name << std::string(12 - std::string_view(c.name).size(), ' ') << c.summary
        << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return ts::cli::kExitBadInput;
  }
  const std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return ts::cli::kExitOk;
  }
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(ts::cli::Args(argv + 2, argv + argc));
    } catch (const ts::InputError& e) {
      for (const auto& d : e.diagnostics()) std::cerr << "error: " << d.to_string() << '\n';
      return ts::cli::kExitBadInput;
    } catch (const ts::InternalError& e) {
      std::cerr << e.what() << '\n';
      return ts::cli::kExitInternal;
    } catch (const std::exception& e) {
      std::cerr << "internal error: " << e.what() << '\n';
      return ts::cli::kExitInternal;
    }
  }
  std::cerr << "error: unknown command '" << name << "'\n";
  print_usage(std::cerr);
  return ts::cli::kExitBadInput;
}
