// Fabric presets (fabric.hpp): fitted per collective and world size, derived from the link
// bandwidth of the measured presets of the same kind, their files, how predict finds them, and
// the leave-one-GPU-out of the collectives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scaledl/comm/fabric.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {

/// Rows of `collective` over `world` ranks that follow the ring form with bus bandwidth `B` and `gamma`.
void add_rows(std::vector<CollectiveMeasurement>& rows, const std::string& campaign,
              const std::string& collective, int64_t world, double B, double gamma) {
  const CommFactors f = comm_factors(collective, CommForm::Ring, world);
  for (double bytes : {1 << 16, 1 << 20, 1 << 24, 1 << 26, 1 << 28}) {
    CollectiveMeasurement r;
    r.campaign = campaign;
    r.collective = collective;
    r.backend = "nccl";
    r.world = world;
    r.bytes = bytes;
    r.time_s = f.a * bytes / B + f.c * gamma;
    r.source = campaign + ".csv";
    rows.push_back(r);
  }
}

FabricDefinition def(const std::string& name, FabricKind kind, double link, const std::string& device,
                     std::vector<std::string> campaigns) {
  FabricDefinition d;
  d.name = name;
  d.description = name + " test fabric";
  d.kind = kind;
  d.link_gbs = link;
  d.device = device;
  d.devices = {device};
  d.campaigns = std::move(campaigns);
  d.link_source = "test";
  return d;
}

/// Two measured NVSwitch systems (links 100 and 200 GB/s, reaching 80 % and 60 % of the
/// link at 8 ranks, 70 % and 50 % at 2), one measured PCIe system, and derived ones.
struct Lab {
  FabricDefinitions defs;
  std::vector<CollectiveMeasurement> rows;
  Lab() {
    add_rows(rows, "a", "allreduce", 2, 70e9, 4e-6);
    add_rows(rows, "a", "allreduce", 8, 80e9, 2e-6);
    add_rows(rows, "a", "allgather", 8, 75e9, 2e-6);
    add_rows(rows, "b", "allreduce", 2, 100e9, 6e-6);
    add_rows(rows, "b", "allreduce", 8, 120e9, 3e-6);
    add_rows(rows, "p", "allreduce", 2, 10e9, 8e-6);
    defs.min_bytes = 1e6;
    defs.fabrics = {def("sys-a", FabricKind::NVSwitch, 100, "spec:A", {"a"}),
                    def("sys-b", FabricKind::NVSwitch, 200, "spec:B", {"b"}),
                    def("sys-p", FabricKind::PCIe, 32, "spec:P", {"p"}),
                    def("new-200", FabricKind::NVSwitch, 200, "spec:N", {}),
                    def("new-400", FabricKind::NVSwitch, 400, "spec:M", {})};
    defs.fabrics[0].nic_gbs = 25;
    defs.fabrics[3].nic_gbs = 50;
  }
};

const FabricPreset& named(const std::vector<FabricPreset>& v, const std::string& name) {
  for (const FabricPreset& p : v)
    if (p.name == name) return p;
  throw std::runtime_error("no preset " + name);
}

}  // namespace

TEST(Fabric, KindsRoundTripAndABadOneIsNamed) {
  for (int i = 0; i < kFabricKindCount; ++i) {
    const FabricKind k = static_cast<FabricKind>(i);
    EXPECT_EQ(fabric_kind_of(to_string(k), "kind"), k);
  }
  EXPECT_NE(error_of([] {
              fabric_kind_of("infiniband", "fabrics[2].kind");
            }).find("fabrics[2].kind=\"infiniband\" is not a fabric kind"),
            std::string::npos);
}

TEST(Fabric, AGroupUsesTheFitOfTheLargestRanksNotAboveIt) {
  ClusterComm c;
  c.intra = CommModel{1e9, 0};
  EXPECT_EQ(c.inside(4).bandwidth_Bps, 1e9);  // no fits by ranks: the one model
  c.by_ranks = {{2, CommModel{2e9, 0}}, {4, CommModel{4e9, 0}}, {8, CommModel{8e9, 0}}};
  EXPECT_EQ(c.inside(2).bandwidth_Bps, 2e9);
  EXPECT_EQ(c.inside(3).bandwidth_Bps, 2e9);
  EXPECT_EQ(c.inside(6).bandwidth_Bps, 4e9);
  EXPECT_EQ(c.inside(64).bandwidth_Bps, 8e9);
  EXPECT_EQ(c.inside(1).bandwidth_Bps, 2e9);  // below every fit: the smallest
}

