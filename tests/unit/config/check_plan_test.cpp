// check_plan: each rule of a parallel plan against model, cluster and GPU count, naming its flag.
#include <catch2/catch.hpp>

#include "sim/config/loader.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::find_field;

// llama3-70b on 64 H100s: tp 8 · pp 4 · dp 2, 32 micro-batches of 1 sequence per pipeline.
struct Fixture {
  ir::ModelSpec model = load_model("llama3-70b");
  Cluster cluster = load_cluster("dgx-h100");
  std::int64_t gpus = 64;
  parallel::ParallelPlan plan = [] {
    parallel::ParallelPlan p;
    p.tp = 8;
    p.pp = 4;
    p.dp = 2;
    p.micro_batch = 1;
    p.global_batch = 64;
    p.seq_len = 8192;
    return p;
  }();

  std::vector<Diagnostic> check() const { return check_plan(plan, model, cluster, gpus); }
};

// The only diagnostics of `ds` are for `flag`, and there is at least one; returns the first.
Diagnostic only(const std::vector<Diagnostic>& ds, std::string_view flag) {
  INFO(test::dump(ds));
  REQUIRE_FALSE(ds.empty());
  for (const auto& d : ds) {
    CHECK(d.field == flag);
    CHECK(d.file.empty());
  }
  return ds.front();
}

TEST_CASE("the base plan is valid") {
  Fixture f;
  const auto ds = f.check();
  INFO(test::dump(ds));
  CHECK(ds.empty());
  CHECK_NOTHROW(make_scenario(f.model, f.cluster, f.gpus, f.plan));
}

TEST_CASE("context parallelism needs flash attention") {
  Fixture f;
  f.plan.flash_attention = false;
  CHECK(f.check().empty());
  f.plan.tp = 4;
  f.plan.cp = 2;
  const auto d = only(f.check(), "--unfused-attention");
  CHECK(d.message.find("cp 2") != std::string::npos);
}

TEST_CASE("sizes must be positive, and zero sizes do not break the other rules") {
  Fixture f;
  f.plan.tp = 0;
  f.plan.micro_batch = -1;
  f.plan.mst_chunks = 0;
  f.gpus = 0;
  const auto ds = f.check();
  INFO(test::dump(ds));
  CHECK(find_field(ds, "--tp") != nullptr);
  CHECK(find_field(ds, "--micro-batch") != nullptr);
  CHECK(find_field(ds, "--mst-chunks") != nullptr);
  CHECK(find_field(ds, "--gpus") != nullptr);
  CHECK(find_field(ds, "--tp")->message == "must be > 0 (got 0)");
}

TEST_CASE("plan rule --tp must divide the attention heads") {
  Fixture f;
  f.plan.tp = 3;  // 64 heads
  f.plan.dp = 1;
  f.gpus = 12 * 8;  // keep the GPU rules quiet: 3·4·1·1 = 12 is not what we test
  f.plan.pp = 32;
  const auto ds = f.check();
  INFO(test::dump(ds));
  const auto* d = find_field(ds, "--tp");
  REQUIRE(d != nullptr);
  CHECK(d->message.find("attention heads") != std::string::npos);
}

TEST_CASE("plan rule --tp and grouped-query KV heads") {
  Fixture f;
  SECTION("tp above the KV heads is allowed when a multiple of them (KV heads replicated)") {
    f.plan.tp = 16;  // llama3-70b: 8 KV heads, each on 2 ranks
    f.plan.dp = 1;
    CHECK(f.check().empty());
  }
  SECTION("tp above the KV heads but not a multiple") {
    f.model.num_heads = 48;
    f.model.num_kv_heads = 8;
    f.model.hidden = 48 * 128;
    f.model.ffn_hidden = 12 * 1024;
    f.plan.tp = 12;
    f.plan.pp = 1;
    f.plan.dp = 1;
    f.gpus = 12;
    f.cluster.cluster.scale_up.gpus_per_domain = f.cluster.cluster.host.gpus_per_host = 12;
    const auto d = only(f.check(), "--tp");
    CHECK(d.message.find("key/value heads") != std::string::npos);
  }
  SECTION("tp below the KV heads must divide them") {
    f.model.num_heads = 24;
    f.model.num_kv_heads = 6;
    f.model.hidden = 24 * 128;
    f.plan.tp = 4;
    f.plan.pp = 4;
    f.plan.dp = 4;
    const auto d = only(f.check(), "--tp");
    CHECK(d.message.find("key/value heads (" + f.model.name + " has 6)") != std::string::npos);
  }
}

