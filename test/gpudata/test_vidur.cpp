// import_vidur on the committed copy datasets/gpus/vidur (scripts/gpu/subset_vidur.py) and on
// temporary copies with planted bad rows and malformed files.
#include <gtest/gtest.h>

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
const std::string kA100 = "spec:NVIDIA A100-SXM4-80GB";
const std::string kA100Pcie = "spec:NVIDIA A100 80GB PCIe";
const std::string kA40 = "spec:NVIDIA A40";
const std::string kH100 = "spec:NVIDIA H100 80GB HBM3";
const std::string kCopyReason =
    "byte-identical copy of a100_pairwise_nvlink/send_recv.csv (an upstream placeholder, not a measurement "
    "of h100_pairwise_nvlink)";

GpuImportOptions options(const std::string& root) {
  return test::gpu_import_options(root);
}

/// A copy of the committed data in a fresh temporary folder.
std::string temp_copy(const std::string& name) {
  const std::string dir = testing::TempDir() + "/" + name;
  scaledl::remove_tree(dir);
  fs::copy(kSrc + "/datasets/gpus/vidur", dir, fs::copy_options::recursive);
  return dir;
}

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

using test::count_of;

TEST(VidurImport, CommittedCopyCountsPerGpuAndKind) {
  Store store(test::fresh_store_path("vidur_copy.db"));
  const GpuImportSummary s = import_vidur(options(kSrc + "/datasets/gpus/vidur"), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(s.files, 25u);  // 16 mlp.csv + 9 network tables
  // 843 + 595 + 595 rows of mlp.csv (A100 has Llama-3-8B) and 292 network rows.
  EXPECT_EQ(s.rows, 2033u + 292u);
  // Operators without a layer type of ours, one per row (phi-2's block adds three tensors).
  EXPECT_EQ(count_of(s.skipped, "attn_rope"), 2033u);
  EXPECT_EQ(count_of(s.skipped, "mlp_act (SiLU-and-mul, one fused kernel)"), 2033u - 105u);
  EXPECT_EQ(count_of(s.skipped, "add of three tensors (parallel attention block)"), 105u);
  // One row per (layer, dims, GPU): the median of the models' and TP degrees' medians.
  EXPECT_EQ(count_of(s.per_kind, "linear fwd fp16"), 2793u + 2112u + 2112u);
  EXPECT_EQ(count_of(s.per_kind, "rmsnorm fwd fp16"), 123u + 99u + 99u);
  EXPECT_EQ(count_of(s.per_kind, "layernorm fwd fp16"), 3u * 33u);  // phi-2
  EXPECT_EQ(count_of(s.per_kind, "gelu fwd fp16"), 3u * 33u);       // phi-2
  EXPECT_EQ(count_of(s.per_kind, "add fwd fp16"), 83u + 67u + 67u);
  // Embedding shapes: 789 + 561 + 561. The shared plausibility check (implausible_layer_row)
  // counts the whole table [vocab/t, h] as forward traffic while the gather reads `tokens` rows
  // of it, so the lookups faster than the table at spec bandwidth are refused under "faster
  // than the spec bandwidth" (1403 of the 2033 lookups with the check as it is); no other row
  // of the copy is refused as implausible.
  const size_t bw_refused = count_of(s.refused, "faster than the spec bandwidth by more than 10 %");
  EXPECT_LE(bw_refused, 2033u);
  std::map<std::string, size_t> emb;
  for (const auto& m : store.layers(LayerType::Embedding)) ++emb[m.device];
  EXPECT_LE(emb[kA100], 789u);
  EXPECT_LE(emb[kA40], 561u);
  EXPECT_LE(emb[kH100], 561u);
  EXPECT_EQ(count_of(s.per_kind, "embedding fwd fp16"), emb[kA100] + emb[kA40] + emb[kH100]);
  if (bw_refused == 0) EXPECT_EQ(emb[kA100] + emb[kA40] + emb[kH100], 789u + 561u + 561u);
  EXPECT_EQ(s.layer_rows, 3065u + 2344u + 2344u + emb[kA100] + emb[kA40] + emb[kH100]);
  EXPECT_EQ(s.layers_inserted, s.layer_rows);
  // Collectives (groups of ranks, devices per node and size): a100_dgx 77 all-reduce + 22
  // send/recv, a100_pairwise_nvlink 26 + 22, a40 22 send/recv, h100_dgx 33 + 22.
  EXPECT_EQ(count_of(s.per_device, kA100), 3065u + emb[kA100] + 77u + 22u);
  EXPECT_EQ(count_of(s.per_device, kA100Pcie), 26u + 22u);
  EXPECT_EQ(count_of(s.per_device, kA40), 2344u + emb[kA40] + 22u);
  EXPECT_EQ(count_of(s.per_device, kH100), 2344u + emb[kH100] + 33u + 22u);
  // h100_pairwise_nvlink: its send_recv.csv is A100's; its all_reduce.csv has no spec sheet
  // unless one for the H100 NVL exists.
  EXPECT_EQ(count_of(s.refused, kCopyReason), 24u);
  const SpecCatalog cat(kSrc + "/models/devices");
  if (cat.find("NVIDIA H100 NVL"))
    EXPECT_EQ(count_of(s.per_device, cat.find("NVIDIA H100 NVL")->key()), 22u);
  else
    EXPECT_EQ(count_of(s.refused, "no spec sheet for NVIDIA H100 NVL"), 24u);
  EXPECT_EQ(s.refused_total(), 48u + bw_refused);
  EXPECT_EQ(s.collective_rows, 99u + 48u + 22u + 55u + (cat.find("NVIDIA H100 NVL") ? 22u : 0u));
  EXPECT_EQ(s.collectives_inserted, s.collective_rows);
}

TEST(VidurImport, Llama2QkvGemmOnH100At700Tflops) {
  Store store(test::fresh_store_path("vidur_qkv.db"));
  import_vidur(options(kSrc + "/datasets/gpus/vidur"), store);
  // Llama-2-7B, TP 1, 4096 tokens: QKV [4096, 4096] -> [12288], no bias. The source times it
  // twice (0.584 and 0.593 ms): the median 0.5885 ms is 701 TFLOP/s (README: 706).
  const std::vector<int64_t> dims = {4096, 4096, 12288, 0};
  int found = 0;
  for (const auto& m : store.layers(LayerType::Linear, kH100)) {
    if (m.dims != dims) continue;
    ++found;
    EXPECT_EQ(m.dtype, DType::FP16);
    EXPECT_EQ(m.campaign, "vidur");
    EXPECT_EQ(m.source, "vidur");
    EXPECT_GT(m.env_id, 0);
    EXPECT_TRUE(std::isnan(m.bwd.median_ms));
    const double tflops = 2.0 * 4096 * 4096 * 12288 / (m.fwd.median_ms * 1e9);
    EXPECT_NEAR(tflops, 700.6, 1.0);
  }
  EXPECT_EQ(found, 1);
  // The same GEMM on the A100 is ~216 TFLOP/s, on the A40 ~110.
  for (const auto& [dev, lo, hi] : {std::tuple{kA100, 200.0, 235.0}, std::tuple{kA40, 100.0, 120.0}}) {
    bool seen = false;
    for (const auto& m : store.layers(LayerType::Linear, dev)) {
      if (m.dims != dims) continue;
      seen = true;
      const double tflops = 2.0 * 4096 * 4096 * 12288 / (m.fwd.median_ms * 1e9);
      EXPECT_GT(tflops, lo) << dev;
      EXPECT_LT(tflops, hi) << dev;
    }
    EXPECT_TRUE(seen) << dev;
  }
}

TEST(VidurImport, CollectivesCarryNodesLevelAndBusBandwidth) {
  Store store(test::fresh_store_path("vidur_coll.db"));
  import_vidur(options(kSrc + "/datasets/gpus/vidur"), store);
  // h100_dgx: 8 ranks, 64 MiB in 0.322 ms (README): bus bandwidth 2 (n-1)/n x S / t = 364 GB/s.
  int found = 0;
  for (const auto& c : store.collectives("vidur-h100_dgx", "allreduce")) {
    EXPECT_EQ(c.backend, "nccl");
    EXPECT_EQ(c.dtype, "fp16");
    EXPECT_EQ(c.device, kH100);
    EXPECT_NEAR(c.busbw_gbs, 2.0 * (c.world - 1) / c.world * c.bytes / c.time_s / 1e9, 1e-9 * c.busbw_gbs);
    if (c.world == 8 && c.bytes == 67108864.0) {
      ++found;
      EXPECT_EQ(c.nodes, 1);
      EXPECT_EQ(c.level, "intra-node");
      EXPECT_NEAR(c.time_s, 0.322e-3, 1e-9);
      EXPECT_NEAR(c.busbw_gbs, 364.8, 0.5);
    }
  }
  EXPECT_EQ(found, 1);
  // a100_dgx: 16 ranks at 8 per node are 2 nodes; 2 ranks at 1 per node too.
  size_t inter = 0, sendrecv = 0;
  for (const auto& c : store.collectives("vidur-a100_dgx")) {
    EXPECT_LE(c.nodes, c.world);
    if (c.level == "inter-node") {
      ++inter;
      EXPECT_GT(c.nodes, 1);
    }
    if (c.collective == "sendrecv") {
      ++sendrecv;
      EXPECT_EQ(c.world, 2);
      EXPECT_NEAR(c.busbw_gbs, c.bytes / c.time_s / 1e9, 1e-9 * c.busbw_gbs);
    }
  }
  EXPECT_EQ(sendrecv, 22u);
  // 11 sizes each of all-reduce on 2 ranks at 1 per node, 4 at 2, 8 at 4, 16 at 8, and of
  // send/recv on 2 ranks at 1 per node.
  EXPECT_EQ(inter, 5u * 11u);
  bool sixteen = false;
  for (const auto& c : store.collectives("vidur-a100_dgx", "allreduce"))
    if (c.world == 16) {
      sixteen = true;
      EXPECT_EQ(c.nodes, 2);
      EXPECT_EQ(c.level, "inter-node");
    }
  EXPECT_TRUE(sixteen);
}

TEST(VidurImport, ImportingTwiceAddsNothing) {
  Store store(test::fresh_store_path("vidur_twice.db"));
  const auto first = import_vidur(options(kSrc + "/datasets/gpus/vidur"), store);
  const auto counts = store.counts();
  const auto second = import_vidur(options(kSrc + "/datasets/gpus/vidur"), store);
  EXPECT_GT(first.layers_inserted, 0u);
  EXPECT_EQ(second.layer_rows, first.layer_rows);
  EXPECT_EQ(second.layers_inserted, 0u);
  EXPECT_EQ(second.collectives_inserted, 0u);
  EXPECT_EQ(store.counts(), counts);
}

TEST(VidurImport, PlantedBadRowsAreRefusedUnderTheirReason) {
  const std::string dir = temp_copy("vidur_planted");
  const std::string head =
      "time_stats.attn_pre_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,"
      "num_tokens,num_tensor_parallel_workers\n";
  // Llama-2-70B is not in the copy: QKV [T, 8192] -> [10240]. 1001 tokens at 1 ms is plausible,
  // a negative time is not, nor 2 x 4096 x 8192 x 10240 FLOP in 0.1 us (H100 FP16 peak: 0.69 ms).
  write_file(dir + "/profiling/compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv",
             head + "-0.5,64,8,8192,28672,32768,True,512,1\n" + "0.0001,64,8,8192,28672,32768,True,4096,1\n" +
                 "1.0,64,8,8192,28672,32768,True,1001,1\n");
  write_file(dir + "/profiling/compute/b200/meta-llama/Llama-2-7b-hf/mlp.csv",
             head + "0.1,32,32,4096,11008,32768,True,512,1\n");
  write_file(dir + "/profiling/compute/h100/acme/unknown-7b/mlp.csv",
             head + "0.1,32,32,4096,11008,32768,True,512,1\n");
  Store clean_store(test::fresh_store_path("vidur_clean.db"));
  const auto clean = import_vidur(options(kSrc + "/datasets/gpus/vidur"), clean_store);
  Store store(test::fresh_store_path("vidur_planted.db"));
  const auto s = import_vidur(options(dir), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(count_of(s.refused, "time not positive and finite"), 1u);
  EXPECT_EQ(count_of(s.refused, "faster than the fp16 spec peak by more than 10 %"), 1u);
  EXPECT_EQ(count_of(s.refused, "unknown Vidur GPU folder compute/b200"), 1u);
  EXPECT_EQ(count_of(s.refused, "no Vidur model config known for acme/unknown-7b (norm type, biases)"), 1u);
  EXPECT_EQ(s.refused_total(), clean.refused_total() + 4);
  EXPECT_EQ(s.layer_rows, clean.layer_rows + 1);
  bool found = false;
  for (const auto& m : store.layers(LayerType::Linear, kH100))
    if (m.dims == std::vector<int64_t>{1001, 8192, 10240, 0}) found = m.fwd.median_ms == 1.0;
  EXPECT_TRUE(found);
}

TEST(VidurImport, DuplicateSendRecvIsRefusedByContentNotName) {
  // The committed copy keeps upstream's duplicate: refused (CommittedCopy...). Changed by one
  // digit it is no longer a copy; A100 DGX's table copied over A40's is.
  const std::string dir = temp_copy("vidur_dup");
  const std::string h100 = dir + "/profiling/network/h100_pairwise_nvlink/send_recv.csv";
  std::string text = read_text_file(h100);
  const size_t nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos);
  text.insert(nl + 1, "1");  // the first row's time gains a leading digit
  write_file(h100, text);
  fs::copy_file(dir + "/profiling/network/a100_dgx/send_recv.csv",
                dir + "/profiling/network/a40_pairwise_nvlink/send_recv.csv",
                fs::copy_options::overwrite_existing);
  Store store(test::fresh_store_path("vidur_dup.db"));
  const auto s = import_vidur(options(dir), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(count_of(s.refused, kCopyReason), 0u);
  EXPECT_EQ(
      count_of(s.refused,
               "byte-identical copy of a100_dgx/send_recv.csv (an upstream placeholder, not a measurement "
               "of a40_pairwise_nvlink)"),
      24u);
  EXPECT_TRUE(store.collectives("vidur-a40_pairwise_nvlink").empty());
}

TEST(VidurImport, MalformedFileIsAnErrorNamingFileAndLineAndStoresNothing) {
  struct Case {
    std::string name, file, header, row, expect;
  };
  const std::string shape = "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,";
  const std::vector<Case> cases = {
      {"missing_column", "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
       "time_stats.add.median," + shape + "num_tensor_parallel_workers", "0.1,32,32,4096,11008,32768,True,1",
       "mlp.csv:1: the header lacks the column num_tokens"},
      {"non_numeric", "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
       "time_stats.add.median," + shape + "num_tokens,num_tensor_parallel_workers",
       "0.1,32,32,4096,11008,32768,True,64,1\nfast,32,32,4096,11008,32768,True,128,1",
       "mlp.csv:3: time_stats.add.median=\"fast\" is not a number"},
      {"bad_gated", "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
       "time_stats.add.median," + shape + "num_tokens,num_tensor_parallel_workers",
       "0.1,32,32,4096,11008,32768,maybe,64,1", "mlp.csv:2: use_gated_mlp=\"maybe\""},
      {"network_non_numeric", "network/h100_dgx/all_reduce.csv",
       "time_stats.all_reduce.median,rank,num_workers,size,collective,devices_per_node",
       "0.1,0,8,2MB,all_reduce,8", "all_reduce.csv:2: size=\"2MB\" is not a number"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = temp_copy("vidur_bad_" + c.name);
    write_file(dir + "/profiling/" + c.file, c.header + "\n" + c.row + "\n");
    Store store(test::fresh_store_path("vidur_bad_" + c.name + ".db"));
    const std::string err = test::error_of([&] { import_vidur(options(dir), store); });
    EXPECT_NE(err.find(dir + "/profiling/" + c.file), std::string::npos) << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
    EXPECT_TRUE(store.layers(std::nullopt, "", false).empty());
    EXPECT_TRUE(store.collectives("", "", false).empty());
    EXPECT_TRUE(store.devices().empty());
  }
}

TEST(VidurImport, FolderWithoutProfilingIsAnError) {
  const std::string dir = testing::TempDir() + "/vidur_empty";
  scaledl::remove_tree(dir);
  fs::create_directories(dir);
  const std::string err = test::error_of([&] {
    Store store(test::fresh_store_path("vidur_none.db"));
    import_vidur(options(dir), store);
  });
  EXPECT_NE(err.find("not a Vidur data folder"), std::string::npos) << err;
}

}  // namespace
}  // namespace scaledl
