// The host input pipeline (issue #15, pipeline.hpp): the JPEG path on the
// committed data, skip-and-count of corrupt JPEGs, the ORION
// throughput model, the JSON report and the store's pipeline table (the
// tokenizer: test/pipeline_text/). No timed assertion: measured rates are only
// checked to be rates.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/pipeline/pipeline.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(SCALEDL_SOURCE_DIR) + "/datasets/pipeline";

std::vector<uint8_t> file_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::path(testing::TempDir()) / (name + "-" + std::to_string(::getpid()));
  scaledl::remove_tree(d);
  fs::create_directories(d);
  return d;
}

/// Quick settings: the tests check shapes and counts, never speed.
PipelineBenchOptions quick() {
  PipelineBenchOptions o;
  o.corpus = kData + "/kjv-genesis-leviticus.txt";
  o.tokenizer = kData + "/kjv-bpe4k.model";
  o.images = kData + "/images";
  o.max_workers = 2;
  o.warmup_s = 0.01;
  o.repeats = 2;
  o.repeat_s = 0.03;
  o.tokens_per_sample = 128;
  o.image_size = 64;
  return o;
}

PipelineMeasurement synthetic(InputKind kind, std::vector<std::pair<int, double>> pts, int64_t size) {
  PipelineMeasurement m;
  m.kind = kind;
  m.sample_size = size;
  for (auto [w, r] : pts) {
    WorkerPoint p;
    p.workers = w;
    p.samples_per_s = r;
    m.points.push_back(p);
  }
  return m;
}

}  // namespace

// ---- images -------------------------------------------------------------------------

TEST(Jpeg, CommittedImagesDecodeToTheirSizes) {
  JpegDecoder d;
  RgbImage img;
  struct Case {
    const char* file;
    int w, h;
  };
  for (const Case& c : {Case{"astronaut-448.jpg", 448, 448}, Case{"rocket-448.jpg", 448, 299},
                        Case{"chelsea-crop256.jpg", 256, 256}, Case{"camera-384.jpg", 384, 384}}) {
    const auto b = file_bytes(kData + "/images/" + c.file);
    ASSERT_FALSE(b.empty()) << c.file;
    std::string why;
    ASSERT_TRUE(d.decode(b.data(), b.size(), img, &why)) << c.file << ": " << why;
    EXPECT_EQ(img.width, c.w) << c.file;
    EXPECT_EQ(img.height, c.h) << c.file;
    EXPECT_EQ(img.pixels.size(), static_cast<size_t>(c.w) * c.h * 3) << c.file;
  }
}

