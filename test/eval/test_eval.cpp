// Protocol splits and error statistics of `scaledl eval` (eval.hpp), and the
// evaluation's refusal of a test store whose device record is missing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "scaledl/core/error.hpp"
#include "scaledl/eval/eval.hpp"
#include "scaledl/io/store.hpp"

using namespace scaledl;

namespace {

/// `n` runs of each family with FLOPs 1..n (family f's run i has flops i).
std::vector<EvalRun> runs_of(const std::vector<std::string>& families, int n) {
  std::vector<EvalRun> v;
  for (const auto& f : families)
    for (int i = 1; i <= n; ++i) {
      EvalRun r;
      r.family = f;
      r.label = f + std::to_string(i);
      r.flops = i;
      r.target_ms = i;
      v.push_back(r);
    }
  return v;
}

void expect_error(const std::function<void()>& fn, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(EvalSplits, IdIsAnEightyTwentySplitPerFamilyAndSeedDependent) {
  auto runs = runs_of({"bert", "gpt2", "vit"}, 10);
  auto s = make_splits(runs, Protocol::Id, 0);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].test.size(), 6u);  // 2 of 10 per family
  EXPECT_EQ(s[0].train.size(), 24u);
  std::set<size_t> all(s[0].train.begin(), s[0].train.end());
  for (size_t i : s[0].test) EXPECT_TRUE(all.insert(i).second) << "run " << i << " in both";
  EXPECT_EQ(all.size(), runs.size());
  for (const char* f : {"bert", "gpt2", "vit"})
    EXPECT_EQ(
        std::count_if(s[0].test.begin(), s[0].test.end(), [&](size_t i) { return runs[i].family == f; }), 2);
  EXPECT_NE(make_splits(runs, Protocol::Id, 1)[0].test, s[0].test);
  EXPECT_EQ(make_splits(runs, Protocol::Id, 0)[0].test, s[0].test);
}

TEST(EvalSplits, OodFamilyHoldsOutEachFamilyOnce) {
  auto runs = runs_of({"bert", "gpt2", "vit"}, 4);
  auto s = make_splits(runs, Protocol::OodFamily, 0);
  ASSERT_EQ(s.size(), 3u);
  for (const auto& sp : s) {
    const std::string held = sp.name.substr(sp.name.find(':') + 1);
    for (size_t i : sp.test) EXPECT_EQ(runs[i].family, held);
    for (size_t i : sp.train) EXPECT_NE(runs[i].family, held);
    EXPECT_EQ(sp.test.size(), 4u);
    EXPECT_EQ(sp.train.size(), 8u);
  }
}

TEST(EvalSplits, OodSizeTestsTheLargestThirtyPercentOfEachFamily) {
  auto runs = runs_of({"bert", "t5"}, 10);
  std::reverse(runs.begin(), runs.end());  // order must not matter
  auto s = make_splits(runs, Protocol::OodSize, 0);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].test.size(), 6u);
  for (size_t i : s[0].test) EXPECT_GE(runs[i].flops, 8);
  for (size_t i : s[0].train) EXPECT_LE(runs[i].flops, 7);
}

TEST(EvalSplits, SweepRunsAreNeverTrainedOn) {
  auto runs = runs_of({"bert", "gpt2"}, 10);
  runs[3].sweep = true;
  for (const Protocol p : {Protocol::Id, Protocol::OodFamily, Protocol::OodSize})
    for (const auto& sp : make_splits(runs, p, 0)) {
      EXPECT_EQ(std::count(sp.train.begin(), sp.train.end(), 3u), 0) << to_string(p);
      EXPECT_EQ(std::count(sp.test.begin(), sp.test.end(), 3u), 0) << to_string(p);
    }
}

TEST(EvalSplits, EmptyOrTooSmallSplitsAreErrors) {
  expect_error([] { make_splits(runs_of({"bert", "vit"}, 4), Protocol::Id, 0); }, "family bert has 4 runs");
  expect_error([] { make_splits(runs_of({"bert"}, 10), Protocol::OodFamily, 0); }, ">= 2 families");
  expect_error([] { make_splits(runs_of({"bert"}, 3), Protocol::OodSize, 0); }, "family bert has 3 runs");
  expect_error([] { make_splits(runs_of({"bert"}, 10), Protocol::CrossDevice, 0); }, "--test-db");
  expect_error([] { make_splits(runs_of({"bert"}, 10), parse_protocol("loo"), 0); }, "--protocol=\"loo\"");
  expect_error([] { make_splits({}, Protocol::Id, 0); }, "no ok model runs");
}

