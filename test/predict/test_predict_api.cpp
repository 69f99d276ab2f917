// `predict` as a library (predict_api.hpp): the request's checks, the device and bundle it names,
// one configuration, a sweep streamed in chunks, and the one row schema (JSON and CSV).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/predict_api.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kBundle = kSrc + "/models/bundles/default";
const std::string kH100 = kSrc + "/models/devices/h100-sxm.json";
const std::string kV100 = kSrc + "/models/devices/v100-sxm2-32gb.json";
const std::string kGpt2 = kSrc + "/models/gpt2.json";

const Bundle& bundle() {
  static const Bundle b = load_bundle(kBundle);
  return b;
}

PredictRequest gpt2_on_h100() {
  PredictRequest r;
  r.args.model = kGpt2;
  r.bundle = kBundle;
  r.device_spec = kH100;
  return r;
}

/// Fields of one CSV line (commas inside quotes are part of a field).
size_t fields(const std::string& csv_line) {
  size_t n = 1;
  bool quoted = false;
  for (char c : csv_line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++n;
  }
  return n;
}

/// Every row of a sweep, and how many chunks brought them.
std::vector<PredictRow> sweep_rows(const PredictRequest& r, const std::optional<DeviceRecord>& dev,
                                   size_t* chunks = nullptr, size_t* total = nullptr) {
  std::vector<PredictRow> all;
  size_t n = 0;
  predict_sweep(
      r, bundle(), dev,
      [&](const std::vector<PredictRow>& rows) {
        ++n;
        all.insert(all.end(), rows.begin(), rows.end());
      },
      [&](size_t t) {
        if (total) *total = t;
      });
  if (chunks) *chunks = n;
  return all;
}
}  // namespace

TEST(PredictRequest, ChecksWhatIsPredictedAndTheNumbers) {
  PredictRequest r;
  EXPECT_EQ(error_of([&] { r.check_inputs(); }), "predict: MODEL.json is required (or --csv FILE)");
  r.sweeps = {"batch=1,2"};
  r.csv = "x.csv";
  EXPECT_EQ(error_of([&] { r.check_inputs(); }), "give --sweep or --csv, not both");
  r.sweeps.clear();
  EXPECT_EQ(error_of([&] { r.check_inputs(); }), "<no error>");  // a CSV names its models
  r.devices = 4;
  EXPECT_NE(error_of([&] { r.check_ranges(); }).find("--devices=4 needs an all-reduce calibration"),
            std::string::npos);
  r.devices = 1;
  r.samples = 10;
  r.iterations = 10;
  EXPECT_EQ(error_of([&] { r.check_ranges(); }), "give --samples or --iterations, not both");
}

TEST(PredictRequest, ParallelIsOneConfigurationOnOneDeviceKind) {
  PredictRequest r = gpt2_on_h100();
  EXPECT_EQ(error_of([&] { r.check_parallel(); }), "<no error>");
  r.devices = 2;
  EXPECT_EQ(error_of([&] { r.check_parallel(); }), "give --gpus N (with --tp/--pp) or --devices N, not both");
  r.devices = 1;
  r.sweeps = {"batch=1,2"};
  EXPECT_NE(error_of([&] { r.check_parallel(); }).find("one configuration at a time"), std::string::npos);
}

TEST(PredictRequest, TheDeviceIsTheSpecOrTheStoresOne) {
  PredictRequest r;
  EXPECT_EQ(error_of([&] { resolve_device(r); }),
            "no device: give --device-spec FILE or --db STORE [--device KEY]");
  r.device_spec = kH100;
  r.db = "x.db";
  EXPECT_EQ(error_of([&] { resolve_device(r); }), "--device-spec and --db both name a device: give one");
  r.db.clear();
  EXPECT_EQ(resolve_device(r).key(), load_device_spec(kH100).key());
  // "This machine's CPU" needs its probe record: one error saying how to get it.
  PredictRequest c;
  c.device = "cpu";
  EXPECT_NE(error_of([&] {
              resolve_device(c);
            }).find("--device=cpu: describe this CPU first (`scaledl probe --json > cpu.json`"),
            std::string::npos);
  // A sweep without a device: each configuration names its own.
  PredictRequest s;
  s.args.model = kGpt2;
  s.sweeps = {"device_spec=" + kH100};
  EXPECT_FALSE(default_device(s).has_value());
}

