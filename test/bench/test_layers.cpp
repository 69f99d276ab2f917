// Every layer type runs on the CPU with tiny dims and gives finite, positive
// forward/backward times; failing configs become "oom"/"error" rows and the
// campaign goes on.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "test_util.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "scaledl/bench/bench.hpp"
#include "scaledl/core/error.hpp"

using namespace scaledl;
using scaledl::test::error_of;

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
      {LayerType::Embedding, {16, 100, 32}},
      {LayerType::LayerNorm, {16, 32}},
      {LayerType::RMSNorm, {16, 32}},
      {LayerType::Linear, {16, 32, 48, 1}},
      {LayerType::BMM, {2, 8, 16, 8}},
      {LayerType::Attention, {1, 2, 8, 8, 16}},
      {LayerType::Softmax, {16, 32}},
      {LayerType::Dropout, {512}},
      {LayerType::GELU, {512}},
      {LayerType::ReLU, {512}},
      {LayerType::SiLU, {512}},
      {LayerType::Add, {512}},
      {LayerType::Mul, {512}},
      {LayerType::Conv2dPatch, {1, 3, 16, 32, 8}},
      {LayerType::CrossEntropy, {16, 50}},
      {LayerType::Optimizer, {1000, 2}},
      {LayerType::Pointwise, {512, 0}},
      {LayerType::FlashAttention, {1, 4, 2, 8, 8, 16, 16, 1}},
  };
  return t;
}

std::string temp_db(const std::string& name) {
  return scaledl::test::fresh_store_path(name);
}

}  // namespace

