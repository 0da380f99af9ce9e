// Published-runs CSV text built from rows given as column → cell maps, for the validate tests.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "sim/driver/csv.h"
#include "sim/driver/validate.h"

namespace ts::test {

using Row = std::map<std::string, std::string>;

// A CSV with every required column but `drop`, plus an extra column the reader must ignore; one
// record per row, absent keys empty.
inline std::string runs_csv(const std::vector<Row>& rows, const std::string& drop = "") {
  std::vector<std::string> header;
  for (const auto& c : driver::published_run_columns()) {
    if (c != drop) header.push_back(c);
  }
  header.push_back("extra_column");
  std::string text = driver::csv::line(header);
  for (const auto& r : rows) {
    std::vector<std::string> f;
    for (const auto& h : header) {
      auto it = r.find(h);
      f.push_back(it == r.end() ? "" : it->second);
    }
    text += driver::csv::line(f);
  }
  return text;
}

// The one run a single row parses to.
inline driver::PublishedRun parse_row(const Row& row) {
  const auto runs = driver::parse_published_runs(runs_csv({row}), "rows.csv");
  REQUIRE(runs.size() == 1);
  return runs[0];
}

}  // namespace ts::test