TEST_CASE("plan rule --tp must divide ffn_hidden, the vocabulary is padded, never rejected") {
  Fixture f;
  f.model.ffn_hidden = 1001;
  const auto d = only(f.check(), "--tp");
  CHECK(d.message.find("ffn_hidden") != std::string::npos);

  Fixture g;
  g.model.vocab = 50257;  // GPT-2 BPE, not divisible by 8: Megatron pads it
  CHECK(g.check().empty());
}

TEST_CASE("plan rule --pp must divide the layers unless --pp-layers is given") {
  Fixture f;
  f.plan.pp = 3;  // 80 layers
  f.plan.dp = 1;
  f.gpus = 24;
  const auto d = only(f.check(), "--pp");
  CHECK(d.message.find("--pp-layers") != std::string::npos);

  f.plan.pp_layers = {27, 27, 26};
  CHECK(f.check().empty());
}

TEST_CASE("plan rule --pp-layers: one positive entry per stage, summing to the layers") {
  Fixture f;
  SECTION("count") {
    f.plan.pp_layers = {40, 40};
    const auto d = only(f.check(), "--pp-layers");
    CHECK(d.message.find("has 2 entries") != std::string::npos);
  }
  SECTION("sum") {
    f.plan.pp_layers = {20, 20, 20, 21};
    const auto d = only(f.check(), "--pp-layers");
    CHECK(d.message.find("sum to 81") != std::string::npos);
  }
  SECTION("positive") {
    f.plan.pp_layers = {0, 40, 20, 20};
    only(f.check(), "--pp-layers");
  }
  SECTION("interleaved: pp·vpp entries") {
    f.plan.schedule = parallel::Schedule::kInterleaved;
    f.plan.vpp = 2;
    f.plan.pp_layers = {20, 20, 20, 20};
    const auto d = only(f.check(), "--pp-layers");
    CHECK(d.message.find("pp·vpp") != std::string::npos);
    f.plan.pp_layers = {10, 10, 10, 10, 10, 10, 10, 10};
    CHECK(f.check().empty());
  }
}

TEST_CASE("tp·pp·dp·cp must equal --gpus") {
  Fixture f;
  f.gpus = 128;
  const auto d = only(f.check(), "--gpus");
  CHECK(d.message == "tp·pp·dp·cp = 8·4·2·1 = 64 must equal the number of GPUs (128)");
}

TEST_CASE("plan rule --gpus: whole nodes beyond one node, any count within one") {
  Fixture f;
  f.plan = parallel::ParallelPlan{};
  f.plan.tp = 4;
  f.plan.dp = 3;
  f.plan.global_batch = 3;
  f.gpus = 12;  // 1.5 DGX nodes
  const auto d = only(f.check(), "--gpus");
  CHECK(d.message.find("whole nodes") != std::string::npos);

  f.plan.dp = 1;
  f.plan.global_batch = 1;
  f.gpus = 4;  // half a node
  CHECK(f.check().empty());
}

TEST_CASE("plan rule --global-batch must be a multiple of dp·micro_batch") {
  Fixture f;
  f.plan.micro_batch = 3;
  const auto d = only(f.check(), "--global-batch");
  CHECK(d.message == "must be a multiple of dp·micro_batch = 2·3 = 6 (got 64)");
}

TEST_CASE("context parallelism and the sequence length") {
  Fixture f;
  f.plan.cp = 2;
  f.plan.dp = 1;
  SECTION("ring: seq divisible by 2·cp for causal load balancing") {
    f.plan.seq_len = 8190;  // divisible by 2, not by 4
    const auto d = only(f.check(), "--seq");
    CHECK(d.message.find("2·cp = 4") != std::string::npos);
    f.plan.seq_len = 8188;
    CHECK(f.check().empty());
  }
  SECTION("all-gather splits the same way") {
    f.plan.cp_algo = parallel::CpAlgo::kAllGather;
    f.plan.seq_len = 8190;
    only(f.check(), "--seq");
  }
  SECTION("ulysses: seq divisible by cp, heads per tp rank divisible by cp") {
    f.plan.cp_algo = parallel::CpAlgo::kUlysses;
    f.plan.seq_len = 8190;  // divisible by cp = 2
    CHECK(f.check().empty());
    f.plan.cp = 16;  // 64/8 = 8 heads per tp rank
    f.plan.pp = 1;
    f.plan.seq_len = 8192;
    f.gpus = 128;
    f.plan.global_batch = 64;
    const auto d = only(f.check(), "--cp");
    CHECK(d.message.find("heads per tp rank") != std::string::npos);
  }
}

