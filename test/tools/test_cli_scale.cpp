// `scaledl scale` searching layouts (ZeRO stages, context parallelism, virtual stages,
// recomputation, sequence parallelism, kernel recipes) and comparing GPU types by the cost of
// an epoch, with the shipped price table or the user's prices (issues #42, #43).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
/// Run from the source tree, where models/devices and models/prices.json are.
const std::string kInSrc = "cd " + kSrc + " && ";
const std::string kBase =
    "scale models/gpt2.json --bundle models/bundles/default --seq 1024 --batch 32 --dtype bf16 ";

nlohmann::json scale_json(const std::string& args) {
  const CliResult r = run_cli(kBase + args + " --json", kInSrc);
  EXPECT_EQ(r.rc, 0) << args << "\n" << r.out;
  if (r.rc != 0) return {};
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}
}  // namespace

TEST(CliScale, SearchesTheLayoutsItIsGivenAndNeverDoesWorseThanASubset) {
  const nlohmann::json plain = scale_json("--device-spec h100-sxm --gpus 1,8");
  const nlohmann::json wide = scale_json(
      "--device-spec h100-sxm --gpus 1,8 --zero 0,1,3 --cp 1,2 --search recompute,sp "
      "--framework hf-eager,megatron");
  ASSERT_EQ(plain["points"].size(), 2u);
  ASSERT_EQ(wide["points"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto& p = wide["points"][i];
    EXPECT_EQ(p["gpus"].get<int64_t>(), p["tp"].get<int64_t>() * p["cp"].get<int64_t>() *
                                            p["pp"].get<int64_t>() * p["dp"].get<int64_t>())
        << p.dump();
    EXPECT_TRUE(std::set<int64_t>({0, 1, 3}).count(p["zero"].get<int64_t>())) << p.dump();
    EXPECT_TRUE(p["framework"] == "hf-eager" || p["framework"] == "megatron") << p.dump();
    if (p["sequence_parallel"].get<bool>()) EXPECT_GT(p["tp"].get<int64_t>(), 1) << p.dump();
    // The wider search holds the plain one's layouts: never slower.
    EXPECT_LE(p["t_iter_ms"].get<double>(), plain["points"][i]["t_iter_ms"].get<double>() * (1 + 1e-12));
    EXPECT_NE(p["layout"].get<std::string>().find("tp "), std::string::npos);
  }
  EXPECT_TRUE(plain["points"][0]["framework"].is_null());
  // --search recompute tries the attention core alone too (where it is eager) and names the pick.
  const nlohmann::json rc = scale_json("--device-spec h100-sxm --gpus 8 --search recompute --headroom 0.99");
  ASSERT_EQ(rc["points"].size(), 1u);
  EXPECT_TRUE(std::set<std::string>({"none", "selective", "full"})
                  .count(rc["points"][0]["recompute_granularity"].get<std::string>()))
      << rc["points"][0].dump();
  const nlohmann::json sel = scale_json("--device-spec h100-sxm --gpus 8 --recompute-selective");
  ASSERT_EQ(sel["points"].size(), 1u);
  EXPECT_EQ(sel["points"][0]["recompute_granularity"], "selective") << sel["points"][0].dump();
  EXPECT_NE(sel["points"][0]["layout"].get<std::string>().find("selective recompute"), std::string::npos);
  // Megatron's fused kernels beat Hugging Face's eager ones on one GPU.
  EXPECT_EQ(wide["points"][0]["framework"], "megatron");
  EXPECT_LT(wide["single_gpu_ms"].get<double>(), plain["single_gpu_ms"].get<double>());
}

TEST(CliScale, ComparesGpuTypesByTheCostOfAnEpoch) {
  const nlohmann::json j =
      scale_json("--device-spec h100-sxm,a100-sxm4-80gb,b200 --gpus 1..8 --samples 1000000");
  ASSERT_EQ(j["devices"].size(), 3u);
  ASSERT_EQ(j["ranking"].size(), 3u);
  for (const auto& d : j["devices"]) {
    EXPECT_GT(d["price_per_gpu_hour"].get<double>(), 0) << d.dump();
    EXPECT_NE(d["price_source"].get<std::string>().find("prices.json"), std::string::npos) << d.dump();
  }
  double last = 0;
  for (const auto& r : j["ranking"]) {  // cheapest first
    EXPECT_GT(r["cost"].get<double>(), 0) << r.dump();
    EXPECT_GE(r["cost"].get<double>(), last) << j["ranking"].dump();
    last = r["cost"].get<double>();
  }
  // Prices of one's own, one per GPU, and the text form's comparison table.
  const CliResult t = run_cli(kBase +
                                  "--device-spec h100-sxm,a100-sxm4-80gb --gpus 1..8 --samples 1000000 "
                                  "--price-per-gpu-hour 2,1",
                              kInSrc);
  ASSERT_EQ(t.rc, 0) << t.out;
  EXPECT_NE(t.out.find("== h100-sxm"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("ranked by cost per epoch"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("price: 2.00 per GPU hour (--price-per-gpu-hour)"), std::string::npos) << t.out;
  // Without --samples there is no epoch: ranked by time per sample, and it says how to get a cost.
  const CliResult n = run_cli(kBase + "--device-spec h100-sxm,b200 --gpus 1,2", kInSrc);
  ASSERT_EQ(n.rc, 0) << n.out;
  EXPECT_NE(n.out.find("ranked by time per sample"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("give --samples"), std::string::npos) << n.out;
}

TEST(CliScale, APlotOfGpuTypesWithoutACurveIsNotWritten) {
  // FP8 on two GPUs without FP8 units: each has no curve, so there is nothing to plot.
  const fs::path dir = fs::temp_directory_path() / ("scaledl-scale-plot-" + std::to_string(getpid()));
  scaledl::remove_tree(dir);
  const CliResult r = run_cli(
      "scale models/gpt2.json --bundle models/bundles/default --seq 1024 --batch 32 --dtype fp8 "
      "--device-spec a100-sxm4-80gb,v100-sxm2-32gb --gpus 1,2 --plot " +
          dir.string(),
      kInSrc);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("no curve: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plot: none written (no GPU type has a curve)"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "scale.dat"));
  scaledl::remove_tree(dir);
}

TEST(CliScale, BadSearchesAndPricesAreOneErrorLine) {
  auto err = [&](const std::string& args, const std::string& expect) {
    const CliResult r = run_cli(kBase + args, kInSrc);
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("scaledl: error: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(expect), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
  };
  err("--device-spec h100-sxm --zero 0,7", "--zero=0,7: \"7\" is not an integer in [0, 3]");
  err("--device-spec h100-sxm --cp 1,x", "--cp=1,x");
  err("--device-spec h100-sxm --search recompute,fsdp",
      "--search=recompute,fsdp: \"fsdp\" is not a searched");
  err("--device-spec h100-sxm --framework hf-eager,megatron --attention fused",
      "--attention=fused with several");
  err("--device-spec h100-sxm --recompute --recompute-selective",
      "--recompute and --recompute-selective: give one granularity");
  err("--device-spec h100-sxm --framework hf-eager,jax", "--framework=\"jax\"");
  err("--device-spec h100-sxm,nosuch-gpu --gpus 1", "--device-spec=\"nosuch-gpu\"");
  err("--device-spec h100-sxm,b200 --gpus 1 --price-per-gpu-hour 1,2,3",
      "give one price, or one per --device-spec (2)");
  err("--device-spec h100-sxm --gpus 1 --price-per-gpu-hour -1", "--price-per-gpu-hour=-1 must be >= 0");
  const fs::path bad = fs::temp_directory_path() / ("scaledl_prices_" + std::to_string(::getpid()) + ".json");
  write(bad.string(), R"({"gpus": {"h100-sxm": {"usd_per_gpu_hour": -3}}})");
  err("--device-spec h100-sxm --gpus 1 --prices " + bad.string(),
      "gpus.h100-sxm.usd_per_gpu_hour=-3 must be a price > 0");
  write(bad.string(), R"({"gpus": {"h100-sxm": {"usd": 3}}})");
  err("--device-spec h100-sxm --gpus 1 --prices " + bad.string(), "gpus.h100-sxm.usd is not a price key");
  fs::remove(bad);
}

TEST(CliScale, WithoutABundleTheShippedDefaultIsTaken) {
  const std::string job =
      "scale models/gpt2.json --seq 1024 --batch 32 --dtype bf16 --device-spec h100-sxm "
      "--gpus 1,8 --json";
  const CliResult plain = run_cli(job, kInSrc);
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const CliResult given = run_cli(job + " --bundle models/bundles/default", kInSrc);
  ASSERT_EQ(given.rc, 0) << given.out;
  const auto a = nlohmann::json::parse(plain.out.substr(plain.out.find('{')));
  const auto b = nlohmann::json::parse(given.out.substr(given.out.find('{')));
  EXPECT_EQ(a["points"], b["points"]);
}
