// Issue #13 on the command line: the shipped default bundle predicts a GPU the
// user does not have from its spec sheet, in every mode, on a fresh clone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;

nlohmann::json predict_json(const std::string& args) {
  CliResult r = run_cli("predict --bundle " + kSrc + "/models/bundles/default " + args + " --json");
  EXPECT_EQ(r.rc, 0) << args << "\n" << r.out;
  const size_t at = r.out.find('{');
  if (r.rc != 0 || at == std::string::npos) return {};
  return nlohmann::json::parse(r.out.substr(at), nullptr, false);
}
}  // namespace

TEST(CliUnseenGpu, DefaultBundlePredictsAnH100FromItsSpecSheetInEveryMode) {
  const std::string base = kSrc + "/models/gpt2-large.json --batch 4 --seq 1024 --device-spec " + kSrc +
                           "/models/devices/h100-sxm.json";
  const nlohmann::json fb = predict_json(base + " --mode fwd-bwd");
  ASSERT_TRUE(fb.is_object());
  EXPECT_EQ(fb["mode"], "fwd-bwd");
  const double t_fb = fb["t_iter_ms"].get<double>();
  EXPECT_GT(t_fb, 0);
  const double t_inf = predict_json(base + " --mode inference")["t_iter_ms"].get<double>();
  const double t_train = predict_json(base + " --mode train")["t_iter_ms"].get<double>();
  // An iteration does less work without backward, and more with the optimizer step.
  EXPECT_LT(t_inf, t_fb);
  EXPECT_GT(t_train, t_fb);
  // The same on a slower GPU (L4, 30 TFLOP/s FP32, 300 GB/s) takes longer.
  const double t_l4 = predict_json(kSrc + "/models/gpt2-large.json --batch 4 --seq 1024 --device-spec " + kSrc +
                                   "/models/devices/l4.json --mode fwd-bwd")["t_iter_ms"].get<double>();
  EXPECT_GT(t_l4, 2 * t_fb);
}

TEST(CliUnseenGpu, BadModesAndSpecsAreOneClearError) {
  const std::string base = "predict --bundle " + kSrc + "/models/bundles/default " + kSrc + "/models/gpt2.json ";
  expect_one_error(base + "--device-spec " + kSrc + "/models/devices/l4.json --mode backward",
                   "--mode=\"backward\" is not a mode (known: train, fwd-bwd, inference)");
  expect_one_error(base + "--device-spec " + kSrc + "/models/devices/l4.json --mode train --no-optimizer",
                   "--mode excludes --no-optimizer");
  const fs::path dir = fs::temp_directory_path() / ("scaledl_unseen_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "nopeak.json") << R"({"name":"Mystery GPU","kind":"spec","cores":100,"clock_mhz":1500,)"
                                     << R"("peak_mem_bw_gbs":2000})";
  expect_one_error(base + "--device-spec " + (dir / "nopeak.json").string(), "peak_fp32_gflops");
  std::ofstream(dir / "hot.json") << R"({"name":"Hot GPU","kind":"spec","cores":100,"clock_mhz":1500,)"
                                  << R"("sustained_clock_mhz":1800,"peak_fp32_gflops":20000,"peak_mem_bw_gbs":2000})";
  expect_one_error(base + "--device-spec " + (dir / "hot.json").string(), "sustained_clock_mhz=1800 must be at most");
  fs::remove_all(dir);
}

TEST(CliUnseenGpu, SweepAndCsvCarryTheMode) {
  CliResult r = run_cli("predict --bundle " + kSrc + "/models/bundles/default " + kSrc +
                        "/models/gpt2.json --device-spec " + kSrc +
                        "/models/devices/a100-sxm4-80gb.json --sweep mode=inference,fwd-bwd,train");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(",adjusted,mode\n"), std::string::npos) << r.out;
  for (const char* m : {",inference\n", ",fwd-bwd\n", ",train\n"}) EXPECT_NE(r.out.find(m), std::string::npos) << m;
  expect_one_error("predict --bundle " + kSrc + "/models/bundles/default " + kSrc + "/models/gpt2.json --device-spec " +
                       kSrc + "/models/devices/l4.json --sweep mode=eval",
                   "mode=\"eval\" is not a mode");
}