TEST(LayerBench, EveryLayerTypeIsRegistered) {
  auto reg = registered_layer_benches();
  EXPECT_EQ(reg.size(), static_cast<size_t>(kLayerTypeCount));
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
  EXPECT_EQ(
      classify([] { throw std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB"); }).status,
      "oom");
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

static LayerMeasurement pass_row(const std::string& status, double fwd_ms, double cv = 0.01) {
  LayerMeasurement m;
  m.campaign = "p";
  m.type = LayerType::ReLU;
  m.dims = {4096};
  m.device = "cpu:x";
  m.status = status;
  m.reason = status == "ok" ? "" : status + " reason";
  if (std::isfinite(fwd_ms)) m.fwd = {fwd_ms, 0.9 * fwd_ms, 1.1 * fwd_ms, cv, 10};
  return m;
}

TEST(LayerCampaign, PassesCombineIntoOneRowByTheirMedian) {
  // Most passes ok: the ok passes' median of medians, the widest p10 / p90, the sum of n.
  LayerMeasurement m =
      combine_layer_passes({pass_row("ok", 1.0), pass_row("unstable", 9.0, 0.5), pass_row("ok", 2.0)});
  EXPECT_EQ(m.status, "ok");
  EXPECT_DOUBLE_EQ(m.fwd.median_ms, 1.5);  // the unstable pass is left out
  EXPECT_DOUBLE_EQ(m.fwd.p10_ms, 0.9);
  EXPECT_DOUBLE_EQ(m.fwd.p90_ms, 2.2);
  EXPECT_EQ(m.fwd.n, 20);
  EXPECT_EQ(m.bwd.n, 0);  // no pass timed a backward
  EXPECT_NE(m.reason.find("2 of 3 passes ok; fwd medians spread 100.0 %"), std::string::npos) << m.reason;
  // Most passes unstable: unstable, from all passes.
  m = combine_layer_passes({pass_row("unstable", 1.0), pass_row("unstable", 3.0), pass_row("ok", 2.0)});
  EXPECT_EQ(m.status, "unstable");
  EXPECT_DOUBLE_EQ(m.fwd.median_ms, 2.0);
  EXPECT_NE(m.reason.find("2 of 3 passes unstable (unstable reason)"), std::string::npos) << m.reason;
  // A failed pass fails the row.
  m = combine_layer_passes({pass_row("ok", 1.0), pass_row("oom", NAN)});
  EXPECT_EQ(m.status, "oom");
  EXPECT_EQ(m.reason, "pass 2: oom reason");
  // Passes of different configs, or none, are refused.
  LayerMeasurement other = pass_row("ok", 1.0);
  other.dims = {8192};
  EXPECT_NE(error_of([&] {
              combine_layer_passes({pass_row("ok", 1.0), other});
            }).find("passes of different configs"),
            std::string::npos);
  EXPECT_THROW(combine_layer_passes({}), Error);
}

TEST(LayerCampaign, SeveralPassesResumeMidwayAndKeepEachConfigsMedian) {
  const std::string db = temp_db("campaign_passes.sqlite");
  Store store(db);
  std::vector<LayerConfig> cs;
  cs.push_back({LayerType::ReLU, {4096}, DType::FP32});
  cs.push_back({LayerType::Linear, {int64_t(1) << 27, int64_t(1) << 20, 8, 0}, DType::FP32});  // 512 TiB: oom
  cs.push_back({LayerType::Add, {4096}, DType::FP32});
  LayerCampaignOptions o;
  o.campaign = "p";
  o.timing = fast();
  o.timing.warmup_min = 0;     // no settling test and
  o.timing.unstable_cv = 1e9;  // no cv limit: every timed pass is ok, so which passes count is known
  o.full_probe = false;
  o.passes = 0;
  EXPECT_NE(error_of([&] { run_layer_campaign(cs, store, o); }).find("--passes=0 must be in [1, 100]"),
            std::string::npos);
  EXPECT_EQ(store.layers(std::nullopt, "", false).size(), 0u);
  // A campaign stopped after the ReLU's first pass, which ran during a slow spell (1 s).
  o.passes = 1;
  o.campaign = "probe-only";
  run_layer_campaign({}, store, o);  // stores the device record
  const std::string dev = store.devices().at(0).key();
  LayerMeasurement slow = pass_row("ok", 1000.0);
  slow.device = dev;
  ASSERT_TRUE(store.put_layer_pass(slow, 1));
  EXPECT_FALSE(store.put_layer_pass(slow, 1));  // one row per (campaign, config, device, pass)
  o.campaign = "p";
  o.passes = 3;
  auto s = run_layer_campaign(cs, store, o);
  EXPECT_EQ(s.ok + s.unstable, 2u);
  EXPECT_EQ(s.oom, 1u);
  const auto passes = store.layer_passes("p", dev);
  const std::string relu = cs[0].key(), lin = cs[1].key(), add = cs[2].key();
  ASSERT_EQ(passes.at(relu).size(), 3u);
  EXPECT_DOUBLE_EQ(passes.at(relu).at(1).fwd.median_ms, 1000.0);  // resumed: pass 1 not timed again
  EXPECT_EQ(passes.at(lin).size(), 1u);                           // failed in pass 1: not timed again
  ASSERT_EQ(passes.at(add).size(), 3u);
  std::map<std::string, LayerMeasurement> rows;
  for (const auto& r : store.layers(std::nullopt, dev, false)) rows[layer_key(r.type, r.dims, r.dtype)] = r;
  ASSERT_EQ(rows.size(), 3u);
  // The ReLU's slow pass is outvoted: its row is the faster of the two other passes.
  const double r2 = passes.at(relu).at(2).fwd.median_ms, r3 = passes.at(relu).at(3).fwd.median_ms;
  EXPECT_LT(std::max(r2, r3), 100.0);
  EXPECT_DOUBLE_EQ(rows.at(relu).fwd.median_ms, std::max(r2, r3));
  EXPECT_DOUBLE_EQ(rows.at(relu).fwd.p90_ms, 1100.0);  // the spread stays visible
  std::vector<double> a;
  for (int p = 1; p <= 3; ++p) a.push_back(passes.at(add).at(p).fwd.median_ms);
  std::sort(a.begin(), a.end());
  EXPECT_DOUBLE_EQ(rows.at(add).fwd.median_ms, a[1]);
  EXPECT_EQ(rows.at(add).fwd.n, passes.at(add).at(1).fwd.n * 3);
  EXPECT_EQ(rows.at(lin).status, "oom");
  EXPECT_EQ(rows.at(lin).reason.rfind("pass 1: ", 0), 0u) << rows.at(lin).reason;
  // Rerun: nothing timed, nothing duplicated.
  auto again = run_layer_campaign(cs, store, o);
  EXPECT_EQ(again.skipped, 3u);
  EXPECT_EQ(store.layers(std::nullopt, dev, false).size(), 3u);
  EXPECT_EQ(store.layer_passes("p", dev).at(add).size(), 3u);
  EXPECT_EQ(store.info()["counts"]["layer_passes"], 7);  // `db info` counts them
}

TEST(LayerCampaign, DamagedPassRowsAreNamedAndNothingIsWritten) {
  // A pass row altered outside ScaleDL (dims that are no JSON array, a pass of 0):
  // resuming the campaign names the row, and no layers row is written.
  for (const std::string damage : {"dims='abc'", "pass=0"}) {
    Store store(temp_db("campaign_passes_damaged.sqlite"));
    LayerCampaignOptions o;
    o.campaign = "probe-only";
    o.full_probe = false;
    o.timing = fast();
    run_layer_campaign({}, store, o);
    const std::string dev = store.devices().at(0).key();
    LayerMeasurement m = pass_row("ok", 1.0);
    m.device = dev;
    ASSERT_TRUE(store.put_layer_pass(m, 1));
    const std::string q = "UPDATE layer_passes SET " + damage;
    ASSERT_EQ(sqlite3_exec(store.handle(), q.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    o.campaign = "p";
    o.passes = 2;
    const std::string e = error_of([&] {
      run_layer_campaign({{LayerType::ReLU, {4096}, DType::FP32}}, store, o);
    });
    EXPECT_NE(e.find("layer_passes row 1"), std::string::npos) << damage << ": " << e;
    EXPECT_NE(e.find(damage == "pass=0" ? "pass=0 must be >= 1" : "dims"), std::string::npos) << e;
    EXPECT_EQ(store.layers(std::nullopt, "", /*ok_only=*/false).size(), 0u);
  }
}
