// Measured collectives (issue #14): the nccl-tests / vTrain importer, the store
// round trip, and the per-group fits of the ring and tree forms.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "scaledl/comm/collectives.hpp"
#include "scaledl/comm/comm.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {

// all_reduce_perf -b 1M -e 128M -f 2 -g 4 on one node (nccl-tests 2.13 layout):
// a banner, the rank lines, the column headings, 8 data rows, the footer.
const char* kAllReduce4 = R"(# nccl-tests version 2.13.9 nccl-headers=21903 nccl-library=21903
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 4 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41235 on dgx-a100-01 device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  41235 on dgx-a100-01 device  1 [0x0f] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid  41235 on dgx-a100-01 device  2 [0x47] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid  41235 on dgx-a100-01 device  3 [0x4e] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576       262144    float    sum     -1    40.44   25.93   38.90      0    39.52   26.53   39.80      0
     2097152       524288    float    sum     -1    46.21   45.38   68.07      0    47.28   44.35   66.53      0
     4194304      1048576    float    sum     -1    59.75   70.20  105.30      0    59.87   70.06  105.08      0
     8388608      2097152    float    sum     -1    89.02   94.23  141.34      0    88.85   94.41  141.62      0
    16777216      4194304    float    sum     -1   140.99  118.99  178.49      0   141.28  118.75  178.13      0
    33554432      8388608    float    sum     -1   249.31  134.59  201.88      0   255.11  131.53  197.30      0
    67108864     16777216    float    sum     -1   477.73  140.48  210.71      0   466.90  143.73  215.60      0
   134217728     33554432    float    sum     -1   899.25  149.26  223.88      0   920.14  145.87  218.80      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 141.852
#
)";

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string p = testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::string dataset(const std::string& rel) {
  return std::string(SCALEDL_SOURCE_DIR) + "/datasets/" + rel;
}

std::vector<std::string> vtrain_files(const std::string& gpu) {
  std::vector<std::string> f;
  for (int n = 2; n <= 8; ++n)
    f.push_back(dataset(fmt::format("vtrain-allreduce/{}/AR_GPU{}_1M_1024M_LUT", gpu, n)));
  return f;
}

/// The text with line `lineno` (1-based) replaced.
std::string with_line(const std::string& text, size_t lineno, const std::string& line) {
  std::istringstream in(text);
  std::string out;
  size_t k = 0;
  for (std::string l; std::getline(in, l);) out += (++k == lineno ? line : l) + "\n";
  return out;
}

}  // namespace

