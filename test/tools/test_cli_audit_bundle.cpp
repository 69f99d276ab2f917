// End-to-end: issue #39's bundle-manifest cases (11, 12, 22) against `scaledl predict
// --bundle`. A bundle's manifest.json holds the checksums, so nothing in it is covered
// by them: every field is type- and range-checked, every path it names stays inside the
// bundle and among the checksummed files, and only regular files are read. Each bad
// input: one "scaledl: error:" line naming the file and the key, exit 1.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/checksum.hpp"
#include "scaledl/core/fs_util.hpp"

using scaledl::test::CliResult;
namespace fs = std::filesystem;
using scaledl::test::slurp;
using scaledl::test::write;
using json = nlohmann::json;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

/// `scaledl <args>` under `timeout 20`: a reader blocked on a FIFO fails the test (exit
/// 124) instead of hanging it.
CliResult run_timed(const std::string& args) {
  return scaledl::test::run_cli(args, "timeout 20 ");
}

/// Exactly one line "scaledl: error: ..." holding every one of `expect`, exit 1.
void expect_one_error(const std::string& args, std::initializer_list<std::string> expect) {
  const CliResult r = run_timed(args);
  EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("scaledl: error: ", 0), 0u) << args << "\n" << r.out;
  for (const std::string& e : expect)
    EXPECT_NE(r.out.find(e), std::string::npos) << e << "\n" << args << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
}

class CliAuditBundle : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/scaledl-audit-bundle-" + std::to_string(getpid());
    scaledl::remove_tree(dir_);
    fs::create_directories(dir_);
    fs::copy(kSrc + "/models/bundles/default", dir_ + "/b", fs::copy_options::recursive);
    manifest_ = json::parse(slurp(dir_ + "/b/manifest.json"));
    layers_manifest_ = slurp(dir_ + "/b/layers/manifest.json");
  }
  static void TearDownTestSuite() { scaledl::remove_tree(dir_); }
  // Each test starts from the pristine copy.
  void SetUp() override {
    write(B() + "/manifest.json", manifest_.dump(2));
    write(B() + "/layers/manifest.json", layers_manifest_);
  }

  static std::string B() { return dir_ + "/b"; }
  static std::string M() { return B() + "/manifest.json"; }
  static std::string predict(const std::string& extra = "") {
    return "predict " + kSrc + "/models/gpt2.json --bundle " + B() + " --device-spec " + kSrc +
           "/models/devices/h100-sxm.json --json" + extra;
  }
  /// The bundle's manifest changed by `edit` (the checksums it lists stay as they are).
  static void with_manifest(const std::function<void(json&)>& edit) {
    json m = manifest_;
    edit(m);
    write(M(), m.dump(2));
  }
  /// The layer-model manifest changed by `edit`, with its own checksum and the bundle's
  /// recomputed: the field reader is reached, not the checksums.
  static void with_layers_manifest(const std::function<void(json&)>& edit) {
    json lm = json::parse(layers_manifest_);
    edit(lm);
    json rest = lm;
    rest.erase("manifest_sha256");
    lm["manifest_sha256"] = scaledl::sha256_hex(rest.dump());
    write(B() + "/layers/manifest.json", lm.dump(2));
    json m = manifest_;
    m["files"]["layers/manifest.json"] = scaledl::sha256_file(B() + "/layers/manifest.json");
    write(M(), m.dump(2));
  }

  static std::string dir_;
  static json manifest_;
  static std::string layers_manifest_;
};
std::string CliAuditBundle::dir_;
json CliAuditBundle::manifest_;
std::string CliAuditBundle::layers_manifest_;

}  // namespace