TEST(Jpeg, CorruptBytesAreRefusedNotCrashed) {
  JpegDecoder d;
  RgbImage img;
  auto b = file_bytes(kData + "/images/astronaut-448.jpg");
  b.resize(b.size() / 2);  // truncated: "Premature end of JPEG file" stops the decode
  std::string why;
  EXPECT_FALSE(d.decode(b.data(), b.size(), img, &why));
  EXPECT_FALSE(why.empty());
  const std::vector<uint8_t> junk = {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'};
  EXPECT_FALSE(d.decode(junk.data(), junk.size(), img, &why));
  EXPECT_FALSE(d.decode(junk.data(), 0, img, &why));
}

TEST(ImageTransform, RandomResizedCropStaysInsideAndCoversTheScaleRange) {
  std::mt19937_64 rng(7);
  double lo = 1, hi = 0;
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = random_resized_crop_box(451, 300, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_GE(b.w, 1);
    ASSERT_GE(b.h, 1);
    ASSERT_LE(b.x + b.w, 451);
    ASSERT_LE(b.y + b.h, 300);
    const double f = static_cast<double>(b.w) * b.h / (451.0 * 300.0);
    lo = std::min(lo, f), hi = std::max(hi, f);
  }
  EXPECT_LT(lo, 0.12);  // near the 0.08 lower bound
  EXPECT_GT(hi, 0.7);
  // An extreme aspect ratio falls back to the centred crop at the clamped ratio.
  std::mt19937_64 r2(1);
  const CropBox c = random_resized_crop_box(1000, 10, r2, 0.99, 1.0);
  EXPECT_EQ(c.h, 10);
  EXPECT_EQ(c.w, 13);  // 10 x 4/3
  EXPECT_EQ(c.x, (1000 - 13) / 2);
}

TEST(ImageTransform, OutputShapeRangeAndFlip) {
  JpegDecoder d;
  RgbImage img;
  const auto b = file_bytes(kData + "/images/coffee-448.jpg");
  ASSERT_TRUE(d.decode(b.data(), b.size(), img));
  std::mt19937_64 rng(3);
  const CropBox box = random_resized_crop_box(img.width, img.height, rng);
  const int S = 224;
  std::vector<float> a(3 * S * S, NAN), f(3 * S * S, NAN);
  resize_flip_normalise(img, box, S, false, a.data());
  resize_flip_normalise(img, box, S, true, f.data());
  for (int c = 0; c < 3; ++c) {
    const float lo = -kImageNetMean[c] / kImageNetStd[c], hi = (1 - kImageNetMean[c]) / kImageNetStd[c];
    for (int i = 0; i < S * S; ++i) {
      const float v = a[static_cast<size_t>(c * S * S + i)];
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_GE(v, lo - 1e-4f) << "channel " << c;
      ASSERT_LE(v, hi + 1e-4f) << "channel " << c;
    }
    for (int y = 0; y < S; y += 37)
      for (int x = 0; x < S; x += 11)
        ASSERT_FLOAT_EQ(f[static_cast<size_t>(c * S * S + y * S + x)],
                        a[static_cast<size_t>(c * S * S + y * S + S - 1 - x)]);
  }
  // A one-colour image normalises to exactly (v / 255 - mean) / std.
  RgbImage flat{5, 4, std::vector<uint8_t>(5 * 4 * 3, 128)};
  std::vector<float> o(3 * 8 * 8);
  resize_flip_normalise(flat, {0, 0, 5, 4}, 8, true, o.data());
  EXPECT_NEAR(o[0], (128 / 255.0 - 0.485) / 0.229, 1e-5);
  EXPECT_NEAR(o[2 * 64 + 63], (128 / 255.0 - 0.406) / 0.225, 1e-5);
  EXPECT_NE(error_of([&] {
              resize_flip_normalise(flat, {3, 0, 5, 4}, 8, false, o.data());
            }).find("outside the 5 x 4"),
            std::string::npos);
}

// ---- the benchmark on committed data --------------------------------------------------

TEST(PipelineBench, ImageMeasuresEveryWorkerCount) {
  const PipelineMeasurement i = bench_image_pipeline(quick());
  ASSERT_EQ(i.points.size(), 2u);
  for (const auto& p : i.points) {
    EXPECT_GT(p.samples_per_s, 0);
    EXPECT_EQ(p.repeats, 2);
    EXPECT_GT(p.samples, 0);
  }
  EXPECT_EQ(i.items, 24);
  EXPECT_EQ(i.skipped, 0);
  EXPECT_GT(i.decode_ms, 0);
  EXPECT_GT(i.bytes_per_sample, 5000);
}

TEST(PipelineBench, CorruptJpegIsSkippedAndCounted) {
  const fs::path dir = temp_dir("scaledl-jpegs");
  fs::copy_file(kData + "/images/chelsea-crop256.jpg", dir / "a.jpg");
  fs::copy_file(kData + "/images/rocket-crop256.jpg", dir / "b.JPEG");
  auto b = file_bytes(kData + "/images/coffee-352.jpg");
  b.resize(b.size() * 2 / 3);
  write_bytes(dir / "truncated.jpg", b);
  write_bytes(dir / "empty.jpg", {});
  std::ofstream(dir / "notes.txt") << "not an image";
  PipelineBenchOptions o = quick();
  o.images = dir.string();
  const PipelineMeasurement m = bench_image_pipeline(o);
  EXPECT_EQ(m.items, 2);
  EXPECT_EQ(m.skipped, 2);
  ASSERT_EQ(m.skipped_files.size(), 2u);
  EXPECT_EQ(m.skipped_files[0].rfind("empty.jpg: ", 0), 0u) << m.skipped_files[0];
  EXPECT_EQ(m.skipped_files[1].rfind("truncated.jpg: ", 0), 0u) << m.skipped_files[1];
  EXPECT_EQ(m.points.size(), 2u);
  // Only corrupt files: an error naming the option, not a hang.
  fs::remove(dir / "a.jpg");
  fs::remove(dir / "b.JPEG");
  EXPECT_NE(error_of([&] {
              bench_image_pipeline(o);
            }).find("--images=" + dir.string() + ": no decodable JPEG (2 corrupt"),
            std::string::npos);
  scaledl::remove_tree(dir);
}

TEST(PipelineBench, BadOptionsNameTheirKey) {
  PipelineBenchOptions o = quick();
  o.max_workers = 0;
  EXPECT_NE(error_of([&] { bench_image_pipeline(o); }).find("--workers=0 must be in [1, 256]"),
            std::string::npos);
  o = quick();
  o.image_size = 4;
  EXPECT_NE(error_of([&] { bench_image_pipeline(o); }).find("--image=4 must be in [8, 4096]"),
            std::string::npos);
  o = quick();
  o.images = "/nonexistent/dir";
  EXPECT_NE(error_of([&] { bench_image_pipeline(o); }).find("--images=/nonexistent/dir: no such folder"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              measure_storage_read("/nonexistent/file.bin");
            }).find("--path=/nonexistent/file.bin: cannot open"),
            std::string::npos);
  EXPECT_NE(error_of([] { measure_storage_read(testing::TempDir()); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_input_kind("audio"); }).find("--input=audio is not an input kind"),
            std::string::npos);
}

