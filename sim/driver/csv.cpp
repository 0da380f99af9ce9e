#include "sim/driver/csv.h"

#include <fstream>
#include <set>
#include <sstream>

#include "sim/base/diagnostic.h"

namespace ts::driver::csv {
namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

bool all_empty(const std::vector<std::string>& fields) {
  for (const auto& f : fields) {
    if (!f.empty()) return false;
  }
  return true;
}

}  // namespace

std::vector<Record> parse(std::string_view text, const std::string& file) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<Record> out;
  Record rec;
  std::string field;
  int line = 1;
  rec.line = 1;
  bool quoted = false;        // inside a quoted field
  bool after_quote = false;   // the current field was quoted and its closing quote seen
  bool field_started = false; // something of the current record has been read
  auto end_field = [&] {
    rec.fields.push_back(std::move(field));
    field.clear();
    after_quote = false;
  };
  auto end_record = [&] {
    end_field();
    // A line with nothing on it is not a record (a trailing newline, blank separator lines).
    if (!(rec.fields.size() == 1 && rec.fields[0].empty() && !field_started)) out.push_back(std::move(rec));
    rec = Record{};
    field_started = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
          after_quote = true;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    switch (c) {
      case ',':
        end_field();
        field_started = true;
        break;
      case '\r':
        if (i + 1 < text.size() && text[i + 1] == '\n') break;  // CRLF: the LF ends the record
        [[fallthrough]];
      case '\n':
        end_record();
        ++line;
        rec.line = line;
        break;
      case '"':
        if (!field.empty() || after_quote) {
          throw InputError(Diagnostic{file, line, "",
                                      "a double quote inside an unquoted field (RFC 4180: a field "
                                      "holding quotes must be quoted, with inner quotes doubled)"});
        }
        quoted = true;
        field_started = true;
        break;
      default:
        if (after_quote) {
          throw InputError(Diagnostic{file, line, "",
                                      std::string("character '") + c +
                                          "' after the closing quote of a field (expected a comma "
                                          "or the end of the line)"});
        }
        field += c;
        field_started = true;
        break;
    }
  }
  if (quoted) {
    throw InputError(Diagnostic{file, rec.line, "", "quoted field is not terminated before the end of the file"});
  }
  if (field_started || !field.empty() || !rec.fields.empty()) end_record();
  return out;
}

int Table::column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

Table parse_table(std::string_view text, const std::string& file) {
  Table t;
  t.file = file;
  std::vector<Record> records = parse(text, file);
  if (records.empty()) throw InputError(Diagnostic{file, 0, "", "empty file: expected a header line"});
  const int header_line = records.front().line;
  std::set<std::string> seen;
  for (const auto& f : records.front().fields) {
    std::string name = trim(f);
    if (name.empty()) {
      throw InputError(Diagnostic{file, header_line, "", "the header has an empty column name"});
    }
    if (!seen.insert(name).second) {
      throw InputError(Diagnostic{file, header_line, name, "column named twice in the header"});
    }
    t.header.push_back(std::move(name));
  }
  DiagnosticList problems;
  for (std::size_t r = 1; r < records.size(); ++r) {
    auto& rec = records[r];
    // A line of only commas is an empty record padded by a spreadsheet: skip it.
    if (all_empty(rec.fields)) continue;
    if (rec.fields.size() != t.header.size()) {
      problems.add(Diagnostic{file, rec.line, "",
                              "record " + std::to_string(r) + " has " +
                                  std::to_string(rec.fields.size()) + " fields; the header has " +
                                  std::to_string(t.header.size())});
      continue;
    }
    t.rows.push_back(std::move(rec));
  }
  problems.throw_if_any();
  return t;
}

Table read_table(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Diagnostic{path.string(), 0, "", "cannot open the file"});
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_table(ss.str(), path.string());
}

std::string quote(std::string_view field) {
  bool needs = !field.empty() && (field.front() == ' ' || field.back() == ' ');
  for (char c : field) {
    if (c == ',' || c == '"' || c == '\n' || c == '\r') needs = true;
  }
  if (!needs) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string line(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += quote(fields[i]);
  }
  out += '\n';
  return out;
}

}  // namespace ts::driver::csv