// Case 11: fields of the wrong type gave raw `[json.exception.type_error.302]` (and `"comm": {}`
// read a missing key through a const operator[]).
TEST_F(CliAuditBundle, ManifestFieldsOfTheWrongTypeAreOneErrorNamingFileAndKey) {
  // The pristine copy predicts.
  const CliResult ok = run_timed(predict());
  ASSERT_EQ(ok.rc, 0) << ok.out;

  const std::string h100 = "cuda:NVIDIA H100 80GB HBM3";
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& m) { m["comm"] = json::object(); }, "comm.file is missing"},
      {[](json& m) { m["comm"] = 5; }, "comm=5 is not an object"},
      {[](json& m) {
         m["comm"] = {{"file", 7}};
       },
       "comm.file=7 is not a string"},
      {[](json& m) {
         m["layers"] = {{"dir", 5}};
       },
       "layers.dir=5 is not a string"},
      {[](json& m) { m["layers"] = "layers"; }, "layers=\"layers\" is not an object"},
      {[](json& m) { m.erase("layers"); }, "layers is missing"},
      {[](json& m) { m["graph"]["file"] = json::array({1}); }, "graph.file=[1] is not a string"},
      {[](json& m) { m["graph"] = 5; }, "graph=5 is not an object"},
      {[](json& m) { m["graph_device_out"] = true; }, "graph_device_out=true is not an object"},
      {[](json& m) {
         m["training"]["global_feature_ranges"] = json::array({1, 2});
       },
       "training.global_feature_ranges=[1,2] is not an object"},
      {[](json& m) { m["training"]["global_feature_ranges"]["log_batch"] = 3; },
       "training.global_feature_ranges.log_batch=3 is not [lo, hi]"},
      {[](json& m) {
         m["training"]["global_feature_ranges"]["log_batch"] = {"a", 1};
       },
       "training.global_feature_ranges.log_batch[0]=\"a\" is not a number"},
      {[](json& m) { m["training"] = "x"; }, "training=\"x\" is not an object"},
      {[&](json& m) { m["host"][h100] = 0.1; }, "host.\"cuda:NVIDIA H100 80GB HBM3\"=0.1 is not an object"},
      {[&](json& m) { m["host"][h100] = json::object(); },
       "host.\"cuda:NVIDIA H100 80GB HBM3\".node_ms is missing"},
      {[&](json& m) { m["host"][h100]["node_ms"] = "fast"; }, "node_ms=\"fast\" must be a number > 0"},
      {[](json& m) { m["host"] = json::array(); }, "host=[] is not an object"},
      {[](json& m) {
         m["memory"] = {{"file", 5}};
       },
       "memory.file=5 is not a string"},
      {[](json& m) { m["memory"] = 1; }, "memory=1 is not an object"},
      {[](json& m) { m["files"]["graph.safetensors"] = 5; }, "files.\"graph.safetensors\"=5 is not a string"},
      {[](json& m) { m["files"]["graph.safetensors"] = "b89c"; }, "is not a SHA-256"},
      {[](json& m) { m["files"] = json::array(); }, "files=[] is not an object"},
      {[](json& m) { m = json::array({1}); }, "[1] is not a bundle manifest"},
  };
  for (const auto& [edit, expect] : cases) {
    with_manifest(edit);
    expect_one_error(predict(), {M() + ": ", expect});
  }
}

// Case 11, the layer-model manifest (layers/manifest.json): a feature name that is not a
// string was a raw type_error.
TEST_F(CliAuditBundle, LayerModelManifestFieldsOfTheWrongTypeAreOneError) {
  with_layers_manifest([](json& lm) { lm["models"]["linear.fwd"]["features"][0] = 1; });
  expect_one_error(predict(), {"layers/manifest.json.models.linear.fwd.features[0]=1 is not a string"});
}