TEST(PipelineBench, StorageReadOfACommittedFile) {
  const StorageMeasurement s = measure_storage_read(kData + "/kjv-genesis-leviticus.txt", 2);
  EXPECT_EQ(s.bytes, 522204);
  EXPECT_GT(s.read_Bps, 0);
  EXPECT_EQ(s.repeats, 2);
  EXPECT_GE(s.resident_before, 0);
  EXPECT_LE(s.resident_before, 1);
}

// ---- the throughput model --------------------------------------------------------------

TEST(ThroughputModel, FitFromTwoWorkersIsMonotoneAndFlatBeyondTheVcpus) {
  HostInfo h{"test cpu", 2};
  const auto m = ThroughputModel::fit(synthetic(InputKind::Image, {{1, 100}, {2, 180}}, 224), nullptr, h);
  EXPECT_DOUBLE_EQ(m.r1, 100);
  EXPECT_NEAR(m.alpha, 2 * 100.0 / 180 - 1, 1e-12);
  EXPECT_EQ(m.beta, 0);
  EXPECT_NEAR(m.cpu_rate(2, 2, 224), 180, 1e-9);  // reproduces its points
  double prev = 0;
  for (int w = 1; w <= 64; ++w) {
    const double r = predict_input(m, w, 16, 224).samples_per_s;
    EXPECT_GE(r, prev - 1e-9) << "W=" << w;  // monotone in workers
    prev = r;
  }
  EXPECT_DOUBLE_EQ(predict_input(m, 64, 16, 224).samples_per_s, predict_input(m, 16, 16, 224).samples_per_s);
  EXPECT_DOUBLE_EQ(predict_input(m, 8, 2, 224).samples_per_s, 180);  // 8 workers share 2 vCPUs
  // A W = 2 point slower than W = 1 (a loaded machine) is read as no gain, not a loss.
  const auto flat = ThroughputModel::fit(synthetic(InputKind::Text, {{1, 100}, {2, 90}}, 512), nullptr, h);
  EXPECT_EQ(flat.alpha, 1);
  EXPECT_DOUBLE_EQ(flat.cpu_rate(8, 8, 512), 100);
  // Three worker counts fit contention and coherency.
  HostInfo h4{"test cpu", 4};
  const auto usl =
      ThroughputModel::fit(synthetic(InputKind::Text, {{1, 100}, {2, 190}, {4, 330}}, 512), nullptr, h4);
  EXPECT_GE(usl.beta, 0);
  EXPECT_NEAR(usl.cpu_rate(4, 4, 512), 330, 15);
  EXPECT_NE(error_of([&] {
              ThroughputModel::fit(synthetic(InputKind::Text, {{2, 100}}, 512), nullptr, h);
            }).find("no W = 1 measurement"),
            std::string::npos);
}