TEST(CollectiveImport, NcclTestsTextGivesBothHalvesOfEveryRow) {
  auto rows = parse_nccl_tests_text(kAllReduce4, "run/all_reduce_perf.txt", {});
  ASSERT_EQ(rows.size(), 16u);  // 8 sizes x (out-of-place, in-place)
  const auto& a = rows[0];
  EXPECT_EQ(a.collective, "allreduce");
  EXPECT_EQ(a.backend, "nccl-tests");
  EXPECT_EQ(a.world, 4);  // four "#  Rank" lines
  EXPECT_EQ(a.nodes, 1);  // one host
  EXPECT_EQ(a.level, "intra-node");
  EXPECT_EQ(a.device, "cuda:NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a.dtype, "fp32");
  EXPECT_EQ(a.repeats, 20);
  EXPECT_EQ(a.status, "ok");
  EXPECT_EQ(a.campaign, "default");
  EXPECT_EQ(a.source, "run/all_reduce_perf.txt");
  EXPECT_DOUBLE_EQ(a.bytes, 1048576);
  EXPECT_FALSE(a.in_place);
  EXPECT_NEAR(a.time_s, 40.44e-6, 1e-15);
  EXPECT_DOUBLE_EQ(a.busbw_gbs, 38.90);
  EXPECT_TRUE(rows[1].in_place);
  EXPECT_NEAR(rows[1].time_s, 39.52e-6, 1e-15);
  EXPECT_DOUBLE_EQ(rows[15].bytes, 134217728);
  EXPECT_NEAR(rows[15].time_s, 920.14e-6, 1e-15);
}

TEST(CollectiveImport, WhatTheFileDoesNotSayComesFromTheOptions) {
  // No banner, no rank lines: the collective from the file name, the world from --world.
  std::string bare;
  {
    std::istringstream in(kAllReduce4);
    for (std::string l; std::getline(in, l);)
      if (l.find("Rank") == std::string::npos && l.find("Collective test") == std::string::npos &&
          l.find("nThread") == std::string::npos)
        bare += l + "\n";
  }
  NcclTestsImportOptions o;
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(bare, "x/all_gather_perf.log", o);
            }).find("x/all_gather_perf.log: the file does not give the world size"),
            std::string::npos);
  o.world = 16;
  o.nodes = 2;
  auto rows = parse_nccl_tests_text(bare, "x/all_gather_perf.log", o);
  ASSERT_EQ(rows.size(), 16u);
  EXPECT_EQ(rows[0].collective, "allgather");
  EXPECT_EQ(rows[0].world, 16);
  EXPECT_EQ(rows[0].level, "inter-node");
  EXPECT_EQ(rows[0].device, "");
  // Neither banner nor name: --collective is needed, and then used.
  EXPECT_NE(error_of([&] { parse_nccl_tests_text(bare, "x/run1.log", o); }).find("pass --collective"),
            std::string::npos);
  o.collective = "reduce_scatter";
  EXPECT_EQ(parse_nccl_tests_text(bare, "x/run1.log", o)[0].collective, "reducescatter");
  // Disagreements with the file are errors, not silent overrides.
  NcclTestsImportOptions d;
  d.collective = "allgather";
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(kAllReduce4, "a.txt", d);
            }).find("--collective=allgather but a.txt is allreduce output"),
            std::string::npos);
  d = {};
  d.world = 8;
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(kAllReduce4, "a.txt", d);
            }).find("--world=8 but a.txt lists 4 ranks"),
            std::string::npos);
  // Older nccl-tests: no root column, a float error where #wrong is now.
  const std::string old =
      "# Using devices\n#  Rank  0 on h device 0 [0x1] G\n#  Rank  1 on h device 1 [0x2] G\n"
      "  1048576  262144  float  sum  40.4  25.9  25.9  0e+00  39.5  26.5  26.5  0e+00\n"
      "  2097152  524288  float  sum  46.2  45.4  45.4  2e-07  47.3  44.4  44.4  N/A\n";
  auto r = parse_nccl_tests_text(old, "all_reduce_perf.out", {});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].world, 2);
  EXPECT_EQ(r[3].status, "ok");
  // #wrong > 0: the row is kept, marked error (and the fit leaves it out).
  auto w = parse_nccl_tests_text(with_line(kAllReduce4, 14,
                                           "1048576 262144 float sum -1 40.4 25.9 38.9 3 "
                                           "39.5 26.5 39.8 0"),
                                 "all_reduce_perf.txt", {});
  EXPECT_EQ(w[0].status, "error");
  EXPECT_EQ(w[1].status, "ok");
}

