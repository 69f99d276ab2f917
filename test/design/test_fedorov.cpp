// Fedorov exchange on hand-made candidate matrices with known D-optimal designs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "scaledl/core/error.hpp"
#include "scaledl/design/design.hpp"

using scaledl::FeatureMatrix;
using scaledl::fedorov_design;
using scaledl::FedorovOptions;

namespace {

/// Linear model (1, x1, x2) on the 3x3 grid {-1,0,1}^2, row r = (x1, x2) with
/// x1 = r / 3 - 1, x2 = r % 3 - 1.
FeatureMatrix grid3x3() {
  FeatureMatrix F(9, 3);
  for (int r = 0; r < 9; ++r) F.row(r) << 1.0, r / 3 - 1.0, r % 3 - 1.0;
  return F;
}

/// Quadratic model (1, x, x^2) on {-1, -0.5, 0, 0.5, 1}.
FeatureMatrix quad5() {
  FeatureMatrix F(5, 3);
  for (int r = 0; r < 5; ++r) {
    double x = -1 + 0.5 * r;
    F.row(r) << 1.0, x, x * x;
  }
  return F;
}

/// Random candidates: intercept + p-1 uniform features in [-1, 1].
FeatureMatrix random_candidates(int m, int p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  FeatureMatrix F(m, p);
  for (int i = 0; i < m; ++i) {
    F(i, 0) = 1;
    for (int j = 1; j < p; ++j) F(i, j) = (rng() >> 11) * (2.0 / 9007199254740992.0) - 1;
  }
  return F;
}

FedorovOptions opts(int k, uint64_t seed = 1) {
  FedorovOptions o;
  o.k = k;
  o.seed = seed;
  return o;
}

}  // namespace

TEST(Fedorov, LinearModelOn3x3GridChoosesTheFourCorners) {
  for (uint64_t seed : {0, 1, 7, 12345}) {
    auto r = fedorov_design(grid3x3(), FeatureMatrix(0, 3), opts(4, seed));
    // Corners (-1,-1) (-1,1) (1,-1) (1,1) are rows 0, 2, 6, 8.
    EXPECT_EQ(r.chosen, (std::vector<int64_t>{0, 2, 6, 8})) << "seed " << seed;
    // M = diag(4, 4, 4) => log det = 3 log 4.
    EXPECT_NEAR(r.log_det, 3 * std::log(4.0), 1e-9);
  }
}

TEST(Fedorov, QuadraticModelOnFiveLevelsChoosesMinusOneZeroOne) {
  for (uint64_t seed : {0, 3, 99}) {
    FedorovOptions o = opts(3, seed);
    o.starts = 3;
    auto r = fedorov_design(quad5(), FeatureMatrix(0, 3), o);
    EXPECT_EQ(r.chosen, (std::vector<int64_t>{0, 2, 4})) << "seed " << seed;  // x = -1, 0, 1
  }
}

TEST(Fedorov, LogDetNeverDecreasesAcrossExchanges) {
  FeatureMatrix F = random_candidates(3000, 6, 5);
  for (int start : {1, 4}) {
    FedorovOptions o = opts(20, 11);
    o.starts = start;
    auto r = fedorov_design(F, FeatureMatrix(0, 6), o);
    ASSERT_GE(r.trace.size(), 1u);
    for (size_t i = 1; i < r.trace.size(); ++i) EXPECT_GE(r.trace[i], r.trace[i - 1]) << "exchange " << i;
    // The tracked value (rank-one updates) agrees with a fresh determinant.
    EXPECT_NEAR(r.trace.back(), r.log_det, 1e-6);
    EXPECT_GT(r.exchanges, 0);
  }
}

TEST(Fedorov, ExchangeImprovesOnGreedyStartAndOnRandomDesigns) {
  FeatureMatrix F = random_candidates(5000, 10, 9);
  auto r = fedorov_design(F, FeatureMatrix(0, 10), opts(30, 2));
  EXPECT_GE(r.log_det, r.trace.front() - 1e-9);
  EXPECT_GT(r.d_efficiency_vs_random, 1.0);
  std::set<int64_t> distinct(r.chosen.begin(), r.chosen.end());
  EXPECT_EQ(distinct.size(), 30u);
}