TEST(Fabric, AMeasuredPresetRecoversEachCollectiveAndWorld) {
  Lab lab;
  const auto presets = build_fabric_presets(lab.defs, lab.rows);
  const FabricPreset& a = named(presets, "sys-a");
  EXPECT_EQ(a.origin, "measured");
  ASSERT_NE(a.fit("allreduce", 8), nullptr);
  EXPECT_NEAR(a.fit("allreduce", 8)->model.bandwidth_Bps / 80e9, 1, 1e-9);
  EXPECT_NEAR(a.fit("allreduce", 8)->model.gamma_s / 2e-6, 1, 1e-6);
  EXPECT_NEAR(a.fit("allreduce", 2)->model.bandwidth_Bps / 70e9, 1, 1e-9);
  EXPECT_NEAR(a.fit("allgather", 8)->model.bandwidth_Bps / 75e9, 1, 1e-9);
  // Rows below min_bytes are not fitted: 1 MiB and up, 4 sizes.
  EXPECT_EQ(a.fit("allreduce", 8)->samples, 4u);
  EXPECT_EQ(a.fit("allreduce", 8)->min_bytes, 1 << 20);
  // The cluster's models: by ranks inside a node; no inter-node rows, so no inter model of its own.
  EXPECT_FALSE(a.inter.has_value());
  const ClusterComm c = a.cluster();
  EXPECT_NEAR(c.inside(4).bandwidth_Bps / 70e9, 1, 1e-9);
  EXPECT_NEAR(c.intra.bandwidth_Bps / 80e9, 1, 1e-9);
  EXPECT_EQ(c.inter.nodes, 1);  // the node's model: the cross-node warning applies
}

TEST(Fabric, ADerivedPresetTakesTheLinkShareOfItsGenerationElseOfItsKind) {
  Lab lab;
  const auto presets = build_fabric_presets(lab.defs, lab.rows);
  // Same link as sys-b (200 GB/s): sys-b's shares alone (0.6 at 8 ranks) x 200.
  const FabricPreset& n = named(presets, "new-200");
  EXPECT_EQ(n.origin, "derived");
  EXPECT_NEAR(n.fit("allreduce", 8)->model.bandwidth_Bps / 120e9, 1, 1e-9);
  EXPECT_NEAR(n.fit("allreduce", 8)->model.gamma_s / 3e-6, 1, 1e-6);
  EXPECT_NE(n.source.find("sys-b"), std::string::npos) << n.source;
  EXPECT_EQ(n.source.find("sys-a"), std::string::npos) << n.source;
  // No measured 400 GB/s system: the median of both NVSwitch ones, (0.8 + 0.6) / 2 x 400 at 8 ranks;
  // the PCIe system does not count.
  const FabricPreset& m = named(presets, "new-400");
  EXPECT_NEAR(m.fit("allreduce", 8)->model.bandwidth_Bps / (0.7 * 400e9), 1, 1e-9);
  EXPECT_NEAR(m.fit("allreduce", 2)->model.bandwidth_Bps / (0.6 * 400e9), 1, 1e-9);
  // Across nodes: no measured inter-node rows anywhere, so no inter model (nic_gbs alone is not enough).
  EXPECT_FALSE(n.inter.has_value());
  // A derived kind with nothing measured is named.
  FabricDefinitions lone = lab.defs;
  lone.fabrics.push_back(def("pair", FabricKind::NVLinkPair, 300, "spec:Q", {}));
  EXPECT_NE(error_of([&] {
              build_fabric_presets(lone, lab.rows);
            }).find("fabric pair: no measured nvlink-pair preset to derive it from"),
            std::string::npos);
  // A campaign without rows is named.
  FabricDefinitions missing = lab.defs;
  missing.fabrics[0].campaigns = {"a", "zzz"};
  EXPECT_NE(error_of([&] {
              build_fabric_presets(missing, lab.rows);
            }).find("fabric sys-a: campaign zzz has no collective rows"),
            std::string::npos);
}

