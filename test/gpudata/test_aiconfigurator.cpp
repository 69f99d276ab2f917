// import_aiconfigurator on the committed subset datasets/gpus/aiconfigurator (spec sheets of
// models/devices), and on edited copies of it: refused rows, malformed files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "scaledl/core/fs_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "test_util.hpp"

namespace scaledl {
namespace {

namespace fs = std::filesystem;

const std::string kSubset = std::string(SCALEDL_SOURCE_DIR) + "/datasets/gpus/aiconfigurator";
const std::string kDevices = std::string(SCALEDL_SOURCE_DIR) + "/models/devices";

GpuImportOptions options(const std::string& root) {
  GpuImportOptions o;
  o.root = root;
  o.devices_dir = kDevices;
  return o;
}

/// A writable copy of the subset in the test temp dir (an earlier copy is removed).
std::string copy_subset(const std::string& name) {
  const fs::path dst = fs::path(testing::TempDir()) / name;
  scaledl::remove_tree(dst);
  fs::copy(kSubset, dst, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(dst))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  return dst.string();
}

void append(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::app) << text;
}

size_t line_count(const fs::path& file) {
  std::ifstream in(file);
  return static_cast<size_t>(
      std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

size_t total(const std::map<std::string, size_t>& m) {
  size_t n = 0;
  for (const auto& [k, v] : m) n += v;
  return n;
}

/// Layer rows of `device` by dtype.
std::map<DType, size_t> rows_by_dtype(const Store& s, const std::string& device) {
  std::map<DType, size_t> out;
  for (const auto& m : s.layers(LayerType::Linear, device)) ++out[m.dtype];
  return out;
}

// Rows of the committed subset (scripts/gpu/subset_aiconfigurator.py; its README.md).
constexpr size_t kGemmRows = 12329;      // 594 A100 + 6 x 1448 + 1188 B60 + 1188 H20 + 671 RTX 5090
constexpr size_t kAttentionRows = 2040;  // context attention: 136 A100, B60, H20 (fp16) + 6 x 272
constexpr size_t kLayerRows = kGemmRows + kAttentionRows;
constexpr size_t kCollectiveRows = 462;  // one per (op, world, size): 6 x 63 + 42 B60 + 42 GB200
constexpr size_t kAllRows = 18305;

TEST(Aiconfigurator, ImportsTheSubsetPerDeviceAndDtype) {
  Store s(test::fresh_store_path("aic_subset.db"));
  const GpuImportSummary sum = import_aiconfigurator(options(kSubset), s);
  EXPECT_EQ(sum.source, "aiconfigurator");
  EXPECT_EQ(sum.files, 45u);
  EXPECT_EQ(sum.rows, kAllRows);
  // Every GPU of the data has a spec sheet and no row of it is implausible.
  EXPECT_TRUE(sum.refused.empty()) << sum.to_text();
  EXPECT_EQ(sum.layer_rows, kLayerRows) << sum.to_text();
  EXPECT_EQ(sum.layers_inserted, kLayerRows);
  EXPECT_EQ(sum.collective_rows, kCollectiveRows) << sum.to_text();
  EXPECT_EQ(sum.collectives_inserted, kCollectiveRows);
  // Every row read is accepted, refused or skipped.
  EXPECT_EQ(sum.rows, sum.layer_rows + sum.collective_rows + sum.refused_total() + total(sum.skipped));

  struct Want {
    std::string device;
    size_t bf16, fp8, fp16;
  };
  const std::vector<Want> want = {
      {"spec:NVIDIA A100-SXM4-80GB", 594, 0, 0},
      {"spec:NVIDIA B200", 724, 724, 0},
      {"spec:NVIDIA GB200", 724, 724, 0},
      {"spec:NVIDIA H100 80GB HBM3", 724, 724, 0},
      {"spec:NVIDIA H200", 724, 724, 0},
      {"spec:NVIDIA L40S", 724, 724, 0},
      {"spec:NVIDIA RTX PRO 6000 Blackwell Server Edition", 724, 724, 0},
      {"spec:Intel Arc Pro B60", 594, 594, 0},
      {"spec:NVIDIA H20-3e", 0, 594, 594},
      {"spec:NVIDIA GeForce RTX 5090", 671, 0, 0},
  };
  for (const auto& w : want) {
    auto got = rows_by_dtype(s, w.device);
    EXPECT_EQ(got[DType::BF16], w.bf16) << w.device;
    EXPECT_EQ(got[DType::FP8], w.fp8) << w.device;
    EXPECT_EQ(got[DType::FP16], w.fp16) << w.device;
  }
  EXPECT_EQ(sum.per_kind.at("linear fwd bf16"), 594u + 6 * 724 + 594 + 671);
  EXPECT_EQ(sum.per_kind.at("linear fwd fp8"), 6u * 724 + 594 + 594);
  EXPECT_EQ(sum.per_kind.at("linear fwd fp16"), 594u);
  EXPECT_EQ(sum.per_kind.at("flash_attention fwd bf16"), 136u * 2 + 6 * 272);
  EXPECT_EQ(sum.per_kind.at("flash_attention fwd fp16"), 136u);  // the H20-3e's SGLang table

  // Skipped: decode and encoder attention (24 rows a table), custom all-reduce, alltoall, int8,
  // repeated sizes. Context attention is imported (the subset has no sliding-window row).
  EXPECT_EQ(sum.skipped.count("context attention with a sliding window (no window dim)"), 0u);
  EXPECT_EQ(sum.skipped.at("generation attention (decode / encoder kernels)"), 9u * 24);
  EXPECT_EQ(sum.skipped.at("encoder attention (decode / encoder kernels)"), 24u);
  EXPECT_EQ(sum.skipped.at("custom all-reduce (framework kernel, not NCCL)"), 8u * 24);
  EXPECT_EQ(sum.skipped.at("alltoall"), 3u * 42 + 252 + 3 * 168);  // the B60 has none
  EXPECT_EQ(sum.skipped.at("int8 collective"), 3u * 63 + 42 + 378 + 238 + 2 * 231);
  EXPECT_EQ(sum.skipped.at("collective timed again (kept: newest version, median time)"),
            315u + 200 + 2 * 168);

  // One row: the H100's 8192^3 BF16 GEMM, fwd only, n = 6 runs, 700-900 TFLOP/s (README: 783).
  bool found = false;
  for (const auto& m : s.layers(LayerType::Linear, "spec:NVIDIA H100 80GB HBM3")) {
    if (m.dtype != DType::BF16 || m.dims != std::vector<int64_t>{8192, 8192, 8192, 0}) continue;
    found = true;
    const double tflops = 2.0 * 8192 * 8192 * 8192 / (m.fwd.median_ms * 1e-3) / 1e12;
    EXPECT_GT(tflops, 700);
    EXPECT_LT(tflops, 900);
    EXPECT_EQ(m.fwd.n, 6);
    EXPECT_TRUE(std::isnan(m.bwd.median_ms));
    EXPECT_EQ(m.source, "aiconfigurator");
    EXPECT_EQ(m.campaign, "aiconfigurator");
    EXPECT_GT(m.env_id, 0);
  }
  EXPECT_TRUE(found);
  // The layout of the GEMM: tokens = m, d_in = k, d_out = n (m8192 n12288 k4096: 1.018 ms).
  found = false;
  for (const auto& m : s.layers(LayerType::Linear, "spec:NVIDIA H100 80GB HBM3"))
    if (m.dtype == DType::BF16 && m.dims == std::vector<int64_t>{8192, 4096, 12288, 0}) {
      found = true;
      EXPECT_NEAR(m.fwd.median_ms, 1.018, 0.001);
    }
  EXPECT_TRUE(found);
}

TEST(Aiconfigurator, ImportingTwiceInsertsNothingNew) {
  Store s(test::fresh_store_path("aic_twice.db"));
  const auto first = import_aiconfigurator(options(kSubset), s);
  const auto second = import_aiconfigurator(options(kSubset), s);
  EXPECT_EQ(second.layer_rows, first.layer_rows);
  EXPECT_EQ(second.collective_rows, first.collective_rows);
  EXPECT_EQ(second.layers_inserted, 0u);
  EXPECT_EQ(second.collectives_inserted, 0u);
  EXPECT_EQ(s.layers(LayerType::Linear).size() + s.layers(LayerType::FlashAttention).size(),
            first.layers_inserted);
}

TEST(Aiconfigurator, CollectivesLandPerFabricWithNcclTestsBusBandwidth) {
  Store s(test::fresh_store_path("aic_comm.db"));
  import_aiconfigurator(options(kSubset), s);
  // One campaign per GPU folder; one row per (collective, world, size): 3 x 3 x 7 on 8-GPU boards.
  const auto h100 = s.collectives("aiconfigurator-h100_sxm");
  ASSERT_EQ(h100.size(), 63u);
  const auto b200 = s.collectives("aiconfigurator-b200_sxm");
  EXPECT_EQ(b200.size(), 63u);                                   // 6 rows a size in the table, one kept
  EXPECT_EQ(s.collectives("aiconfigurator-gb200").size(), 42u);  // one 4-GPU tray
  for (const auto& c : h100) {
    EXPECT_EQ(c.backend, "nccl");
    EXPECT_EQ(c.level, "intra-node");
    EXPECT_EQ(c.dtype, "fp16");
    EXPECT_EQ(c.nodes, 1);
    EXPECT_FALSE(c.in_place);
    EXPECT_EQ(c.device, "spec:NVIDIA H100 80GB HBM3");
    EXPECT_GE(c.bytes, 65536);
    const double n = static_cast<double>(c.world), algbw = c.bytes / c.time_s / 1e9;
    const double factor = c.collective == "allreduce" ? 2 * (n - 1) / n : (n - 1) / n;
    EXPECT_NEAR(c.busbw_gbs, algbw * factor, 1e-9 * c.busbw_gbs) << c.collective << " " << c.bytes;
  }
  auto busbw = [&](const std::string& campaign, const std::string& coll, int64_t world, double bytes) {
    for (const auto& c : s.collectives(campaign, coll))
      if (c.world == world && c.bytes == bytes) return c.busbw_gbs;
    return -1.0;
  };
  const double big = 256.0 * 1024 * 1024;
  // NVSwitch (H100 NVLink 4: 450 GB/s a direction) vs PCIe (L40S).
  const double h100_ar8 = busbw("aiconfigurator-h100_sxm", "allreduce", 8, big);
  EXPECT_GT(h100_ar8, 250);
  EXPECT_LT(h100_ar8, 500);
  const double l40s_ar8 = busbw("aiconfigurator-l40s", "allreduce", 8, big);
  EXPECT_GT(l40s_ar8, 1);
  EXPECT_LT(l40s_ar8, 64);
  // oneCCL rows of the Arc Pro B60.
  const auto b60 = s.collectives("aiconfigurator-b60");
  ASSERT_EQ(b60.size(), 42u);
  for (const auto& c : b60) EXPECT_EQ(c.backend, "oneccl");
}

/// Which of the repeated B200 sizes is kept: newest ccl_version_field, then the median time.
TEST(Aiconfigurator, RepeatedSizesKeepTheNewestVersionsMedian) {
  const std::string root = copy_subset("aic_dups");
  const fs::path f = fs::path(root) / "a100_sxm" / "comm_collectives.csv";
  // Three more timings of the all_reduce of 64 KiB on 2 GPUs: two of a newer NCCL.
  append(f,
         "x,2.99.1,TRTLLM,NCCL,all_reduce,half,2,65536,0.5,NVIDIA A100-SXM4-80GB\n"
         "x,2.99.1,TRTLLM,NCCL,all_reduce,half,2,65536,0.1,NVIDIA A100-SXM4-80GB\n"
         "x,2.100.0,TRTLLM,NCCL,all_reduce,half,2,65536,0.3,NVIDIA A100-SXM4-80GB\n"
         "x,2.100.0,TRTLLM,NCCL,all_reduce,half,2,65536,0.2,NVIDIA A100-SXM4-80GB\n");
  Store s(test::fresh_store_path("aic_dups.db"));
  const auto sum = import_aiconfigurator(options(root), s);
  bool found = false;
  for (const auto& c : s.collectives("aiconfigurator-a100_sxm", "allreduce"))
    if (c.world == 2 && c.bytes == 65536) {
      found = true;
      EXPECT_DOUBLE_EQ(c.time_s, 0.2e-3);  // 2.100.0 is newer than 2.99.1; lower middle of 0.2, 0.3
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(sum.collective_rows, kCollectiveRows);
}

TEST(Aiconfigurator, BadRowsAreRefusedAndCountedTheRestImports) {
  const std::string root = copy_subset("aic_bad_rows");
  const fs::path gemm = fs::path(root) / "h100_sxm" / "gemm.csv";
  append(gemm,
         "bfloat16,64,64,64,-0.01\n"       // negative time
         "bfloat16,8192,8192,8192,0.01\n"  // 110 PFLOP/s: far above the BF16 peak
         "bfloat16,0,64,64,0.01\n"         // m = 0
         "nvfp4,64,64,64,0.01\n");         // a dtype we have not: skipped, not refused
  append(fs::path(root) / "h100_sxm" / "comm_collectives.csv",
         "nccl/2.29.2,2.29.2,TRTLLM,NCCL,all_gather,half,8,3,-1,NVIDIA H100 80GB HBM3\n");
  // A GPU without a spec sheet: every row refused.
  fs::create_directories(fs::path(root) / "mystery");
  std::ofstream(fs::path(root) / "mystery" / "gemm.csv")
      << "gemm_dtype,m,n,k,latency_ms\nbfloat16,1,64,64,0.01\nfp8,1,64,64,0.01\nbfloat16,2,64,64,0.01\n";
  append(fs::path(root) / "manifest.csv",
         "mystery/gemm.csv,mystery,NVIDIA Mystery GPU,gemm,trtllm,9.9,x,y\n");

  Store s(test::fresh_store_path("aic_bad_rows.db"));
  const auto sum = import_aiconfigurator(options(root), s);
  EXPECT_EQ(sum.rows, kAllRows + 4 + 1 + 3);
  EXPECT_EQ(sum.refused.at("time not positive and finite"), 1u) << sum.to_text();
  EXPECT_EQ(sum.refused.at("faster than the bf16 spec peak by more than 10 %"), 1u);
  EXPECT_EQ(sum.refused.at("GEMM m, n or k not in [1, 2^40)"), 1u);
  EXPECT_EQ(sum.refused.at("no spec sheet for NVIDIA Mystery GPU"), 3u);
  EXPECT_EQ(sum.refused.at("collective: time, size or ranks not positive"), 1u);
  EXPECT_EQ(sum.refused_total(), 7u);
  EXPECT_EQ(sum.skipped.at("GEMM nvfp4 (no dtype of ours)"), 1u);
  EXPECT_EQ(sum.layer_rows, kLayerRows);
  EXPECT_EQ(sum.collective_rows, kCollectiveRows);
  EXPECT_EQ(s.layers(LayerType::Linear).size(), kGemmRows);
  EXPECT_EQ(sum.rows, sum.layer_rows + sum.collective_rows + sum.refused_total() + total(sum.skipped));
}

TEST(Aiconfigurator, GpusWithoutASpecSheetAreRefusedPerRow) {
  // A folder of spec sheets holding only the H100's.
  const fs::path devs = fs::path(testing::TempDir()) / "aic_one_spec";
  scaledl::remove_tree(devs);
  fs::create_directories(devs);
  fs::copy_file(fs::path(kDevices) / "h100-sxm.json", devs / "h100-sxm.json");
  GpuImportOptions o = options(kSubset);
  o.devices_dir = devs.string();
  Store s(test::fresh_store_path("aic_one_spec.db"));
  const auto sum = import_aiconfigurator(o, s);
  EXPECT_EQ(sum.layer_rows, 1448u + 272);  // GEMMs and context attention
  EXPECT_EQ(sum.collective_rows, 63u);
  EXPECT_EQ(sum.per_device.size(), 1u);
  EXPECT_EQ(sum.refused.at("no spec sheet for NVIDIA B200"),
            1448u + 272 + 378);  // GEMMs, attention, collectives
  EXPECT_EQ(sum.refused.at("no spec sheet for NVIDIA GeForce RTX 5090"), 671u);
  EXPECT_EQ(sum.refused.at("no spec sheet for Intel(R) Graphics [0xe211]"), 42u);  // B60 oneCCL rows
  EXPECT_EQ(sum.refused_total(), kLayerRows - 1448 - 272 + kCollectiveRows - 63 + 315 + 200 + 168);
  EXPECT_EQ(s.devices().size(), 1u);
}

TEST(Aiconfigurator, MalformedFilesAreErrorsNamingFileAndLineAndWriteNothing) {
  struct Case {
    std::string name;
    std::string file;  // relative to the copy
    std::string text;  // appended, or the whole file when `replace`
    bool replace;
    std::vector<std::string> message;  // parts of the Error
  };
  const size_t gemm_lines = line_count(fs::path(kSubset) / "b200_sxm" / "gemm.csv");
  const std::string next = std::to_string(gemm_lines + 1);
  const std::vector<Case> cases = {
      {"missing column k",
       "b200_sxm/gemm.csv",
       "gemm_dtype,m,n,latency_ms\nbfloat16,1,64,0.1\n",
       true,
       {"b200_sxm/gemm.csv:1", "lacks the column k"}},
      {"non-numeric m",
       "b200_sxm/gemm.csv",
       "bfloat16,abc,64,64,0.01\n",
       false,
       {"b200_sxm/gemm.csv:" + next, "m=\"abc\" is not an integer"}},
      {"non-numeric latency",
       "b200_sxm/gemm.csv",
       "fp8,64,64,64,fast\n",
       false,
       {"b200_sxm/gemm.csv:" + next, "latency_ms=\"fast\" is not a number"}},
      {"short record", "b200_sxm/gemm.csv", "fp8,64,64\n", false, {"b200_sxm/gemm.csv:" + next, "3 fields"}},
      {"unknown collective",
       "l40s/comm_collectives.csv",
       "x,2.27.3,TRTLLM,NCCL,broadcast,half,2,65536,0.1,NVIDIA L40S\n",
       false,
       {"l40s/comm_collectives.csv:", "op_name=\"broadcast\""}},
      {"comm without num_gpus",
       "l40s/comm_collectives.csv",
       "op_name,dtype,message_size_bytes,latency_ms\nall_reduce,half,65536,0.1\n",
       true,
       {"l40s/comm_collectives.csv:1", "num_gpus"}},
      {"table not in the manifest", "l40s/gemm.csv", "", false, {}},  // set up below
      {"unknown table", "l40s/moe.csv", "a,b\n1,2\n", true, {"l40s/moe.csv", "not an aiconfigurator table"}},
  };
  for (const auto& c : cases) {
    const std::string root = copy_subset("aic_malformed");
    std::vector<std::string> message = c.message;
    if (c.name == "table not in the manifest") {
      fs::rename(fs::path(root) / "l40s" / "gemm.csv", fs::path(root) / "l40s" / "gemm2.csv");
      fs::create_directories(fs::path(root) / "l4");
      fs::rename(fs::path(root) / "l40s" / "gemm2.csv", fs::path(root) / "l4" / "gemm.csv");
      message = {"l4/gemm.csv", "no row of its folder's manifest.csv"};
    } else if (c.replace) {
      std::ofstream(fs::path(root) / c.file) << c.text;
    } else {
      append(fs::path(root) / c.file, c.text);
    }
    Store s(test::fresh_store_path("aic_malformed.db"));
    const std::string err = test::error_of([&] { import_aiconfigurator(options(root), s); });
    for (const auto& part : message) EXPECT_NE(err.find(part), std::string::npos) << c.name << ": " << err;
    EXPECT_TRUE(s.layers(std::nullopt, "", false).empty()) << c.name;
    EXPECT_TRUE(s.collectives().empty()) << c.name;
    EXPECT_TRUE(s.devices().empty()) << c.name;
  }
}

TEST(Aiconfigurator, ProvenanceSaysFrameworkCommitAndLowerConfidence) {
  Store s(test::fresh_store_path("aic_prov.db"));
  import_aiconfigurator(options(kSubset), s);
  const nlohmann::json info = s.export_json();
  ASSERT_TRUE(info.contains("environments")) << info.dump().substr(0, 400);
  bool trtllm = false, pull = false, nccl = false;
  for (const auto& e : info.at("environments")) {
    const nlohmann::json env = nlohmann::json::parse(e.at("env").get<std::string>());  // a JSON text column
    const auto& p = env.at("provenance");
    EXPECT_EQ(p.at("source"), "aiconfigurator");
    EXPECT_EQ(p.at("license"), "Apache-2.0");
    const std::string fw = p.at("framework"), timed = p.at("timed"), commit = p.at("commit");
    if (fw.rfind("TensorRT-LLM 1.3.0rc20", 0) == 0 && timed.find("FP8") != std::string::npos) {
      trtllm = true;
      EXPECT_EQ(commit, "095f58a51c4ca8e61b66ec108d86f223f8d559ce");
      EXPECT_NE(timed.find("mean of 6 runs"), std::string::npos);
      EXPECT_NE(timed.find("activation quantisation"), std::string::npos);
    }
    if (fw.find("refs/pull/1312/head") != std::string::npos) {
      pull = true;
      EXPECT_EQ(commit, "5532b59818b3ae38a658d95fc4777f2aca1de177");
      EXPECT_NE(fw.find("lower confidence"), std::string::npos);
    }
    if (fw.rfind("NCCL 2.29.2", 0) == 0) nccl = true;
  }
  EXPECT_TRUE(trtllm);
  EXPECT_TRUE(pull);
  EXPECT_TRUE(nccl);
}

TEST(Aiconfigurator, ContextAttentionIsTheFusedAttentionKindAndBadRowsAreRefused) {
  const std::string root = copy_subset("aic_attention");
  append(fs::path(root) / "h100_sxm" / "context_attention_bf16.csv",
         "torch_flow,1,4096,32,8,128,1024,0.2\n"  // a sliding window: skipped
         "torch_flow,1,4096,32,6,128,0,0.2\n"     // 6 k/v heads do not divide 32: refused
         "torch_flow,1,4096,32,8,128,0,-1\n"      // negative time: refused
         "torch_flow,64,16384,64,8,128,0,0.01\n"  // 10^5 TFLOP/s: above the BF16 peak, refused
  );
  Store s(test::fresh_store_path("aic_attention.db"));
  const auto sum = import_aiconfigurator(options(root), s);
  EXPECT_EQ(sum.skipped.at("context attention with a sliding window (no window dim)"), 1u);
  EXPECT_EQ(sum.refused.at("attention: a size not in [1, 2^40), or num_kv_heads not dividing num_heads"), 1u);
  EXPECT_EQ(sum.refused.at("time not positive and finite"), 1u) << sum.to_text();
  EXPECT_EQ(sum.refused.at("faster than the bf16 spec peak by more than 10 %"), 1u) << sum.to_text();
  EXPECT_EQ(sum.layer_rows, kLayerRows);
  // One row: the H100's causal attention at b = 4, s = 4096, 32/8 heads, d = 128 runs at 300-600
  // TFLOP/s (the data's README: 445), forward only, as flash_attention's causal FLOP count it.
  bool found = false;
  for (const auto& m : s.layers(LayerType::FlashAttention, "spec:NVIDIA H100 80GB HBM3")) {
    if (m.dims != std::vector<int64_t>{4, 32, 8, 4096, 4096, 128, 128, 1}) continue;
    found = true;
    const LayerCost c = layer_cost(LayerType::FlashAttention, m.dims, DType::BF16);
    const double tflops = c.flops_fwd / (m.fwd.median_ms * 1e-3) / 1e12;
    EXPECT_GT(tflops, 300);
    EXPECT_LT(tflops, 600);
    EXPECT_EQ(m.dtype, DType::BF16);
    EXPECT_TRUE(std::isnan(m.bwd.median_ms));
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace scaledl
