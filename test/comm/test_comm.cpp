// ScaleDL eq. 15 and its least-squares calibration.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "scaledl/comm/comm.hpp"
#include "scaledl/core/error.hpp"

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

// Issue #39 case 9: a fit outside the plausibility bounds of case 12 of #16
// (B in [1e3, 1e14] B/s, gamma <= 1 s) is an error naming the file and the value.
TEST(Comm, ImplausibleFitsAreErrorsNamingTheFileAndTheValue) {
  const std::string path = testing::TempDir() + "/comm_implausible.json";
  auto load_error = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      load_comm_model(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  // The issue's samples: B = 1e-5 B/s, T_comm of 8.7e16 ms before.
  std::string e = load_error(
      R"({"allreduce":[{"bytes":1,"devices":2,"seconds":1e5},{"bytes":2,"devices":2,"seconds":2e5}]})");
  EXPECT_EQ(e.rfind(path + ": ", 0), 0u) << e;
  EXPECT_NE(e.find("bandwidth_Bps=1e-05 is outside the plausible [1000, 1e+14] B/s"), std::string::npos) << e;
  // gamma about 500 s (T = S/B + 2 gamma with B = 10 GB/s).
  e = load_error(
      R"({"allreduce":[{"bytes":1e9,"devices":2,"seconds":1000.1},{"bytes":2e9,"devices":2,"seconds":1000.2}]})");
  EXPECT_NE(e.find(path + ": all-reduce fit of 2 samples: gamma_s=500"), std::string::npos) << e;
  // B about 1e27 B/s.
  e = load_error(
      R"({"allreduce":[{"bytes":1e17,"devices":2,"seconds":1e-10},{"bytes":2e17,"devices":2,"seconds":2e-10}]})");
  EXPECT_NE(e.find("bandwidth_Bps=1e+27 is outside"), std::string::npos) << e;
  // A plausible calibration still loads (25 GB/s, 7 us).
  const CommModel truth{25e9, 7e-6};
  const std::string good = fmt::format(
      R"({{"allreduce":[{{"bytes":1e6,"devices":8,"seconds":{}}},{{"bytes":1e9,"devices":8,"seconds":{}}}]}})",
      truth.time_s(1e6, 8), truth.time_s(1e9, 8));
  EXPECT_EQ(load_error(good), "<no error>");
  EXPECT_NEAR(load_comm_model(path).bandwidth_Bps / 25e9, 1.0, 1e-6);
  // The library functions themselves.
  EXPECT_THROW(fit_comm_model({{1, 2, 1e5}, {2, 2, 2e5}}), Error);
  EXPECT_THROW(check_comm_plausible(CommModel{1e15, 0}, "x"), Error);
  EXPECT_THROW(check_comm_plausible(CommModel{1e10, 2.0}, "x"), Error);
  EXPECT_NO_THROW(check_comm_plausible(CommModel{1e10, 1e-5}, "x"));
  std::remove(path.c_str());
}

// Issue #39 case 27: the nodes a calibration was measured on are read, kept and
// written; a one-node (or unrecorded) calibration used across nodes is a warning.
TEST(Comm, NodesOfTheCalibrationAndTheCrossNodeWarning) {
  CommModel m = CommModel::from_json({{"bandwidth_Bps", 2.27e11}, {"gamma_s", 5.6e-6}, {"nodes", 1}});
  EXPECT_EQ(m.nodes, 1);
  EXPECT_EQ(CommModel::from_json(m.to_json()).nodes, 1);  // what a bundle's comm.json keeps
  // `comm fit --out` names its group in "source".
  EXPECT_EQ(
      CommModel::from_json({{"bandwidth_Bps", 2.27e11}, {"source", {{"nodes", 2}, {"world", 16}}}}).nodes, 2);
  EXPECT_EQ(CommModel::from_json({{"bandwidth_Bps", 2.27e11}, {"source", "my cluster"}}).nodes, 0);
  EXPECT_FALSE(CommModel::from_json({{"bandwidth_Bps", 2.27e11}}).to_json().contains("nodes"));
  EXPECT_THROW(CommModel::from_json({{"bandwidth_Bps", 2.27e11}, {"nodes", 0}}), Error);
  EXPECT_THROW(CommModel::from_json({{"bandwidth_Bps", 2.27e11}, {"nodes", "two"}}), Error);

  const std::string w = cross_node_comm_warning(m, 2);
  EXPECT_NE(w.find("fitted on 1 node (bandwidth 227 GB/s"), std::string::npos) << w;
  EXPECT_NE(w.find("--nodes=2"), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
  EXPECT_EQ(cross_node_comm_warning(m, 1), "");
  CommModel across = m;
  across.nodes = 2;
  EXPECT_EQ(cross_node_comm_warning(across, 2), "");
  EXPECT_EQ(cross_node_comm_warning(across, 4), "");  // measured across nodes: inter-node links are in it
  CommModel unknown = m;
  unknown.nodes = 0;
  EXPECT_NE(cross_node_comm_warning(unknown, 2).find("does not record how many nodes"), std::string::npos);

  // Samples: the nodes when every sample says (the largest), else unrecorded.
  const std::string path = testing::TempDir() + "/comm_nodes.json";
  const CommModel truth{25e9, 7e-6};
  auto samples = [&](const std::string& n1, const std::string& n2) {
    std::ofstream(path) << fmt::format(
        R"({{"allreduce":[{{"bytes":1e6,"devices":8,"seconds":{}{}}},{{"bytes":1e9,"devices":16,"seconds":{}{}}}]}})",
        truth.time_s(1e6, 8), n1, truth.time_s(1e9, 16), n2);
    return load_comm_model(path).nodes;
  };
  EXPECT_EQ(samples(R"(,"nodes":1)", R"(,"nodes":1)"), 1);
  EXPECT_EQ(samples(R"(,"nodes":1)", R"(,"nodes":2)"), 2);
  EXPECT_EQ(samples(R"(,"nodes":1)", ""), 0);
  EXPECT_THROW(samples(R"(,"nodes":9)", ""), Error);  // more nodes than devices
  std::remove(path.c_str());
}
