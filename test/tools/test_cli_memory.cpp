// Peak memory on the command line (issue #15): predict says whether it fits,
// --headroom is checked, scale skips splits that do not fit, bench models
// stores peaks and eval memory reports the protocols.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "test_util.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kBundle = " --bundle " + kSrc + "/models/bundles/default ";
std::string dev(const char* name) {
  return " --device-spec " + kSrc + "/models/devices/" + name + ".json ";
}
// A committed collective calibration (A100 NVLink all-reduce, docs/parallel.md): --gpus N needs one.
const std::string kComm = " --comm " + kSrc + "/docs/results/parallel/comm-a100.json ";
}  // namespace

TEST(CliMemory, PredictSaysWhetherItFits) {
  auto r = run_cli("predict" + kBundle + kSrc + "/models/gpt2.json --batch 4 --seq 512" + dev("h100-sxm") +
                   "--json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  const auto& m = j["memory"];
  EXPECT_EQ(m["verdict"], "fits");
  // GPT-2 (124M) with AdamW: at least weights + gradients + two moments in FP32.
  EXPECT_GT(m["peak_bytes"].get<double>(), 124e6 * 16);
  EXPECT_LT(m["peak_bytes"].get<double>(), 40e9);
  EXPECT_DOUBLE_EQ(m["capacity_bytes"].get<double>(), 80e9);
  // GPT-2 large at batch 64 x 1024 tokens on a 16 GB T4: no.
  r = run_cli("predict" + kBundle + kSrc + "/models/gpt2-large.json --batch 64 --seq 1024" + dev("t4"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("DOES NOT FIT in 16.0 GB with 10 % headroom"), std::string::npos) << r.out;
  // Per GPU under tensor + pipeline parallelism, with ZeRO.
  r = run_cli("predict" + kBundle + kSrc + "/models/gpt2-large.json --batch 8 --seq 1024" +
              dev("a100-sxm4-80gb") + "--gpus 8 --tp 2 --pp 2 --microbatches 4 --zero 1 --json" + kComm);
  ASSERT_EQ(r.rc, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["memory_per_gpu"]["in_flight_microbatches"], 2);
  EXPECT_EQ(j["memory_per_gpu"]["verdict"], "fits");
}

TEST(CliMemory, BadHeadroomIsOneError) {
  const std::string base =
      "predict" + kBundle + kSrc + "/models/gpt2.json --batch 1 --seq 128" + dev("h100-sxm");
  expect_one_error(base + "--headroom 1", "--headroom=1 must be in [0, 1)");
  expect_one_error(base + "--headroom -0.2", "--headroom=-0.2 must be in [0, 1)");
  expect_one_error("scale" + kBundle + kSrc + "/models/gpt2.json --batch 8 --seq 128" + dev("h100-sxm") +
                       "--gpus 1 --headroom 1.5",
                   "--headroom=1.5 must be in [0, 1)");
}

TEST(CliMemory, KeepOutputsHoldsTheLogitsOfOneGpusLoop) {
  // GPT-2's 50,257-word logits at 8 x 1,024 tokens in BF16 (autocast): 0.82 GB more at the peak.
  const std::string base = "predict" + kBundle + kSrc +
                           "/models/gpt2.json --batch 8 --seq 1024 --dtype amp-bf16" + dev("h100-sxm");
  auto freed = run_cli(base + "--json");
  auto held = run_cli(base + "--keep-outputs --json");
  ASSERT_EQ(freed.rc, 0) << freed.out;
  ASSERT_EQ(held.rc, 0) << held.out;
  const double d = nlohmann::json::parse(held.out)["memory"]["peak_bytes"].get<double>() -
                   nlohmann::json::parse(freed.out)["memory"]["peak_bytes"].get<double>();
  EXPECT_NEAR(d, 8.0 * 1024 * 50257 * 2, 1024);
  // Megatron-LM's loop (a parallel prediction) holds none: refused, not ignored.
  expect_one_error(base + "--keep-outputs --gpus 2" + kComm, "--keep-outputs: not with --gpus/--tp/--pp");
}

TEST(CliMemory, ScaleSkipsSplitsThatDoNotFit) {
  // GPT-2 large on 16 GB T4s: one GPU cannot hold it with AdamW at 16 x 1024 tokens; splits can.
  auto r = run_cli("scale" + kBundle + kSrc + "/models/gpt2-large.json --batch 16 --seq 1024" + dev("t4") +
                   "--gpus 1..8 --json" + kComm);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["infeasible"].empty()) << r.out;
  EXPECT_EQ(j["infeasible"][0].get<std::string>().rfind("1: no split fits in 16.0 GB", 0), 0u) << r.out;
  for (const auto& p : j["points"]) EXPECT_LE(p["peak_bytes_per_gpu"].get<double>(), 16e9 * 0.9) << p.dump();
}

TEST(CliMemory, BenchModelsStoresPeaksAndEvalMemoryReports) {
  // 16 tiny GPT-2 runs in all three modes: enough for the protocols' splits.
  nlohmann::json plan = {{"kind", "models"}, {"configs", nlohmann::json::array()}};
  int k = 0;
  for (int h : {16, 32})
    for (int l : {1, 2})
      for (int b : {1, 2})
        for (int s : {8, 16}) {
          nlohmann::json st = {{"batch", b}, {"seq_len", s}};
          if (k % 3 == 1) st["optimizer_step"] = false;
          if (k % 3 == 2) st["backward"] = false, st["optimizer_step"] = false;
          ++k;
          plan["configs"].push_back(
              {{"model", kSrc + "/models/gpt2.json"},
               {"overrides", {{"n_embd", h}, {"n_layer", l}, {"n_head", 2}, {"vocab_size", 64}}},
               {"settings", st}});
        }
  const std::string dir = testing::TempDir() + "/cli-memory";
  scaledl::remove_tree(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/plan.json") << plan.dump();
  const std::string db = dir + "/m.sqlite";
  auto r =
      run_cli("bench models --plan " + dir + "/plan.json --db " + db +
              " --device cpu --threads 1 --warmup 1 --warmup-extra 0 --repeats 1 --probe-repeats 0 --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_cli("db export --db " + db + " --table memory");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 17) << r.out;  // header + one row per run
  EXPECT_NE(r.out.find("cpu-counting-allocator"), std::string::npos);
  r = run_cli("eval memory --db " + db + " --seeds 1 --out " + dir + "/eval --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs"], 16);
  for (const char* p : {"id", "ood-size"})
    for (const char* m : {"analytic", "corrected", "dnnperf"}) {
      const auto& a = j["protocols"][p][m]["all"];
      EXPECT_GT(a["runs"].get<int>(), 0) << p << " " << m;
      EXPECT_LT(a["mre"].get<double>(), 100) << p << " " << m;
    }
  EXPECT_TRUE(fs::exists(dir + "/eval/report.md"));
  expect_one_error("eval memory --db " + db + " --protocol ood-family", "--protocol=\"ood-family\"");
}
