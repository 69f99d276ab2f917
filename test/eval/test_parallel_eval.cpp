// `scaledl eval parallel`'s runs file (parallel_eval.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/eval/parallel_eval.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
}  // namespace

TEST(ParallelEval, RunsFileParsesAndRejectsBadLines) {
  const auto runs = load_parallel_runs(kSrc + "/datasets/vtrain/single_node_train.csv");
  EXPECT_EQ(runs.size(), 720u);
  for (const auto& r : runs) EXPECT_EQ(r.gpus, r.tp * r.dp * r.pp);
  const auto ns = load_parallel_runs(kSrc + "/datasets/parallel/neusight-a100-4gpu.csv");
  ASSERT_EQ(ns.size(), 3u);
  EXPECT_EQ(ns[0].scheme(), "dp");
  EXPECT_EQ(ns[1].scheme(), "tp");
  EXPECT_EQ(ns[2].scheme(), "pp");
  EXPECT_EQ(ns[0].dtype, DType::FP32);
  EXPECT_FALSE(ns[0].recompute);
  const fs::path dir = fs::temp_directory_path() / ("scaledl_peval_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string head =
      "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,tensor "
      "parallelism,"
      "data parallelism,pipeline parallelism,iteration time (ms)\n";
  auto bad = [&](const std::string& body) {
    std::ofstream(dir / "r.csv") << head << body;
    return error_of([&] { load_parallel_runs((dir / "r.csv").string()); });
  };
  EXPECT_NE(bad("4,16,4,1024,16,24,1024,2,1,1,100\n").find("r.csv:2: # GPUs=4 is not tp x dp x pp"),
            std::string::npos);
  EXPECT_NE(bad("4,16,4,1024,16,24,1024,2,2,1,abc\n").find("r.csv:2: iteration time (ms)=\"abc\""),
            std::string::npos);
  EXPECT_NE(bad("4,16,4,1024,16,x,1024,2,2,1,100\n").find("# layers=\"x\""), std::string::npos);
  EXPECT_NE(bad("4,16,4\n").find("r.csv:2: 3 fields, expected 11"), std::string::npos);
  scaledl::remove_tree(dir);
}
