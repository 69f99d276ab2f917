// Quantiles shared by timing statistics, error summaries and residual bands:
// the values of the type-7 rule, and exact monotonicity in q (a CI run once
// saw p10 > median by one rounding step for three equal timings).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/stats.hpp"

using namespace scaledl;

TEST(Stats, QuantilesInterpolateLinearlyBetweenOrderStatistics) {
  const std::vector<double> v{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.1), 1.3);
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.9), 3.7);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile({7.0}, 0.3), 7.0);
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(Stats, RepeatedValuesGiveExactlyThatValueAtEveryLevel) {
  // 0.0013666 is the timing CI saw: 0.8 x + 0.2 x rounded one step above x.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-12, 3);
  std::vector<double> xs{0.0013666};
  for (int i = 0; i < 2000; ++i) xs.push_back(std::pow(10.0, u(rng)));
  for (double x : xs) {
    for (double q : {0.1, 0.25, 0.5, 0.75, 0.9}) ASSERT_EQ(quantile({x, x, x}, q), x) << x << " at " << q;
  }
}

TEST(Stats, QuantilesNeverDecreaseWithTheLevel) {
  std::mt19937 rng(11);
  std::lognormal_distribution<double> ln(-6, 2);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<double> v(1 + trial % 9);
    for (double& x : v) x = ln(rng);
    double last = -INFINITY;
    for (int k = 0; k <= 100; ++k) {
      const double q = quantile(v, k / 100.0);
      ASSERT_GE(q, last) << "trial " << trial << " level " << k;
      last = q;
    }
  }
}
