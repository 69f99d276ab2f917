// scaledl import nccl-tests and scaledl comm fit (issue #14) end to end: the
// committed vTrain tables in, a fit file that `train --comm` reads and a plot
// out; bad inputs are one "scaledl: error:" line, exit 1, the store unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_util.hpp"
#include "scaledl/comm/comm.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using scaledl::test::expect_one_error;
using scaledl::test::run_cli;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kA100 = kSrc + "/datasets/vtrain-allreduce/a100/AR_GPU*_1M_1024M_LUT";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(CliComm, ImportVTrainFitAndPlot) {
  const std::string db = scaledl::test::fresh_store_path("cli-comm.sqlite");
  auto r = run_cli("import nccl-tests " + kA100 + " --db " + db + " --campaign a100");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("7 files, 14336 rows (out-of-place + in-place), 14336 inserted (0 already there)"),
            std::string::npos)
      << r.out;
  r = run_cli("import nccl-tests " + kA100 + " --db " + db + " --campaign a100");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("14336 rows (out-of-place + in-place), 0 inserted (14336 already there)"),
            std::string::npos)
      << r.out;
  r = run_cli("db info --db " + db + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"collectives\": 14336"), std::string::npos) << r.out;

  const std::string dir = testing::TempDir() + "/cli-comm-plot";
  const std::string out = testing::TempDir() + "/cli-comm-fit.json";
  scaledl::remove_tree(dir);
  fs::remove(out);
  r = run_cli("comm fit --db " + db + " --campaign a100 --collective allreduce --out " + out + " --plot " +
              dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ring_B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(ring all-reduce, world 8, campaign a100)"), std::string::npos) << r.out;
  EXPECT_GT(fs::file_size(dir + "/allreduce-a100.svg"), 1000u);
  EXPECT_NE(slurp(dir + "/allreduce-a100.svg").find("<svg"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir + "/allreduce-a100.dat"));
  EXPECT_TRUE(fs::exists(dir + "/allreduce-a100.svg.gp"));
  // The file is a calibration `train --comm` / `predict --comm` read.
  const scaledl::CommModel m = scaledl::load_comm_model(out);
  EXPECT_GT(m.bandwidth_Bps, 100e9);
  EXPECT_LT(m.bandwidth_Bps, 300e9);
  const auto j = scaledl::read_json_file(out);
  EXPECT_EQ(j["fits"].size(), 8u);  // N = 2..8 and the joint fit

  r = run_cli("comm fit --db " + db + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"bandwidth_Bps\""), std::string::npos) << r.out;

  r = run_cli("db export --db " + db + " --format csv --table collectives");
  ASSERT_EQ(r.rc, 0) << r.out.substr(0, 400);
  EXPECT_EQ(r.out.rfind("id,campaign,collective,backend", 0), 0u) << r.out.substr(0, 400);
}

TEST(CliComm, BadInputsAreOneErrorAndLeaveTheStoreAlone) {
  const std::string db = scaledl::test::fresh_store_path("cli-comm-bad.sqlite");
  const std::string good = kSrc + "/datasets/vtrain-allreduce/v100/AR_GPU2_1M_1024M_LUT";
  ASSERT_EQ(run_cli("import nccl-tests " + good + " --db " + db).rc, 0);
  const auto before = fs::file_size(db);
  auto rows = [&] { return scaledl::Store(db, true).collectives("", "", false).size(); };
  ASSERT_EQ(rows(), 2048u);

  // A malformed line in the second file: FILE:LINE and the field, nothing inserted.
  std::string text = slurp(kSrc + "/datasets/vtrain-allreduce/v100/AR_GPU4_1M_1024M_LUT");
  const auto third = text.find('\n', text.find('\n', text.find('\n') + 1) + 1);  // end of line 3
  const auto fourth = text.find('\n', third + 1);
  text.replace(third + 1, fourth - third - 1, "4194304,1048576,float,9x9,1.0,100,1.0");
  const std::string bad = testing::TempDir() + "/AR_GPU4_bad";
  std::ofstream(bad) << text;
  const std::string v4 = kSrc + "/datasets/vtrain-allreduce/v100/AR_GPU3_1M_1024M_LUT";
  expect_one_error("import nccl-tests " + v4 + " " + bad + " --db " + db + " --campaign other",
                   bad + ":4: time(ns)=\"9x9\"");
  EXPECT_EQ(rows(), 2048u);

  expect_one_error("import nccl-tests " + good + " --db " + db + " --world 0", "--world=0 must be >= 2");
  expect_one_error("import nccl-tests " + good + " --db " + db + " --collective broadcast",
                   "--collective=\"broadcast\" is not allreduce, allgather, reducescatter or sendrecv");
  expect_one_error("import nccl-tests " + good + " --db " + db + " --level rack",
                   "--level=\"rack\" is not intra-node or inter-node");
  expect_one_error("import nccl-tests " + good + " --db " + db + " --world 4", "--world=4 but");
  expect_one_error("import nccl-tests /nonexistent/all_reduce_perf.txt --db " + db,
                   "/nonexistent/all_reduce_perf.txt: no such file");
  expect_one_error("comm fit --db " + db + " --collective broadcast", "--collective=\"broadcast\"");
  expect_one_error("comm fit --db " + db + " --campaign nope", "no ok collective rows in --campaign=nope");
  expect_one_error("comm fit --db /nonexistent/x.sqlite", "/nonexistent/x.sqlite: no such store");
  EXPECT_EQ(rows(), 2048u);
  EXPECT_EQ(fs::file_size(db), before);
}