TEST(Fabric, InterNodeRowsGiveAModelAndTheNicShareCarriesIt) {
  Lab lab;
  // sys-a across 2 nodes: 16 ranks at 20 GB/s bus bandwidth, 80 % of its 25 GB/s NIC.
  std::vector<CollectiveMeasurement> across;
  add_rows(across, "a", "allreduce", 16, 20e9, 10e-6);
  for (auto& r : across) {
    r.level = "inter-node";
    r.nodes = 2;
  }
  lab.rows.insert(lab.rows.end(), across.begin(), across.end());
  const auto presets = build_fabric_presets(lab.defs, lab.rows);
  const FabricPreset& a = named(presets, "sys-a");
  ASSERT_TRUE(a.inter.has_value());
  EXPECT_NEAR(a.inter->bandwidth_Bps / 20e9, 1, 1e-9);
  EXPECT_EQ(a.inter->nodes, 2);
  const FabricPreset& n = named(presets, "new-200");
  ASSERT_TRUE(n.inter.has_value());
  EXPECT_NEAR(n.inter->bandwidth_Bps / (0.8 * 50e9), 1, 1e-9);
  EXPECT_NE(n.inter_source.find("derived"), std::string::npos);
  EXPECT_EQ(n.cluster().inter.bandwidth_Bps, n.inter->bandwidth_Bps);
}

TEST(Fabric, APresetFileRoundTripsAndReadsAsACalibration) {
  Lab lab;
  const FabricPreset a = named(build_fabric_presets(lab.defs, lab.rows), "sys-a");
  const std::string path = testing::TempDir() + "/sys-a.json";
  write_json_file(path, a.to_json());
  const FabricPreset back = load_fabric(path);
  EXPECT_EQ(back.to_json(), a.to_json());
  // `--comm FILE` reads the all-reduce of a whole node from it.
  const CommModel m = load_comm_model(path);
  EXPECT_NEAR(m.bandwidth_Bps / 80e9, 1, 1e-9);
  EXPECT_EQ(m.nodes, 1);
  // Bad fields are named.
  nlohmann::json j = a.to_json();
  j.erase("link_gbs");
  EXPECT_NE(error_of([&] { FabricPreset::from_json(j, "f.json"); }).find("f.json.link_gbs is missing"),
            std::string::npos);
  j = a.to_json();
  j["origin"] = "guessed";
  EXPECT_NE(error_of([&] { FabricPreset::from_json(j, "f.json"); }).find("f.json.origin=\"guessed\""),
            std::string::npos);
  j = a.to_json();
  j["fits"][0]["bandwidth_Bps"] = -1;
  EXPECT_NE(error_of([&] { FabricPreset::from_json(j, "f.json"); }).find("f.json.fits[0]"),
            std::string::npos);
  j = a.to_json();
  j["fits"] = nlohmann::json::array({j["fits"][0]});  // the all-gather alone (fits: by collective, world)
  EXPECT_NE(error_of([&] { FabricPreset::from_json(j, "f.json"); }).find("no allreduce fit"),
            std::string::npos);
  j = a.to_json();
  j["kind"] = "token-ring";
  EXPECT_NE(error_of([&] { FabricPreset::from_json(j, "f.json"); }).find("f.json.kind=\"token-ring\""),
            std::string::npos);
}

TEST(Fabric, PresetsAreFoundByFileByNameAndByTheGpuTheyServe) {
  Lab lab;
  const fs::path dir = fs::path(testing::TempDir()) / "fabric_find" / "fabrics";
  fs::create_directories(dir);
  for (const FabricPreset& p : build_fabric_presets(lab.defs, lab.rows))
    write_json_file((dir / (p.name + ".json")).string(), p.to_json());
  const std::vector<std::string> dirs = {dir.string()};
  EXPECT_EQ(find_fabric("sys-b", dirs).name, "sys-b");
  EXPECT_EQ(find_fabric((dir / "sys-p.json").string(), {}).name, "sys-p");
  const std::string e = error_of([&] { find_fabric("sys-z", dirs); });
  EXPECT_NE(e.find("--fabric=\"sys-z\" is neither a file nor a preset name"), std::string::npos) << e;
  EXPECT_NE(e.find("new-200, new-400, sys-a, sys-b, sys-p"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { find_fabric("../fabrics/sys-a", dirs); }).find("neither a file"),
            std::string::npos);
  // By the GPU: a probed record of the same name matches as its spec does.
  ASSERT_TRUE(default_fabric_for("B", dirs).has_value());
  EXPECT_EQ(default_fabric_for("B", dirs)->name, "sys-b");
  EXPECT_FALSE(default_fabric_for("Tesla T4", dirs).has_value());
  // A spec sheet in models/devices looks in models/fabrics.
  EXPECT_EQ(fabric_dirs_for_spec("x/models/devices/h100.json").front(), "x/models/fabrics");
}