TEST(PredictRequest, TheBundleIsOneSourceOfModels) {
  PredictRequest r;
  r.graph = "g";
  EXPECT_EQ(error_of([&] { load_predict_bundle(r, std::nullopt); }),
            "--graph=g needs --layers DIR (or give --bundle DIR)");
  r.graph.clear();
  r.bundle = kBundle;
  r.layers = "layers";
  EXPECT_NE(error_of([&] { load_predict_bundle(r, std::nullopt); }).find("drop --layers/--graph"),
            std::string::npos);
  r.layers.clear();
  r.calibrate = "x.db";
  EXPECT_NE(error_of([&] { load_predict_bundle(r, std::nullopt); }).find("--calibrate=x.db: one device"),
            std::string::npos);
}

TEST(ModelRequest, AppliesTheGivenSettingsOnTopOfTheConfigs) {
  ModelRequest a;
  a.model = kGpt2;
  a.batch = 4;
  a.seq = 256;
  a.dtype = "bf16";
  std::vector<std::string> assumed;
  const auto [m, s] = a.load(&assumed);
  EXPECT_EQ(m.name, "gpt2");
  EXPECT_EQ(s.batch, 4);
  EXPECT_EQ(s.seq_len, 256);
  EXPECT_EQ(s.dtype, DType::BF16);
  ASSERT_EQ(assumed.size(), 1u);  // only the mode came from a default
  EXPECT_EQ(assumed[0], "mode train (the default; give --mode)");
  a.image = 224;
  EXPECT_NE(error_of([&] { a.load(); }).find("--image=224 does not apply: gpt2 is a text model"),
            std::string::npos);
  ModelRequest f;
  f.mode = "fwd-bwd";
  f.optimizer = "sgd";
  TrainSettings t;
  EXPECT_NE(error_of([&] { f.apply(t); }).find("--optimizer=sgd does not apply: mode fwd-bwd"),
            std::string::npos);
}

TEST(PredictRow, OneSchemaInCsvAndJson) {
  const std::string& head = PredictRow::csv_header();
  EXPECT_EQ(fields(head), 30u);
  EXPECT_EQ(head.rfind("model,batch,seq,image,dtype,optimizer,devices,t_sum_ms,", 0), 0u);
  PredictRow r;
  r.label = "gpt2 n_layer=2";
  r.settings.batch = 8;
  r.settings.seq_len = 128;
  r.settings.dtype = DType::BF16;
  r.device = "gpu:Tesla V100";
  r.iterations = 5;
  r.infeasible = "dtype=bf16 needs a GPU, of compute capability 8.0";
  EXPECT_EQ(r.to_csv(),
            "\"gpt2 n_layer=2\",8,128,0,bf16,adamw,1,,,,,,,,,,,5,,,,,train,\"gpu:Tesla V100\",,,eager,"
            "\"dtype=bf16 needs a GPU, of compute capability 8.0\",,");
  EXPECT_EQ(fields(r.to_csv()), 30u);  // the quoted reason's comma is inside its field
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["infeasible"], r.infeasible);
  EXPECT_TRUE(j["t_epoch_s"].is_null());
  EXPECT_FALSE(j.contains("memory"));
  EXPECT_FALSE(j.contains("t_iter_ms"));
  // A priced device: its price, and the cost of an epoch = price x devices x epoch hours.
  PredictRow ok;
  ok.label = "gpt2";
  ok.settings.num_devices = 4;
  ok.iterations = 3600;
  ok.p.t_iter_ms = 500;  // an epoch of 1,800 s on 4 GPUs: 2 GPU hours
  ok.price_per_gpu_hour = 2.5;
  EXPECT_DOUBLE_EQ(ok.cost_per_epoch(), 5.0);
  EXPECT_EQ(fields(ok.to_csv()), 30u);
  EXPECT_NE(ok.to_csv().find(",2.5,5"), std::string::npos) << ok.to_csv();
  EXPECT_DOUBLE_EQ(ok.to_json()["cost_per_epoch"].get<double>(), 5.0);
  ok.iterations = 0;  // no epoch, no cost
  EXPECT_EQ(ok.cost_per_epoch(), 0);
  EXPECT_TRUE(ok.to_json()["cost_per_epoch"].is_null());
}