TEST(CollectiveImport, MalformedLinesNameFileLineAndField) {
  struct Case {
    size_t line;
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {14, "1048576 262144 float sum -1 4O.44 25.93 38.90 0 39.52 26.53 39.80 0", "time=\"4O.44\""},
      {15, "2097152 524288 float sum -1 46.21 45.38 -68.07 0 47.28 44.35 66.53 0", "busbw=\"-68.07\""},
      {16, "4194304 1048576 float32x sum -1 59.75 70.20 105.30 0 59.87 70.06 105.08 0", "type=\"float32x\""},
      {17, "8388608 2097152 float sum -1 89.02 94.23 141.34 0 88.85 94.41", "11 fields, expected 13"},
      {18, "16777216 4194304 float sum -1 140.99 118.99 178.49 0 141.28 118.75 178.13 x",
       "in-place #wrong=\"x\""},
      {19, "33554432 8388608 float sum -1 249.31 134.59 201.88 0 0 131.53 197.30 0", "in-place time=\"0\""},
      {20, "-67108864 16777216 float sum -1 477.73 140.48 210.71 0 466.90 143.73 215.60 0",
       "size=\"-67108864\""},
      {21, "134217728 33554432 float sum root 899.25 149.26 223.88 0 920.14 145.87 218.80 0",
       "root=\"root\""},
  };
  for (const auto& c : cases) {
    const std::string e =
        error_of([&] { parse_nccl_tests_text(with_line(kAllReduce4, c.line, c.text), "f.txt", {}); });
    EXPECT_EQ(e.rfind(fmt::format("f.txt:{}: ", c.line), 0), 0u) << c.text << "\n" << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.text << "\n" << e;
  }
  // vTrain CSV: its own header, 7 fields, nanoseconds.
  const std::string csv =
      "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n"
      "1048576,262144,float,44210,23.72,45100,23.25\n";
  EXPECT_EQ(parse_nccl_tests_text(csv, "AR_GPU2_x", {}).size(), 2u);
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(csv + "2097152,524288,float,5343O,39.25,51130,41.01\n", "AR_GPU2_x", {});
            }).find("AR_GPU2_x:3: time(ns)=\"5343O\""),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(csv + "2097152,524288,float,53430,39.25\n", "AR_GPU2_x", {});
            }).find("AR_GPU2_x:3: 5 fields, expected 7"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text("size(B),count,time\n", "AR_GPU2_x", {});
            }).find("AR_GPU2_x:1: header"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text("# nothing here\n", "all_reduce_perf.txt", {});
            }).find("no data rows"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_nccl_tests_file("/nonexistent/all_reduce_perf.txt", {});
            }).find("/nonexistent/all_reduce_perf.txt: no such file"),
            std::string::npos);
}

TEST(CollectiveImport, BadOptionsNameOptionAndValue) {
  auto err = [](auto set) {
    NcclTestsImportOptions o;
    set(o);
    return error_of([&] { parse_nccl_tests_text(kAllReduce4, "a.txt", o); });
  };
  EXPECT_NE(err([](auto& o) { o.world = 1; }).find("--world=1 must be >= 2"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.level = "rack"; }).find("--level=\"rack\" is not intra-node or inter-node"),
            std::string::npos);
  EXPECT_NE(err([](auto& o) { o.collective = "broadcast"; }).find("--collective=\"broadcast\""),
            std::string::npos);
  EXPECT_NE(err([](auto& o) {
              o.nodes = 2;
              o.world = 4;
            }).find("--nodes=2 but the ranks of a.txt sit on 1 hosts"),
            std::string::npos);
  EXPECT_EQ(canonical_collective("all_reduce_perf"), "allreduce");
  EXPECT_EQ(canonical_collective("ReduceScatter"), "reducescatter");
  EXPECT_EQ(canonical_collective("p2p"), "sendrecv");
}

TEST(CollectiveImport, VTrainTablesParseWithWorldFromTheName) {
  size_t total = 0;
  for (const std::string gpu : {"a100", "v100"}) {
    for (const auto& f : vtrain_files(gpu)) {
      auto rows = parse_nccl_tests_file(f, {});
      ASSERT_EQ(rows.size(), 2048u) << f;  // 1,024 sizes x (out-of-place, in-place)
      const int64_t n = std::stoi(fs::path(f).filename().string().substr(6));
      for (const auto& r : rows) {
        ASSERT_EQ(r.world, n) << f;
        ASSERT_EQ(r.collective, "allreduce");
        ASSERT_EQ(r.dtype, "fp32");
        ASSERT_GT(r.time_s, 0);
      }
      EXPECT_DOUBLE_EQ(rows.front().bytes, 1048576);
      EXPECT_DOUBLE_EQ(rows.back().bytes, 1073741824);
      total += rows.size();
    }
  }
  EXPECT_EQ(total, 14u * 2048u);
  auto a2 = parse_nccl_tests_file(vtrain_files("a100")[0], {});
  EXPECT_NEAR(a2[0].time_s, 44210e-9, 1e-15);  // first row, out of place
  EXPECT_NEAR(a2[1].time_s, 45100e-9, 1e-15);  // in place
}

