// Reading one textproto/JSON input file into a protobuf message, with the line of every field.
#include "sim/config/proto_reader.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace ts::config::detail {
namespace pb = google::protobuf;

int FieldLines::line_of(std::string_view path) const {
  std::string_view p = path;
  while (true) {
    if (auto it = lines_.find(p); it != lines_.end()) return it->second;
    // Drop the last component ("a.b[2]" → "a.b" → "a").
    const std::size_t cut = p.find_last_of(".[");
    if (cut == std::string_view::npos) return 0;
    p = p.substr(0, cut);
  }
}

std::string format_number(double v) {
  if (std::isfinite(v) && v == std::round(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

void Checker::fail(std::string_view field, std::string message) const {
  diags_->add(Diagnostic{file_, line_of(field), path(field), std::move(message)});
}

bool Checker::require(bool has, std::string_view field) const {
  if (!has) fail(field, "required value is missing");
  return has;
}

void Checker::positive(bool has, double value, std::string_view field) const {
  if (!require(has, field)) return;
  if (!std::isfinite(value) || value <= 0) fail(field, "must be > 0 (got " + format_number(value) + ")");
}

void Checker::non_negative(bool has, double value, std::string_view field) const {
  if (!require(has, field)) return;
  if (!std::isfinite(value) || value < 0) fail(field, "must be >= 0 (got " + format_number(value) + ")");
}

void Checker::fraction(bool has, double value, std::string_view field) const {
  if (!require(has, field)) return;
  if (!std::isfinite(value) || value <= 0 || value > 1) {
    fail(field, "must be in (0, 1] (got " + format_number(value) + ")");
  }
}

void Checker::at_least(bool has, double value, double lo, std::string_view field) const {
  if (!require(has, field)) return;
  if (!std::isfinite(value) || value < lo) {
    fail(field, "must be >= " + format_number(lo) + " (got " + format_number(value) + ")");
  }
}

void Checker::non_empty(bool has, const std::string& value, std::string_view field) const {
  if (!require(has, field)) return;
  if (value.empty()) fail(field, "must not be empty");
}

namespace {

enum class Format { kText, kJson, kUnknown };

Format format_of(const std::string& display) {
  const auto ends_with = [&](std::string_view suffix) {
    return display.size() >= suffix.size() &&
           display.compare(display.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".json")) return Format::kJson;
  if (ends_with(".textproto") || ends_with(".txtpb") || ends_with(".pbtxt")) return Format::kText;
  return Format::kUnknown;
}

// Comma-separated names of the fields of `d`, for "unknown field" messages.
std::string field_names(const pb::Descriptor* d) {
  std::string out;
  for (int i = 0; i < d->field_count(); ++i) {
    if (!out.empty()) out += ", ";
    out += d->field(i)->name();
  }
  return out;
}

// Path from `root` to the first sub-message of type `full_name` (breadth first), e.g.
// "node." for trainsim.schema.Cluster.Node; empty for the root itself or when not found.
std::string path_to_type(const pb::Descriptor* root, const std::string& full_name) {
  std::deque<std::pair<const pb::Descriptor*, std::string>> queue{{root, ""}};
  int guard = 0;
  while (!queue.empty() && ++guard < 1000) {
    auto [d, prefix] = queue.front();
    queue.pop_front();
    if (d->full_name() == full_name) return prefix;
    for (int i = 0; i < d->field_count(); ++i) {
      const pb::FieldDescriptor* f = d->field(i);
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        queue.emplace_back(f->message_type(), prefix + f->name() + ".");
      }
    }
  }
  return "";
}

// Turns the text-format parser's errors into diagnostics. Unknown fields are allowed by the
// parser (so that every one of them is found) and reported here as errors.
class TextCollector : public pb::io::ErrorCollector {
 public:
  TextCollector(const std::string& file, const pb::Descriptor* root, DiagnosticList& diags)
      : file_(file), root_(root), diags_(diags) {}

  void AddError(int line, pb::io::ColumnNumber, const std::string& message) override {
    diags_.add(Diagnostic{file_, line + 1, "", message});
    ++errors_;
  }

  void AddWarning(int line, pb::io::ColumnNumber, const std::string& message) override {
    // 'Message type "trainsim.schema.Cluster.Node" has no field named "nvlink_bw".'
    static constexpr std::string_view kType = "Message type \"";
    static constexpr std::string_view kField = "\" has no field named \"";
    const std::size_t t = message.find(kType);
    const std::size_t f = message.find(kField);
    if (t == std::string::npos || f == std::string::npos || f < t) return;  // other warnings
    const std::string type = message.substr(t + kType.size(), f - t - kType.size());
    const std::size_t name_start = f + kField.size();
    const std::size_t name_end = message.find('"', name_start);
    const std::string name = message.substr(name_start, name_end - name_start);
    const pb::Descriptor* d = root_->file()->pool()->FindMessageTypeByName(type);
    std::string msg = "unknown field";
    if (d != nullptr) msg += " (the fields of " + d->name() + " are: " + field_names(d) + ")";
    diags_.add(Diagnostic{file_, line + 1, path_to_type(root_, type) + name, msg});
    ++errors_;
  }

  int errors() const { return errors_; }

 private:
  const std::string& file_;
  const pb::Descriptor* root_;
  DiagnosticList& diags_;
  int errors_ = 0;
};

// Records the line of every field present in `msg` from the parser's location tree.
void record_text_lines(const pb::Message& msg, const pb::TextFormat::ParseInfoTree* tree,
                       const std::string& prefix, FieldLines& lines) {
  const pb::Descriptor* d = msg.GetDescriptor();
  const pb::Reflection* r = msg.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    const std::string path = prefix + f->name();
    const bool is_message = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
    if (f->is_repeated()) {
      const int n = r->FieldSize(msg, f);
      for (int k = 0; k < n; ++k) {
        const auto loc = tree->GetLocation(f, k);
        const std::string item = path + "[" + std::to_string(k) + "]";
        if (loc.line >= 0) {
          lines.set(item, loc.line + 1);
          if (k == 0) lines.set(path, loc.line + 1);
        }
        if (is_message) {
          if (const auto* sub = tree->GetTreeForNested(f, k)) {
            record_text_lines(r->GetRepeatedMessage(msg, f, k), sub, item + ".", lines);
          }
        }
      }
    } else {
      const auto loc = tree->GetLocation(f, -1);
      if (loc.line >= 0) lines.set(path, loc.line + 1);
      if (is_message && r->HasField(msg, f)) {
        if (const auto* sub = tree->GetTreeForNested(f, -1)) {
          record_text_lines(r->GetMessage(msg, f), sub, path + ".", lines);
        }
      }
    }
  }
}

bool parse_text(std::string_view text, const std::string& display, pb::Message& msg,
                FieldLines& lines, DiagnosticList& diags) {
  TextCollector collector(display, msg.GetDescriptor(), diags);
  pb::TextFormat::ParseInfoTree tree;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  parser.AllowUnknownField(true);
  const bool ok = parser.ParseFromString(std::string(text), &msg);
  if (!ok && collector.errors() == 0) {
    diags.add(Diagnostic{display, 0, "", "could not parse the file as protobuf text format"});
  }
  if (ok) record_text_lines(msg, &tree, "", lines);
  return ok;
}

// --- JSON ---------------------------------------------------------------------------------
//
// protobuf's JSON parser gives no line numbers and stops at the first unknown field, so the
// text is first walked with nlohmann::json's SAX parser: it finds syntax errors (with their
// line), every unknown key (checked against the message descriptors), and the line of every
// known field. The conversion itself is then protobuf's (JsonStringToMessage).

// Input iterator over the text that remembers the last character the JSON lexer read, so that
// SAX callbacks know the current line.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, const char** last) : p_(p), last_(last) {}
  reference operator*() const {
    *last_ = p_;
    return *p_;
  }
  TrackingIterator& operator++() {
    ++p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator old = *this;
    ++p_;
    return old;
  }
  bool operator==(const TrackingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** last_;
};

class JsonWalker : public nlohmann::json_sax<nlohmann::json> {
 public:
  JsonWalker(std::string_view text, const std::string& display, const pb::Descriptor* root,
             FieldLines& lines, DiagnosticList& diags)
      : text_(text), last_(text.data()), display_(display), root_(root), lines_(lines),
        diags_(diags) {}

  const char** last() { return &last_; }
  bool failed() const { return failed_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }

  bool start_object(std::size_t) override {
    if (frames_.empty()) {
      frames_.push_back(Frame{root_, "", nullptr, 0});
      return true;
    }
    const auto [field, path] = element();
    const pb::Descriptor* d = field != nullptr && field->message_type() != nullptr
                                  ? field->message_type()
                                  : nullptr;
    frames_.push_back(Frame{d, path, nullptr, 0});
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return value();  // the object was a value of its parent
  }
  bool start_array(std::size_t) override {
    if (frames_.empty()) {
      diags_.add(Diagnostic{display_, line(), "", "expected a JSON object, got an array"});
      failed_ = true;
      return false;
    }
    const auto [field, path] = element();
    frames_.push_back(Frame{nullptr, path, field, 0});
    frames_.back().is_array = true;
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return value();
  }
  bool key(string_t& name) override {
    Frame& top = frames_.back();
    top.pending = nullptr;
    top.pending_path.clear();
    if (top.message == nullptr) return true;  // inside an unknown field or a scalar: not checked
    const pb::FieldDescriptor* f = top.message->FindFieldByName(name);
    for (int i = 0; f == nullptr && i < top.message->field_count(); ++i) {
      if (top.message->field(i)->json_name() == name) f = top.message->field(i);  // lowerCamelCase
    }
    const std::string prefix = top.path.empty() ? "" : top.path + ".";
    if (f == nullptr) {
      diags_.add(Diagnostic{display_, line(), prefix + name,
                            "unknown field (the fields of " + top.message->name() +
                                " are: " + field_names(top.message) + ")"});
      return true;
    }
    top.pending = f;
    top.pending_path = prefix + f->name();
    lines_.set(top.pending_path, line());
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ...":
    // the line is given separately, so keep what follows the position.
    if (const std::size_t tag = what.find("] "); what.rfind("[json.exception", 0) == 0 &&
                                                  tag != std::string::npos) {
      what = what.substr(tag + 2);
    }
    if (what.rfind("parse error at ", 0) == 0) {
      if (const std::size_t colon = what.find(": "); colon != std::string::npos) {
        what = what.substr(colon + 2);
      }
    }
    diags_.add(Diagnostic{display_, line_at(position), "", "JSON syntax error: " + what});
    failed_ = true;
    return false;
  }

 private:
  struct Frame {
    const pb::Descriptor* message;        // null when the object's type is unknown
    std::string path;                     // field path of this object or array
    const pb::FieldDescriptor* pending;   // field of the last key (objects) / array field
    int index;                            // next element (arrays)
    std::string pending_path = {};
    bool is_array = false;
  };

  // The field and path a value starting now belongs to.
  std::pair<const pb::FieldDescriptor*, std::string> element() {
    Frame& top = frames_.back();
    if (top.is_array) {
      return {top.pending, top.path + "[" + std::to_string(top.index) + "]"};
    }
    return {top.pending, top.pending_path};
  }

  bool value() {
    if (!frames_.empty() && frames_.back().is_array) {
      Frame& top = frames_.back();
      lines_.set(top.path + "[" + std::to_string(top.index) + "]", line());
      ++top.index;
    }
    return true;
  }

  int line() const { return line_at(static_cast<std::size_t>(last_ - text_.data())); }
  int line_at(std::size_t position) const {
    position = std::min(position, text_.size());
    return 1 + static_cast<int>(std::count(text_.begin(),
                                           text_.begin() + static_cast<std::ptrdiff_t>(position),
                                           '\n'));
  }

  std::string_view text_;
  const char* last_;
  const std::string& display_;
  const pb::Descriptor* root_;
  FieldLines& lines_;
  DiagnosticList& diags_;
  std::vector<Frame> frames_;
  bool failed_ = false;
};

bool parse_json(std::string_view text, const std::string& display, pb::Message& msg,
                FieldLines& lines, DiagnosticList& diags) {
  JsonWalker walker(text, display, msg.GetDescriptor(), lines, diags);
  TrackingIterator first(text.data(), walker.last());
  TrackingIterator last(text.data() + text.size(), walker.last());
  const bool syntax_ok = nlohmann::json::sax_parse(first, last, &walker);
  if (!syntax_ok || walker.failed()) return false;

  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // already reported, each with its line, by the walker
  const auto status = pb::util::JsonStringToMessage(std::string(text), &msg, options);
  if (!status.ok()) {
    diags.add(Diagnostic{display, 0, "", std::string(status.message())});
    return false;
  }
  return true;
}

// Nesting depth limit of an input file. The parsers recurse per level (protobuf's text parser
// without a limit when it skips unknown fields), so a file of 10^5 opening braces would
// overflow the stack; real files nest 3 levels deep.
constexpr int kMaxNesting = 64;

// The line of the first bracket nested deeper than kMaxNesting, or 0. Skips quoted strings
// (both formats) and # comments (text format).
int too_deep_line(std::string_view text, bool json) {
  int depth = 0;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '"' || (c == '\'' && !json)) {
      for (++i; i < text.size() && text[i] != c && text[i] != '\n'; ++i) {
        if (text[i] == '\\') ++i;
      }
      if (i < text.size() && text[i] == '\n') ++line;
    } else if (c == '#' && !json) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '{' || c == '[' || (c == '<' && !json)) {
      if (++depth > kMaxNesting) return line;
    } else if (c == '}' || c == ']' || (c == '>' && !json)) {
      --depth;
    }
  }
  return 0;
}

}  // namespace

