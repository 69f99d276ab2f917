#include <gtest/gtest.h>

#include "test_util.hpp"

#include <cstdio>
#include <fstream>

#include "scaledl/core/error.hpp"
#include "scaledl/io/store.hpp"

using namespace scaledl;

namespace {
std::string temp_path(const std::string& name) {
  return scaledl::test::fresh_store_path(name);
}

LayerMeasurement linear_row(int64_t tokens, double ms) {
  LayerMeasurement m;
  m.campaign = "c";
  m.type = LayerType::Linear;
  m.dims = {tokens, 64, 64, 1};
  m.device = "cpu:test";
  m.fwd = TimingStats::from_samples({ms, ms * 1.01, ms * 0.99});
  m.bwd = TimingStats::from_samples({2 * ms});
  return m;
}
}  // namespace

TEST(Store, InsertIsIdempotentPerKey) {
  Store s(temp_path("idem.sqlite"));
  EXPECT_TRUE(s.put_layer(linear_row(8, 1.0)));
  EXPECT_FALSE(s.put_layer(linear_row(8, 5.0)));  // same key: kept, not duplicated
  EXPECT_TRUE(s.put_layer(linear_row(16, 2.0)));
  auto rows = s.layers(LayerType::Linear);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].fwd.median_ms, 1.0);
  EXPECT_EQ(s.layer_keys("c", "cpu:test").size(), 2u);
  EXPECT_EQ(s.counts()["layers"], 2);
}

TEST(Store, BatchInsertAndReopen) {
  std::string p = temp_path("batch.sqlite");
  {
    Store s(p);
    std::vector<LayerMeasurement> v;
    for (int i = 1; i <= 100; ++i) v.push_back(linear_row(i, i * 0.1));
    EXPECT_EQ(s.put_layers(v), 100u);
    EXPECT_EQ(s.put_layers(v), 0u);
  }
  Store s(p);
  EXPECT_EQ(s.layers().size(), 100u);
}

TEST(Store, RejectsInvalidDimsWithoutWriting) {
  Store s(temp_path("bad.sqlite"));
  auto m = linear_row(8, 1.0);
  m.dims = {8, 0, 64, 1};
  EXPECT_THROW(s.put_layer(m), Error);
  std::vector<LayerMeasurement> v = {linear_row(1, 1.0), m};
  EXPECT_THROW(s.put_layers(v), Error);
  EXPECT_EQ(s.layers().size(), 0u);  // the batch rolled back as a whole
}

TEST(Store, RefusesAFileThatIsNotAStore) {
  std::string p = temp_path("garbage.sqlite");
  { std::ofstream(p) << "this is not a database, just some text that is long enough............"; }
  try {
    Store s(p);
    FAIL() << "opened a garbage file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Store, DeviceRoundTrip) {
  Store s(temp_path("dev.sqlite"));
  DeviceRecord d;
  d.name = "Test GPU";
  d.kind = "spec";
  d.peak_fp32_gflops = 1000;
  d.peak_mem_bw_gbs = 500;
  s.put_device(d);
  auto back = s.device(d.key());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->name, "Test GPU");
  EXPECT_DOUBLE_EQ(back->compute_gflops(), 1000);
}

TEST(TimingStats, QuantilesAndCv) {
  auto t = TimingStats::from_samples({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_DOUBLE_EQ(t.median_ms, 6);
  EXPECT_DOUBLE_EQ(t.p10_ms, 2);
  EXPECT_DOUBLE_EQ(t.p90_ms, 10);
  EXPECT_NEAR(t.cv, 3.3166 / 6, 1e-3);
  EXPECT_EQ(TimingStats::from_samples({}).n, 0);
  // Three equal timings (CI's 1.3666 us): every quantile is that value exactly,
  // not 0.8 x + 0.2 x rounded one step above the median.
  for (double x : {0.0013666, 0.1, 1.0 / 3, 12.5}) {
    const TimingStats r = TimingStats::from_samples({x, x, x});
    EXPECT_EQ(r.p10_ms, x);
    EXPECT_EQ(r.median_ms, x);
    EXPECT_EQ(r.p90_ms, x);
  }
}