TEST(ThroughputModel, StorageCapsTheRateAndSampleSizeRescalesIt) {
  HostInfo h{"test cpu", 2};
  PipelineMeasurement pm = synthetic(InputKind::Image, {{1, 100}, {2, 200}}, 224);
  pm.read_ms = 0.1;
  pm.decode_ms = 5.9;
  pm.transform_ms = 4.0;  // 10 ms per sample, 4 of them scale with the output's pixels
  pm.bytes_per_sample = 100e3;
  StorageMeasurement st;
  st.read_Bps = 15e6;  // 150 samples/s of 100 kB
  const auto m = ThroughputModel::fit(pm, &st, h);
  const InputPrediction one = predict_input(m, 1, 2, 224), two = predict_input(m, 2, 2, 224);
  EXPECT_DOUBLE_EQ(one.samples_per_s, 100);
  EXPECT_EQ(one.limit, "cpu");
  EXPECT_DOUBLE_EQ(two.cpu_samples_per_s, 200);
  EXPECT_DOUBLE_EQ(two.samples_per_s, 150);  // capped by storage
  EXPECT_EQ(two.limit, "storage");
  for (int w = 1; w <= 32; ++w) EXPECT_LE(predict_input(m, w, 32, 224).samples_per_s, 150 + 1e-9);
  // 448 px output: 6 + 4 x 4 = 22 ms per sample instead of 10.
  EXPECT_NEAR(predict_input(m, 1, 2, 448).cpu_samples_per_s, 100 * 10.0 / 22.0, 1e-9);
  // Text: the cost and the stored bytes scale with tokens per sample.
  PipelineMeasurement tm = synthetic(InputKind::Text, {{1, 1000}}, 512);
  tm.decode_ms = 1;
  tm.bytes_per_sample = 2000;
  st.read_Bps = 4e6;
  const auto t = ThroughputModel::fit(tm, &st, h);
  EXPECT_NEAR(predict_input(t, 1, 2, 1024).cpu_samples_per_s, 500, 1e-9);
  EXPECT_NEAR(t.storage_rate(1024), 1000, 1e-9);
  EXPECT_NE(error_of([&] { predict_input(t, 0, 2, 512); }).find("--workers=0 must be in [1, 4096]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { predict_input(t, 1, 0, 512); }).find("--vcpus=0"), std::string::npos);
}

TEST(ThroughputModel, IterationBoundNamesTheSlowerSide) {
  InputPrediction in;
  in.samples_per_s = 100;
  const IterationBound a = bound_iteration(50, 32, in);  // 320 ms of input
  EXPECT_DOUBLE_EQ(a.t_input_ms, 320);
  EXPECT_DOUBLE_EQ(a.t_iter_ms, 320);
  EXPECT_EQ(a.bottleneck, "input");
  const IterationBound b = bound_iteration(500, 32, in);
  EXPECT_DOUBLE_EQ(b.t_iter_ms, 500);
  EXPECT_EQ(b.bottleneck, "compute");
}

// ---- JSON and the store -----------------------------------------------------------------

TEST(PipelineReport, JsonRoundTripAndBadDescriptions) {
  PipelineReport r;
  r.host = {"test cpu", 2};
  r.pipelines.push_back(synthetic(InputKind::Text, {{1, 1000}, {2, 1900}}, 512));
  r.pipelines.back().bytes_per_sample = 2000;
  r.pipelines.push_back(synthetic(InputKind::Image, {{1, 300}, {2, 560}}, 224));
  StorageMeasurement st;
  st.path = "/data/x";
  st.read_Bps = 5e8;
  st.cache_dropped = true;
  r.storage = st;
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["format"], "scaledl-pipeline");
  EXPECT_NEAR(j["pipelines"][1]["predicted"][1]["samples_per_s"].get<double>(), 560, 1e-9);
  const PipelineReport back = PipelineReport::from_json(j, "r.json");
  ASSERT_EQ(back.pipelines.size(), 2u);
  EXPECT_EQ(back.pipelines[1].kind, InputKind::Image);
  EXPECT_DOUBLE_EQ(back.pipelines[1].points[1].samples_per_s, 560);
  EXPECT_EQ(back.host.vcpus, 2);
  ASSERT_TRUE(back.storage.has_value());
  EXPECT_DOUBLE_EQ(back.storage->read_Bps, 5e8);
  // A hand-written description: only what the model needs.
  const auto hand =
      PipelineReport::from_json(nlohmann::json::parse(R"({"pipelines": [{"kind": "image", "sample_size": 224,
                               "points": [{"workers": 1, "samples_per_s": 50}]}]})"),
                                "hand.json");
  EXPECT_EQ(hand.host.vcpus, 1);
  auto bad = [](const char* text) {
    return error_of([&] { PipelineReport::from_json(nlohmann::json::parse(text), "p.json"); });
  };
  EXPECT_NE(bad(R"({"pipelines": [{"kind": "audio", "sample_size": 1, "points": []}]})").find("kind=audio"),
            std::string::npos);
  EXPECT_NE(bad(R"({"pipelines": [{"kind": "text", "sample_size": 512, "points": []}]})").find("\"points\""),
            std::string::npos);
  EXPECT_NE(
      bad(R"({"pipelines": [{"kind": "text", "sample_size": 512, "points": [{"workers": 0, "samples_per_s": 1}]}]})")
          .find("workers"),
      std::string::npos);
  EXPECT_NE(bad(R"({"pipelines": [{"kind": "text", "sample_size": 512, "points": [{"workers": 1}]}]})")
                .find("samples_per_s is missing"),
            std::string::npos);
  EXPECT_NE(bad(R"({"format": "other", "pipelines": []})").find("format=\"other\""), std::string::npos);
  EXPECT_NE(bad(R"([1, 2])").find("not a pipeline description"), std::string::npos);
}