TEST_CASE("plan rule --sequence-parallel splits each cp rank's tokens over tp") {
  Fixture f;
  f.plan.sequence_parallel = true;
  CHECK(f.check().empty());
  f.plan.seq_len = 8196;  // not divisible by 8
  only(f.check(), "--sequence-parallel");
}

TEST_CASE("plan rule --seq may not exceed a learned position table") {
  Fixture f;
  f.model = load_model("gpt3-175b");
  f.plan.seq_len = 4096;
  const auto d = only(f.check(), "--seq");
  CHECK(d.message.find("max_seq_len 2048") != std::string::npos);
  f.plan.seq_len = 2048;
  CHECK(f.check().empty());
  // Rotary positions have no table: llama3-70b at 32k is fine.
  Fixture g;
  g.plan.seq_len = 32768;
  CHECK(g.check().empty());
}

TEST_CASE("virtual stages and the interleaved schedule") {
  Fixture f;
  SECTION("vpp > 1 needs the interleaved schedule") {
    f.plan.vpp = 2;
    const auto d = only(f.check(), "--vpp");
    CHECK(d.message.find("interleaved") != std::string::npos);
    f.plan.schedule = parallel::Schedule::kInterleaved;
    CHECK(f.check().empty());
  }
  SECTION("interleaved needs vpp > 1") {
    f.plan.schedule = parallel::Schedule::kInterleaved;
    only(f.check(), "--schedule");
  }
  SECTION("layers divisible by pp·vpp") {
    f.plan.schedule = parallel::Schedule::kInterleaved;
    f.plan.vpp = 3;  // 80 % 12 != 0, 80 % 4 == 0
    const auto d = only(f.check(), "--vpp");
    CHECK(d.message.find("pp·vpp = 4·3 = 12") != std::string::npos);
  }
  SECTION("micro-batches a multiple of pp (Megatron-LM)") {
    f.plan.schedule = parallel::Schedule::kInterleaved;
    f.plan.vpp = 2;
    f.plan.global_batch = 36;  // 18 micro-batches per pipeline, pp = 4
    const auto d = only(f.check(), "--schedule");
    CHECK(d.message.find("= 18) to be a multiple of pp (4)") != std::string::npos);
  }
  SECTION("interleaved needs pp >= 2") {
    f.plan.schedule = parallel::Schedule::kInterleaved;
    f.plan.vpp = 2;
    f.plan.pp = 1;
    f.plan.dp = 8;
    const auto d = only(f.check(), "--schedule");
    CHECK(d.message.find("--pp >= 2") != std::string::npos);
  }
}

TEST_CASE("plan rule --dtype fp8 needs FP8 tensor cores") {
  Fixture f;
  f.plan.dtype = ir::Dtype::kFp8;
  CHECK(f.check().empty());  // H100
  f.cluster = load_cluster("dgx-a100");
  const auto d = only(f.check(), "--dtype");
  CHECK(d.message.find("A100-SXM4-80GB") != std::string::npos);
}

TEST_CASE("plan rule --zero stage is 0..3") {
  Fixture f;
  f.plan.zero_stage = 4;
  only(f.check(), "--zero");
  f.plan.zero_stage = -1;
  only(f.check(), "--zero");
  f.plan.zero_stage = 3;
  CHECK(f.check().empty());
}

TEST_CASE("plan rule --mst-chunks at least 1 and at most the tokens of a cp rank") {
  Fixture f;
  f.plan.mst_chunks = 8;
  CHECK(f.check().empty());
  f.plan.mst_chunks = 8193;
  only(f.check(), "--mst-chunks");
}

TEST_CASE("plan rule --recompute-layers counts layers of full recompute") {
  Fixture f;
  f.plan.recompute_layers = 2;
  const auto d = only(f.check(), "--recompute-layers");
  CHECK(d.message.find("--recompute full") != std::string::npos);
  f.plan.recompute = parallel::Recompute::kSelective;
  only(f.check(), "--recompute-layers");
  f.plan.recompute = parallel::Recompute::kFull;
  CHECK(f.check().empty());
  f.plan.recompute_layers = 100;  // more than a stage holds: every layer
  CHECK(f.check().empty());
  f.plan.recompute_layers = -1;
  only(f.check(), "--recompute-layers");
}