bool parse_message(std::string_view text, const std::string& display, pb::Message& msg,
                   FieldLines& lines, DiagnosticList& diags) {
  const Format format = format_of(display);
  if (format != Format::kUnknown) {
    if (const int line = too_deep_line(text, format == Format::kJson); line > 0) {
      diags.add(Diagnostic{display, line, "", "nested more than " + std::to_string(kMaxNesting) +
                                                  " levels deep"});
      return false;
    }
  }
  switch (format) {
    case Format::kText: return parse_text(text, display, msg, lines, diags);
    case Format::kJson: return parse_json(text, display, msg, lines, diags);
    case Format::kUnknown: break;
  }
  diags.add(Diagnostic{display, 0, "",
                       "unknown file type: expected .textproto (protobuf text format) or .json"});
  return false;
}

bool read_message(const std::filesystem::path& path, const std::string& display,
                  pb::Message& msg, FieldLines& lines, DiagnosticList& diags) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    diags.add(Diagnostic{display, 0, "", "no such file"});
    return false;
  }
  // Input files are a few kilobytes; a huge one is a wrong path, not a configuration.
  constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{64} << 20;
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxFileBytes) {
    diags.add(Diagnostic{display, 0, "", "file of " + std::to_string(size) +
                                             " bytes is too large for an input file (limit 64 MiB)"});
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (!in) {
    diags.add(Diagnostic{display, 0, "", "cannot read the file"});
    return false;
  }
  return parse_message(buf.str(), display, msg, lines, diags);
}

}  // namespace ts::config::detail
