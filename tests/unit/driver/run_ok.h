// A simulation that the test needs to succeed: its result, after requiring an ok status.
#pragma once

#include <catch2/catch.hpp>

#include "sim/driver/simulate.h"

namespace ts::testing {

inline driver::RunResult run_ok(const config::Scenario& sc, const driver::RunOptions& options = {}) {
  driver::RunResult r = driver::simulate(sc, options);
  REQUIRE(r.status == driver::Status::kOk);
  return r;
}

}  // namespace ts::testing
