// RFC 4180 CSV: reading records (quoted fields, embedded commas, quotes and newlines) with their line numbers, and writing fields.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ts::driver::csv {

// One record and the 1-based line on which it starts (a quoted field may span lines).
struct Record {
  int line = 0;
  std::vector<std::string> fields;
};

// Splits `text` into records (RFC 4180: fields separated by commas, records by CRLF or LF; a
// field in double quotes may hold commas, line breaks and doubled quotes ""). A UTF-8 byte
// order mark is skipped; lines that are entirely empty are skipped. Throws InputError naming
// `file` and the line for an unterminated quoted field or a character after a closing quote.
std::vector<Record> parse(std::string_view text, const std::string& file);

// A file with a header record: the header's field names, trimmed of surrounding spaces, and the
// data records, each checked to have exactly as many fields as the header (else InputError
// naming the file, line and record number); records whose fields are all empty (",,,") are
// dropped. An empty file or a header with a repeated or empty
// name is an InputError too.
struct Table {
  std::string file;
  std::vector<std::string> header;
  std::vector<Record> rows;
  // Index of `name` in the header, or -1.
  int column(std::string_view name) const;
};
Table read_table(const std::filesystem::path& path);
Table parse_table(std::string_view text, const std::string& file);

// One field as RFC 4180 writes it: quoted (inner quotes doubled) when it holds a comma, a quote,
// a line break or leading/trailing spaces; as is otherwise.
std::string quote(std::string_view field);
// Fields quoted and joined with commas, ending in "\n".
std::string line(const std::vector<std::string>& fields);

}  // namespace ts::driver::csv