TEST(CollectiveImport, OneTransactionReimportAddsNothingBadFileChangesNothing) {
  const std::string db = scaledl::test::fresh_store_path("collectives-import.sqlite");
  const std::string good = write_temp("all_reduce_perf.txt", kAllReduce4);
  auto s = import_nccl_tests({good}, {}, db);
  EXPECT_EQ(s.files, 1u);
  EXPECT_EQ(s.rows, 16u);
  EXPECT_EQ(s.inserted, 16u);
  EXPECT_EQ(import_nccl_tests({good}, {}, db).inserted, 0u);  // natural key: nothing twice
  // A second campaign is new rows; a malformed second file stops the whole import.
  NcclTestsImportOptions o;
  o.campaign = "second";
  const std::string bad =
      write_temp("all_reduce_perf_bad.txt", with_line(kAllReduce4, 19, "33554432 8388608 float"));
  EXPECT_NE(error_of([&] {
              import_nccl_tests({good, bad}, o, db);
            }).find("all_reduce_perf_bad.txt:19: 3 fields"),
            std::string::npos);
  Store store(db, true);
  EXPECT_EQ(store.collectives("", "", false).size(), 16u);
  EXPECT_TRUE(store.collectives("second").empty());
  EXPECT_EQ(store.counts()["collectives"], 16);
  // Rows come back as they went in.
  auto back = store.collectives("default", "allreduce");
  ASSERT_EQ(back.size(), 16u);
  EXPECT_EQ(back[0].device, "cuda:NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(back[0].world, 4);
  EXPECT_NEAR(back[0].time_s, 40.44e-6, 1e-15);
  // A store that does not exist is not created by a failed import.
  const std::string none = scaledl::test::fresh_store_path("collectives-none.sqlite");
  EXPECT_NE(error_of([&] { import_nccl_tests({bad}, {}, none); }), "<no error>");
  EXPECT_FALSE(fs::exists(none));
}

namespace {
std::vector<CollectiveMeasurement> synthetic(const std::string& collective, CommForm form, double B,
                                             double gamma, std::vector<int64_t> worlds) {
  std::vector<CollectiveMeasurement> rows;
  for (int64_t n : worlds)
    for (double s = 1024; s <= 1.1e9; s *= 4) {
      CollectiveMeasurement m;
      m.campaign = "synthetic";
      m.collective = collective;
      m.backend = "nccl";
      m.world = n;
      m.bytes = s;
      const CommFactors f = comm_factors(collective, form, n);
      m.time_s = f.a * s / B + f.c * gamma;
      rows.push_back(m);
    }
  return rows;
}
}  // namespace

TEST(CommFit, RecoversBandwidthAndLatencyOfEveryCollective) {
  struct Case {
    std::string collective;
    CommForm form;
    double B, gamma;
  };
  for (const auto& c : std::vector<Case>{{"allreduce", CommForm::Ring, 180e9, 6e-6},
                                         {"allreduce", CommForm::Tree, 90e9, 12e-6},
                                         {"allgather", CommForm::Ring, 40e9, 3e-6},
                                         {"reducescatter", CommForm::Ring, 40e9, 3e-6},
                                         {"sendrecv", CommForm::Ring, 12e9, 9e-6}}) {
    const std::string what = c.collective + "/" + to_string(c.form);
    auto fits = fit_collectives(synthetic(c.collective, c.form, c.B, c.gamma, {2, 4, 8}));
    ASSERT_EQ(fits.size(), 4u) << what;  // N = 2, 4, 8 and the joint fit
    for (const auto& f : fits) {
      ASSERT_TRUE(f.skipped.empty()) << f.skipped;
      const CommFit& fit = c.form == CommForm::Tree ? *f.tree : *f.ring;
      EXPECT_NEAR(fit.model.bandwidth_Bps / c.B, 1.0, 0.01) << what << " N=" << f.world;
      EXPECT_NEAR(fit.model.gamma_s / c.gamma, 1.0, 0.01) << what << " N=" << f.world;
      EXPECT_LT(fit.max_rel, 1e-6) << what << " N=" << f.world;
    }
    EXPECT_EQ(fits.back().world, 0);  // joint
    EXPECT_EQ(fits.back().worlds, (std::vector<int64_t>{2, 4, 8}));
    if (c.collective == "allreduce") {
      // One N: the forms are one line (gammas in the ratio of their c(N)); over
      // several N only the generating form fits, and it is the better one.
      EXPECT_EQ(fits[1].best(), "same");
      EXPECT_NEAR(fits[1].ring->mre, fits[1].tree->mre, 1e-9);
      EXPECT_NEAR(fits[2].tree->model.gamma_s / fits[2].ring->model.gamma_s, 14.0 / 6.0, 1e-6);  // N = 8
      EXPECT_EQ(fits.back().best(), to_string(c.form)) << what;
      const CommFit& wrong = c.form == CommForm::Tree ? *fits.back().ring : *fits.back().tree;
      EXPECT_GT(wrong.mre, 1e-3) << what;
    }
  }
  // 2 % alternating noise: the constants stay close and the MRE reports the noise.
  auto rows = synthetic("allreduce", CommForm::Ring, 150e9, 5e-6, {8});
  for (size_t i = 0; i < rows.size(); ++i) rows[i].time_s *= 1 + (i % 2 ? 0.02 : -0.02);
  auto f = fit_collectives(rows);
  ASSERT_EQ(f.size(), 1u);  // one world: no joint fit
  EXPECT_NEAR(f[0].ring->model.bandwidth_Bps / 150e9, 1.0, 0.03);
  EXPECT_NEAR(f[0].ring->mre, 0.02, 0.005);
}

TEST(CommFit, GroupsWithOneSizeAreSkippedNotFatal) {
  auto rows = synthetic("allreduce", CommForm::Ring, 100e9, 5e-6, {4});
  CollectiveMeasurement one = rows[0];
  one.world = 2;
  rows.push_back(one);
  CollectiveMeasurement bad = rows[1];
  bad.world = 8;
  bad.status = "error";  // not ok: never fitted
  rows.push_back(bad);
  auto fits = fit_collectives(rows);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].world, 2);
  EXPECT_NE(fits[0].skipped.find("only 1 message size"), std::string::npos) << fits[0].skipped;
  EXPECT_TRUE(fits[1].skipped.empty());
  const auto j = comm_fit_json(fits);
  EXPECT_EQ(j["source"]["world"], 4);  // the largest world that has a fit
  EXPECT_EQ(j["fits"].size(), 2u);
}

