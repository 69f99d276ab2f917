// KernelBench importer (libscaledl/src/gpudata/kernelbench.cpp) on the committed subset
// datasets/gpus/kernelbench: the rows per GPU and kind, the mapping of shapes, the pooling of
// several runs, idempotence, the refusals of planted bad rows and the errors of malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

namespace scaledl {
namespace {

namespace fs = std::filesystem;

const fs::path kSubset = fs::path(SCALEDL_SOURCE_DIR) / "datasets" / "gpus" / "kernelbench";
const std::string kDevices = (fs::path(SCALEDL_SOURCE_DIR) / "models" / "devices").string();
constexpr const char* kEager = "level1_eager_compile.csv";
constexpr const char* kShapes = "level1_problem_shapes.csv";
constexpr const char* kRuns = "runs_index.csv";

GpuImportOptions options(const fs::path& root) {
  GpuImportOptions o;
  o.root = root.string();
  o.devices_dir = kDevices;
  return o;
}

std::string key_of(const std::string& gpu) {
  static const SpecCatalog catalog(kDevices);
  const DeviceRecord* d = catalog.find(gpu);
  EXPECT_NE(d, nullptr) << "no spec sheet for " << gpu;
  return d ? d->key() : "";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

/// A copy of the committed subset in a fresh temporary folder, for planting bad rows.
fs::path temp_copy(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("kernelbench_" + name);
  scaledl::remove_tree(dir);
  fs::create_directories(dir);
  for (const char* f : {kEager, kShapes, kRuns, "LICENSE"}) fs::copy_file(kSubset / f, dir / f);
  return dir;
}

/// The layer row of (type, dims) on `gpu`; fails the test when absent.
LayerMeasurement row_of(const Store& store, LayerType t, const std::vector<int64_t>& dims,
                        const std::string& gpu) {
  for (auto& m : store.layers(t, key_of(gpu)))
    if (m.dims == dims) return m;
  ADD_FAILURE() << "no " << to_string(t) << " row of these dims on " << gpu;
  return {};
}

/// The provenance ("provenance" object) stored with environment `id`.
nlohmann::json provenance_of(const Store& store, int64_t id) {
  const nlohmann::json all = store.export_json();
  for (const auto& e : all.at("environments"))
    if (e.at("id").get<int64_t>() == id) {
      const auto& env = e.at("env");
      return (env.is_string() ? nlohmann::json::parse(env.get<std::string>()) : env).at("provenance");
    }
  ADD_FAILURE() << "no environment " << id;
  return {};
}

// Accepted rows per GPU of the committed subset: one per (layer, dims, GPU). A run of one
// problem set gives 18 shapes (19 problems: 13 repeats 1's N x N GEMM, 17 and 2 share one
// shape); several problem sets give more (H100 SXM: ps1, ps4, ps7), and the A10G_modal run
// timed some problems on an A10 and the others on an A10G.
const std::map<std::string, size_t> kRowsPerGpu = {
    {"NVIDIA A100-SXM4-80GB", 18},
    {"NVIDIA A100-SXM4-40GB", 18},
    {"NVIDIA A10G", 11},
    {"NVIDIA A10", 8},
    {"NVIDIA RTX A6000", 31},
    {"NVIDIA B200", 18},
    {"NVIDIA H100 80GB HBM3", 32},
    {"NVIDIA H100 PCIe", 19},
    {"NVIDIA H200", 12},
    {"NVIDIA L40S", 31},
    {"Tesla T4", 18},
    {"NVIDIA GeForce RTX 3090 Ti", 18},
    {"AMD Instinct MI250X/MI250", 18},
};

TEST(Kernelbench, CommittedSubsetGivesRowsOfThirteenGpus) {
  Store store(test::fresh_store_path("kernelbench_subset.db"));
  const GpuImportSummary s = import_kernelbench(options(kSubset), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(s.source, "kernelbench");
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.rows, 461u);  // every eager row of the 19 mapped problems
  EXPECT_EQ(s.refused_total(), 0u);
  EXPECT_EQ(s.collective_rows, 0u);
  EXPECT_EQ(s.layers_inserted, s.layer_rows);
  EXPECT_GE(s.per_device.size(), 10u);
  size_t total = 0;
  for (const auto& [gpu, n] : kRowsPerGpu) {
    const std::string key = key_of(gpu);
    EXPECT_EQ(s.per_device.count(key) ? s.per_device.at(key) : 0, n) << gpu;
    EXPECT_EQ(store.layers(std::nullopt, key).size(), n) << gpu;
    total += n;
  }
  EXPECT_EQ(s.per_device.size(), kRowsPerGpu.size());
  EXPECT_EQ(s.layer_rows, total);
  // Every kind is FP32 forward only.
  for (const auto& [kind, n] : s.per_kind) EXPECT_NE(kind.find(" fwd fp32"), std::string::npos) << kind;
  for (const char* kind :
       {"linear fwd fp32", "bmm fwd fp32", "relu fwd fp32", "gelu fwd fp32", "pointwise fwd fp32",
        "softmax fwd fp32", "layernorm fwd fp32", "rmsnorm fwd fp32", "cross_entropy fwd fp32"})
    EXPECT_GT(s.per_kind.count(kind) ? s.per_kind.at(kind) : 0, 0u) << kind;
  // Skipped: only A.B timings of shapes also timed as A.B^T (nn.Linear's layout).
  for (const auto& [what, n] : s.skipped)
    EXPECT_NE(what.find("also timed as 17_Matmul_with_transposed_B"), std::string::npos) << what;
  for (const auto& m : store.layers()) {
    EXPECT_EQ(m.source, "kernelbench");
    EXPECT_EQ(m.campaign, "kernelbench");
    EXPECT_EQ(m.dtype, DType::FP32);
    EXPECT_TRUE(std::isnan(m.bwd.median_ms));
    EXPECT_GT(m.env_id, 0);
  }
}

TEST(Kernelbench, H100SquareMatmulIsALinearRowAt40To60Tflops) {
  Store store(test::fresh_store_path("kernelbench_h100.db"));
  import_kernelbench(options(kSubset), store);
  // Problem 1 (N = 4096, ps7, H100_Modal 2025-10) and problem 13 (the same dense GEMM, ps7 and
  // ps1 of H100_together) all timed 2.66 ms: one row, their median, n = 3 timings.
  const LayerMeasurement m = row_of(store, LayerType::Linear, {4096, 4096, 4096, 0}, "NVIDIA H100 80GB HBM3");
  const double tflops = 2.0 * 4096 * 4096 * 4096 / (m.fwd.median_ms * 1e9);
  EXPECT_GE(tflops, 40);
  EXPECT_LE(tflops, 60);
  EXPECT_DOUBLE_EQ(m.fwd.median_ms, 2.66);
  EXPECT_EQ(m.fwd.n, 3);
  const auto prov = provenance_of(store, m.env_id);
  EXPECT_EQ(prov.at("source"), "kernelbench");
  EXPECT_EQ(prov.at("repository"), "ScalingIntelligence/KernelBench");
  EXPECT_EQ(prov.at("license"), "MIT");
  // Two runs: H100_together (torch 2.5.0, 2025-01) and H100_Modal (torch 2.9, L2 flushed).
  const std::string commit = prov.at("commit");
  EXPECT_NE(commit.find("15c880c7fbb5"), std::string::npos) << commit;
  EXPECT_NE(commit.find("a6dea99ed3e3"), std::string::npos) << commit;
  const std::string fw = prov.at("framework");
  EXPECT_NE(fw.find("PyTorch 2.5.0 eager (CUDA 12.4)"), std::string::npos) << fw;
  EXPECT_NE(fw.find("PyTorch 2.9.0 eager (CUDA 12.8)"), std::string::npos) << fw;
  const std::string timed = prov.at("timed");
  EXPECT_NE(timed.find("mean of 100 trials"), std::string::npos) << timed;
  EXPECT_NE(timed.find("median of the means of every timing"), std::string::npos) << timed;
}

TEST(Kernelbench, ShapesMapToOurDims) {
  Store store(test::fresh_store_path("kernelbench_shapes.db"));
  import_kernelbench(options(kSubset), store);
  // A single timing: median = eager_ms, cv = std / mean, n = 100 trials (A100-80GB, ps1).
  const auto one = row_of(store, LayerType::BMM, {128, 128, 256, 512}, "NVIDIA A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(one.fwd.median_ms, 0.327);  // torch.bmm(A[128,128,256], B[128,256,512])
  EXPECT_NEAR(one.fwd.cv, 0.00182 / 0.327, 1e-12);
  EXPECT_EQ(one.fwd.n, 100);
  const auto prov = provenance_of(store, one.env_id);
  EXPECT_EQ(prov.at("commit"), "47f78d7f22dc0dc84b5e7c9d3b022e5982ebf9be");
  EXPECT_EQ(prov.at("framework"), "PyTorch 2.5.0 eager (CUDA 12.4)");
  EXPECT_NE(prov.at("timed").get<std::string>().find("L2 not flushed"), std::string::npos);
  // Two runs of T4_modal (2025-01-21): A.B^T (problem 17) 4.86 and 5.23 ms -> median 5.045, n = 2.
  const auto t4 = row_of(store, LayerType::Linear, {1024, 4096, 2048, 0}, "Tesla T4");
  EXPECT_DOUBLE_EQ(t4.fwd.median_ms, 0.5 * (4.86 + 5.23));
  EXPECT_EQ(t4.fwd.n, 2);
  // Each mapping, on the H100 SXM (H100_Modal, ps7).
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  row_of(store, LayerType::Linear, {32768, 32, 32768, 0}, h100);                      // 9: A[M,N] . B[N,M]
  row_of(store, LayerType::Linear, {2048, 1048576, 1, 0}, h100);                      // 4: matrix-vector
  row_of(store, LayerType::Linear, {16 * 1024, 2048, 768, 0}, h100);                  // 10: [N,M,K] . [K,L]
  row_of(store, LayerType::BMM, {128, 512, 1024, 2048}, h100);                        // 3
  row_of(store, LayerType::Pointwise, {65536LL * 16384, 0}, h100);                    // 5: A * s
  row_of(store, LayerType::Pointwise, {4096LL * 393216, 1}, h100);                    // 22: tanh
  row_of(store, LayerType::ReLU, {4096LL * 393216}, h100);                            // 19
  row_of(store, LayerType::GELU, {4096LL * 393216}, h100);                            // 26
  row_of(store, LayerType::Softmax, {4096, 393216}, h100);                            // 23
  row_of(store, LayerType::LayerNorm, {16, 64 * 256 * 256}, h100);                    // 40
  row_of(store, LayerType::RMSNorm, {112LL * 512 * 512, 64}, h100);                   // 36
  row_of(store, LayerType::CrossEntropy, {32768, 4096}, h100);                        // 95
  const auto ps7_ab = row_of(store, LayerType::Linear, {2048, 8192, 4096, 0}, h100);  // 17 of two runs
  EXPECT_DOUBLE_EQ(ps7_ab.fwd.median_ms, 0.5 * (2.68 + 2.74));
}

TEST(Kernelbench, ImportingTwiceInsertsNothing) {
  Store store(test::fresh_store_path("kernelbench_twice.db"));
  const auto first = import_kernelbench(options(kSubset), store);
  const auto second = import_kernelbench(options(kSubset), store);
  EXPECT_GT(first.layers_inserted, 0u);
  EXPECT_EQ(second.layer_rows, first.layer_rows);
  EXPECT_EQ(second.layers_inserted, 0u);
  EXPECT_EQ(store.layers().size(), first.layer_rows);
}

TEST(Kernelbench, PlantedBadRowsAreRefusedUnderTheirReason) {
  const fs::path dir = temp_copy("planted");
  std::string text = read_file(dir / kEager);
  // A flag column, as the long table has: empty for every row of the subset.
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += line + (out.empty() ? ",flag\n" : ",\n");
  const char* h100 = "NVIDIA H100 80GB HBM3,H100_Modal,15c880c7fbb5,ps7";
  // 4096^3 at the FP32 peak of 66.9 TFLOP/s takes 2.05 ms: 1.0 ms is twice as fast.
  out += fmt::format("{},1,1_Square_matrix_multiplication_,1.0,0.01,\n", h100);
  out += fmt::format("{},19,19_ReLU,-1.5,0.01,\n", h100);
  out += "NVIDIA Imaginary X1,H100_Modal,15c880c7fbb5,ps7,19,19_ReLU,4.3,0.01,\n";
  out += fmt::format("{},23,23_Softmax,8.5,0.01,suspect_problem_set_mismatch\n", h100);
  out += fmt::format("{},26,26_GELU_,,,\n", h100);
  out += fmt::format("{},42,42_Max_Pooling_2D,1.7,0.01,\n", h100);
  write_file(dir / kEager, out);

  Store clean(test::fresh_store_path("kernelbench_clean.db"));
  const auto c = import_kernelbench(options(kSubset), clean);
  Store store(test::fresh_store_path("kernelbench_planted.db"));
  const auto s = import_kernelbench(options(dir), store);
  SCOPED_TRACE(s.to_text());
  EXPECT_EQ(s.rows, c.rows + 6);
  const std::map<std::string, size_t> refused = {
      {"faster than the fp32 spec peak by more than 10 %", 1},
      {"time not positive and finite", 1},
      {"no spec sheet for NVIDIA Imaginary X1", 1},
      {"suspect_problem_set_mismatch", 1},
      {"no eager time (a null entry: the run failed)", 1},
  };
  EXPECT_EQ(s.refused, refused);
  EXPECT_EQ(s.skipped.count("42_Max_Pooling_2D") ? s.skipped.at("42_Max_Pooling_2D") : 0, 1u);
  // The refused rows entered no median: the store is the clean import's.
  EXPECT_EQ(s.per_device, c.per_device);
  EXPECT_EQ(s.layer_rows, c.layer_rows);
  EXPECT_DOUBLE_EQ(
      row_of(store, LayerType::Linear, {4096, 4096, 4096, 0}, "NVIDIA H100 80GB HBM3").fwd.median_ms, 2.66);
}

/// The Error of importing `dir`, and that it left `name`'s store empty.
std::string error_leaving_store_empty(const fs::path& dir, const std::string& name) {
  Store store(test::fresh_store_path(name));
  const std::string e = test::error_of([&] { import_kernelbench(options(dir), store); });
  EXPECT_EQ(store.layers(std::nullopt, "", false).size(), 0u);
  EXPECT_EQ(store.devices().size(), 0u);
  return e;
}

TEST(Kernelbench, MissingColumnIsAnErrorNamingTheFile) {
  const fs::path dir = temp_copy("nocolumn");
  std::string text = read_file(dir / kEager);
  text.replace(text.find("eager_std_ms"), 12, "eager_stddev");
  write_file(dir / kEager, text);
  const std::string e = error_leaving_store_empty(dir, "kernelbench_nocolumn.db");
  EXPECT_NE(e.find(std::string(kEager) + ":1:"), std::string::npos) << e;
  EXPECT_NE(e.find("eager_std_ms"), std::string::npos) << e;
}

TEST(Kernelbench, BadNumberIsAnErrorNamingFileLineAndValue) {
  const fs::path dir = temp_copy("badnumber");
  std::string text = read_file(dir / kEager);
  const size_t line = count_lines(text) + 1;
  text += "Tesla T4,T4_modal,47f78d7f22dc,ps1,19,19_ReLU,0.01x,0.001\n";
  write_file(dir / kEager, text);
  const std::string e = error_leaving_store_empty(dir, "kernelbench_badnumber.db");
  EXPECT_NE(e.find(fmt::format("{}:{}: eager_ms=\"0.01x\" is not a number", kEager, line)), std::string::npos)
      << e;
}

TEST(Kernelbench, BadShapesAndUnknownRunsAreErrors) {
  {
    const fs::path dir = temp_copy("badjson");
    std::string text = read_file(dir / kShapes);
    const std::string good = "\"{\"\"N\"\":2048}\"";
    ASSERT_NE(text.find(good), std::string::npos);
    text.replace(text.find(good), good.size(), "\"{\"\"N\"\":}\"");
    write_file(dir / kShapes, text);
    const std::string e = error_leaving_store_empty(dir, "kernelbench_badjson.db");
    EXPECT_NE(e.find(std::string(kShapes) + ":2: constants_json=\"{\"N\":}\" is not JSON"), std::string::npos)
        << e;
  }
  {
    const fs::path dir = temp_copy("noconstant");
    std::string text = read_file(dir / kShapes);
    const std::string good = "{\"\"N\"\":2048}";
    ASSERT_NE(text.find(good), std::string::npos);
    text.replace(text.find(good), good.size(), "{\"\"Q\"\":2048}");
    write_file(dir / kShapes, text);
    const std::string e = error_leaving_store_empty(dir, "kernelbench_noconstant.db");
    EXPECT_NE(e.find(std::string(kShapes) + ":2: constants_json of 1_Square_matrix_multiplication_ lacks N"),
              std::string::npos)
        << e;
  }
  {
    const fs::path dir = temp_copy("norun");
    std::string text = read_file(dir / kEager);
    const size_t line = count_lines(text) + 1;
    text += "Tesla T4,T4_elsewhere,47f78d7f22dc,ps1,19,19_ReLU,0.01,0.001\n";
    write_file(dir / kEager, text);
    const std::string e = error_leaving_store_empty(dir, "kernelbench_norun.db");
    EXPECT_NE(e.find(fmt::format("{}:{}: run (timing_dir=T4_elsewhere", kEager, line)), std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace scaledl
