// The spec sheets shipped under models/devices (README there) and the device
// record's sustained clock and spec checks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

TEST(DeviceSpecs, EveryShippedSpecLoadsAndIsConsistent) {
  const fs::path dir = fs::path(SCALEDL_SOURCE_DIR) / "models" / "devices";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    const DeviceRecord d = load_device_spec(e.path().string());
    ++n;
    EXPECT_EQ(d.kind, "spec");
    EXPECT_GT(d.cores, 0);
    EXPECT_GT(d.clock_mhz, 0);
    EXPECT_GT(d.peak_fp32_gflops, 0);
    EXPECT_GT(d.peak_mem_bw_gbs, 0);
    EXPECT_GE(d.peak_tf32_gflops, d.peak_fp32_gflops);
    EXPECT_GE(d.peak_bf16_gflops, d.peak_tf32_gflops);
    EXPECT_TRUE(d.extra.contains("source") && d.extra["source"].is_string() &&
                d.extra["source"].get<std::string>().find("NVIDIA") != std::string::npos);
    // Every shipped GPU is Volta or newer, with its compute capability (NVIDIA's CUDA GPUs list): 7.0 V100,
    // 7.5 T4, 8.x Ampere and Ada, 9.0 Hopper.
    EXPECT_GE(d.compute_capability(), 7.0) << e.path();
    EXPECT_LE(d.compute_capability(), 10.0) << e.path();
    // FP32 peak = 2 x SMs x lanes per SM x boost clock: 64 lanes on Volta (V100), Turing (T4) and the
    // A100, 128 on Hopper, Ada and GA10x (A10).
    const double lanes = d.peak_fp32_gflops * 1e3 / (2 * d.cores * d.clock_mhz);
    bool narrow = false;
    for (const char* g : {"A100", "V100", "T4"}) narrow = narrow || d.name.find(g) != std::string::npos;
    const double want = narrow ? 64 : 128;
    EXPECT_NEAR(lanes, want, 0.01 * want) << d.name;
  }
  EXPECT_GE(n, 13);
}

