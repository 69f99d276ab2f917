// Campaigns across nodes (issue #14): `bench layers --shard i/n` on the built
// binary, `db merge` of the shards' stores, compared with an unsharded run;
// bad --shard values and bad merge inputs each give one error line.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>
#include <utility>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/design/plan.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl;
using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {

const std::string kBinary = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl";
// The fastest timing the other CLI tests use: a tiny config takes milliseconds.
const std::string kQuick =
    " --campaign shard --threads 1 --quick-probe --quiet --warmup 1 --repeats 3 --min-sample-ms 0.1";

/// A fresh directory per test under the gtest temp dir (ctest runs tests in parallel).
std::string fresh_dir(const std::string& name) {
  const fs::path d = fs::path(testing::TempDir()) / ("cli_shard_" + name + "_" + std::to_string(getpid()));
  scaledl::remove_tree(d);
  fs::create_directories(d);
  return d.string();
}

/// 7 tiny configs of three types: an odd count, so the two shards differ in size.
std::string write_plan(const std::string& dir) {
  std::vector<LayerConfig> cs;
  for (int64_t i = 1; i <= 3; ++i) cs.push_back({LayerType::Linear, {8 * i, 32, 32, 1}, DType::FP32});
  for (int64_t i = 1; i <= 2; ++i) cs.push_back({LayerType::GELU, {1024 * i}, DType::FP32});
  for (int64_t i = 1; i <= 2; ++i) cs.push_back({LayerType::LayerNorm, {8 * i, 64}, DType::FP32});
  const std::string p = dir + "/plan.json";
  std::ofstream(p) << layers_plan_json(cs).dump(1);
  return p;
}

using RowKey = std::tuple<std::string, std::string, std::string>;  // (campaign, config key, device)

/// Every layer row's key, duplicates kept.
std::multiset<RowKey> rows_of(const std::string& db) {
  Store s(db, /*read_only=*/true);
  std::multiset<RowKey> out;
  for (const auto& m : s.layers(std::nullopt, "", /*ok_only=*/false))
    out.insert({m.campaign, layer_key(m.type, m.dims, m.dtype), m.device});
  return out;
}

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(CliShard, TwoShardsMergedEqualAnUnshardedRun) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  const std::string dir = fresh_dir("run");
  const std::string plan = write_plan(dir);

  for (int i = 0; i < 2; ++i) {
    const std::string db = dir + "/part-" + std::to_string(i) + ".sqlite";
    CliResult r = run_cli("bench layers --plan " + plan + " --db " + db + kQuick + " --shard " +
                          std::to_string(i) + "/2");
    ASSERT_EQ(r.rc, 0) << r.out;
    const size_t want = i == 0 ? 4 : 3;  // k % 2 == i of 7 configs
    EXPECT_NE(
        r.out.find("shard " + std::to_string(i) + "/2: " + std::to_string(want) + " of the plan's 7 configs"),
        std::string::npos)
        << r.out;
    EXPECT_EQ(rows_of(db).size(), want) << r.out;
  }
  // The shards are disjoint.
  std::multiset<RowKey> both = rows_of(dir + "/part-0.sqlite");
  for (const auto& k : rows_of(dir + "/part-1.sqlite")) both.insert(k);
  EXPECT_EQ(std::set<RowKey>(both.begin(), both.end()).size(), both.size());

  const std::string all = dir + "/all.sqlite";
  CliResult m = run_cli("db merge " + all + " " + dir + "/part-0.sqlite " + dir + "/part-1.sqlite");
  ASSERT_EQ(m.rc, 0) << m.out;
  EXPECT_NE(m.out.find("part-0.sqlite: 4 rows added, 0 skipped"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("part-1.sqlite: 3 rows added, 0 skipped"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("7 rows added from 2 stores"), std::string::npos) << m.out;

  const std::string whole = dir + "/whole.sqlite";
  CliResult u = run_cli("bench layers --plan " + plan + " --db " + whole + kQuick);
  ASSERT_EQ(u.rc, 0) << u.out;
  EXPECT_EQ(u.out.find("of the plan's"), std::string::npos) << u.out;  // unsharded output unchanged
  const std::multiset<RowKey> merged = rows_of(all);
  EXPECT_EQ(merged, rows_of(whole));
  EXPECT_EQ(merged.size(), 7u);
  {
    Store s(all, /*read_only=*/true);
    EXPECT_EQ(s.devices().size(), 1u);  // both shards ran on this machine: one key
    EXPECT_EQ(s.counts()["environments"], 1);
  }

  // A re-merge adds nothing; a resumed shard skips what it has.
  CliResult again = run_cli("db merge " + all + " " + dir + "/part-1.sqlite " + dir + "/part-0.sqlite");
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_NE(again.out.find("part-1.sqlite: 0 rows added, 3 skipped"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("0 rows added from 2 stores"), std::string::npos) << again.out;
  EXPECT_EQ(rows_of(all), merged);
  CliResult resumed =
      run_cli("bench layers --plan " + plan + " --db " + dir + "/part-1.sqlite" + kQuick + " --shard 1/2");
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("3 configs, 3 skipped"), std::string::npos) << resumed.out;
}

TEST(CliShard, ModelsPlanShardsMergeToTheUnshardedRows) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  const std::string dir = fresh_dir("models");
  const std::string plan = dir + "/models-plan.json";
  {
    // Three tiny BERTs (1 layer, hidden 32): milliseconds per iteration.
    nlohmann::json cs = nlohmann::json::array();
    for (auto [batch, seq] : {std::pair{2, 8}, {4, 8}, {2, 16}})
      cs.push_back({{"model", std::string(SCALEDL_SOURCE_DIR) + "/models/bert-base.json"},
                    {"overrides",
                     {{"hidden_size", 32},
                      {"num_hidden_layers", 1},
                      {"num_attention_heads", 2},
                      {"intermediate_size", 64},
                      {"vocab_size", 100}}},
                    {"settings", {{"batch", batch}, {"seq_len", seq}}}});
    std::ofstream(plan) << nlohmann::json{{"kind", "models"}, {"configs", cs}}.dump(1);
  }
  const std::string quick =
      " --threads 1 --warmup 1 --warmup-extra 1 --repeats 2 --probe-repeats 1 --max-cv 10 --quiet";
  auto model_rows = [](const std::string& db) {
    Store s(db, /*read_only=*/true);
    std::multiset<std::string> out;
    for (const auto& m : s.models("", /*ok_only=*/false))
      out.insert(m.campaign + "|" + model_key(m) + "|" + m.device);
    return out;
  };
  std::string parts;
  for (int i = 0; i < 2; ++i) {
    const std::string db = dir + "/part-" + std::to_string(i) + ".sqlite";
    CliResult r = run_cli("bench models --plan " + plan + " --db " + db + quick + " --shard " +
                          std::to_string(i) + "/2");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(model_rows(db).size(), i == 0 ? 2u : 1u) << r.out;
    parts += " " + db;
  }
  CliResult m = run_cli("db merge " + dir + "/all.sqlite" + parts);
  ASSERT_EQ(m.rc, 0) << m.out;
  CliResult u = run_cli("bench models --plan " + plan + " --db " + dir + "/whole.sqlite" + quick);
  ASSERT_EQ(u.rc, 0) << u.out;
  EXPECT_EQ(model_rows(dir + "/all.sqlite"), model_rows(dir + "/whole.sqlite"));
  EXPECT_EQ(model_rows(dir + "/all.sqlite").size(), 3u);
}

TEST(CliShard, BadShardValuesGiveOneErrorLine) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  const std::string dir = fresh_dir("bad");
  const std::string plan = write_plan(dir);
  const std::string db = dir + "/r.sqlite";
  for (const std::string v : {"3/2", "2/2", "0/0", "x", "-1/4", "1/", "1/2/3"}) {
    expect_one_error("bench layers --plan " + plan + " --db " + db + " --shard=" + v, "--shard=" + v);
    // bench models checks --shard before it reads the plan
    expect_one_error("bench models --plan " + plan + " --db " + db + " --shard " + v, "--shard=" + v);
  }
  expect_one_error("bench layers --plan " + plan + " --db " + db + " --shard 2/2", "0-based");
  EXPECT_FALSE(fs::exists(db)) << "a bad --shard created the store";
}