TEST_CASE("plan rule --zero-shard-group: ZeRO-3 groups dividing dp·cp") {
  Fixture f;  // dp 2
  f.plan.zero_shard_group = 2;
  const auto d = only(f.check(), "--zero-shard-group");
  CHECK(d.message.find("--zero 3") != std::string::npos);
  f.plan.zero_stage = 3;
  CHECK(f.check().empty());
  f.plan.zero_shard_group = 4;
  only(f.check(), "--zero-shard-group");
  f.plan.zero_shard_group = -1;
  only(f.check(), "--zero-shard-group");
}

TEST_CASE("plan rule --order is a permutation of tp, cp, dp, pp") {
  Fixture f;
  using parallel::Axis;
  f.plan.order = {Axis::kTp, Axis::kTp, Axis::kDp, Axis::kPp};
  const auto d = only(f.check(), "--order");
  CHECK(d.message.find("'tp,tp,dp,pp'") != std::string::npos);
  f.plan.order = {Axis::kTp, Axis::kDp, Axis::kPp};
  only(f.check(), "--order");
  f.plan.order = {Axis::kPp, Axis::kDp, Axis::kCp, Axis::kTp};
  CHECK(f.check().empty());
}

TEST_CASE("plan rule --optimizer-in-backward needs one micro-batch per iteration") {
  Fixture f;
  f.plan.optimizer_in_backward = true;
  only(f.check(), "--optimizer-in-backward");
  f.plan.global_batch = 2;  // dp·micro_batch
  CHECK(f.check().empty());
}

TEST_CASE("tp larger than a node is allowed") {
  Fixture f;
  f.plan.tp = 16;
  f.plan.dp = 1;
  CHECK(f.check().empty());
}

TEST_CASE("all problems of a plan are reported together") {
  Fixture f;
  f.plan.tp = 3;
  f.plan.zero_stage = 5;
  f.plan.order = {parallel::Axis::kTp};
  f.plan.micro_batch = 5;
  const auto ds = f.check();
  INFO(test::dump(ds));
  CHECK(find_field(ds, "--tp") != nullptr);
  CHECK(find_field(ds, "--zero") != nullptr);
  CHECK(find_field(ds, "--order") != nullptr);
  CHECK(find_field(ds, "--gpus") != nullptr);
  CHECK(find_field(ds, "--global-batch") != nullptr);
  const auto thrown = test::diagnostics_of([&] { make_scenario(f.model, f.cluster, f.gpus, f.plan); });
  CHECK(thrown.size() == ds.size());
}

TEST_CASE("the zero-bubble and DualPipeV schedules") {
  Fixture f;  // llama3-70b: 80 layers, pp 4, 32 micro-batches per pipeline
  SECTION("zb-h1 takes pp stages, like 1F1B") {
    f.plan.schedule = parallel::Schedule::kZbH1;
    CHECK(f.check().empty());
    f.plan.pp_layers = {19, 21, 21, 19};
    CHECK(f.check().empty());
  }
  SECTION("dualpipev: 2·pp stages in a V") {
    f.plan.schedule = parallel::Schedule::kDualPipeV;
    CHECK(f.check().empty());
    f.plan.pp_layers = {20, 20, 20, 20};
    const auto d = only(f.check(), "--pp-layers");
    CHECK(d.message.find("2·pp = 8") != std::string::npos);
    f.plan.pp_layers = {9, 10, 10, 11, 11, 10, 10, 9};
    CHECK(f.check().empty());
  }
  SECTION("dualpipev: layers divisible by 2·pp") {
    f.plan.schedule = parallel::Schedule::kDualPipeV;
    f.model.num_layers = 84;  // 84 % 4 == 0, 84 % 8 != 0
    only(f.check(), "--pp");
  }
  SECTION("dualpipev: at least 2·pp micro-batches (dualpipev.py)") {
    f.plan.schedule = parallel::Schedule::kDualPipeV;
    f.plan.global_batch = 14;  // 7 micro-batches per pipeline, pp = 4
    const auto d = only(f.check(), "--schedule");
    CHECK(d.message.find("at least 2·pp = 8 micro-batches") != std::string::npos);
  }
  SECTION("dualpipev needs pp >= 2") {
    f.plan.schedule = parallel::Schedule::kDualPipeV;
    f.plan.pp = 1;
    f.plan.dp = 8;
    f.plan.global_batch = 64;
    only(f.check(), "--schedule");
  }
}

}  // namespace
}  // namespace ts::config
