// Reading one textproto/JSON input file into a protobuf message, with the line of every field.
// Internal to the config module: only config sources include it (it exposes protobuf types).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "sim/base/diagnostic.h"

namespace ts::config::detail {

// Where each field of a parsed file sits: field path ("node.nics_per_node", "pp_layers[2]")
// → 1-based line.
class FieldLines {
 public:
  void set(const std::string& path, int line) { lines_[path] = line; }
  // Line of `path`; for an absent field, the line of its nearest enclosing field that is
  // present (a missing "gpu.num_sms" points at "gpu {"); 0 when none is.
  int line_of(std::string_view path) const;

 private:
  std::map<std::string, int, std::less<>> lines_;
};

// Parses the text of `display` (a file name, used in diagnostics and to pick the format by its
// extension: .textproto/.txtpb/.pbtxt are protobuf text format, .json is JSON) into `msg`.
// Syntax errors and unknown fields go to `diags` with file, line and field path; unknown
// fields are skipped so the rest of the file is still read and validated. Returns false when
// the text could not be parsed (then `msg` is unusable).
bool parse_message(std::string_view text, const std::string& display,
                   google::protobuf::Message& msg, FieldLines& lines, DiagnosticList& diags);

// Reads `path` and parses it as parse_message does; a missing or unreadable file is a
// diagnostic. `display` names the file in diagnostics.
bool read_message(const std::filesystem::path& path, const std::string& display,
                  google::protobuf::Message& msg, FieldLines& lines, DiagnosticList& diags);

// Value checks on one parsed file: each failure becomes a diagnostic with the file, the line of
// the field (from FieldLines) and its path, prefixed for nested messages.
class Checker {
 public:
  Checker(std::string file, const FieldLines& lines, DiagnosticList& diags, std::string prefix = "")
      : file_(std::move(file)), lines_(&lines), diags_(&diags), prefix_(std::move(prefix)) {}

  // The same checker for the fields of sub-message `field`.
  Checker nested(std::string_view field) const {
    return Checker(file_, *lines_, *diags_, path(field) + ".");
  }
  std::string path(std::string_view field) const { return prefix_ + std::string(field); }
  int line_of(std::string_view field) const { return lines_->line_of(path(field)); }
  const std::string& file() const { return file_; }
  DiagnosticList& diagnostics() const { return *diags_; }

  void fail(std::string_view field, std::string message) const;
  // Adds "required value is missing" when !has; returns has.
  bool require(bool has, std::string_view field) const;
  // Required and > 0.
  void positive(bool has, double value, std::string_view field) const;
  // Required and >= 0.
  void non_negative(bool has, double value, std::string_view field) const;
  // Required and in (0, 1].
  void fraction(bool has, double value, std::string_view field) const;
  // Required and >= lo.
  void at_least(bool has, double value, double lo, std::string_view field) const;
  // Required and non-empty.
  void non_empty(bool has, const std::string& value, std::string_view field) const;

 private:
  std::string file_;
  const FieldLines* lines_;
  DiagnosticList* diags_;
  std::string prefix_;
};

// A number as written in messages: integers without a fraction, others with up to 6
// significant digits.
std::string format_number(double v);

}  // namespace ts::config::detail
