// ScaleDL eq. 15 and its least-squares calibration.
#include <gtest/gtest.h>

#include "scaledl/comm.hpp"
#include "scaledl/error.hpp"

using namespace scaledl;

TEST(Comm, Eq15Values) {
  CommModel m{10e9, 5e-6};
  EXPECT_DOUBLE_EQ(m.time_s(1e9, 1), 0.0);
  // N = 4: 2*3/4 * 1e9/1e10 + 6 * 5e-6 = 0.15 + 3e-5
  EXPECT_NEAR(m.time_s(1e9, 4), 0.15 + 3e-5, 1e-15);
  EXPECT_NEAR(m.time_s(0, 2), 2 * 5e-6, 1e-18);
  EXPECT_THROW(m.time_s(1e6, 0), Error);
  EXPECT_THROW(m.time_s(NAN, 2), Error);
}

TEST(Comm, FitRecoversBandwidthAndLatency) {
  const CommModel truth{25e9, 7e-6};
  std::vector<AllReduceSample> s;
  for (int64_t n : {2, 4, 8})
    for (double bytes : {1e3, 1e5, 1e7, 1e9}) s.push_back({bytes, n, truth.time_s(bytes, n)});
  CommModel f = fit_comm_model(s);
  EXPECT_NEAR(f.bandwidth_Bps / truth.bandwidth_Bps, 1.0, 1e-9);
  EXPECT_NEAR(f.gamma_s / truth.gamma_s, 1.0, 1e-9);
}

TEST(Comm, FitKeepsGammaNonNegative) {
  // Pure bandwidth data with noise pushing the intercept below zero.
  std::vector<AllReduceSample> s = {{1e6, 2, 0.9e-4}, {1e8, 2, 1.0e-2}, {1e9, 2, 1.0e-1}};
  CommModel f = fit_comm_model(s);
  EXPECT_GE(f.gamma_s, 0.0);
  EXPECT_GT(f.bandwidth_Bps, 0.0);
}

TEST(Comm, BadSamplesNameIndexAndField) {
  try {
    fit_comm_model({{1e6, 2, 1e-3}, {1e7, 1, 1e-2}});
    FAIL() << "devices=1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample[1].devices=1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(fit_comm_model({{1e6, 2, 1e-3}}), Error);
  EXPECT_THROW(fit_comm_model({{1e6, 2, NAN}, {1e7, 2, 1e-2}}), Error);
  EXPECT_THROW(fit_comm_model({{-5, 2, 1e-3}, {1e7, 2, 1e-2}}), Error);
}

TEST(Comm, JsonRoundTripAndErrors) {
  CommModel m{3e9, 1e-5};
  CommModel r = CommModel::from_json(m.to_json());
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, m.bandwidth_Bps);
  EXPECT_DOUBLE_EQ(r.gamma_s, m.gamma_s);
  EXPECT_THROW(CommModel::from_json({{"gamma_s", 1e-6}}), Error);
  EXPECT_THROW(CommModel::from_json({{"bandwidth_Bps", -1.0}}), Error);
}
