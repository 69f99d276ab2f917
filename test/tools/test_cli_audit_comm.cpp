// End-to-end: issue #39's cases about collectives and stores — absurd all-reduce
// calibrations (9), nccl-tests rows their own bandwidth columns contradict (10),
// a one-node calibration used across nodes (27), a store on a read-only
// filesystem (20). Bad input: one "scaledl: error:" line, exit 1, nothing written.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using scaledl::test::CliResult;
using scaledl::test::expect_one_error;
using scaledl::test::run_cli;
namespace fs = std::filesystem;
using scaledl::test::write;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kBin = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl";

/// all_reduce_perf on one host, 4 ranks (nccl-tests 2.13): 8 sizes, times
/// consistent with their algbw and busbw (x1.5 for N = 4).
const char* kHeader = R"(# Collective test starting: all_reduce_perf
# nThread 1 nGpus 4 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#  Rank  0 Group  0 Pid  41235 on node01 device  0 [0x07] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41235 on node01 device  1 [0x0f] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41235 on node01 device  2 [0x47] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41235 on node01 device  3 [0x4e] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
)";
const char* kRows[] = {
    "     1048576       262144    float    sum     -1    40.44   25.93   38.90      0    39.52   26.53   "
    "39.80      0",
    "     2097152       524288    float    sum     -1    46.21   45.38   68.07      0    47.28   44.35   "
    "66.53      0",
    "     4194304      1048576    float    sum     -1    59.75   70.20  105.30      0    59.87   70.06  "
    "105.08      0",
    "     8388608      2097152    float    sum     -1    89.02   94.23  141.34      0    88.85   94.41  "
    "141.62      0",
    "    16777216      4194304    float    sum     -1   140.99  118.99  178.49      0   141.28  118.75  "
    "178.13      0",
    "    33554432      8388608    float    sum     -1   249.31  134.59  201.88      0   255.11  131.53  "
    "197.30      0",
    "    67108864     16777216    float    sum     -1   477.73  140.48  210.71      0   466.90  143.73  "
    "215.60      0",
    "   134217728     33554432    float    sum     -1   899.25  149.26  223.88      0   920.14  145.87  "
    "218.80      0",
};

/// The file with both time columns of rows [from, to) replaced by `time` (the bandwidths kept).
std::string nccl_file(const std::string& time = "", size_t from = 0, size_t to = 0) {
  std::string s = kHeader;
  for (size_t i = 0; i < 8; ++i) {
    std::istringstream in(kRows[i]);
    std::string line, w;
    for (int k = 0; in >> w; ++k) line += ((i >= from && i < to && (k == 5 || k == 9)) ? time : w) + " ";
    s += line + "\n";
  }
  return s;
}

/// A shell command line run as is (stdout and stderr together).
CliResult run_sh(const std::string& cmd) {
  CliResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

nlohmann::json json_of(const CliResult& r) {
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

class CliAuditComm : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/audit_comm_" + std::to_string(getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    scaledl::remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { scaledl::remove_tree(dir_); }
  /// predict gpt2 on the default bundle and an H100 spec sheet.
  static std::string predict() {
    return "predict " + kSrc + "/models/gpt2.json --bundle " + kSrc +
           "/models/bundles/default --device-spec " + kSrc + "/models/devices/h100-sxm.json ";
  }
  static std::string scale() {
    return "scale " + kSrc + "/models/gpt2.json --bundle " + kSrc + "/models/bundles/default --device-spec " +
           kSrc + "/models/devices/h100-sxm.json --batch 32 ";
  }
  std::string dir_;
};

}  // namespace

