// `scaledl bench pipeline` on the committed data, `predict --workers` naming the
// bottleneck, `scale` flattened by a slow input, and the bad inputs of issue #15's
// pipeline half (0 workers, an unreadable --path, a bad --input kind; a corrupt
// JPEG is a counted skip, not an error). No assertion on a measured speed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/pipeline/pipeline.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kData = kSrc + "/datasets/pipeline";
const std::string kQuick = " --warmup-s 0.01 --repeats 2 --repeat-s 0.03 --tokens 128 --image 64";

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  scaledl::remove_tree(d);
  fs::create_directories(d);
  return d;
}

nlohmann::json json_of(const std::string& out) {
  return nlohmann::json::parse(out.substr(out.find('{')));
}

/// A hand-written pipeline description: a slow image pipeline, a fast text one.
std::string slow_images_fast_text(const fs::path& dir) {
  const fs::path p = dir / "pipeline.json";
  std::ofstream(p) << R"({"host": {"cpu": "test", "vcpus": 2},
    "pipelines": [
      {"kind": "image", "sample_size": 224, "points": [{"workers": 1, "samples_per_s": 20},
                                                       {"workers": 2, "samples_per_s": 38}]},
      {"kind": "text", "sample_size": 512, "points": [{"workers": 1, "samples_per_s": 50000},
                                                      {"workers": 2, "samples_per_s": 95000}]}]})";
  return p.string();
}

}  // namespace

