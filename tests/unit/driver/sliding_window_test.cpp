// Sliding-window attention (models' sliding_window block): the banded pair count, the kernel's
// skipped blocks, which layers are banded, bad fields, and the lowering of GPT-OSS-120B.
#include <catch2/catch.hpp>

#include <string>

#include "sim/compute/kernel_features.h"
#include "sim/config/loader.h"
#include "sim/driver/simulate.h"
#include "sim/ir/model_graph.h"
#include "sim/parallel/lowering.h"
#include "tests/unit/config/config_test_util.h"
#include "tests/unit/driver/moe_scenario.h"

using namespace ts;

TEST_CASE("sliding window: query-key pairs and computed blocks") {
  // No window reached: the causal triangle s(s+1)/2; a window of 1: one key per query.
  CHECK(ir::banded_pairs(4096, 4096, 4096) == 4096.0 * 4097.0 / 2.0);
  CHECK(ir::banded_pairs(4096, 4096, 1 << 20) == 4096.0 * 4097.0 / 2.0);
  CHECK(ir::banded_pairs(4096, 4096, 1) == 4096.0);
  // 128 keys: the first 128 queries see 1..128 keys, the other 3,968 see 128.
  CHECK(ir::banded_pairs(4096, 4096, 128) == 128.0 * 129.0 / 2.0 + 128.0 * 3968.0);
  // Queries at the end of a longer key range (bottom-right): every one sees the full window.
  CHECK(ir::banded_pairs(1024, 4096, 128) == 128.0 * 1024.0);

  compute::AttentionShape s;
  s.batch = 1;
  s.heads = 64;
  s.kv_heads = 8;
  s.seq_q = s.seq_kv = 4096;
  s.head_dim = 64;
  const double full = compute::detail::attention_blocks(s, 128);
  CHECK(full == 32.0 * 33.0 / 2.0);
  s.window = 128;  // 127 keys back reach one block before the diagonal block
  CHECK(compute::detail::attention_blocks(s, 128) == 1.0 + 2.0 * 31.0);
  s.window = 129;  // 128 keys back from a block's first row: still the block before
  CHECK(compute::detail::attention_blocks(s, 128) == 1.0 + 2.0 * 31.0);
  s.window = 130;  // 129 keys back reach two blocks back
  CHECK(compute::detail::attention_blocks(s, 128) == 1.0 + 2.0 + 3.0 * 30.0);
  s.window = 4096;
  CHECK(compute::detail::attention_blocks(s, 128) == full);
  CHECK(s.flops().value() == Approx(4.0 * 64 * 64 * 4096.0 * 4097.0 / 2.0));
}

TEST_CASE("sliding window: GPT-OSS bands every other layer, bad fields named") {
  const ir::ModelSpec m = config::load_model("gpt-oss-120b");
  CHECK(m.attention_window(0) == 128);  // HF layer_types: sliding_attention first
  CHECK(m.attention_window(1) == 0);
  CHECK(m.attention_window(34) == 128);
  CHECK(m.attention_window(35) == 0);
  CHECK(config::load_model("llama3-8b").attention_window(0) == 0);

  config::test::TempDir dir;
  const std::string base(config::test::kValidModel);
  const auto all =
      config::load_model(dir.write("all.textproto", base + "sliding_window { tokens: 64 }\n"));
  CHECK(all.attention_window(0) == 64);
  CHECK(all.attention_window(1) == 64);
  for (const char* bad : {"sliding_window { tokens: 0 }\n", "sliding_window { full_every: 2 }\n",
                          "sliding_window { tokens: 64 full_every: -1 }\n"}) {
    INFO(bad);
    const auto path = dir.write("bad.textproto", base + bad);
    const auto ds = config::test::diagnostics_of([&] { config::load_model(path); });
    const bool named = config::test::find_field(ds, "sliding_window.tokens") != nullptr ||
                       config::test::find_field(ds, "sliding_window.full_every") != nullptr;
    CHECK(named);
  }
}

TEST_CASE("sliding window: banded layers cost less attention, the rest as before") {
  config::Scenario sc = testing::small_moe("gpt-oss-120b", 8, 1, 16, 4096);
  const parallel::ParallelPlan& p = sc.plan;
  parallel::LoweringOptions lo;
  const parallel::TaskGraph g = parallel::lower(sc.model, p, lo);
  // Per layer, the window of its forward attention core.
  std::int64_t window[4] = {-1, -1, -1, -1};
  for (const parallel::Task& t : g.tasks) {
    if (t.device != 0 || t.ops < 0 || t.part != parallel::Part::kAttention || t.layer < 0) continue;
    for (const ir::Op& op : g.op_lists[static_cast<std::size_t>(t.ops)]) {
      if (op.kind == ir::OpKind::kAttention) window[t.layer] = op.attn.window;
    }
  }
  CHECK(window[0] == 128);
  CHECK(window[1] == 0);
  CHECK(window[2] == 128);
  CHECK(window[3] == 0);

  config::Scenario full = sc;
  full.model.sliding_window = 0;
  const driver::RunResult banded = driver::simulate(sc, driver::RunOptions{});
  const driver::RunResult causal = driver::simulate(full, driver::RunOptions{});
  REQUIRE(banded.status == driver::Status::kOk);
  REQUIRE(causal.status == driver::Status::kOk);
  CHECK(banded.iteration_time_s < causal.iteration_time_s);
}
