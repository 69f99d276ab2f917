// Every layer type runs on the CPU with tiny dims and gives finite, positive
// forward/backward times; failing configs become "oom"/"error" rows and the
// campaign goes on.
#include <gtest/gtest.h>

#include "test_util.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "scaledl/bench.hpp"
#include "scaledl/error.hpp"

using namespace scaledl;

namespace {

TimingOptions fast() {
  TimingOptions o;
  o.warmup_min = 1;
  o.warmup_max = 5;
  o.repeats = 3;
  o.min_sample_ms = 0.05;
  o.max_seconds = 5;
  return o;
}

/// Tiny dims of every type, in layer_info(type).dims order.
const std::map<LayerType, std::vector<int64_t>>& tiny() {
  static const std::map<LayerType, std::vector<int64_t>> t = {
      {LayerType::Embedding, {16, 100, 32}},      {LayerType::LayerNorm, {16, 32}},
      {LayerType::RMSNorm, {16, 32}},             {LayerType::Linear, {16, 32, 48, 1}},
      {LayerType::BMM, {2, 8, 16, 8}},            {LayerType::Attention, {1, 2, 8, 8, 16}},
      {LayerType::Softmax, {16, 32}},             {LayerType::Dropout, {512}},
      {LayerType::GELU, {512}},                   {LayerType::ReLU, {512}},
      {LayerType::SiLU, {512}},                   {LayerType::Add, {512}},
      {LayerType::Mul, {512}},                    {LayerType::Conv2dPatch, {1, 3, 16, 32, 8}},
      {LayerType::CrossEntropy, {16, 50}},        {LayerType::Optimizer, {1000, 2}},
      {LayerType::Pointwise, {512, 0}},
  };
  return t;
}

std::string temp_db(const std::string& name) { return scaledl::test::fresh_store_path(name); }

}  // namespace

TEST(LayerBench, EveryLayerTypeIsRegistered) {
  auto reg = registered_layer_benches();
  EXPECT_EQ(reg.size(), static_cast<size_t>(LayerType::Count));
  for (const auto& info : all_layer_infos()) {
    EXPECT_NO_THROW(make_layer_bench(info.type)) << info.name;
    EXPECT_TRUE(tiny().count(info.type)) << "no tiny dims for " << info.name;
  }
}

TEST(LayerBench, EveryTypeGivesFinitePositiveTimesOnCpu) {
  torch::Device cpu(torch::kCPU);
  for (const auto& [type, dims] : tiny()) {
    SCOPED_TRACE(layer_key(type, dims, DType::FP32));
    LayerTiming t = time_layer(type, dims, DType::FP32, cpu, fast());
    EXPECT_EQ(t.fwd.stats.n, 3);
    EXPECT_TRUE(std::isfinite(t.fwd.stats.median_ms));
    EXPECT_GT(t.fwd.stats.median_ms, 0);
    EXPECT_LE(t.fwd.stats.p10_ms, t.fwd.stats.median_ms);
    EXPECT_GE(t.fwd.stats.p90_ms, t.fwd.stats.median_ms);
    EXPECT_GE(t.fwd.launches, 1);
    EXPECT_EQ(t.has_bwd, layer_info(type).has_backward);
    if (t.has_bwd) {
      EXPECT_EQ(t.bwd.stats.n, 3);
      EXPECT_TRUE(std::isfinite(t.bwd.stats.median_ms));
      EXPECT_GT(t.bwd.stats.median_ms, 0);
    }
  }
}

TEST(LayerBench, BiggerLinearTakesLonger) {
  // A real measurement, not a constant: 64x the FLOP must cost clearly more.
  torch::Device cpu(torch::kCPU);
  auto o = fast();
  o.repeats = 5;
  double small = time_layer(LayerType::Linear, {16, 64, 64, 1}, DType::FP32, cpu, o).fwd.stats.median_ms;
  double big = time_layer(LayerType::Linear, {256, 256, 256, 1}, DType::FP32, cpu, o).fwd.stats.median_ms;
  EXPECT_GT(big, 4 * small) << "small " << small << " ms, big " << big << " ms";
}

