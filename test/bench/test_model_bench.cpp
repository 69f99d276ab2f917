// Whole-iteration model benchmarks and resumable model campaigns (tiny configs, CPU).
#include <gtest/gtest.h>

#include "test_util.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "scaledl/bench/model_bench.hpp"
#include "scaledl/bench/probe.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/design/plan.hpp"

using namespace scaledl;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

std::vector<ModelConfig> tiny_plan() {
  auto plan = nlohmann::json::parse(R"({"kind":"models","configs":[
    {"model":"models/gpt2.json","overrides":{"n_embd":32,"n_layer":1,"n_head":2,"vocab_size":100},
     "settings":{"batch":2,"seq_len":8}},
    {"model":"models/llama-style.json","overrides":{"hidden_size":32,"num_hidden_layers":1,"num_attention_heads":4,
     "num_key_value_heads":2,"intermediate_size":48,"vocab_size":100},"settings":{"batch":1,"seq_len":8,"optimizer":"sgd"}},
    {"model":"models/vit-base.json","overrides":{"hidden_size":32,"num_hidden_layers":1,"num_attention_heads":2,
     "intermediate_size":64,"image_size":16,"patch_size":8,"num_labels":4},"settings":{"batch":2,"image_size":16}}]})");
  return parse_plan(plan, "test", kSrc).models;
}

ModelBenchOptions quick() {
  ModelBenchOptions o;
  o.warmup = 1;
  o.warmup_extra = 2;
  o.repeats = 3;
  o.probe_repeats = 2;
  return o;
}

std::string temp_db(const std::string& name) {
  return scaledl::test::fresh_store_path(name);
}

}  // namespace

TEST(ModelBench, TimesIterationAndNodes) {
  auto mc = tiny_plan().at(0);
  auto r = bench_model(mc.model, mc.settings, torch::kCPU, quick());
  ASSERT_TRUE(r.status == "ok" || r.status == "unstable") << r.status << ": " << r.reason;
  EXPECT_EQ(r.iter.n, 3);
  EXPECT_EQ(r.iter_noopt.n, 3);
  EXPECT_GT(r.iter.median_ms, 0);
  EXPECT_GT(r.iter_noopt.median_ms, 0);
  EXPECT_EQ(r.model_name, mc.model.name);
  EXPECT_EQ(r.family, "gpt2");
  std::map<std::string, double> t;
  for (const auto& n : r.node_times) t[n.node] = n.ms;
  for (const char* n : {"embed.word", "decoder.0.attn.qkv", "decoder.0.attn.qkv.bwd", "head.lm", "head.loss",
                        "embed.word.bwd", "optim.step"})
    EXPECT_TRUE(t.count(n)) << n;
  for (const auto& [n, ms] : t) EXPECT_TRUE(std::isfinite(ms) && ms >= 0) << n;
}

TEST(ModelBench, NoOptimizerStepMeansNoOptimNode) {
  auto mc = tiny_plan().at(2);
  mc.settings.optimizer_step = false;
  auto r = bench_model(mc.model, mc.settings, torch::kCPU, quick());
  ASSERT_NE(r.status, "error") << r.reason;
  for (const auto& n : r.node_times) EXPECT_NE(n.node, "optim.step");
}

TEST(ModelBench, InferenceIsForwardOnlyWithoutLossOrDropout) {
  auto mc = tiny_plan().at(0);  // gpt2 with dropout 0.1
  set_run_mode(mc.settings, RunMode::Inference);
  auto r = bench_model(mc.model, mc.settings, torch::kCPU, quick());
  ASSERT_TRUE(r.status == "ok" || r.status == "unstable") << r.status << ": " << r.reason;
  EXPECT_EQ(r.settings.value("backward", true), false);
  EXPECT_GT(r.iter.median_ms, 0);
  EXPECT_EQ(r.iter_noopt.median_ms, r.iter.median_ms);  // nothing to leave out
  ASSERT_FALSE(r.node_times.empty());
  for (const auto& n : r.node_times) {
    EXPECT_EQ(n.node.find(".bwd"), std::string::npos) << n.node;
    EXPECT_EQ(n.node.find("dropout"), std::string::npos) << n.node;
    EXPECT_NE(n.node, "head.loss");
    EXPECT_NE(n.node, "optim.step");
  }
}

TEST(ModelBench, FailedRunIsRecordedNotThrown) {
  auto mc = tiny_plan().at(0);
  mc.settings.seq_len = 5000;  // beyond n_positions=1024
  auto r = bench_model(mc.model, mc.settings, torch::kCPU, quick());
  EXPECT_EQ(r.status, "error");
  EXPECT_NE(r.reason.find("seq_len=5000"), std::string::npos) << r.reason;
  EXPECT_TRUE(r.node_times.empty());
}

TEST(ModelBench, BadOptionsThrowNamingTheFlag) {
  auto mc = tiny_plan().at(0);
  auto o = quick();
  o.repeats = 0;
  try {
    bench_model(mc.model, mc.settings, torch::kCPU, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--repeats=0"), std::string::npos) << e.what();
  }
}

TEST(ModelBench, CampaignResumesAndRecordsFailures) {
  auto plan = tiny_plan();
  plan.push_back(plan[0]);
  plan.back().settings.seq_len = 4096;  // fails: recorded with status "error", the campaign goes on
  Store store(temp_db("models_campaign.sqlite"));
  ProbeOptions po;  // a small, quick measurement: the store requires a compute rate
  po.matmul_n = 128;
  po.copy_mb = 4;
  po.repeats = 1;
  DeviceRecord dev = probe_device(torch::kCPU, po);
  ModelCampaignOptions opt;
  opt.campaign = "t";
  opt.bench = quick();
  std::vector<std::string> seen;
  auto s1 = run_model_campaign(
      plan, store, torch::kCPU, dev, opt,
      [&](size_t, size_t, const std::string& k, const std::string&) { seen.push_back(k); });
  EXPECT_EQ(s1.total, 4u);
  EXPECT_EQ(s1.ok + s1.unstable, 3u);
  EXPECT_EQ(s1.failed, 1u);
  EXPECT_EQ(seen.size(), 4u);
  auto rows = store.models("", /*ok_only=*/false);
  ASSERT_EQ(rows.size(), 4u);
  size_t with_nodes = 0;
  for (const auto& r : rows) with_nodes += !r.node_times.empty();
  EXPECT_EQ(with_nodes, 3u);
  // Resume: everything is already there.
  auto s2 = run_model_campaign(plan, store, torch::kCPU, dev, opt);
  EXPECT_EQ(s2.skipped, 4u);
  EXPECT_EQ(s2.ok + s2.unstable + s2.failed, 0u);
  EXPECT_EQ(store.models("", false).size(), 4u);
  EXPECT_EQ(model_plan_key(plan[0]), model_key(rows[0]));
}
