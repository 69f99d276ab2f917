// The memory table (schema 3, issue #15): peaks travel with their timing rows,
// through merges, and a version-2 store without the table still reads.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;

namespace {

ModelMeasurement run(const std::string& name, double peak) {
  ModelMeasurement m;
  m.campaign = "mem";
  m.model_name = name;
  m.family = "gpt2";
  m.model = {{"name", name}};
  m.settings = {{"batch", 1}};
  m.device = "cpu:test";
  m.iter = TimingStats::from_samples({1.0, 1.1, 0.9});
  m.iter_noopt = m.iter;
  if (peak > 0) m.memory = {peak, peak / 4, 0, "cpu-counting-allocator"};
  return m;
}

void sql(Store& s, const char* q) {
  ASSERT_EQ(sqlite3_exec(s.handle(), q, nullptr, nullptr, nullptr), SQLITE_OK) << q;
}

}  // namespace

TEST(StoreMemory, PeaksRoundTripWithModelAndLayerRows) {
  const std::string p = scaledl::test::fresh_store_path("mem.sqlite");
  Store s(p);
  ASSERT_TRUE(s.put_model(run("a", 4096)));
  ASSERT_TRUE(s.put_model(run("b", 0)));  // not measured: no memory row
  LayerMeasurement l;
  l.campaign = "mem";
  l.type = LayerType::Linear;
  l.dims = {8, 4, 2, 1};
  l.device = "cpu:test";
  l.fwd = TimingStats::from_samples({0.1});
  l.memory = {900, 150, 64, "cpu-counting-allocator"};
  ASSERT_TRUE(s.put_layer(l));
  auto ms = s.models("", false);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_DOUBLE_EQ(ms[0].memory.peak_bytes, 4096);
  EXPECT_DOUBLE_EQ(ms[0].memory.base_bytes, 1024);
  EXPECT_EQ(ms[0].memory.method, "cpu-counting-allocator");
  EXPECT_FALSE(ms[1].memory.measured());
  auto ls = s.layers(std::nullopt, "", false);
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_DOUBLE_EQ(ls[0].memory.saved_bytes, 64);
  EXPECT_TRUE(s.export_json().contains("memory"));
  // A peak below its base is refused, and the timing row goes with it (one transaction).
  auto bad = run("c", 100);
  bad.memory.base_bytes = 200;
  EXPECT_NE(error_of([&] { s.put_model(bad); }).find("base_bytes=200"), std::string::npos);
  EXPECT_EQ(s.models("", false).size(), 2u);
}

TEST(StoreMemory, MergeCarriesPeaksAndVersionTwoStoresStillRead) {
  const std::string a = scaledl::test::fresh_store_path("mem-a.sqlite");
  const std::string b = scaledl::test::fresh_store_path("mem-b.sqlite");
  {
    Store s(a);
    s.put_model(run("x", 1000));
  }
  {
    Store t(b);
    t.put_model(run("y", 2000));
    const MergeSummary sum = t.merge_from(Store(a, true));
    EXPECT_EQ(sum.memory_added, 1u);
    auto ms = t.models("", false);
    ASSERT_EQ(ms.size(), 2u);
    EXPECT_DOUBLE_EQ(ms[1].memory.peak_bytes, 1000);
    EXPECT_EQ(t.merge_from(Store(a, true)).memory_added, 0u);  // twice adds nothing
  }
  {
    Store s(a);
    sql(s, "DROP TABLE memory");
    sql(s, "UPDATE meta SET value='2' WHERE key='schema_version'");
  }
  {
    Store r(a, /*read_only=*/true);
    EXPECT_FALSE(r.has_table("memory"));
    auto ms = r.models("", false);
    ASSERT_EQ(ms.size(), 1u);
    EXPECT_FALSE(ms[0].memory.measured());
  }
  Store w(a);  // migrated on write
  EXPECT_EQ(w.info()["schema_version"], "4");
  EXPECT_TRUE(w.has_table("memory"));
}