// Case 12: numbers read from the bundle get the ranges the CLI applies (host node_ms 1e300
// gave T_iter 5.9e302 ms; --host-node-us stops at 1e6 us).
TEST_F(CliAuditBundle, ImplausibleNumbersInTheManifestAreRefused) {
  const std::string h100 = "cuda:NVIDIA H100 80GB HBM3";
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[&](json& m) { m["host"][h100]["node_ms"] = 1e300; },
       "host.cuda:NVIDIA H100 80GB HBM3.node_ms=1e+300 must be a number > 0 and at most 1000 ms"},
      {[&](json& m) { m["host"][h100]["node_ms"] = 2000; },
       "node_ms=2000 must be a number > 0 and at most 1000 ms"},
      {[](json& m) {
         m["training"]["global_feature_ranges"]["log_batch"] = {5, 1};
       },
       "training.global_feature_ranges.log_batch=[5,1] is not [lo, hi] with lo <= hi"},
      {[](json& m) {
         m["training"]["global_feature_ranges"]["log_batch"] = {0, 1e300};
       },
       "training.global_feature_ranges.log_batch[1]=1e+300 is out of range"},
      {[](json& m) {
         m["training"]["global_feature_ranges"]["bogus"] = {0, 1};
       },
       "training.global_feature_ranges.bogus=[0,1] is the range of no global feature"},
      {[](json& m) { m["training"]["layer_row_devices"]["spec:Tesla T4"] = "many"; },
       "training.layer_row_devices.\"spec:Tesla T4\"=\"many\" is not an integer"},
      {[](json& m) { m["training"]["layer_row_devices"]["spec:Tesla T4"] = -5; }, "is out of range"},
      {[](json& m) {
         m["graph"]["intervals"]["kappa"] = 1e6;
         m["graph"]["intervals"]["d_max"] = 1e6;
       },
       "graph.intervals: q95="},
      {[](json& m) {
         m["graph"]["intervals"]["log_t_sum_range"] = {-1e300, 1e300};
       },
       "graph.intervals.log_t_sum_range="},
  };
  for (const auto& [edit, expect] : cases) {
    with_manifest(edit);
    expect_one_error(predict(), {M(), expect});
  }
  // The layer-model manifest: a sustained bandwidth of 1e300 GB/s, a floor of 1e11 ms.
  with_layers_manifest([](json& lm) {
    ASSERT_TRUE(lm["sustained_bw"]["gbs"].is_object());
    lm["sustained_bw"]["gbs"].begin().value() = 1e300;
  });
  expect_one_error(predict(), {"layers/manifest.json.sustained_bw.gbs[",
                               "=1e+300 must be a number > 0 and at most 1e6 (GB/s)"});
  with_layers_manifest([](json& lm) { lm["models"]["linear.fwd"]["floor_ms"] = 1e11; });
  expect_one_error(predict(), {"models.linear.fwd.floor_ms=100000000000.0 is out of range [0, 100000]"});
}