TEST(LayerBench, InvalidDimsAreRejectedBeforeRunning) {
  torch::Device cpu(torch::kCPU);
  EXPECT_THROW(time_layer(LayerType::Linear, {16, 0, 8, 1}, DType::FP32, cpu, fast()), Error);
  EXPECT_THROW(time_layer(LayerType::Linear, {16, 8}, DType::FP32, cpu, fast()), Error);
}

TEST(LayerBench, FailuresAreClassified) {
  auto classify = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      return classify_current_exception();
    }
    return Failure{"none", ""};
  };
  EXPECT_EQ(classify([] { throw std::bad_alloc(); }).status, "oom");
  EXPECT_EQ(classify([] { throw std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB"); }).status, "oom");
  auto e = classify([] { throw std::runtime_error("mat1 and mat2 shapes cannot be multiplied\nmore"); });
  EXPECT_EQ(e.status, "error");
  EXPECT_EQ(e.reason, "mat1 and mat2 shapes cannot be multiplied");  // one line
  // A real allocation failure inside LibTorch: 2^46 floats = 256 TiB is more than the
  // 128 TiB x86-64 user address space, so it fails even where memory is overcommitted.
  auto big = classify([] { (void)torch::empty({int64_t(1) << 46}, torch::kFloat); });
  EXPECT_EQ(big.status, "oom") << big.reason;
}

TEST(LayerCampaign, FailingConfigIsRecordedAndTheCampaignGoesOn) {
  Store store(temp_db("campaign_oom.sqlite"));
  std::vector<LayerConfig> cs;
  cs.push_back({LayerType::ReLU, {256}, DType::FP32});
  // x alone is tokens*d_in*4 bytes = 512 TiB, beyond the 128 TiB x86-64 user address
  // space: the allocation throws even on a machine that overcommits memory.
  cs.push_back({LayerType::Linear, {int64_t(1) << 27, int64_t(1) << 20, 8, 0}, DType::FP32});
  cs.push_back({LayerType::Add, {256}, DType::FP32});
  LayerCampaignOptions o;
  o.campaign = "t";
  o.timing = fast();
  o.full_probe = false;
  auto s = run_layer_campaign(cs, store, o);
  EXPECT_EQ(s.total, 3u);
  EXPECT_EQ(s.oom, 1u);
  EXPECT_EQ(s.ok + s.unstable, 2u);
  auto rows = store.layers(std::nullopt, "", /*ok_only=*/false);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].status, "oom");
  EXPECT_FALSE(rows[1].reason.empty());
  EXPECT_TRUE(std::isnan(rows[1].fwd.median_ms));
  EXPECT_GT(rows[2].fwd.median_ms, 0);  // the config after the failure was measured
  EXPECT_GT(rows[0].env_id, 0);
  ASSERT_EQ(store.devices().size(), 1u);
  EXPECT_EQ(store.devices()[0].key(), s.device);

  // Rerun: everything is skipped, nothing duplicated.
  auto again = run_layer_campaign(cs, store, o);
  EXPECT_EQ(again.skipped, 3u);
  EXPECT_EQ(store.layers(std::nullopt, "", false).size(), 3u);
}

TEST(LayerCampaign, MemLimitRecordsOomWithoutRunning) {
  Store store(temp_db("campaign_memlimit.sqlite"));
  LayerCampaignOptions o;
  o.timing = fast();
  o.full_probe = false;
  o.mem_limit_gb = 0.001;  // 1 MB
  std::vector<LayerConfig> cs = {{LayerType::Linear, {512, 512, 512, 1}, DType::FP32}};
  auto s = run_layer_campaign(cs, store, o);
  EXPECT_EQ(s.oom, 1u);
  auto rows = store.layers(std::nullopt, "", false);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NE(rows[0].reason.find("--mem-limit-gb"), std::string::npos) << rows[0].reason;
}

TEST(LayerCampaign, BadOptionsAreRejected) {
  Store store(temp_db("campaign_badopt.sqlite"));
  std::vector<LayerConfig> cs = {{LayerType::ReLU, {256}, DType::FP32}};
  LayerCampaignOptions o;
  o.full_probe = false;
  o.device = "tpu";
  EXPECT_THROW(run_layer_campaign(cs, store, o), Error);
  o.device = "cpu";
  o.timing.repeats = 0;
  EXPECT_THROW(run_layer_campaign(cs, store, o), Error);
  EXPECT_EQ(store.layers(std::nullopt, "", false).size(), 0u);
}
