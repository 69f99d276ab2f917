// The refinement's domain in words (domain.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "scaledl/predict/domain.hpp"

using namespace scaledl;

TEST(Domain, FeaturesOutsideTheirRangeInWords) {
  const std::map<std::string, std::pair<double, double>> ranges = {
      {"log1p_params", {std::log1p(1e8), std::log1p(7.74e8)}},
      {"log_batch", {0.0, std::log(128.0)}},
      {"share_gemm", {0.4, 0.8}},
      {"dtype_fp16", {0.0, 0.0}},
      {"log_num_nodes", {std::log(100.0), std::log(1742.0)}}};
  const std::vector<std::string> names = {"log1p_params", "log_batch",     "share_gemm",
                                          "dtype_fp16",   "log_num_nodes", "unknown"};
  const std::vector<double> values = {std::log1p(7.24e9), std::log(512.0), 0.9, 1.0, std::log(1743.0), 5};
  const auto out = features_out_of_range(names, values, ranges);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].words(),
            "the model is 7.24 B parameters, 9.4x more than any training run's (at most 774 M parameters)");
  EXPECT_EQ(out[1].words(),
            "the batch is 512 samples, 4x more than any training run's (at most 128 samples)");
  EXPECT_EQ(out[2].words(),
            "the GEMMs' share of the layer time is 90 %, more than in any training run (40-80 %)");
  EXPECT_EQ(out[3].words(), "no training run used FP16");
  EXPECT_EQ(out[4].words(),
            "the layer graph is 1743 nodes, slightly more than any training run's (at most 1742 nodes)");
  EXPECT_EQ(out[1].raw().rfind("log_batch=6.238 outside [0, 4.852]", 0), 0u) << out[1].raw();
  // Inside the range (and within the tolerance of its edge), nothing.
  EXPECT_TRUE(features_out_of_range({"log_batch"}, {std::log(128.0) + 1e-9}, ranges).empty());
  // Below the range.
  const auto low = features_out_of_range({"log_batch"}, {-1.0}, {{"log_batch", {0.0, 1.0}}});
  ASSERT_EQ(low.size(), 1u);
  EXPECT_NE(low[0].words().find("less than any training run's (at least 1 samples)"), std::string::npos)
      << low[0].words();
  EXPECT_EQ(feature_in_words("log_num_nodes"), "the layer graph");
  EXPECT_EQ(feature_in_words("opt_sgd"), "whether the run uses SGD");
  EXPECT_EQ(feature_in_words("no_such"), "no_such");
}
