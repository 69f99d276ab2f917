// Store::info(): counts and per-(campaign, device, status) groups with CV spread.
#include <gtest/gtest.h>

#include "test_util.hpp"

#include <cstdio>

#include "scaledl/io/store.hpp"

using namespace scaledl;

TEST(StoreInfo, GroupsRowsByCampaignDeviceStatusWithCvSpread) {
  std::string p = scaledl::test::fresh_store_path("info.sqlite");
  Store s(p);
  auto row = [](int64_t n, const char* status, std::vector<double> fwd) {
    LayerMeasurement m;
    m.campaign = "c";
    m.type = LayerType::ReLU;
    m.dims = {n};
    m.device = "cpu:x";
    m.status = status;
    m.fwd = TimingStats::from_samples(fwd);
    return m;
  };
  s.put_layer(row(1, "ok", {1, 1, 1}));  // cv 0
  s.put_layer(row(2, "ok", {1, 2, 3}));  // cv 0.5
  s.put_layer(row(3, "ok", {2, 2, 2}));  // cv 0
  s.put_layer(row(4, "oom", {}));
  nlohmann::json j = s.info();
  EXPECT_EQ(j["schema_version"], "4");  // 2: collectives (issue #14); 3: memory (issue #15); 4: layer_passes
  EXPECT_EQ(j["counts"]["layers"], 4);
  ASSERT_EQ(j["layer_groups"].size(), 2u);
  const auto& ok = j["layer_groups"][0];
  EXPECT_EQ(ok["status"], "ok");
  EXPECT_EQ(ok["rows"], 3);
  EXPECT_DOUBLE_EQ(ok["fwd_cv_median"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(ok["fwd_cv_max"].get<double>(), 0.5);
  EXPECT_TRUE(ok["bwd_cv_median"].is_null());
  EXPECT_EQ(j["layer_groups"][1]["status"], "oom");
  EXPECT_TRUE(j["layer_groups"][1]["fwd_cv_max"].is_null());
}