TEST(RowWriter, CsvHeaderOnceAndJsonOneArray) {
  PredictRow a, b;
  a.label = "a";
  a.infeasible = "no";
  b.label = "b";
  b.infeasible = "no";
  std::ostringstream csv;
  RowWriter w(csv, false);
  w.write({a});
  w.write({b});
  w.finish();
  EXPECT_EQ(csv.str(), PredictRow::csv_header() + "\n" + a.to_csv() + "\n" + b.to_csv() + "\n");
  std::ostringstream js;
  RowWriter wj(js, true);
  wj.write({a});
  wj.write({b});
  wj.finish();
  nlohmann::json arr = nlohmann::json::array({a.to_json(), b.to_json()});
  EXPECT_EQ(js.str(), arr.dump(2) + "\n");  // as nlohmann's dump(2) of the whole array
  std::ostringstream none;
  RowWriter we(none, true);
  we.finish();
  EXPECT_EQ(none.str(), "[]\n");
}

TEST(PredictSingle, TheReportAndTheJsonSayTheSamePrediction) {
  PredictRequest r = gpt2_on_h100();
  r.samples = 1000;
  const DeviceRecord dev = resolve_device(r);
  const SinglePrediction p = predict_single(r, bundle(), dev);
  EXPECT_EQ(p.settings.batch, 8);
  EXPECT_EQ(p.iterations, 125);
  EXPECT_GT(p.p.t_iter_ms, 0);
  const nlohmann::json j = p.to_json(bundle());
  EXPECT_EQ(j["t_iter_ms"].get<double>(), p.p.t_iter_ms);
  EXPECT_EQ(j["device"], dev.key());
  EXPECT_EQ(j["iterations_per_epoch"], 125);
  std::ostringstream text;
  p.write_report(text, bundle());
  const std::string t = text.str();
  EXPECT_EQ(t.rfind("model        gpt2 (gpt2), batch 8 x 1 device(s), seq 128, fp32, mode train", 0), 0u);
  EXPECT_NE(t.find(fmt::format("T_iter       {:10.3f} ms", p.p.t_iter_ms)), std::string::npos);
  EXPECT_NE(t.find("T_epoch      "), std::string::npos);
  EXPECT_NE(t.find("memory       "), std::string::npos);
}

TEST(PredictSweep, RowsInOrderEachAsThePredictionAlone) {
  PredictRequest r = gpt2_on_h100();
  r.sweeps = {"batch=4,8", "dtype=fp32,bf16"};
  const DeviceRecord dev = resolve_device(r);
  size_t chunks = 0, total = 0;
  const std::vector<PredictRow> rows = sweep_rows(r, dev, &chunks, &total);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(total, 4u);
  EXPECT_EQ(chunks, 1u);
  EXPECT_EQ(rows[1].settings.batch, 4);
  EXPECT_EQ(rows[1].settings.dtype, DType::BF16);
  EXPECT_EQ(rows[2].settings.batch, 8);
  // batch 8 fp32 is the configuration `predict` gives alone
  PredictRequest one = gpt2_on_h100();
  const SinglePrediction p = predict_single(one, bundle(), dev);
  EXPECT_EQ(rows[2].p.t_iter_ms, p.p.t_iter_ms);
  EXPECT_EQ(rows[2].device, dev.key());
  EXPECT_EQ(rows[2].label, "gpt2");
  for (const auto& row : rows) {
    EXPECT_TRUE(row.infeasible.empty());
    EXPECT_EQ(fields(row.to_csv()), 30u);
  }
  EXPECT_LE(rows[0].p.t_iter_ms, rows[2].p.t_iter_ms);  // monotone in batch
}

TEST(PredictSweep, ADeviceThatCannotRunTheDtypeIsARowThatSaysWhy) {
  PredictRequest r;
  r.args.model = kGpt2;
  r.sweeps = {"dtype=bf16", "device_spec=" + kH100 + "," + kV100};
  const std::vector<PredictRow> rows = sweep_rows(r, default_device(r));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].infeasible.empty());
  EXPECT_NE(rows[1].infeasible.find("dtype=bf16 needs a GPU of compute capability 8.0"), std::string::npos);
  EXPECT_FALSE(rows[1].to_json().contains("memory"));
}