TEST(EvalStats, ErrorStatisticsAreTheDefinedOnes) {
  // APE 10 %, 20 %, 50 %, 0 %
  ErrorStats s = ErrorStats::of({11, 8, 15, 4}, {10, 10, 10, 4});
  EXPECT_EQ(s.n, 4);
  EXPECT_NEAR(s.mre_pct, 20, 1e-9);
  EXPECT_NEAR(s.p50_pct, 15, 1e-9);             // between 10 and 20
  EXPECT_NEAR(s.p90_pct, 20 + 0.7 * 30, 1e-9);  // 0.9 * 3 = 2.7 -> 20 + 0.7 (50 - 20)
  EXPECT_NEAR(s.rmse_ms, std::sqrt((1 + 4 + 25 + 0) / 4.0), 1e-9);
  EXPECT_NEAR(s.bias_pct, (10 - 20 + 50 + 0) / 4.0, 1e-9);
  EXPECT_TRUE(std::isnan(ErrorStats::of({}, {}).mre_pct));
}

TEST(EvalRunErrors, ATestStoreWithoutTheDeviceRecordIsRefused) {
  const std::string dir = testing::TempDir() + "/eval_nodev_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string db = dir + "/test.sqlite";
  std::filesystem::remove(db);
  {
    Store s(db);
    ModelMeasurement m;
    m.campaign = "c";
    m.model_name = "gpt2-tiny";
    m.family = "gpt2";
    m.model = nlohmann::json::object();
    m.settings = nlohmann::json::object();
    m.device = "cpu:Other CPU (1 threads)";
    m.iter.median_ms = 3;
    m.iter.cv = 0.01;
    m.iter.n = 5;
    s.put_model(m);
  }
  EvalOptions o;
  o.protocol = Protocol::CrossDevice;
  o.dbs = {std::string(SCALEDL_SOURCE_DIR) + "/datasets/cpu/layers.sqlite",
           std::string(SCALEDL_SOURCE_DIR) + "/datasets/cpu/models.sqlite"};
  o.test_dbs = {db};
  expect_error([&] { run_eval(o); }, "whose record is not in the store");
}

TEST(EvalSplits, LeaveOneDeviceOutHoldsOutEachDeviceOnce) {
  auto runs = runs_of({"bert", "gpt2"}, 6);
  const std::vector<std::string> devs = {"spec:A", "spec:B", "spec:C"};
  for (size_t i = 0; i < runs.size(); ++i) runs[i].device = devs[i % 3];
  auto s = make_splits(runs, Protocol::LeaveOneDeviceOut, 0);
  ASSERT_EQ(s.size(), 3u);
  for (const auto& sp : s) {
    ASSERT_FALSE(sp.held_out_device.empty());
    EXPECT_EQ(sp.name, "device:" + sp.held_out_device);
    for (size_t i : sp.test) EXPECT_EQ(runs[i].device, sp.held_out_device);
    for (size_t i : sp.train) EXPECT_NE(runs[i].device, sp.held_out_device);
    EXPECT_EQ(sp.test.size() + sp.train.size(), runs.size());
  }
  for (const auto& sp : make_splits(runs, Protocol::Id, 0)) EXPECT_TRUE(sp.held_out_device.empty());
  // One device only: nothing to hold out.
  auto one = runs_of({"bert"}, 4);
  for (auto& r : one) r.device = "spec:A";
  expect_error([&] { make_splits(one, Protocol::LeaveOneDeviceOut, 0); }, ">= 2 devices");
}

TEST(EvalProtocols, EveryProtocolParsesFromItsNameAndTheErrorNamesThemAll) {
  ASSERT_EQ(all_protocols().size(), 5u);
  std::set<std::string> names;
  for (const Protocol p : all_protocols()) {
    EXPECT_EQ(parse_protocol(to_string(p)), p) << to_string(p);
    EXPECT_TRUE(names.insert(to_string(p)).second) << to_string(p);
    EXPECT_GT(std::string(protocol_description(p)).size(), 20u) << to_string(p);
  }
  EXPECT_EQ(to_string(Protocol::LeaveOneDeviceOut), std::string("leave-one-device-out"));
  EXPECT_TRUE(protocol_splits_are_random(Protocol::Id));
  EXPECT_FALSE(protocol_splits_are_random(Protocol::OodSize));
  expect_error([] { parse_protocol("Id"); },
               "--protocol=\"Id\" is not a protocol (id, ood-family, ood-size, cross-device, "
               "leave-one-device-out)");
}