TEST(CliPipeline, BenchRunsOnTheCommittedDataAndWritesJsonAndStore) {
  const fs::path dir = temp_dir("scaledl-bench-pipeline");
  const std::string db = (dir / "p.sqlite").string(), out = (dir / "p.json").string();
  CliResult r =
      run_cli("bench pipeline --data " + kData + " --workers 2" + kQuick + " --path " + kData +
              "/kjv-genesis-leviticus.txt --read-repeats 1 --db " + db + " --out " + out + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = json_of(r.out);
  ASSERT_EQ(j["pipelines"].size(), 2u);
  for (const auto& p : j["pipelines"]) {
    ASSERT_EQ(p["points"].size(), 2u);
    for (const auto& q : p["points"]) EXPECT_GT(q["samples_per_s"].get<double>(), 0);
    EXPECT_EQ(p["predicted"].size(), 2u);
    EXPECT_GE(p["model"]["alpha"].get<double>(), 0);
  }
  EXPECT_EQ(j["pipelines"][1]["skipped"], 0);
  EXPECT_EQ(j["storage"]["bytes"], 522204);
  EXPECT_GT(j["storage"]["read_Bps"].get<double>(), 0);
  EXPECT_TRUE(fs::exists(out));
  {
    scaledl::Store s(db, /*read_only=*/true);
    EXPECT_EQ(s.counts()["pipeline"], 5);  // 2 kinds x 2 W + the storage row
  }
  // Both outputs feed the predictor; --check compares a run with another's model.
  EXPECT_GT(scaledl::load_throughput_model(db, scaledl::InputKind::Image).r1, 0);
  r = run_cli("bench pipeline --data " + kData + " --input image --workers 1" + kQuick + " --check " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("check against " + out), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("storage: not measured"), std::string::npos) << r.out;
  scaledl::remove_tree(dir);
}

TEST(CliPipeline, CorruptJpegIsACountedSkipNotAnError) {
  const fs::path dir = temp_dir("scaledl-cli-jpegs");
  fs::copy_file(kData + "/images/chelsea-crop256.jpg", dir / "a.jpg");
  fs::copy_file(kData + "/images/hubble-crop256.jpg", dir / "b.jpg");
  {
    std::ifstream in(kData + "/images/coffee-352.jpg", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir / "truncated.jpg", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  CliResult r =
      run_cli("bench pipeline --input image --images " + dir.string() + " --workers 2" + kQuick + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("warning: corrupt JPEG skipped: truncated.jpg: "), std::string::npos) << r.out;
  const auto j = json_of(r.out);
  EXPECT_EQ(j["pipelines"][0]["skipped"], 1);
  EXPECT_EQ(j["pipelines"][0]["items"], 2);
  scaledl::remove_tree(dir);
}

TEST(CliPipeline, BenchBadInputsAreOneErrorLine) {
  const std::string base = "bench pipeline --data " + kData + kQuick;
  expect_one_error(base + " --workers 0", "--workers=0 must be in [1, 256]");
  expect_one_error(base + " --path /nonexistent/data.bin", "--path=/nonexistent/data.bin: cannot open");
  expect_one_error(base + " --input audio", "--input=audio is not an input kind (text or image)");
  expect_one_error("bench pipeline --data /nonexistent/pipeline",
                   "--data=/nonexistent/pipeline: no such folder");
  expect_one_error(base + " --input text --tokenizer " + kData + "/kjv-genesis-leviticus.txt",
                   "not a SentencePiece model");
}

TEST(CliPipeline, PredictWorkersNamesTheBottleneck) {
  const fs::path dir = temp_dir("scaledl-predict-input");
  const std::string pipe = slow_images_fast_text(dir);
  const std::string bundle = " --bundle " + kSrc + "/models/bundles/default --device-spec " + kSrc +
                             "/models/devices/h100-sxm.json ";
  // A tiny vision model and 38 images/s on 2 workers: the input is the bottleneck.
  const std::string tiny =
      "predict " + kSrc + "/models/deit-tiny.json --batch 32" + bundle + "--pipeline " + pipe;
  CliResult r = run_cli(tiny + " --workers 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = json_of(r.out);
  EXPECT_EQ(j["bottleneck"], "input");
  EXPECT_EQ(j["input"]["kind"], "image");
  EXPECT_NEAR(j["input"]["samples_per_s"].get<double>(), 38, 1e-9);
  EXPECT_NEAR(j["input"]["t_input_ms"].get<double>(), 1e3 * 32 / 38, 1e-6);
  EXPECT_DOUBLE_EQ(j["t_iter_ms"].get<double>(), j["input"]["t_input_ms"].get<double>());
  EXPECT_LT(j["t_compute_ms"].get<double>(), j["t_iter_ms"].get<double>());
  // One worker: slower still (20 images/s), in the text output.
  r = run_cli(tiny + " --workers 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("T_input        1600.000 ms   32 samples per host per iteration"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bottleneck   input: T_iter = max(T_compute"), std::string::npos) << r.out;
  // A big text model and a fast tokenizer: compute is.
  r = run_cli("predict " + kSrc + "/models/gpt2-large.json --batch 4 --seq 1024" + bundle + "--pipeline " +
              pipe + " --workers 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  j = json_of(r.out);
  EXPECT_EQ(j["bottleneck"], "compute");
  EXPECT_EQ(j["input"]["kind"], "text");
  EXPECT_NEAR(j["input"]["samples_per_s"].get<double>(), 95000 * 512.0 / 1024,
              1e-6);  // tokens per sample doubled
  EXPECT_DOUBLE_EQ(j["t_iter_ms"].get<double>(), j["t_compute_ms"].get<double>());
  // Bad inputs.
  expect_one_error(tiny + " --workers 0", "--workers=0 must be in [1, 4096]");
  expect_one_error(tiny + " --workers 2 --input audio", "--input=audio is not an input kind");
  expect_one_error(tiny + " --workers 2 --input text", "--input=text does not match deit-tiny");
  expect_one_error("predict " + kSrc + "/models/deit-tiny.json" + bundle + "--workers 2",
                   "need --pipeline FILE");
  expect_one_error(
      "predict " + kSrc + "/models/deit-tiny.json" + bundle + "--workers 2 --pipeline /nonexistent.json",
      "--pipeline=/nonexistent.json: cannot open");
  scaledl::remove_tree(dir);
}

TEST(CliPipeline, ScaleShowsWhereTheInputStopsMoreGpusHelping) {
  const fs::path dir = temp_dir("scaledl-scale-input");
  std::ofstream(dir / "comm.json") << R"({"bandwidth_Bps": 1.0e11, "gamma_s": 1.0e-5})";
  // 1 text sample/s per host: every GPU count waits for the input.
  std::ofstream(dir / "slow.json") << R"({"pipelines": [{"kind": "text", "sample_size": 512,
                                          "points": [{"workers": 1, "samples_per_s": 1}]}]})";
  const std::string base =
      "scale " + kSrc + "/models/gpt2.json --bundle " + kSrc + "/models/bundles/default " + "--device-spec " +
      kSrc + "/models/devices/a100-sxm4-40gb.json --seq 512 --batch 32 " + "--comm " +
      (dir / "comm.json").string() + " --pipeline " + (dir / "slow.json").string() + " --workers 1";
  CliResult r = run_cli(base + " --gpus 1..4 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = json_of(r.out);
  ASSERT_EQ(j["points"].size(), 3u);
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["bottleneck"], "input");
    EXPECT_NEAR(p["t_input_ms"].get<double>(), 32000, 1e-6);  // 32 samples at 1 sample/s, one host
    EXPECT_DOUBLE_EQ(p["t_iter_ms"].get<double>(), 32000);
    EXPECT_NEAR(p["speedup"].get<double>(), 1.0, 1e-9);  // flat: more GPUs do not help
  }
  r = run_cli(base + " --gpus 1,2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("from 1 GPUs the input pipeline is the bottleneck"), std::string::npos) << r.out;
  expect_one_error(base + " --gpus 1,2 --vcpus 0", "--vcpus=0 must be in [1, 4096]");
  scaledl::remove_tree(dir);
}

// Issue #39, case 29: an input-bound prediction is as uncertain as the input rate, not exact.
TEST(CliPipeline, AnInputBoundPredictionHasTheInputRatesInterval) {
  const fs::path dir = temp_dir("scaledl-predict-input-interval");
  const std::string pipe = slow_images_fast_text(dir);
  CliResult r = run_cli("predict " + kSrc + "/models/deit-tiny.json --batch 32 --bundle " + kSrc +
                        "/models/bundles/default --device-spec " + kSrc +
                        "/models/devices/h100-sxm.json --pipeline " + pipe + " --workers 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = json_of(r.out);
  ASSERT_EQ(j["bottleneck"], "input");
  const double t = j["t_iter_ms"].get<double>();
  const auto& i80 = j["interval_ms"]["80"];
  const auto& i95 = j["interval_ms"]["95"];
  EXPECT_LT(i80[0].get<double>(), t);
  EXPECT_GT(i80[1].get<double>(), t);
  EXPECT_LT(i95[0].get<double>(), i80[0].get<double>());
  EXPECT_GT(i95[1].get<double>(), i80[1].get<double>());
  scaledl::remove_tree(dir);
}