TEST(PredictSweep, ABadValueIsNamedBeforeAnyRow) {
  PredictRequest r = gpt2_on_h100();
  r.sweeps = {"batch=4,0"};
  size_t chunks = 0;
  EXPECT_EQ(error_of([&] { sweep_rows(r, resolve_device(r), &chunks); }),
            "configuration 2 (" + kGpt2 + "): batch=0 must be in [1, 16777216]");
  EXPECT_EQ(chunks, 0u);
  PredictRequest none;
  none.args.model = kGpt2;
  none.sweeps = {"batch=4"};
  EXPECT_NE(error_of([&] { sweep_rows(none, std::nullopt); }).find("configuration 1 (gpt2): no device"),
            std::string::npos);
}

TEST(PredictSweep, ACsvNamesItsModelsRelativeToItsFolder) {
  const std::string dir = testing::TempDir();
  std::ofstream(dir + "/api.csv") << "model,batch\n" << kGpt2 << ",8\n" << kGpt2 << ",2\n";
  PredictRequest r;
  r.csv = dir + "/api.csv";
  r.device_spec = kH100;
  r.samples = 16;
  const std::vector<PredictRow> rows = sweep_rows(r, resolve_device(r));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].iterations, 2);
  EXPECT_EQ(rows[1].iterations, 8);
  EXPECT_EQ(rows[1].settings.batch, 2);
}

TEST(Report, MemoryLineSaysWhetherItFits) {
  EXPECT_EQ(memory_line(12.3e9, NAN, NAN, "analytic", 80e9, 0.1, "fits"),
            "memory           12.300 GB peak (analytic); fits in 80.0 GB with 10 % headroom\n");
  EXPECT_EQ(memory_line(1e9, 0.9e9, 1.2e9, "corrected", 0, 0.1, "unknown"),
            "memory            1.000 GB peak (corrected; 80 % [0.900, 1.200] GB); the device record has no "
            "memory size: fit unknown\n");
  EXPECT_NE(memory_line(90e9, NAN, NAN, "x", 80e9, 0.1, "does not fit").find("DOES NOT FIT"),
            std::string::npos);
}

TEST(PredictRequest, WithoutABundleTheDeviceKindsShippedOneIsTaken) {
  // models/bundles/<default|cpu> beside the first devices folder that has it.
  const fs::path root = fs::temp_directory_path() / ("scaledl_shipped_" + std::to_string(::getpid()));
  fs::create_directories(root / "models" / "devices");
  fs::create_directories(root / "models" / "bundles" / "default");
  std::ofstream(root / "models" / "bundles" / "default" / "manifest.json") << "{}";
  const std::vector<std::string> dirs = {(root / "models" / "devices").string()};
  EXPECT_EQ(shipped_bundle_dir(false, dirs), (root / "models" / "bundles" / "default").string());
  // A CPU's is built by a script, not committed: until then one error saying how.
  EXPECT_NE(error_of([&] { shipped_bundle_dir(true, dirs); })
                .find("no --bundle and no CPU bundle (models/bundles/cpu): build it from the committed CPU "
                      "campaigns with scripts/build_cpu_bundle.sh"),
            std::string::npos);
  fs::create_directories(root / "models" / "bundles" / "cpu");
  std::ofstream(root / "models" / "bundles" / "cpu" / "manifest.json") << "{}";
  EXPECT_EQ(shipped_bundle_dir(true, dirs), (root / "models" / "bundles" / "cpu").string());
  EXPECT_NE(error_of([&] {
              shipped_bundle_dir(false, {(root / "elsewhere").string()});
            }).find("no --bundle and no shipped default bundle (models/bundles/default)"),
            std::string::npos);
  scaledl::remove_tree(root);
  // The source tree's own: the committed default bundle.
  EXPECT_EQ(fs::path(shipped_bundle_dir(false, {kSrc + "/models/devices"})).lexically_normal(),
            fs::path(kSrc + "/models/bundles/default").lexically_normal());
}