// Case 9: the issue's samples fit B = 1e-5 B/s (T_comm 8.7e16 ms, exit 0 before);
// gamma of 500 s and B of 1e27 B/s passed too. Each is one error naming the file and the value.
TEST_F(CliAuditComm, AbsurdAllReduceCalibrationsAreOneErrorNamingTheFileAndTheFit) {
  const std::string slow = dir_ + "/slow.json", late = dir_ + "/late.json", fast = dir_ + "/fast.json";
  write(slow,
        R"({"allreduce":[{"bytes":1,"devices":2,"seconds":1e5},{"bytes":2,"devices":2,"seconds":2e5}]})");
  write(
      late,
      R"({"allreduce":[{"bytes":1e9,"devices":2,"seconds":1000.1},{"bytes":2e9,"devices":2,"seconds":1000.2}]})");
  write(
      fast,
      R"({"allreduce":[{"bytes":1e17,"devices":2,"seconds":1e-10},{"bytes":2e17,"devices":2,"seconds":2e-10}]})");
  expect_one_error(predict() + "--comm " + slow + " --gpus 2",
                   slow + ": all-reduce fit of 2 samples: bandwidth_Bps=1e-05");
  expect_one_error(predict() + "--comm " + late + " --gpus 2",
                   late + ": all-reduce fit of 2 samples: gamma_s=500");
  expect_one_error(predict() + "--comm " + fast + " --gpus 2",
                   fast + ": all-reduce fit of 2 samples: bandwidth_Bps=1e+27");
  expect_one_error(scale() + "--comm " + slow + " --gpus 1..4",
                   slow + ": all-reduce fit of 2 samples: bandwidth_Bps=1e-05");

  // `comm fit` of rows whose time and bandwidth columns agree but are absurd
  // (1e5 s per all-reduce: the bandwidths print as 0.00): one error, no --out.
  const std::string db = dir_ + "/absurd.sqlite", f = dir_ + "/all_reduce_perf.txt", out = dir_ + "/cf.json";
  std::string text = std::string(kHeader);
  for (const char* row : {"1048576 262144 float sum -1 1e11 0.00 0.00 0 1e11 0.00 0.00 0",
                          "2097152 524288 float sum -1 2e11 0.00 0.00 0 2e11 0.00 0.00 0"})
    text += std::string(row) + "\n";
  write(f, text);
  CliResult r = run_cli("import nccl-tests " + f + " --db " + db);
  ASSERT_EQ(r.rc, 0) << r.out;
  expect_one_error(
      "comm fit --db " + db + " --out " + out,
      db +
          ": allreduce fit of campaign default, world 4, 1 node(s), device cuda:NVIDIA H100 80GB HBM3 "
          "(rows from " +
          f + "), ring form: bandwidth_Bps=");
  EXPECT_FALSE(fs::exists(out));
}

// Case 10: a time column of 1e-300 us or 1e12 us that the file's own algbw/busbw
// contradict: such rows are refused and counted; a file of nothing else is an error.
TEST_F(CliAuditComm, NcclTestsRowsTheirOwnBandwidthColumnsContradictAreRefused) {
  const std::string db = dir_ + "/c.sqlite";
  const std::string some = dir_ + "/all_reduce_perf.txt", all = dir_ + "/all_reduce_perf_all.txt";
  write(some, nccl_file("1e-300", 2, 3));  // row 3: both halves
  CliResult r = run_cli("import nccl-tests " + some + " --db " + db);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("14 rows (out-of-place + in-place), 14 inserted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(
                "note: " + some +
                ": 2 of 16 rows (out-of-place + in-place) refused: their time contradicts "
                "the file's own bandwidth columns, e.g. line 10: time=1e-300 us of size 4194304 gives algbw"),
            std::string::npos)
      << r.out;
  r = run_cli("import nccl-tests " + some + " --db " + db + " --campaign again --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(json_of(r)["refused"], 2) << r.out;
  // The fit of what was imported is the file's real bandwidth (~150-225 GB/s), not 1.573 B/s.
  const std::string cf = dir_ + "/cf.json";
  r = run_cli("comm fit --db " + db + " --campaign default --out " + cf);
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(cf));
  EXPECT_GT(j["bandwidth_Bps"].get<double>(), 100e9) << j.dump();
  EXPECT_LT(j["bandwidth_Bps"].get<double>(), 300e9) << j.dump();

  // Every row at 1e12 us: refused whole, the store not even created.
  const std::string none = dir_ + "/none.sqlite";
  write(all, nccl_file("1e12", 0, 8));
  expect_one_error(
      "import nccl-tests " + all + " --db " + none,
      all +
          ": all 16 rows (out-of-place + in-place) contradict the file's own bandwidth columns, e.g. "
          "line 8: time=1e+12 us");
  EXPECT_FALSE(fs::exists(none));
}