TEST(CommFit, VTrainA100GivesPlausibleBusBandwidthAndALoadableFile) {
  std::vector<CollectiveMeasurement> rows;
  for (const auto& f : vtrain_files("a100")) {
    NcclTestsImportOptions o;
    o.campaign = "a100";
    auto r = parse_nccl_tests_file(f, o);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  auto fits = fit_collectives(rows);
  ASSERT_EQ(fits.size(), 8u);  // N = 2..8 and the joint fit
  for (const auto& f : fits) {
    ASSERT_TRUE(f.ring) << f.skipped;
    std::cout << fmt::format(
        "a100 N={}: ring B {:.1f} GB/s gamma {:.2f} us MRE {:.2f} % max {:.1f} % | tree B {:.1f} "
        "GB/s gamma {:.2f} us MRE {:.2f} % | best {}\n",
        f.world, f.ring->model.bandwidth_Bps / 1e9, f.ring->model.gamma_s * 1e6, 100 * f.ring->mre,
        100 * f.ring->max_rel, f.tree->model.bandwidth_Bps / 1e9, f.tree->model.gamma_s * 1e6,
        100 * f.tree->mre, f.best());
    // NVLink A100 nodes: nccl-tests reports ~200-240 GB/s bus bandwidth for
    // large all-reduces; anything outside 100..300 GB/s is a unit slip.
    EXPECT_GT(f.ring->model.bandwidth_Bps, 100e9) << f.world;
    EXPECT_LT(f.ring->model.bandwidth_Bps, 300e9) << f.world;
    EXPECT_GE(f.ring->model.gamma_s, 0.0);
    EXPECT_LT(f.ring->model.gamma_s, 50e-6) << f.world;
    EXPECT_LT(f.ring->mre, 0.10) << f.world;
  }
  const std::string path = testing::TempDir() + "/comm-fit-a100.json";
  write_json_file(path, comm_fit_json(fits));
  const CommModel m = load_comm_model(path);  // what `train --comm` reads
  EXPECT_EQ(fits[6].world, 8);
  EXPECT_DOUBLE_EQ(m.bandwidth_Bps, fits[6].ring->model.bandwidth_Bps);  // N = 8, the largest world
  EXPECT_DOUBLE_EQ(m.gamma_s, fits[6].ring->model.gamma_s);
}

TEST(CommFit, PlotWritesScriptDataAndSvg) {
  auto rows = synthetic("allreduce", CommForm::Ring, 150e9, 5e-6, {2, 4, 8});
  auto fits = fit_collectives(rows);
  const std::string dir = testing::TempDir() + "/comm-plot";
  scaledl::remove_tree(dir);
  auto svgs = plot_collective_fits(rows, fits, dir);
  ASSERT_EQ(svgs.size(), 1u);
  EXPECT_EQ(fs::path(svgs[0]).filename(), "allreduce-synthetic.svg");
  EXPECT_GT(fs::file_size(svgs[0]), 1000u);
  EXPECT_TRUE(fs::exists(dir + "/allreduce-synthetic.dat"));
  EXPECT_TRUE(fs::exists(dir + "/allreduce-synthetic.svg.gp"));
}

// Issue #39 case 10: a row's time is cross-checked against its own algbw/busbw
// columns; contradicting rows are refused and counted, a file of nothing else is an error.
TEST(CollectiveImport, TimesTheFilesOwnBandwidthColumnsContradictAreRefused) {
  // Line 14 (1 MiB): 40.44 us out of place -> 1e-300 us; line 15: in place 47.28 -> 1e12 us.
  std::string text =
      with_line(kAllReduce4, 14, "1048576 262144 float sum -1 1e-300 25.93 38.90 0 39.52 26.53 39.80 0");
  text = with_line(text, 15, "2097152 524288 float sum -1 46.21 45.38 68.07 0 1e12 44.35 66.53 0");
  NcclTestsRefused refused;
  auto rows = parse_nccl_tests_text(text, "all_reduce_perf.txt", {}, &refused);
  EXPECT_EQ(rows.size(), 14u);
  EXPECT_EQ(refused.rows, 2u);
  ASSERT_EQ(refused.notes.size(), 1u);
  EXPECT_NE(refused.notes[0].find("all_reduce_perf.txt: 2 of 16 rows (out-of-place + in-place) refused"),
            std::string::npos)
      << refused.notes[0];
  EXPECT_NE(refused.notes[0].find("line 14: time=1e-300 us of size 1048576 gives algbw"), std::string::npos)
      << refused.notes[0];
  for (const auto& r : rows) EXPECT_GT(r.time_s, 1e-6) << r.bytes;
  for (const auto& r : rows) EXPECT_LT(r.time_s, 1e-2) << r.bytes;
  // busbw alone contradicting (algbw consistent): the file's 4 ranks give x1.5.
  NcclTestsRefused b;
  rows = parse_nccl_tests_text(with_line(kAllReduce4, 16,
                                         "4194304 1048576 float sum -1 59.75 70.20 10.53 0 59.87 "
                                         "70.06 105.08 0"),
                               "all_reduce_perf.txt", {}, &b);
  EXPECT_EQ(rows.size(), 15u);
  ASSERT_EQ(b.notes.size(), 1u);
  EXPECT_NE(b.notes[0].find("gives busbw 105.3 GB/s (allreduce over 4 ranks: x1.5) but the file says 10.53"),
            std::string::npos)
      << b.notes[0];
  // Every row contradicted: one error naming the file, nothing returned.
  std::string all = kAllReduce4;
  for (size_t line = 14; line <= 21; ++line) {
    std::istringstream in(kAllReduce4);
    std::string l;
    for (size_t k = 0; k < line; ++k) std::getline(in, l);
    std::istringstream f(l);
    std::vector<std::string> w;
    for (std::string t; f >> t;) w.push_back(t);
    w[5] = w[9] = "1e12";
    std::string joined;
    for (const auto& t : w) joined += t + " ";
    all = with_line(all, line, joined);
  }
  const std::string e = error_of([&] { parse_nccl_tests_text(all, "all_reduce_perf.txt", {}); });
  EXPECT_NE(
      e.find("all_reduce_perf.txt: all 16 rows (out-of-place + in-place) contradict the file's own bandwidth "
             "columns, e.g. line 14: time=1e+12 us"),
      std::string::npos)
      << e;
  // vTrain tables have busbw only: x2(N-1)/N with N from the name (AR_GPU2: x1).
  const std::string csv =
      "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n"
      "1048576,262144,float,44210,23.72,45100,23.25\n"
      "2097152,524288,float,1e-300,39.25,51130,41.01\n";
  NcclTestsRefused c;
  EXPECT_EQ(parse_nccl_tests_text(csv, "AR_GPU2_x", {}, &c).size(), 3u);
  EXPECT_EQ(c.rows, 1u);
  EXPECT_NE(error_of([&] { parse_nccl_tests_text(csv, "AR_GPU4_x", {}); }).find("AR_GPU4_x: all 4 rows"),
            std::string::npos);  // 4 ranks: x1.5, which no row shows
  // The importer counts what it refused; the committed tables have no such row.
  const std::string db = scaledl::test::fresh_store_path("collectives-refused.sqlite");
  auto s = import_nccl_tests({write_temp("all_reduce_perf_refused.txt", text)}, {}, db);
  EXPECT_EQ(s.rows, 14u);
  EXPECT_EQ(s.refused.rows, 2u);
  EXPECT_EQ(s.to_json()["refused"], 2);
  EXPECT_EQ(Store(db, true).collectives("", "", false).size(), 14u);
  NcclTestsRefused none;
  for (const auto& f : vtrain_files("v100")) parse_nccl_tests_file(f, {}, &none);
  EXPECT_EQ(none.rows, 0u);
}

// Issue #39 case 9: a group whose fit lands outside the plausibility bounds is
// an error naming the group and the file its rows came from, not a calibration.
TEST(CommFit, AnImplausibleFitIsAnErrorNamingTheGroupAndTheFile) {
  auto rows =
      synthetic("allreduce", CommForm::Ring, 1.573, 0, {2});  // 1.573 B/s, as the issue's comm fit wrote
  for (auto& r : rows) r.source = "runs/all_reduce_perf.txt";
  const std::string e = error_of([&] { fit_collectives(rows); });
  EXPECT_NE(e.find("allreduce fit of campaign synthetic, world 2, 1 node(s) (rows from "
                   "runs/all_reduce_perf.txt), ring "
                   "form: bandwidth_Bps=1.573 is outside"),
            std::string::npos)
      << e;
  auto slow = synthetic("allgather", CommForm::Ring, 10e9, 2.0, {4});  // gamma 2 s per step
  EXPECT_NE(error_of([&] { fit_collectives(slow); }).find("gamma_s=2 is outside"), std::string::npos);
  // The calibration file records the nodes its group was measured on.
  const auto j = comm_fit_json(fit_collectives(synthetic("allreduce", CommForm::Ring, 100e9, 5e-6, {8})));
  EXPECT_EQ(j["nodes"], 1);
  const std::string path = testing::TempDir() + "/comm-fit-nodes.json";
  write_json_file(path, j);
  EXPECT_EQ(load_comm_model(path).nodes, 1);
}

// Found by fuzz_comm: a GPU name that is not UTF-8 reached the store and then
// `comm fit --out` / `db export --format json`, where the JSON writer threw a raw
// nlohmann type_error. It is one error naming the line.
TEST(CollectiveImport, AGpuNameThatIsNotUtf8IsAnErrorNamingTheLine) {
  const std::string text = with_line(kAllReduce4, 6,
                                     "#  Rank  0 Group  0 Pid  41235 on dgx-a100-01 device  0 [0x07] "
                                     "NVIDIA A100-S\xff\xff\x04");
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(text, "all_reduce_perf.txt", {});
            }).find("all_reduce_perf.txt:6: the GPU name of rank 0 is not UTF-8 text"),
            std::string::npos);
  NcclTestsImportOptions o;
  o.device = "cuda:A100";  // --device names it instead: the file's name is not used
  EXPECT_EQ(parse_nccl_tests_text(text, "all_reduce_perf.txt", o).size(), 16u);
  o.campaign = "c\xff";
  EXPECT_NE(error_of([&] {
              parse_nccl_tests_text(kAllReduce4, "all_reduce_perf.txt", o);
            }).find("--campaign is not UTF-8 text"),
            std::string::npos);
}