TEST(CliShard, SeveralPassesWriteOneRowPerConfigFromTheirMedian) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  const std::string dir = fresh_dir("passes");
  const std::string plan = write_plan(dir);
  const std::string db = dir + "/p.sqlite";
  for (const std::string v : {"0", "101", "-2"})
    expect_one_error("bench layers --plan " + plan + " --db " + db + " --passes " + v, "--passes=" + v);
  EXPECT_FALSE(fs::exists(db)) << "a bad --passes created the store";
  CliResult r = run_cli("bench layers --plan " + plan + " --db " + db + kQuick + " --passes 2 --shard 0/2");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_cli("bench layers --plan " + plan + " --db " + db + kQuick + " --passes 2");  // the rest
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("7 configs, 4 skipped (already stored)"), std::string::npos) << r.out;
  Store s(db, /*read_only=*/true);
  const auto rows = s.layers(std::nullopt, "", /*ok_only=*/false);
  ASSERT_EQ(rows.size(), 7u);
  const auto passes = s.layer_passes("shard", rows.at(0).device);
  EXPECT_EQ(passes.size(), 7u);
  for (const auto& m : rows) {
    const auto& p = passes.at(layer_key(m.type, m.dims, m.dtype));
    ASSERT_EQ(p.size(), 2u);
    if (m.status != "ok" || p.at(1).status != "ok" || p.at(2).status != "ok") continue;
    EXPECT_DOUBLE_EQ(m.fwd.median_ms, 0.5 * (p.at(1).fwd.median_ms + p.at(2).fwd.median_ms));
    EXPECT_NE(m.reason.find("2 of 2 passes ok"), std::string::npos) << m.reason;
  }
  // The pass rows export like any table: a header and 7 configs x 2 passes.
  CliResult csv = run_cli("db export --db " + db + " --format csv --table layer_passes");
  ASSERT_EQ(csv.rc, 0) << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 15) << csv.out;
  EXPECT_EQ(csv.out.rfind("id,campaign,config_key,device,pass,", 0), 0u) << csv.out;
}

