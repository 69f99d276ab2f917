// Store::merge_from (`scaledl db merge`): the union of two stores without
// duplicates, environment ids remapped, device conflicts keep ours, a second
// merge adds nothing, and a bad input changes nothing.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <set>
#include <tuple>

#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
using scaledl::test::fresh_store_path;

namespace {

LayerMeasurement layer(int64_t tokens, int64_t env_id, const std::string& device = "spec:Test GPU") {
  LayerMeasurement m;
  m.campaign = "c";
  m.type = LayerType::Linear;
  m.dims = {tokens, 64, 64, 1};
  m.device = device;
  m.fwd = TimingStats::from_samples({tokens * 0.01, tokens * 0.0101, tokens * 0.0099});
  m.bwd = TimingStats::from_samples({tokens * 0.02});
  m.env_id = env_id;
  return m;
}

ModelMeasurement model(int batch, int64_t env_id) {
  ModelMeasurement m;
  m.campaign = "c";
  m.model_name = "tiny";
  m.family = "bert";
  m.model = {{"layers", 2}};
  m.settings = {{"batch", batch}, {"seq_len", 16}};
  m.device = "spec:Test GPU";
  m.iter = TimingStats::from_samples({batch * 1.0, batch * 1.01, batch * 0.99});
  m.iter_noopt = TimingStats::from_samples({batch * 0.9});
  m.node_times = {{"embed", 0.5}, {"head", NAN}};
  m.env_id = env_id;
  return m;
}

DeviceRecord device(const std::string& name, double gflops) {
  DeviceRecord d;
  d.name = name;
  d.kind = "spec";
  d.peak_fp32_gflops = gflops;
  d.peak_mem_bw_gbs = 500;
  return d;
}

CollectiveMeasurement collective(double bytes) {
  CollectiveMeasurement m;
  m.collective = "allreduce";
  m.backend = "gloo";
  m.bytes = bytes;
  m.time_s = 1e-5 + bytes / 1e10;
  m.repeats = 5;
  m.source = "test";
  return m;
}

using RowKey = std::tuple<std::string, std::string, std::string>;  // (campaign, key, device)

std::set<RowKey> layer_keys(const Store& s) {
  std::set<RowKey> out;
  for (const auto& m : s.layers(std::nullopt, "", false))
    out.insert({m.campaign, layer_key(m.type, m.dims, m.dtype), m.device});
  return out;
}

/// config key -> the env JSON text its row points to ("" = env_id 0).
std::map<std::string, std::string> env_of_layers(Store& s) {
  std::map<std::string, std::string> out;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(
      s.handle(),
      "SELECT l.config_key, COALESCE(e.env, '') FROM layers l LEFT JOIN environments e ON e.id = l.env_id",
      -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW)
    out[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] =
        reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
  sqlite3_finalize(st);
  return out;
}

}  // namespace