// Case 27: a calibration fitted on one node prices the inter-node collectives
// of --nodes 2 (227 GB/s NVLink) with no warning before.
TEST_F(CliAuditComm, AOneNodeCalibrationAcrossNodesIsAWarningNamingBoth) {
  const std::string one = dir_ + "/one-node.json", two = dir_ + "/two-nodes.json", bare = dir_ + "/bare.json";
  write(one, R"({"bandwidth_Bps":2.27e11,"gamma_s":5.6e-6,"nodes":1})");
  write(two, R"({"bandwidth_Bps":2.27e10,"gamma_s":1e-5,"nodes":2})");
  write(bare, R"({"bandwidth_Bps":2.27e11,"gamma_s":5.6e-6})");
  const std::string want =
      "the collective calibration was fitted on 1 node (bandwidth 227 GB/s, gamma 5.6 us) but "
      "prices the collectives across --nodes=2";
  CliResult r = run_cli(predict() + "--comm " + one + " --gpus 16 --nodes 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("warning      " + want), std::string::npos) << r.out;
  r = run_cli(predict() + "--comm " + one + " --gpus 16 --nodes 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(json_of(r).value("comm_warning", "").find(want), std::string::npos) << r.out;
  // One node asked, or a calibration measured across nodes: no warning.
  r = run_cli(predict() + "--comm " + one + " --gpus 8 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(json_of(r).contains("comm_warning")) << r.out;
  r = run_cli(predict() + "--comm " + two + " --gpus 16 --nodes 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.find("warning      the collective calibration"), std::string::npos) << r.out;
  // A calibration that does not say: the warning says that.
  r = run_cli(predict() + "--comm " + bare + " --gpus 16 --nodes 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(
      r.out.find("warning      the collective calibration (bandwidth 227 GB/s, gamma 5.6 us) does not record "
                 "how many nodes it was measured on, and prices the collectives across --nodes=2"),
      std::string::npos)
      << r.out;

  // `comm fit --out` of a one-host nccl-tests run records its node: the warning follows it.
  const std::string db = dir_ + "/c.sqlite", f = dir_ + "/all_reduce_perf.txt", cf = dir_ + "/cf.json";
  write(f, nccl_file());
  ASSERT_EQ(run_cli("import nccl-tests " + f + " --db " + db).rc, 0);
  ASSERT_EQ(run_cli("comm fit --db " + db + " --out " + cf).rc, 0);
  r = run_cli(predict() + "--comm " + cf + " --gpus 16 --nodes 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(json_of(r).value("comm_warning", "").find("fitted on 1 node"), std::string::npos) << r.out;

  // scale: 16 GPUs of 8 per node span 2 nodes.
  r = run_cli(scale() + "--comm " + one + " --gpus 1..16");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + want), std::string::npos) << r.out;
  r = run_cli(scale() + "--comm " + one + " --gpus 1..16 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(json_of(r).value("comm_warning", "").find(want), std::string::npos) << r.out;
  r = run_cli(scale() + "--comm " + one + " --gpus 1..8 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(json_of(r).contains("comm_warning")) << r.out;
}

// Case 20: a store written by `db merge` was left in WAL mode and could not be
// read on a read-only mount ("unable to open database file").
TEST_F(CliAuditComm, StoresAreReadOnAReadOnlyFilesystem) {
  const std::string ro = dir_ + "/ro", out = ro + "/merged.sqlite";
  fs::create_directories(ro);
  CliResult r = run_cli("db merge " + out + " " + kSrc + "/datasets/cpu/layers.sqlite");
  ASSERT_EQ(r.rc, 0) << r.out;
  // The merged file is self-contained: rollback-journal mode (header bytes 18-19 = 1), no -wal/-shm.
  {
    std::ifstream h(out, std::ios::binary);
    h.seekg(18);
    EXPECT_EQ(h.get(), 1);
    EXPECT_EQ(h.get(), 1);
  }
  EXPECT_FALSE(fs::exists(out + "-wal"));
  EXPECT_FALSE(fs::exists(out + "-shm"));
  const std::string want = run_cli("db info --db " + out + " --json").out;
  ASSERT_NE(want.find("\"layers\""), std::string::npos) << want;

  // On a read-only bind mount (a private mount namespace; skipped where none is allowed),
  // both the merged store and one left in WAL mode (an older build's, a killed writer's) are read.
  const std::string wal = ro + "/wal.sqlite";
  fs::copy_file(out, wal);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(wal.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string mount = "unshare -m sh -c 'mount --make-rprivate / && mount --bind " + ro + " " + ro +
                            " && mount -o remount,bind,ro " + ro + " || exit 77; touch " + ro +
                            "/probe 2>/dev/null && exit 78; ";
  r = run_sh(mount + kBin + " db info --db " + wal + " --json'");
  if (r.rc == 77 || r.rc == 127) GTEST_SKIP() << "no private read-only bind mount here: " << r.out;
  ASSERT_NE(r.rc, 78) << "the mount was writable";
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, want);
  r = run_sh(mount + kBin + " db info --db " + out + " --json'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, want);
  // train reads its store there too.
  r = run_sh(mount + kBin + " train layers --db " + out + " --folds 0 --nthread 1 --out " + dir_ + "/L'");
  EXPECT_EQ(r.rc, 0) << r.out;
}
