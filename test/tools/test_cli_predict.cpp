// End-to-end: `scaledl train layers` on the committed CPU campaign, then
// `scaledl predict` with and without a graph model, and its bad-input paths.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using scaledl::test::run_cli;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

/// Layer models trained once for the whole suite (0.2 s on the CPU rows).
class CliPredict : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One directory per process: ctest -j runs each test of this suite in its own process.
    dir_ = testing::TempDir() + "/predict_layers_" + std::to_string(getpid());
    scaledl::remove_tree(dir_);
    auto r = run_cli("train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --out " + dir_ +
                     " --folds 0 --nthread 1");
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  static std::string base() {
    return "predict " + kSrc + "/models/gpt2.json --batch 2 --seq 64 --layers " + dir_ + " --db " + kSrc +
           "/datasets/cpu/layers.sqlite";
  }
  static std::string dir_;
};
std::string CliPredict::dir_;

}  // namespace

TEST_F(CliPredict, AdditiveBaselineIsTheSumOfLayerTimes) {
  auto r = run_cli(base() + " --samples 1000 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["t_sum_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["t_comm_ms"].get<double>(), 0);  // one device
  EXPECT_FALSE(j["refined"].get<bool>());
  EXPECT_DOUBLE_EQ(j["t_iter_ms"].get<double>(), j["t_sum_ms"].get<double>());
  EXPECT_EQ(j["iterations_per_epoch"], 500);  // ceil(1000 / 2)
  EXPECT_NEAR(j["t_epoch_s"].get<double>(), 500 * j["t_iter_ms"].get<double>() / 1000, 1e-9);
  double by_type = 0;
  for (auto& [k, v] : j["by_type_ms"].items()) by_type += v.get<double>();
  EXPECT_NEAR(by_type, j["t_sum_ms"].get<double>(), 1e-6 * by_type);
}

TEST_F(CliPredict, BiggerBatchTakesLonger) {
  auto small = run_cli(base() + " --json");
  auto big = run_cli("predict " + kSrc + "/models/gpt2.json --batch 16 --seq 256 --layers " + dir_ +
                     " --db " + kSrc + "/datasets/cpu/layers.sqlite --json");
  ASSERT_EQ(small.rc, 0) << small.out;
  ASSERT_EQ(big.rc, 0) << big.out;
  EXPECT_GT(nlohmann::json::parse(big.out)["t_sum_ms"].get<double>(),
            2 * nlohmann::json::parse(small.out)["t_sum_ms"].get<double>());
}

TEST_F(CliPredict, DataParallelUsesTheCalibratedAllReduce) {
  const std::string comm = testing::TempDir() + "/comm_" + std::to_string(getpid()) + ".json";
  std::ofstream(comm) << R"({"bandwidth_Bps": 1e10, "gamma_s": 1e-5})";
  auto r = run_cli(base() + " --devices 4 --comm " + comm + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  // eq. 15 with S = 124,439,808 params x 4 bytes: 2*3/4 * S/B + 2*3*gamma
  const double s = 124439808.0 * 4;
  EXPECT_NEAR(j["t_comm_ms"].get<double>(), 1e3 * (1.5 * s / 1e10 + 6e-5), 1e-3);
}

TEST_F(CliPredict, BadInputsGiveOneErrorLine) {
  struct Case {
    std::string args, expect;
  };
  const std::string bad_json = testing::TempDir() + "/bad_device_" + std::to_string(getpid()) + ".json";
  std::ofstream(bad_json) << "{\"name\": \"x\", ";
  const std::string empty_dir = testing::TempDir() + "/empty_layers_" + std::to_string(getpid());
  std::filesystem::create_directories(empty_dir);
  const std::string model = kSrc + "/models/gpt2.json --layers " + dir_;
  const Case cases[] = {
      {"predict " + model, "no device"},
      {"predict " + model + " --device-spec " + bad_json, "malformed JSON"},
      {"predict " + model + " --db " + kSrc + "/datasets/cpu/layers.sqlite --device cuda:nothing",
       "--device=cuda:nothing"},
      {base() + " --devices 2", "--devices=2 needs an all-reduce calibration"},
      {base() + " --samples 10 --iterations 3", "not both"},
      {"predict " + kSrc + "/models/gpt2.json --layers " + empty_dir + " --db " + kSrc +
           "/datasets/cpu/layers.sqlite",
       empty_dir},
      {base() + " --graph " + empty_dir, "graph_model.safetensors"},
      {base() + " --dtype fp64", "--dtype=\"fp64\""},
  };
  for (const auto& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_EQ(r.rc, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("scaledl: error: "), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << "\n" << r.out;
  }
}
