// Spellings shared by flags and files: parsing, errors naming the flag, and round trips.
#include <catch2/catch.hpp>

#include "sim/config/names.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

TEST_CASE("every spelling parses back to its value") {
  for (auto s : {parallel::Schedule::kGpipe, parallel::Schedule::k1F1B, parallel::Schedule::kInterleaved}) {
    CHECK(try_parse_schedule(name(s)) == s);
  }
  for (auto r : {parallel::Recompute::kNone, parallel::Recompute::kSelective, parallel::Recompute::kSelectiveOp,
                 parallel::Recompute::kFull}) {
    CHECK(try_parse_recompute(name(r)) == r);
  }
  for (auto a : {parallel::CpAlgo::kRing, parallel::CpAlgo::kAllGather, parallel::CpAlgo::kUlysses}) {
    CHECK(try_parse_cp_algo(name(a)) == a);
  }
  for (auto d : {ir::Dtype::kBf16, ir::Dtype::kFp16, ir::Dtype::kFp8}) {
    CHECK(try_parse_dtype(name(d)) == d);
  }
  for (auto g : {parallel::GradReduce::kFp32, parallel::GradReduce::kBf16}) {
    CHECK(try_parse_grad_reduce(name(g)) == g);
  }
  CHECK(grad_reduce_choices() == "fp32|bf16");
  for (auto e : {parallel::Elementwise::kFused, parallel::Elementwise::kEager}) {
    CHECK(try_parse_elementwise(name(e)) == e);
  }
  CHECK(elementwise_choices() == "fused|eager");
  CHECK(name(ir::Dtype::kFp32) == "fp32");
  CHECK_FALSE(try_parse_dtype("fp32").has_value());  // not a training precision
  CHECK(name(parallel::Schedule::k1F1B) == "1f1b");
  CHECK(schedule_choices() == "gpipe|1f1b|interleaved|zb-h1|dualpipev|zb-v");
}

TEST_CASE("flag parsers name the flag and list the choices") {
  const auto ds = test::diagnostics_of([] { parse_schedule("zigzag", "--schedule"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "--schedule");
  CHECK(ds[0].to_string() ==
        "--schedule: unknown value 'zigzag' (expected gpipe|1f1b|interleaved|zb-h1|dualpipev|zb-v)");
  CHECK(parse_recompute("full", "--recompute") == parallel::Recompute::kFull);
  CHECK(parse_optimizer_states("bf16", "--optimizer-states") == parallel::OptimizerStates::kBf16);
  CHECK(parse_optimizer_states("none", "--optimizer-states") == parallel::OptimizerStates::kNone);
  CHECK(parse_cp_algo("ulysses", "--cp-algo") == parallel::CpAlgo::kUlysses);
  CHECK(parse_dtype("fp8", "--dtype") == ir::Dtype::kFp8);
  const auto bad = test::diagnostics_of([] { parse_elementwise("compiled", "--elementwise"); });
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].to_string() == "--elementwise: unknown value 'compiled' (expected fused|eager)");
}

TEST_CASE("order and integer lists") {
  using parallel::Axis;
  CHECK(parse_order("pp, dp,cp,tp", "--order") == std::vector<Axis>{Axis::kPp, Axis::kDp, Axis::kCp, Axis::kTp});
  CHECK(format_order({Axis::kTp, Axis::kCp, Axis::kDp, Axis::kPp}) == "tp,cp,dp,pp");
  const auto ds = test::diagnostics_of([] { parse_order("tp,xp", "--order"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "--order");
  CHECK(parse_int_list("15,16, 16,15", "--pp-layers") == std::vector<std::int64_t>{15, 16, 16, 15});
  CHECK(parse_int_list("-1", "--pp-layers") == std::vector<std::int64_t>{-1});
  const auto bad = test::diagnostics_of([] { parse_int_list("15,,16", "--pp-layers"); });
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].field == "--pp-layers");
  test::diagnostics_of([] { parse_int_list("4x", "--pp-layers"); });
}

}  // namespace
}  // namespace ts::config
