// import_training_kinds on our H200's committed measurements (datasets/h200/training-kinds) and on
// temporary copies with planted bad rows and malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpudata_test_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "test_util.hpp"

namespace scaledl {
namespace {

namespace fs = std::filesystem;

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kData = kSrc + "/datasets/h200/training-kinds";
const std::string kH200 = "spec:NVIDIA H200";

GpuImportOptions options(const std::string& root) {
  return test::gpu_import_options(root);
}

std::string temp_copy(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  scaledl::remove_tree(dir);
  fs::create_directories(dir);
  for (const char* f : {"kernels.csv", "attention.csv", "gemm.csv", "env.txt"})
    fs::copy_file(kData + "/" + f, dir + "/" + f);
  return dir;
}

void append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

using test::count_of;

TEST(TrainingKindsImport, CommittedH200RowsMapOntoOurLayerTypes) {
  Store store(test::fresh_store_path("tk_copy.db"));
  const auto s = import_training_kinds(options(kData), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.rows, 62u + 192u + 1715u);
  // kernels.csv: 8 shapes of layernorm, rmsnorm_hf, gelu, dropout and add, 3 embeddings, 3 losses;
  // a backward only where its forward + backward call took 3x the fastest one (0.0569 ms, an add)
  EXPECT_EQ(count_of(s.per_kind, "layernorm fwd+bwd bf16"), 4u);
  EXPECT_EQ(count_of(s.per_kind, "layernorm fwd bf16"), 4u);
  EXPECT_EQ(count_of(s.per_kind, "rmsnorm fwd+bwd bf16"), 8u);
  // GELU over 4 hidden: [4096, 4096] and [16384, 1024] are the same elements (one row), as are
  // [4096, 8192] and [16384, 2048]
  EXPECT_EQ(count_of(s.per_kind, "gelu fwd+bwd bf16") + count_of(s.per_kind, "gelu fwd bf16"), 6u);
  EXPECT_EQ(count_of(s.per_kind, "gelu fwd bf16"), 2u);  // [4096, 1024] and [4096, 2048]: near the floor
  EXPECT_EQ(count_of(s.skipped, "gelu_tanh_4h: the elements of an earlier row's shape (the first is kept)"),
            2u);
  EXPECT_EQ(s.layers_inserted, s.layer_rows);
  EXPECT_EQ(count_of(s.per_kind, "embedding fwd+bwd bf16"), 3u);
  EXPECT_EQ(count_of(s.per_kind, "cross_entropy fwd+bwd bf16"), 3u);
  EXPECT_EQ(count_of(s.skipped, "rmsnorm_fused (a fused RMSNorm is costed by the layernorm model)"), 8u);
  EXPECT_EQ(count_of(s.skipped, "swiglu_4h (silu(gate) * up: two layer types)"), 8u);
  // attention.csv: SDPA's own backend only
  EXPECT_EQ(count_of(s.per_kind, "flash_attention fwd+bwd bf16"), 48u);
  EXPECT_EQ(count_of(s.skipped, "attention backend cudnn (forced; SDPA's own choice is imported)"), 48u);
  // gemm.csv: the forward layout, BF16 and FP8 with its quantisation
  EXPECT_EQ(count_of(s.per_kind, "linear fwd bf16"), 343u);
  EXPECT_EQ(count_of(s.per_kind, "linear fwd fp8"), 343u);
  EXPECT_EQ(count_of(s.skipped, "GEMM layout NN (a linear's backward is costed as forward GEMMs)"), 343u);
  EXPECT_EQ(count_of(s.skipped, "fp8 GEMM variant gemm"), 343u);
  EXPECT_EQ(
      s.refused_total() + s.layer_rows +
          [&] {
            size_t k = 0;
            for (const auto& [why, n] : s.skipped) k += n;
            return k;
          }(),
      s.rows);
  EXPECT_EQ(count_of(s.per_device, kH200), s.layer_rows);
  // One row as measured: the RMSNorm of Hugging Face at 4,096 x 2,048 (kernels.csv line 5).
  bool found = false;
  for (const auto& m : store.layers(LayerType::RMSNorm, kH200))
    if (m.dims == std::vector<int64_t>{4096, 2048} && m.dtype == DType::BF16) {
      found = true;
      EXPECT_DOUBLE_EQ(m.fwd.median_ms, 0.12538);
      EXPECT_NEAR(m.bwd.median_ms, 0.48185 - 0.12538, 1e-12);
      EXPECT_EQ(m.source, "training-kinds");
      EXPECT_EQ(m.campaign, "training-kinds");
    }
  EXPECT_TRUE(found);
  // Near the floor the call waits on Python: the smallest LayerNorm keeps its forward alone.
  bool small = false, large = false;
  for (const auto& m : store.layers(LayerType::LayerNorm, kH200)) {
    if (m.dims == std::vector<int64_t>{4096, 1024})
      small = std::isnan(m.bwd.median_ms) && m.fwd.median_ms == 0.013008;
    if (m.dims == std::vector<int64_t>{16384, 8192})
      large = std::fabs(m.bwd.median_ms - (0.74701 - 0.24984)) < 1e-12;
  }
  EXPECT_TRUE(small);
  EXPECT_TRUE(large);
  // Importing again adds nothing.
  const auto counts = store.counts();
  const auto again = import_training_kinds(options(kData), store);
  EXPECT_EQ(again.layers_inserted, 0u);
  EXPECT_EQ(store.counts(), counts);
}

TEST(TrainingKindsImport, PlantedBadRowsAreRefusedUnderTheirReason) {
  const std::string dir = temp_copy("tk_planted");
  Store clean_store(test::fresh_store_path("tk_clean.db"));
  const auto clean = import_training_kinds(options(kData), clean_store);
  // A backward below zero (the difference of two noisy times, far above the calls' floor), a GPU
  // without a spec sheet, a
  // GEMM faster than the H200's BF16 peak, a failed run.
  append(dir + "/kernels.csv", "NVIDIA H200,layernorm,bf16,512,512,ok,0.2,0.19,-0.01,1,0.01,\n");
  append(dir + "/kernels.csv", "NVIDIA Z9,dropout,bf16,512,512,ok,0.01,0.02,0.01,1,0.01,\n");
  append(dir + "/kernels.csv", "NVIDIA H200,dropout,bf16,1024,512,oom,,,,,,out of memory\n");
  append(dir + "/gemm.csv", "NVIDIA H200,bf16,gemm,NT,8192,8192,8192,ok,0.0001,0.0001,0.01,10,1e7,\n");
  Store store(test::fresh_store_path("tk_planted.db"));
  const auto s = import_training_kinds(options(dir), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(count_of(s.refused, "no spec sheet for NVIDIA Z9"), 1u);
  EXPECT_EQ(count_of(s.refused, "faster than the bf16 spec peak by more than 10 %"), 1u);
  EXPECT_EQ(count_of(s.skipped, "status oom"), count_of(clean.skipped, "status oom") + 1);
  EXPECT_EQ(count_of(s.refused, "time not positive and finite"),
            count_of(clean.refused, "time not positive and finite") + 1);
  EXPECT_EQ(s.refused_total(), clean.refused_total() + 3);
  EXPECT_EQ(s.layer_rows, clean.layer_rows);
}

TEST(TrainingKindsImport, MalformedFileIsAnErrorNamingFileAndLineAndStoresNothing) {
  const std::string dir = temp_copy("tk_bad");
  append(dir + "/kernels.csv", "NVIDIA H200,layernorm,bf16,4096,1024,ok,fast,0.1,0.1,1,0.01,\n");
  Store store(test::fresh_store_path("tk_bad.db"));
  const std::string err = test::error_of([&] { import_training_kinds(options(dir), store); });
  EXPECT_NE(err.find(dir + "/kernels.csv:64: fwd_ms=\"fast\" is not a number"), std::string::npos) << err;
  EXPECT_TRUE(store.layers(std::nullopt, "", false).empty());
  EXPECT_TRUE(store.devices().empty());
  const std::string empty = testing::TempDir() + "/tk_empty";
  scaledl::remove_tree(empty);
  fs::create_directories(empty);
  EXPECT_NE(test::error_of([&] {
              import_training_kinds(options(empty), store);
            }).find("none of kernels.csv, attention.csv, gemm.csv is there"),
            std::string::npos);
}

}  // namespace
}  // namespace scaledl
