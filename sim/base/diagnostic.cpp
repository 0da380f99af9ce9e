#include "sim/base/diagnostic.h"

namespace ts {
namespace {
std::string join(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) {
    if (!out.empty()) out += '\n';
    out += d.to_string();
  }
  return out;
}
}  // namespace

std::string Diagnostic::to_string() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) {
      out += ':';
      out += std::to_string(line);
    }
    out += ": ";
  }
  if (!field.empty()) out += field + ": ";
  out += message;
  return out;
}

InputError::InputError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

InputError::InputError(Diagnostic diagnostic) : InputError(std::vector<Diagnostic>{std::move(diagnostic)}) {}

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(std::string("internal error: ") + file + ":" + std::to_string(line) +
                      ": assertion `" + expr + "` failed: " + msg);
}

void DiagnosticList::throw_if_any() const {
  if (!items_.empty()) throw InputError(items_);
}

}  // namespace ts