TEST(Fabric, DefinitionsNameTheirBadEntries) {
  const std::string path = testing::TempDir() + "/fabric_defs.json";
  auto expect = [&](const std::string& text, const std::string& what) {
    std::ofstream(path) << text;
    const std::string e = error_of([&] { load_fabric_definitions(path); });
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  const std::string one =
      R"({"name": "x", "kind": "nvswitch", "gpus_per_node": 8, "link_gbs": 450, "link_source": "sheet"})";
  std::ofstream(path) << "{\"fabrics\": [" + one + "]}";
  EXPECT_EQ(load_fabric_definitions(path).fabrics.size(), 1u);
  expect("{\"fabrics\": [" + one + ", " + one + "]}", "fabrics[1].name=\"x\" is given twice");
  expect(R"({"fabrics": [{"name": "y", "kind": "nvswitch", "gpus_per_node": 8, "link_gbs": 450}]})",
         "fabrics[0].link_source is missing");
  expect(
      R"({"fabrics": [{"name": "y", "kind": "nvswitch", "gpus_per_node": 0, "link_gbs": 1, "link_source": "s"}]})",
      "gpus_per_node");
  expect(R"({"fabrics": []})", "fabrics must be a non-empty array");
  expect(R"({"fabrics": [)", "malformed JSON");
}

TEST(Fabric, LeaveOneOutDerivesEachGpuFromTheOthers) {
  Lab lab;
  const auto rows = leave_one_fabric_out(lab.defs, lab.rows, 64e6);
  // sys-a and sys-b are held out in turn (each from the other: no same-link peer, so the kind's
  // median is the other alone); sys-p is the only PCIe one: nothing to derive it from.
  size_t a = 0, b = 0;
  for (const FabricLooRow& r : rows) {
    EXPECT_NE(r.fabric, "sys-p");
    EXPECT_GE(r.bytes, 64e6);
    EXPECT_NEAR(r.fitted_gbs / r.measured_gbs, 1, 1e-6);  // exact rows: the own fit reproduces them
    if (r.fabric == "sys-a" && r.collective == "allreduce" && r.world == 8) {
      ++a;
      // sys-b's share at 8 ranks (0.6) x sys-a's link (100) = 60 GB/s against 80, with sys-b's gamma.
      EXPECT_NEAR(r.predicted_gbs, model_busbw_gbs(CommModel{60e9, 3e-6}, "allreduce", 8, r.bytes), 1e-6);
      EXPECT_NEAR(r.measured_gbs, model_busbw_gbs(CommModel{80e9, 2e-6}, "allreduce", 8, r.bytes), 1e-6);
    }
    if (r.fabric == "sys-b" && r.collective == "allreduce" && r.world == 8) {
      ++b;
      EXPECT_NEAR(r.predicted_gbs, model_busbw_gbs(CommModel{160e9, 2e-6}, "allreduce", 8, r.bytes), 1e-6);
    }
  }
  EXPECT_EQ(a, 2u);  // 64 MiB and 256 MiB
  EXPECT_EQ(b, 2u);
  const auto sum = summarize_fabric_loo(rows);
  ASSERT_FALSE(sum.empty());
  EXPECT_EQ(sum.front().group, "all");
  EXPECT_EQ(sum.front().rows, rows.size());
  EXPECT_NEAR(sum.front().fitted_mape, 0, 1e-4);
  EXPECT_GT(sum.front().predicted_mape, 20);
}