// Case 22: `layers.dir` and `graph.file` accepted `..`, absolute paths and links out of the
// bundle, so models loaded from outside its checksums.
TEST_F(CliAuditBundle, BundlePathsStayInsideTheBundleAndAmongItsChecksummedFiles) {
  fs::copy(B() + "/layers", dir_ + "/outside-layers",
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::copy_file(B() + "/graph.safetensors", dir_ + "/outside.safetensors",
                fs::copy_options::overwrite_existing);
  with_manifest([](json& m) { m["layers"]["dir"] = "../outside-layers"; });
  expect_one_error(predict(), {M(), "layers.dir=\"../outside-layers\" has a '..' component"});
  with_manifest([&](json& m) { m["layers"]["dir"] = dir_ + "/outside-layers"; });
  expect_one_error(predict(), {"layers.dir=", "is an absolute path"});
  with_manifest([](json& m) { m["graph"]["file"] = "../outside.safetensors"; });
  expect_one_error(predict(), {"graph.file=\"../outside.safetensors\" has a '..' component"});
  with_manifest([&](json& m) { m["graph"]["file"] = dir_ + "/outside.safetensors"; });
  expect_one_error(predict(), {"graph.file=", "is an absolute path"});
  with_manifest([](json& m) { m["layers"]["dir"] = "layers/../../outside-layers"; });
  expect_one_error(predict(), {"has a '..' component"});

  // A link inside the bundle to a file outside it, listed with the right checksum.
  fs::create_symlink(dir_ + "/outside.safetensors", B() + "/link.safetensors");
  with_manifest([&](json& m) {
    m["graph"]["file"] = "link.safetensors";
    m["files"]["link.safetensors"] = scaledl::sha256_file(dir_ + "/outside.safetensors");
  });
  expect_one_error(predict(), {"files key link.safetensors resolves outside the bundle"});
  fs::remove(B() + "/link.safetensors");

  // A file inside the bundle that the manifest does not checksum.
  fs::copy_file(B() + "/graph.safetensors", B() + "/unlisted.safetensors");
  with_manifest([](json& m) { m["graph"]["file"] = "unlisted.safetensors"; });
  expect_one_error(predict(),
                   {"graph.file=\"unlisted.safetensors\" names unlisted.safetensors, which is not among "
                    "the files the manifest checksums"});
  fs::remove(B() + "/unlisted.safetensors");
  // A layer-model manifest naming a model file outside its folder (its checksums recomputed).
  with_layers_manifest([](json& lm) { lm["models"]["linear.fwd"]["file"] = "../graph.safetensors"; });
  expect_one_error(predict(), {"models.linear.fwd.file=../graph.safetensors has a '..' component"});
}

// Case 22: a manifest.json that is a FIFO blocked `predict` forever; every bundle, layer and
// graph file, and every JSON file read_json_file reads, must be a regular file.
TEST_F(CliAuditBundle, OnlyRegularFilesAreReadAndAFifoNeverBlocks) {
  const std::string fifo_bundle = dir_ + "/fifo";
  scaledl::remove_tree(fifo_bundle);
  fs::copy(B(), fifo_bundle, fs::copy_options::recursive);
  fs::remove(fifo_bundle + "/manifest.json");
  ASSERT_EQ(mkfifo((fifo_bundle + "/manifest.json").c_str(), 0600), 0);
  const std::string dev = " --device-spec " + kSrc + "/models/devices/h100-sxm.json --json";
  expect_one_error("predict " + kSrc + "/models/gpt2.json --bundle " + fifo_bundle + dev,
                   {"manifest.json is a FIFO, not a regular file"});
  fs::remove(fifo_bundle + "/manifest.json");
  write(fifo_bundle + "/manifest.json", manifest_.dump(2));

  // A listed file that is a FIFO or a directory.
  fs::rename(fifo_bundle + "/graph.safetensors", fifo_bundle + "/graph.keep");
  ASSERT_EQ(mkfifo((fifo_bundle + "/graph.safetensors").c_str(), 0600), 0);
  expect_one_error("predict " + kSrc + "/models/gpt2.json --bundle " + fifo_bundle + dev,
                   {"file graph.safetensors is a FIFO, not a regular file"});
  fs::remove(fifo_bundle + "/graph.safetensors");
  fs::create_directory(fifo_bundle + "/graph.safetensors");
  expect_one_error("predict " + kSrc + "/models/gpt2.json --bundle " + fifo_bundle + dev,
                   {"file graph.safetensors is a directory, not a regular file"});

  // A layer-model folder (--layers) whose manifest, or one of whose model files, is a FIFO.
  const std::string L = fifo_bundle + "/layers";
  fs::rename(L + "/linear.fwd.json", L + "/linear.fwd.keep");
  ASSERT_EQ(mkfifo((L + "/linear.fwd.json").c_str(), 0600), 0);
  expect_one_error("predict " + kSrc + "/models/gpt2.json --layers " + L + dev,
                   {"linear.fwd.json: model file is a FIFO, not a regular file"});
  fs::rename(L + "/manifest.json", L + "/manifest.keep");
  ASSERT_EQ(mkfifo((L + "/manifest.json").c_str(), 0600), 0);
  expect_one_error("predict " + kSrc + "/models/gpt2.json --layers " + L + dev,
                   {L + "/manifest.json: not a regular file (a FIFO)"});
  // A graph model (--graph) that is a FIFO.
  const std::string G = fifo_bundle + "/graph.fifo";
  ASSERT_EQ(mkfifo(G.c_str(), 0600), 0);
  expect_one_error("predict " + kSrc + "/models/gpt2.json --layers " + B() + "/layers --graph " + G + dev,
                   {G + ": not a regular file (a FIFO)"});

  // Any JSON file: a model config and a device spec that are FIFOs.
  const std::string cfg = dir_ + "/config.fifo";
  fs::remove(cfg);
  ASSERT_EQ(mkfifo(cfg.c_str(), 0600), 0);
  expect_one_error("predict " + cfg + " --bundle " + B() + dev, {cfg + ": not a regular file (a FIFO)"});
  expect_one_error("predict " + kSrc + "/models/gpt2.json --bundle " + B() + " --device-spec " + cfg,
                   {cfg + ": not a regular file (a FIFO)"});
  fs::remove(cfg);
  scaledl::remove_tree(fifo_bundle);
}
