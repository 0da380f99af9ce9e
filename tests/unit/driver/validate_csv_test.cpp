// RFC 4180 reading and writing (sim/driver/csv.h): quoting, line numbers, malformed input.
#include <catch2/catch.hpp>

#include <string>

#include "sim/base/diagnostic.h"
#include "sim/driver/csv.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;
using driver::csv::parse;
using driver::csv::parse_table;

TEST_CASE("csv: quoted fields hold commas, doubled quotes and line breaks (RFC 4180 §2.5-2.7)") {
  const auto recs = parse("a,b,c\n1,\"x, y\",\"say \"\"hi\"\"\"\n2,\"two\nlines\",z\n3,,\n", "t.csv");
  REQUIRE(recs.size() == 4);
  CHECK(recs[1].fields == std::vector<std::string>{"1", "x, y", "say \"hi\""});
  CHECK(recs[2].fields == std::vector<std::string>{"2", "two\nlines", "z"});
  CHECK(recs[3].fields == std::vector<std::string>{"3", "", ""});
  // A record starts on the line of its first character; the line break inside the quoted field
  // moves the next record to line 5.
  CHECK(recs[1].line == 2);
  CHECK(recs[2].line == 3);
  CHECK(recs[3].line == 5);
}

TEST_CASE("csv: CRLF line ends, a byte order mark, blank lines and no final newline") {
  const auto recs = parse("\xEF\xBB\xBFh1,h2\r\n\r\nv1,\"v\r\n2\"\r\nlast,row", "t.csv");
  REQUIRE(recs.size() == 3);
  CHECK(recs[0].fields == std::vector<std::string>{"h1", "h2"});
  CHECK(recs[1].fields == std::vector<std::string>{"v1", "v\r\n2"});
  CHECK(recs[1].line == 3);
  CHECK(recs[2].fields == std::vector<std::string>{"last", "row"});
  CHECK(recs[2].line == 5);
}

TEST_CASE("csv: an empty quoted field is a record, an empty line is not") {
  const auto recs = parse("a\n\"\"\n\n", "t.csv");
  REQUIRE(recs.size() == 2);
  CHECK(recs[1].fields == std::vector<std::string>{""});
}

TEST_CASE("csv: malformed input is an InputError with file and line") {
  const auto unterminated = config::test::first_diagnostic([] { parse("a,b\n1,\"open\n2,3\n", "u.csv"); });
  CHECK(unterminated.file == "u.csv");
  CHECK(unterminated.line == 2);
  CHECK_THAT(unterminated.message, Catch::Contains("not terminated"));

  const auto stray = config::test::first_diagnostic([] { parse("a,b\n1,x\"y\n", "s.csv"); });
  CHECK(stray.line == 2);
  CHECK_THAT(stray.message, Catch::Contains("double quote"));

  const auto after = config::test::first_diagnostic([] { parse("a,b\n\n\n1,\"x\"y\n", "q.csv"); });
  CHECK(after.line == 4);
  CHECK_THAT(after.message, Catch::Contains("after the closing quote"));
}

TEST_CASE("csv: a table checks every record against the header") {
  const auto t = parse_table(" a , b ,c\n1,2,3\n,,\n4,5,6\n", "t.csv");
  CHECK(t.header == std::vector<std::string>{"a", "b", "c"});  // names are trimmed
  REQUIRE(t.rows.size() == 2);  // the all-empty padding line is dropped
  CHECK(t.column("c") == 2);
  CHECK(t.column("d") == -1);

  const auto short_row = config::test::first_diagnostic([] { parse_table("a,b,c\n1,2,3\n4,5\n", "t.csv"); });
  CHECK(short_row.line == 3);
  CHECK_THAT(short_row.message, Catch::Contains("record 2 has 2 fields; the header has 3"));

  const auto dup = config::test::first_diagnostic([] { parse_table("a,b,a\n", "t.csv"); });
  CHECK(dup.field == "a");
  const auto empty = config::test::first_diagnostic([] { parse_table("", "t.csv"); });
  CHECK_THAT(empty.message, Catch::Contains("empty file"));
}

TEST_CASE("csv: quote() writes what parse() reads back") {
  using driver::csv::line;
  using driver::csv::quote;
  CHECK(quote("plain") == "plain");
  CHECK(quote("a,b") == "\"a,b\"");
  CHECK(quote("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(quote(" padded") == "\" padded\"");
  const std::vector<std::string> fields = {"x", "a,b", "q\"q", "multi\nline", "", " s "};
  const auto back = parse(line(fields), "t.csv");
  REQUIRE(back.size() == 1);
  CHECK(back[0].fields == fields);
}