TEST(PipelineStore, RowsRoundTripAndLoadAsAModel) {
  const std::string p = scaledl::test::fresh_store_path("pipeline-rows.sqlite");
  PipelineReport r;
  r.host = {"test cpu", 2};
  r.pipelines.push_back(synthetic(InputKind::Image, {{1, 300}, {2, 560}}, 224));
  r.pipelines.back().data = "imgs";
  r.pipelines.back().decode_ms = 2;
  r.pipelines.back().bytes_per_sample = 40e3;
  StorageMeasurement st;
  st.path = "/data/x";
  st.read_Bps = 8e6;  // 200 samples/s of 40 kB
  st.cache_dropped = true;
  r.storage = st;
  {
    Store s(p);
    EXPECT_EQ(put_pipeline_rows(s, "c1", r), 3u);
    EXPECT_EQ(put_pipeline_rows(s, "c1", r), 0u);  // kept, not duplicated
    EXPECT_EQ(s.counts()["pipeline"], 3);
    EXPECT_TRUE(s.export_json().contains("pipeline"));
    const PipelineReport back = pipeline_rows(s);
    ASSERT_EQ(back.pipelines.size(), 1u);
    EXPECT_EQ(back.host.key(), "test cpu (2 vCPUs)");
    EXPECT_DOUBLE_EQ(back.pipelines[0].points[1].samples_per_s, 560);
    EXPECT_DOUBLE_EQ(back.pipelines[0].decode_ms, 2);
    ASSERT_TRUE(back.storage.has_value());
    EXPECT_DOUBLE_EQ(back.storage->read_Bps, 8e6);
  }
  const ThroughputModel m = load_throughput_model(p, InputKind::Image);
  EXPECT_DOUBLE_EQ(predict_input(m, 2, 2, 224).samples_per_s, 200);  // storage-bound
  EXPECT_NE(error_of([&] { load_throughput_model(p, InputKind::Text); }).find("holds no text pipeline"),
            std::string::npos);
  {
    Store s(p);
    r.host = {"other cpu", 8};
    put_pipeline_rows(s, "c2", r);
  }
  EXPECT_NE(error_of([&] { load_throughput_model(p, InputKind::Image); }).find("2 campaigns / hosts"),
            std::string::npos);
}

TEST(PipelineStore, SchemaTwoStoreGainsThePipelineTableOnWrite) {
  const std::string p = scaledl::test::fresh_store_path("pipeline-v2.sqlite");
  {
    Store s(p);
    ASSERT_EQ(sqlite3_exec(s.handle(),
                           "DROP TABLE pipeline; DROP TABLE IF EXISTS memory; "
                           "UPDATE meta SET value='2' WHERE key='schema_version'",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  {
    Store r(p, /*read_only=*/true);  // read-only: stays 2, has no rows of the table
    EXPECT_EQ(r.info()["schema_version"], "2");
    EXPECT_FALSE(r.has_table("pipeline"));
    EXPECT_NE(error_of([&] { pipeline_rows(r); }).find("no pipeline table"), std::string::npos);
  }
  {
    Store w(p);  // writable: migrated
    EXPECT_EQ(w.info()["schema_version"], "4");
    EXPECT_TRUE(w.has_table("pipeline"));
  }
}