TEST(CliShard, BadMergeInputsGiveOneErrorLineAndLeaveOutUntouched) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0) << kBinary << " is not built";
  const std::string dir = fresh_dir("merge");
  // Two small valid stores (no benchmark needed).
  auto make_store = [&](const std::string& name, int64_t tokens) {
    Store s(dir + "/" + name);
    LayerMeasurement m;
    m.campaign = "c";
    m.dims = {tokens, 16, 16, 1};
    m.device = "cpu:test";
    m.fwd = TimingStats::from_samples({1.0, 1.1, 0.9});
    EXPECT_TRUE(s.put_layer(m));
    return s.path();
  };
  const std::string a = make_store("a.sqlite", 8), b = make_store("b.sqlite", 16);
  const std::string text = dir + "/notes.txt";
  std::ofstream(text) << "not a database, just text that is long enough to look like a file........\n";
  const std::string foreign = dir + "/foreign.sqlite";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const std::string fresh = dir + "/new.sqlite";

  // OUT does not exist: nothing is created.
  expect_one_error("db merge", "OUT is missing");
  expect_one_error("db merge " + fresh, "no input store given");
  expect_one_error("db merge " + fresh + " " + a + " " + dir + "/missing.sqlite", dir + "/missing.sqlite");
  expect_one_error("db merge " + fresh + " " + a + " " + text, text);
  expect_one_error("db merge " + fresh + " " + foreign + " " + a, "not a ScaleDL store");
  EXPECT_FALSE(fs::exists(fresh));

  // OUT exists: its bytes stay as they were.
  CliResult ok = run_cli("db merge " + fresh + " " + a);
  ASSERT_EQ(ok.rc, 0) << ok.out;
  const std::string before = bytes_of(fresh);
  expect_one_error("db merge " + fresh + " " + b + " " + fresh, "is also an input");
  expect_one_error(
      "db merge " + fresh + " " + b + " " + dir + "/../" + fs::path(dir).filename().string() + "/new.sqlite",
      "is also an input");
  expect_one_error("db merge " + fresh + " " + b + " " + dir + "/missing.sqlite", "no such store");
  const std::string text_before = bytes_of(text);
  expect_one_error("db merge " + text + " " + b, text);
  EXPECT_EQ(bytes_of(text), text_before);
  EXPECT_EQ(bytes_of(fresh), before);

  // A garbage row in the second input: the first input's rows are not kept either.
  {
    Store s(b);
    ASSERT_EQ(sqlite3_exec(s.handle(), "UPDATE layers SET fwd_median_ms='abc'", nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  const std::string c = make_store("c.sqlite", 32);
  auto contents = [&] { return Store(fresh, /*read_only=*/true).export_json().dump(); };
  const std::string rows_before = contents();
  expect_one_error("db merge " + fresh + " " + c + " " + b, "fwd_median_ms='abc'");
  EXPECT_EQ(contents(), rows_before);
  EXPECT_EQ(rows_of(fresh).size(), 1u);
  const std::string fresh2 = dir + "/new2.sqlite";
  expect_one_error("db merge " + fresh2 + " " + c + " " + b, b);
  EXPECT_FALSE(fs::exists(fresh2)) << "a failed merge left a new OUT behind";
}