TEST(StoreMerge, UnionWithoutDuplicatesAndRemappedEnvironments) {
  const std::string pa = fresh_store_path("merge-a.sqlite"), pb = fresh_store_path("merge-b.sqlite");
  const nlohmann::json e1 = {{"threads", 1}}, e2 = {{"threads", 2}}, e3 = {{"threads", 3}};
  {
    Store a(pa);
    a.put_device(device("Test GPU", 1000));
    const int64_t a1 = a.put_environment(e1), a2 = a.put_environment(e2);
    for (int64_t t : {8, 16, 24, 32}) ASSERT_TRUE(a.put_layer(layer(t, t < 24 ? a1 : a2)));
    ASSERT_TRUE(a.put_model(model(1, a1)));
    ASSERT_EQ(a.put_collectives({collective(1 << 20)}), 1u);
  }
  {
    Store b(pb);
    b.put_device(device("Test GPU", 1200));  // same key, another record (a second node's probe)
    b.put_device(device("Other GPU", 800));
    // Ids differ from A's: e2 is B's 1, e3 B's 2.
    const int64_t b2 = b.put_environment(e2), b3 = b.put_environment(e3);
    ASSERT_EQ(b2, 1);
    for (int64_t t : {24, 32, 40}) ASSERT_TRUE(b.put_layer(layer(t, t == 40 ? b3 : b2)));
    ASSERT_TRUE(b.put_layer(layer(8, 0, "spec:Other GPU")));  // another device is another row
    ASSERT_TRUE(b.put_model(model(1, b2)));                   // duplicate of A's
    ASSERT_TRUE(b.put_model(model(2, b3)));
    ASSERT_EQ(b.put_collectives({collective(1 << 20), collective(1 << 22)}), 2u);
  }
  Store a(pa, true), b(pb, true);
  const std::string po = fresh_store_path("merge-out.sqlite");
  Store out(po);
  MergeSummary sa = out.merge_from(a);
  EXPECT_EQ(sa.layers_added, 4u);
  EXPECT_EQ(sa.models_added, 1u);
  EXPECT_EQ(sa.collectives_added, 1u);
  EXPECT_EQ(sa.rows_skipped(), 0u);
  EXPECT_EQ(sa.devices_added, 1u);
  EXPECT_EQ(sa.environments_added, 2u);
  EXPECT_TRUE(sa.device_conflicts.empty());

  MergeSummary sb = out.merge_from(b);
  EXPECT_EQ(sb.layers_added, 2u);  // 40 and Other GPU's 8
  EXPECT_EQ(sb.layers_skipped, 2u);
  EXPECT_EQ(sb.models_added, 1u);
  EXPECT_EQ(sb.models_skipped, 1u);
  EXPECT_EQ(sb.collectives_added, 1u);
  EXPECT_EQ(sb.collectives_skipped, 1u);
  EXPECT_EQ(sb.devices_added, 1u);
  EXPECT_EQ(sb.environments_added, 1u);  // e3; e2 was already there
  ASSERT_EQ(sb.device_conflicts.size(), 1u);
  EXPECT_NE(sb.device_conflicts[0].find("spec:Test GPU"), std::string::npos) << sb.device_conflicts[0];
  EXPECT_NE(sb.device_conflicts[0].find("peak_fp32_gflops"), std::string::npos) << sb.device_conflicts[0];
  EXPECT_DOUBLE_EQ(out.device("spec:Test GPU")->peak_fp32_gflops, 1000);  // ours kept

  // The union of the two key sets, each once.
  std::set<RowKey> want = layer_keys(a);
  for (const auto& k : layer_keys(b)) want.insert(k);
  EXPECT_EQ(layer_keys(out), want);
  EXPECT_EQ(out.layers(std::nullopt, "", false).size(), want.size());
  EXPECT_EQ(out.counts()["models"], 2);
  EXPECT_EQ(out.counts()["collectives"], 2);
  EXPECT_EQ(out.counts()["environments"], 3);
  EXPECT_EQ(out.devices().size(), 2u);

  // Every row still points at the environment it was measured in.
  const auto envs = env_of_layers(out);
  EXPECT_EQ(nlohmann::json::parse(envs.at(layer_key(LayerType::Linear, {16, 64, 64, 1}, DType::FP32))), e1);
  EXPECT_EQ(nlohmann::json::parse(envs.at(layer_key(LayerType::Linear, {24, 64, 64, 1}, DType::FP32))), e2);
  EXPECT_EQ(nlohmann::json::parse(envs.at(layer_key(LayerType::Linear, {40, 64, 64, 1}, DType::FP32))), e3);
  // Values are copied as they were (NaN node times stay null).
  const auto ms = out.models("", false);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_TRUE(std::isnan(ms[0].node_times[1].ms));
  EXPECT_DOUBLE_EQ(ms[1].iter.median_ms, model(2, 0).iter.median_ms);

  // Merging again adds nothing.
  for (const Store* in : {&a, &b}) {
    MergeSummary again = out.merge_from(*in);
    EXPECT_EQ(again.rows_added(), 0u);
    EXPECT_EQ(again.devices_added + again.environments_added, 0u);
  }
  EXPECT_EQ(out.layers(std::nullopt, "", false).size(), want.size());
}

TEST(StoreMerge, ABadInputRowChangesNothingAndItselfIsRefused) {
  const std::string pa = fresh_store_path("merge-bad-a.sqlite"), pb = fresh_store_path("merge-bad-b.sqlite");
  {
    Store a(pa);
    a.put_device(device("Test GPU", 1000));
    ASSERT_TRUE(a.put_layer(layer(8, 0)));
    Store b(pb);
    b.put_device(device("New GPU", 1000));
    b.put_environment({{"threads", 9}});
    ASSERT_TRUE(b.put_layer(layer(16, 1)));
    ASSERT_TRUE(b.put_layer(layer(24, 1)));
    ASSERT_EQ(
        sqlite3_exec(b.handle(), "UPDATE layers SET dims='[24, \"x\"]' WHERE config_key LIKE 'linear:24x%'",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
  }
  Store a(pa), b(pb, true);
  const std::string e = error_of([&] { a.merge_from(b); });
  EXPECT_NE(e.find(pb), std::string::npos) << e;
  EXPECT_NE(e.find("dims"), std::string::npos) << e;
  EXPECT_EQ(a.counts()["layers"], 1);
  EXPECT_EQ(a.counts()["devices"], 1);
  EXPECT_EQ(a.counts()["environments"], 0);

  // A dangling env_id is named too, and also leaves nothing behind.
  {
    Store bw(pb);
    ASSERT_EQ(
        sqlite3_exec(bw.handle(),
                     "UPDATE layers SET dims='[24, 64, 64, 1]', env_id=7 WHERE config_key LIKE 'linear:24x%'",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
  }
  const std::string e2 = error_of([&] { a.merge_from(b); });
  EXPECT_NE(e2.find("env_id=7"), std::string::npos) << e2;
  EXPECT_EQ(a.counts()["layers"], 1);
  EXPECT_EQ(a.counts()["environments"], 0);

  Store a_again(pa, true);
  EXPECT_NE(error_of([&] { a.merge_from(a_again); }).find("into itself"), std::string::npos);
}
