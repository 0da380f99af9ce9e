// Diagnostics for bad input (exit 2) and internal errors (exit 3), and SIM_ASSERT.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ts {

// One problem with the input: where it is (file, line, field path or flag) and what is wrong.
struct Diagnostic {
  std::string file;   // input file, or empty for a command-line flag
  int line = 0;       // 1-based line in `file`, 0 when unknown
  std::string field;  // field path ("node.nvlink_bandwidth_gbps") or flag ("--tp")
  std::string message;

  std::string to_string() const;
};

// Bad input: carries every problem found, so that all are reported at once. Exit code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Diagnostic> diagnostics);
  explicit InputError(Diagnostic diagnostic);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// A broken invariant inside trainsim (a bug, not bad input). Exit code 3.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& msg);

// Collects diagnostics while validating, then throws them together.
class DiagnosticList {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  // Runs `action`; the diagnostics of an InputError it throws are added here instead, so that
  // every problem of an input is reported at once.
  template <class F>
  void collect(F&& action) {
    try {
      action();
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) add(d);
    }
  }
  bool empty() const { return items_.empty(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  // Throws InputError with everything collected, if anything was.
  void throw_if_any() const;

 private:
  std::vector<Diagnostic> items_;
};

}  // namespace ts

#define SIM_ASSERT(cond, msg)                                         \
  do {                                                                \
    if (!(cond)) ::ts::assertion_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (false)
