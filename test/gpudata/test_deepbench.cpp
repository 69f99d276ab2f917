// import_deepbench on the committed copy datasets/gpus/deepbench
// (scripts/gpu/subset_deepbench.py) and on small tables with planted bad rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "scaledl/core/fs_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "test_util.hpp"

namespace scaledl {
namespace {

namespace fs = std::filesystem;

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kCopy = kSrc + "/datasets/gpus/deepbench";

GpuImportOptions options(const std::string& root) {
  GpuImportOptions o;
  o.root = root;
  o.devices_dir = kSrc + "/models/devices";
  return o;
}

size_t count_of(const std::map<std::string, size_t>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

/// The store key of a GPU as DeepBench names it ("" when no spec sheet has that name or alias).
std::string key_of(const std::string& deepbench_name) {
  static const SpecCatalog cat(kSrc + "/models/devices");
  const DeviceRecord* d = cat.find(deepbench_name);
  return d ? d->key() : "";
}

/// A fresh folder holding the given files (name -> text).
std::string temp_tables(const std::string& name, const std::map<std::string, std::string>& files) {
  const std::string dir = testing::TempDir() + "/" + name;
  scaledl::remove_tree(dir);
  fs::create_directories(dir);
  for (const auto& [f, text] : files) std::ofstream(dir + "/" + f) << text;
  return dir;
}

const std::string kGemmHeader = "device,precision,m,n,k,a_transpose,b_transpose,time_ms\n";
const std::string kSpecs =
    "device,key,value\nTesla V100-SXM2-32GB,CUDA Version,10.1.243\nTesla V100-SXM2-32GB,Cudnn "
    "Version,7.6.2.24\nTesla V100-SXM2-32GB,Nvidia Driver,418.67\n";

TEST(DeepbenchImport, CommittedCopyCountsPerGpuAndKind) {
  Store store(test::fresh_store_path("deepbench_copy.db"));
  const GpuImportSummary s = import_deepbench(options(kCopy), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(s.files, 3u);           // specs, gemm, allreduce (no conv.csv / rnn.csv in the copy)
  EXPECT_EQ(s.rows, 2240u + 203u);  // gemm + allreduce rows
  EXPECT_EQ(count_of(s.skipped, "Intel Xeon Phi 7250 (CPU): a CPU"), 160u + 35u);
  EXPECT_EQ(count_of(s.skipped, "P100 pseudo-FP16 (no tensor cores)"), 160u);
  // Ten GPUs x 160 FP32 GEMMs + V100 and T4 x 160 FP16 GEMMs; 168 GPU all-reduce rows.
  EXPECT_EQ(s.layer_rows, 1920u);
  EXPECT_EQ(s.collective_rows, 168u);
  EXPECT_EQ(s.refused_total(), 0u);
  EXPECT_EQ(count_of(s.per_kind, "linear fwd fp32"), 1600u);
  EXPECT_EQ(count_of(s.per_kind, "linear fwd fp16"), 320u);
  for (const char* gpu : {"NVIDIA V100", "NVIDIA T4"}) {
    ASSERT_NE(key_of(gpu), "") << gpu;
    EXPECT_EQ(count_of(s.per_device, key_of(gpu)), 320u) << gpu;
  }
  for (const char* gpu : {"NVIDIA TitanXp", "AMD Radeon Instinct MI25", "AMD Vega Frontier Edition"}) {
    ASSERT_NE(key_of(gpu), "") << gpu;
    EXPECT_EQ(count_of(s.per_device, key_of(gpu)), 160u) << gpu;
  }
  for (const char* gpu :
       {"NVIDIA Tesla M40", "NVIDIA TitanX (Maxwell)", "NVIDIA TitanX Pascal", "NVIDIA GTX 1080 Ti"}) {
    ASSERT_NE(key_of(gpu), "") << gpu;
    EXPECT_EQ(count_of(s.per_device, key_of(gpu)), 160u + 35u) << gpu;
  }
  ASSERT_NE(key_of("NVIDIA Tesla P100"), "");
  EXPECT_EQ(count_of(s.per_device, key_of("NVIDIA Tesla P100")), 160u + 28u);
  EXPECT_EQ(s.layers_inserted, s.layer_rows);
  EXPECT_EQ(s.collectives_inserted, s.collective_rows);
}

TEST(DeepbenchImport, TransposesStayApartInTheirCampaigns) {
  Store store(test::fresh_store_path("deepbench_campaigns.db"));
  import_deepbench(options(kCopy), store);
  std::map<std::string, size_t> per_campaign;
  for (const auto& m : store.layers(LayerType::Linear, key_of("NVIDIA V100"))) {
    ++per_campaign[m.campaign];
    EXPECT_EQ(m.source, "deepbench");
    EXPECT_GT(m.env_id, 0);
    EXPECT_EQ(m.dims[3], 0);
  }
  // Per sheet: 77 NN, 73 TN and 10 NT GEMMs; V100 has an FP32 and an FP16 sheet.
  EXPECT_EQ(per_campaign["deepbench-NN"], 2u * 77u);
  EXPECT_EQ(per_campaign["deepbench-TN"], 2u * 73u);
  EXPECT_EQ(per_campaign["deepbench-NT"], 2u * 10u);
  // 1760 x 7000 x 1760 (NN), FP16 on V100: 0.485 ms (README): tokens = N, d_in = K, d_out = M.
  bool found = false;
  for (const auto& m : store.layers(LayerType::Linear, key_of("NVIDIA V100")))
    if (m.campaign == "deepbench-NN" && m.dtype == DType::FP16 &&
        m.dims == std::vector<int64_t>{7000, 1760, 1760, 0}) {
      found = true;
      EXPECT_DOUBLE_EQ(m.fwd.median_ms, 0.485);
    }
  EXPECT_TRUE(found);
}

TEST(DeepbenchImport, V100TensorCoreGemmsReach60To100Tflops) {
  Store store(test::fresh_store_path("deepbench_v100.db"));
  import_deepbench(options(kCopy), store);
  auto tflops = [](const LayerMeasurement& m) {
    return 2.0 * m.dims[0] * m.dims[1] * m.dims[2] / (m.fwd.median_ms * 1e9);
  };
  // The README's anchors: 5124 x 9124 x 2560 (TN) 92.1 and 1760 x 7000 x 1760 (NN) 89.4 TFLOP/s.
  std::map<std::string, double> anchors;
  std::vector<double> big;  // TFLOP/s of the GEMMs of >= 50 GFLOP
  for (const auto& m : store.layers(LayerType::Linear, key_of("NVIDIA V100"))) {
    if (m.dtype != DType::FP16) continue;
    if (m.campaign == "deepbench-TN" && m.dims == std::vector<int64_t>{9124, 2560, 5124, 0})
      anchors["TN 5124x9124x2560"] = tflops(m);
    if (m.campaign == "deepbench-NN" && m.dims == std::vector<int64_t>{7000, 1760, 1760, 0})
      anchors["NN 1760x7000x1760"] = tflops(m);
    if (2.0 * m.dims[0] * m.dims[1] * m.dims[2] < 5e10) continue;
    big.push_back(tflops(m));
    EXPECT_LT(big.back(), 125.0) << "above the V100's tensor-core peak";
  }
  ASSERT_EQ(anchors.size(), 2u);
  EXPECT_NEAR(anchors["TN 5124x9124x2560"], 92.1, 0.2);
  EXPECT_NEAR(anchors["NN 1760x7000x1760"], 89.4, 0.2);
  ASSERT_EQ(big.size(), 68u);
  std::sort(big.begin(), big.end());
  EXPECT_GT(big.front(), 60.0);  // 89.7 .. 112.3, median 100.5
  EXPECT_GT(big[big.size() / 2], 80.0);
  EXPECT_LT(big[big.size() / 2], 110.0);
  // The T4's tensor cores (65 TFLOP/s peak) reach 33 .. 47 on the same shapes.
  for (const auto& m : store.layers(LayerType::Linear, key_of("NVIDIA T4")))
    if (m.dtype == DType::FP16 && 2.0 * m.dims[0] * m.dims[1] * m.dims[2] >= 5e10) {
      EXPECT_GT(tflops(m), 30.0);
      EXPECT_LT(tflops(m), 50.0);
    }
}

TEST(DeepbenchImport, AllReduceRowsKeepAlgorithmBackendAndNodes) {
  Store store(test::fresh_store_path("deepbench_ar.db"));
  import_deepbench(options(kCopy), store);
  std::map<std::string, size_t> per_campaign;
  for (const auto& c : store.collectives()) {
    ++per_campaign[c.campaign];
    EXPECT_EQ(c.collective, "allreduce");
    EXPECT_EQ(c.dtype, "fp32");
    EXPECT_EQ(c.backend, c.campaign.find("nccl") != std::string::npos ? "nccl" : "mpi") << c.campaign;
    EXPECT_EQ(c.level, c.nodes > 1 ? "inter-node" : "intra-node");
    EXPECT_NEAR(c.busbw_gbs, 2.0 * (c.world - 1) / c.world * c.bytes / c.time_s / 1e9, 1e-9 * c.busbw_gbs);
  }
  EXPECT_EQ(per_campaign["deepbench-nccl-2-0-mpi"] + per_campaign["deepbench-nccl-2-0-single"] +
                per_campaign["deepbench-baidu-ringallreduce"] + per_campaign["deepbench-osu-allreduce"],
            168u);
  EXPECT_EQ(per_campaign["deepbench-osu-allreduce"], 4u);
  // 1080 Ti, NCCL 2.0 Single, 2 ranks, 12,390,400 bytes: 1.0442 ms, std 0.00341 ms.
  bool found = false;
  for (const auto& c : store.collectives("deepbench-nccl-2-0-single"))
    if (c.device == key_of("NVIDIA GTX 1080 Ti") && c.world == 2 && c.bytes == 12390400.0) {
      found = true;
      EXPECT_EQ(c.nodes, 1);
      EXPECT_DOUBLE_EQ(c.time_s, 1.0442e-3);
      EXPECT_NEAR(c.cv, 0.00341205 / 1.0442, 1e-12);
    }
  EXPECT_TRUE(found);
}

TEST(DeepbenchImport, ImportingTwiceAddsNothing) {
  Store store(test::fresh_store_path("deepbench_twice.db"));
  const auto first = import_deepbench(options(kCopy), store);
  const auto counts = store.counts();
  const auto second = import_deepbench(options(kCopy), store);
  EXPECT_GT(first.layers_inserted, 0u);
  EXPECT_EQ(second.layer_rows, first.layer_rows);
  EXPECT_EQ(second.layers_inserted, 0u);
  EXPECT_EQ(second.collectives_inserted, 0u);
  EXPECT_EQ(store.counts(), counts);
}

TEST(DeepbenchImport, PlantedBadRowsAreRefusedUnderTheirReason) {
  // A V100 (FP32 peak 15.7 TFLOP/s): 2 x 4096 x 7000 x 4096 FLOP take >= 15 ms.
  const std::string dir = temp_tables(
      "deepbench_planted",
      {{"specs.csv", kSpecs},
       {"gemm.csv", kGemmHeader + "Tesla V100-SXM2-32GB,Float,1760,16,1760,N,N,0.06\n" +
                        "Tesla V100-SXM2-32GB,Float,1760,32,1760,N,N,-0.5\n" +
                        "Tesla V100-SXM2-32GB,Float,4096,7000,4096,N,N,0.001\n" +
                        "NVIDIA Imaginary X,Float,1760,16,1760,N,N,0.06\n" +
                        "Tesla V100-SXM2-32GB,8 bit inputs,1760,16,1760,N,N,0.06\n"},
       {"allreduce.csv",
        "device,algorithm,size_bytes_fp32,num_ranks,num_nodes,mean_ms,std_ms,gbytes_per_s_reported\n"
        "Tesla V100-SXM2-32GB,NCCL 2.0 Single,400000,4,,0.1,,16\n"
        "Tesla V100-SXM2-32GB,NCCL 2.0 Single,400000,8,,-0.1,,\n"
        "Tesla V100-SXM2-32GB,NCCL 2.0 Single,400000,8,,0.1,,99\n"
        "Tesla V100-SXM2-32GB,Carrier Pigeon,400000,8,,0.1,,\n"
        "NVIDIA Imaginary X,NCCL 2.0 MPI,400000,8,,0.1,,\n"},
       {"conv.csv", "device,fwd_ms\nTesla V100-SXM2-32GB,1\nTesla V100-SXM2-32GB,2\n"}});
  Store store(test::fresh_store_path("deepbench_planted.db"));
  const auto s = import_deepbench(options(dir), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(s.layer_rows, 1u);
  EXPECT_EQ(s.collective_rows, 1u);
  EXPECT_EQ(count_of(s.refused, "time not positive and finite"), 1u);
  EXPECT_EQ(count_of(s.refused, "faster than the fp32 spec peak by more than 10 %"), 1u);
  EXPECT_EQ(count_of(s.refused, "no spec sheet for NVIDIA Imaginary X"), 2u);
  EXPECT_EQ(count_of(s.refused, "unknown precision \"8 bit inputs\""), 1u);
  EXPECT_EQ(count_of(s.refused, "collective: time, size or ranks not positive"), 1u);
  EXPECT_EQ(count_of(s.refused, "all-reduce: reported GB/s contradicts ranks x size / time by more than 2 %"),
            1u);
  EXPECT_EQ(count_of(s.refused, "unknown all-reduce algorithm \"Carrier Pigeon\""), 1u);
  EXPECT_EQ(s.refused_total(), 8u);
  EXPECT_EQ(count_of(s.skipped, "conv"), 2u);
  EXPECT_EQ(s.files, 4u);
  // The provenance of the rows names the software of the device's Specs sheet.
  const auto rows = store.layers(LayerType::Linear);
  ASSERT_EQ(rows.size(), 1u);
  const auto env = store.export_json().dump();
  EXPECT_NE(env.find("CUDA 10.1.243, cuDNN 7.6.2.24, driver 418.67"), std::string::npos);
  EXPECT_NE(env.find("da81ba7820739e2e506dc27f382d15be5479f98f"), std::string::npos);
}

TEST(DeepbenchImport, MalformedFileIsAnErrorNamingFileAndLineAndStoresNothing) {
  struct Case {
    std::string name, file, text, expect;
  };
  const std::vector<Case> cases = {
      {"missing_column", "gemm.csv",
       "device,precision,m,n,k,a_transpose,b_transpose\nTesla V100-SXM2-32GB,Float,1,1,1,N,N\n",
       "gemm.csv:1: the header lacks the column time_ms"},
      {"non_numeric", "gemm.csv",
       kGemmHeader + "Tesla V100-SXM2-32GB,Float,1760,16,1760,N,N,0.06\nTesla "
                     "V100-SXM2-32GB,Float,1760,x16,1760,N,N,0.06\n",
       "gemm.csv:3: n=\"x16\" is not a number"},
      {"bad_transpose", "gemm.csv", kGemmHeader + "Tesla V100-SXM2-32GB,Float,1760,16,1760,C,N,0.06\n",
       "gemm.csv:2: a_transpose=\"C\" is not N or T"},
      {"allreduce_non_numeric", "allreduce.csv",
       "device,algorithm,size_bytes_fp32,num_ranks,num_nodes,mean_ms\nTesla V100-SXM2-32GB,NCCL 2.0 "
       "MPI,4e5,2,,n/a\n",
       "allreduce.csv:2: mean_ms=\"n/a\" is not a number"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::map<std::string, std::string> files = {
        {"specs.csv", kSpecs},
        {"gemm.csv", kGemmHeader + "Tesla V100-SXM2-32GB,Float,1760,16,1760,N,N,0.06\n"}};
    files[c.file] = c.text;
    const std::string dir = temp_tables("deepbench_bad_" + c.name, files);
    Store store(test::fresh_store_path("deepbench_bad_" + c.name + ".db"));
    const std::string err = test::error_of([&] { import_deepbench(options(dir), store); });
    EXPECT_NE(err.find(dir + "/" + c.expect), std::string::npos) << err;
    EXPECT_TRUE(store.layers(std::nullopt, "", false).empty());
    EXPECT_TRUE(store.collectives("", "", false).empty());
    EXPECT_TRUE(store.devices().empty());
  }
  const std::string empty = temp_tables("deepbench_empty", {});
  Store store(test::fresh_store_path("deepbench_empty.db"));
  const std::string err = test::error_of([&] { import_deepbench(options(empty), store); });
  EXPECT_NE(err.find("gemm.csv and specs.csv are required"), std::string::npos) << err;
}

}  // namespace
}  // namespace scaledl