TEST(DeviceSpecs, SustainedClockScalesTheComputeRateAndIsChecked) {
  nlohmann::json j = read_json_file(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/l4.json");
  const DeviceRecord boost = DeviceRecord::from_json(j);
  EXPECT_DOUBLE_EQ(boost.compute_gflops(), 30300);
  j["sustained_clock_mhz"] = 1530;
  const DeviceRecord held = DeviceRecord::from_json(j);
  EXPECT_DOUBLE_EQ(held.compute_gflops(), 30300.0 * 1530 / 2040);
  EXPECT_EQ(DeviceRecord::from_json(held.to_json()).sustained_clock_mhz, 1530);  // round trip
  EXPECT_FALSE(boost.to_json().contains("sustained_clock_mhz"));                 // earlier records unchanged
  j["sustained_clock_mhz"] = 2500;
  EXPECT_NE(
      error_of([&] { DeviceRecord::from_json(j, "l4"); }).find("l4.sustained_clock_mhz=2500 must be at most"),
      std::string::npos);
  j["sustained_clock_mhz"] = -5;
  EXPECT_NE(error_of([&] { DeviceRecord::from_json(j, "l4"); }).find("sustained_clock_mhz"),
            std::string::npos);
}

TEST(DeviceSpecs, RooflinesRunAtTheSpecPeakOfAProbedGpuAndAtMeasuredRatesOfACpu) {
  // A probed GPU with a built-in spec: the measured rates are kept in the record, the
  // rooflines use the spec peak (one quantity, the share of the peak, for every GPU).
  const DeviceRecord h200 = load_device_spec(std::string(SCALEDL_SOURCE_DIR) + "/datasets/h200/probe.json");
  ASSERT_GT(h200.measured_gflops, 0);
  EXPECT_DOUBLE_EQ(h200.compute_gflops(), 66900);
  EXPECT_DOUBLE_EQ(h200.bandwidth_gbs(), 4800);
  EXPECT_DOUBLE_EQ(h200.features()[0], 66900);
  // A CPU probe has no spec peak: its measured rates.
  const DeviceRecord cpu =
      load_device_spec(std::string(SCALEDL_SOURCE_DIR) + "/datasets/cpu-intel/probe.json");
  ASSERT_EQ(cpu.peak_fp32_gflops, 0);
  EXPECT_DOUBLE_EQ(cpu.compute_gflops(), cpu.measured_gflops);
  EXPECT_DOUBLE_EQ(cpu.bandwidth_gbs(), cpu.measured_bw_gbs);
}

TEST(DeviceSpecs, ASpecWithoutItsPeakRatesIsRefused) {
  nlohmann::json j = read_json_file(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/h100-sxm.json");
  j.erase("peak_fp32_gflops");
  EXPECT_NE(error_of([&] { DeviceRecord::from_json(j, "h100"); }).find("peak_fp32_gflops"),
            std::string::npos);
  j = read_json_file(std::string(SCALEDL_SOURCE_DIR) + "/models/devices/h100-sxm.json");
  j["peak_mem_bw_gbs"] = 0;
  EXPECT_NE(error_of([&] { DeviceRecord::from_json(j, "h100"); }).find("peak_mem_bw_gbs"), std::string::npos);
  // NeuSight's format: SingleFLOPs missing.
  const nlohmann::json ns =
      nlohmann::json::parse(R"({"Device":"X","Dev_Mem":16,"Mem_Bw":300,"Num_Sm":40,"Freq":1500})");
  EXPECT_NE(error_of([&] { DeviceRecord::from_json(ns, "x"); }).find("x.SingleFLOPs is missing"),
            std::string::npos);
}

TEST(DeviceSpecs, MemoryFamilyFromTheSpecOrTheName) {
  // Every shipped spec names its memory, and the name of a known GPU says the same.
  const fs::path dir = fs::path(SCALEDL_SOURCE_DIR) / "models" / "devices";
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    DeviceRecord d = load_device_spec(e.path().string());
    ASSERT_FALSE(d.memory_type.empty());
    const std::string fam = memory_family(d);
    EXPECT_TRUE(fam == "hbm" || fam == "gddr") << fam;
    d.memory_type.clear();
    EXPECT_EQ(memory_family(d), fam) << d.name;
  }
  DeviceRecord d;
  d.kind = "spec";
  for (const char* n :
       {"NVIDIA A100-PCIE-40GB", "Tesla P100-PCIE-16GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200"}) {
    d.name = n;
    EXPECT_EQ(memory_family(d), "hbm") << n;
  }
  for (const char* n : {"Tesla T4", "Tesla P4", "NVIDIA L40S", "NVIDIA A10", "NVIDIA GeForce RTX 4090"}) {
    d.name = n;
    EXPECT_EQ(memory_family(d), "gddr") << n;
  }
  d.name = "Some Accelerator";
  EXPECT_EQ(memory_family(d), "");
  d.memory_type = "GDDR6";  // the spec's own word wins over the name
  d.name = "NVIDIA A100 with a typo";
  EXPECT_EQ(memory_family(d), "gddr");
  DeviceRecord cpu;
  cpu.kind = "cpu";
  cpu.name = "AMD EPYC (2 threads)";
  EXPECT_EQ(memory_family(cpu), "");
  // Written only when set; a value that is no memory technology is an error naming the key.
  EXPECT_FALSE(cpu.to_json().contains("memory_type"));
  nlohmann::json j = load_device_spec((dir / "l4.json").string()).to_json();
  EXPECT_EQ(j["memory_type"], "GDDR6");
  EXPECT_EQ(DeviceRecord::from_json(j).memory_type, "GDDR6");
  j["memory_type"] = "SRAM";
  EXPECT_NE(error_of([&] {
              DeviceRecord::from_json(j, "l4");
            }).find("l4.memory_type=\"SRAM\" is not a memory technology"),
            std::string::npos);
  j["memory_type"] = 6;
  EXPECT_NE(error_of([&] { DeviceRecord::from_json(j, "l4"); }).find("memory_type"), std::string::npos);
}