TEST(Fedorov, ExistingPointsStayInTheDesign) {
  // The four corners are already measured; one new point on the 3x3 grid.
  FeatureMatrix F = grid3x3();
  FeatureMatrix E(4, 3);
  E << 1, -1, -1, 1, -1, 1, 1, 1, -1, 1, 1, 1;
  auto r = fedorov_design(F, E, opts(1, 4));
  ASSERT_EQ(r.chosen.size(), 1u);
  EXPECT_NEAR(r.log_det, scaledl::design_log_det(F, r.chosen, E), 1e-9);
  // log det of the whole (existing + new) exceeds the existing design's 3 log 4.
  EXPECT_GT(r.log_det, 3 * std::log(4.0));
  // With only existing points k may be smaller than p: e + k >= p is what counts.
  FeatureMatrix E2(2, 3);
  E2 << 1, -1, -1, 1, 1, 1;
  auto r2 = fedorov_design(F, E2, opts(1, 4));
  EXPECT_TRUE(std::isfinite(r2.log_det));
  EXPECT_NEAR(r2.log_det, scaledl::design_log_det(F, r2.chosen, E2), 1e-9);
}

TEST(Fedorov, SameSeedSameDesignWhateverTheThreads) {
  FeatureMatrix F = random_candidates(4000, 8, 3);
  FedorovOptions a = opts(25, 42), b = a;
  b.threads = 1;
  auto ra = fedorov_design(F, FeatureMatrix(0, 8), a);
  auto rb = fedorov_design(F, FeatureMatrix(0, 8), b);
  auto rc = fedorov_design(F, FeatureMatrix(0, 8), a);
  EXPECT_EQ(ra.chosen, rb.chosen);
  EXPECT_EQ(ra.chosen, rc.chosen);
  EXPECT_DOUBLE_EQ(ra.log_det, rc.log_det);
}

TEST(Fedorov, SubsetRoundsReachTheFullSearchOptimum) {
  // With a candidate subset smaller than m the rounds must still end at a design
  // at least nearly as good as exchanging over all candidates.
  FeatureMatrix F = random_candidates(6000, 5, 21);
  FedorovOptions full = opts(12, 5), sub = full;
  full.subset = 6000;
  sub.subset = 200;
  auto rf = fedorov_design(F, FeatureMatrix(0, 5), full);
  auto rs = fedorov_design(F, FeatureMatrix(0, 5), sub);
  EXPECT_GT(rs.log_det, rf.log_det - 0.05 * std::fabs(rf.log_det));
}

TEST(Fedorov, BadInputsGiveOneClearError) {
  FeatureMatrix F = grid3x3();
  struct Case {
    const char* what;
    FedorovOptions o;
    FeatureMatrix F;
    const char* needle;
  };
  FeatureMatrix nan = F;
  nan(3, 1) = std::numeric_limits<double>::quiet_NaN();
  FedorovOptions starts0 = opts(4);
  starts0.starts = 0;
  FeatureMatrix degenerate(9, 3);  // x2 = x1: rank 2 < 3 terms
  for (int r = 0; r < 9; ++r) degenerate.row(r) << 1.0, r - 4.0, r - 4.0;
  std::vector<Case> cases = {
      {"k > m", opts(10), F, "--budget=10"},  {"k = 0", opts(0), F, "--budget=0"},
      {"k < p", opts(2), F, "model terms"},   {"NaN feature", opts(4), nan, "NaN"},
      {"starts 0", starts0, F, "--starts=0"}, {"rank-deficient candidates", opts(4), degenerate, "singular"},
  };
  for (auto& c : cases) {
    try {
      fedorov_design(c.F, FeatureMatrix(0, 3), c.o);
      ADD_FAILURE() << c.what << ": no error";
    } catch (const scaledl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << c.what << ": " << e.what();
    }
  }
}
