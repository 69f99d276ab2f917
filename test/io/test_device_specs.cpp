// The spec sheets shipped under models/devices (README there) and the device
// record's sustained clock and spec checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;
namespace fs = std::filesystem;

namespace {

// FP32 lanes per SM of an NVIDIA part by its compute capability (NVIDIA's CUDA GPUs list), the
// capabilities a shipped spec may have: 64 on GP100 (6.0), Volta (7.0), Turing (7.5) and GA100 (8.0:
// A100, A30); 128 on Maxwell (5.x: GM200), GP102/GP104 (6.1), GA10x (8.6), Ada (8.9), Hopper (9.0) and
// Blackwell (10.x data centre, 12.0 workstation and GeForce).
const std::map<std::string, double> kNvidiaLanesByCc = {
    {"5.0", 128}, {"5.2", 128}, {"6.0", 64},  {"6.1", 128},  {"7.0", 64},   {"7.5", 64},  {"8.0", 64},
    {"8.6", 128}, {"8.9", 128}, {"9.0", 128}, {"10.0", 128}, {"10.3", 128}, {"12.0", 128}};

// FP32 lanes per compute unit (AMD) or Xe core (Intel) by extra.architecture; 0 = not in the table.
// AMD GCN 5 (Vega 10: MI25, Vega FE): 64 lanes, 128 FP32 FLOP per CU and clock. CDNA 2-4: 256 FP32
// FLOP per CU and clock = 64 lanes x 2 (packed FP32) = 128: AMD's "vector FP32" of CDNA 3 and 4 counts
// packed FP32 (MI300X 163.4 TFLOPS = 304 CUs x 256 x 2.1 GHz); CDNA 2's "vector FP32" does not
// (MI250X 128 per CU), but its packed and matrix FP32 run at 256, which FP32 GEMMs use (KernelBench's
// FP32 matmuls on one MI250X GCD reach 31.9 TFLOP/s, above the 23.9 of 128 per CU). Intel Xe2: 8 vector
// engines x SIMD16 = 128 lanes per Xe core.
double non_nvidia_lanes(const std::string& vendor, const std::string& arch) {
  auto starts = [&](const char* p) { return arch.rfind(p, 0) == 0; };
  if (vendor == "AMD" && starts("GCN 5")) return 64;
  if (vendor == "AMD" && (starts("CDNA 2") || starts("CDNA 3") || starts("CDNA 4"))) return 128;
  if (vendor == "Intel" && starts("Xe2")) return 128;
  return 0;
}

}  // namespace

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
    if (d.peak_fp8_gflops > 0) EXPECT_GE(d.peak_fp8_gflops, d.peak_bf16_gflops);
    if (d.extra.contains("peak_fp4_gflops")) {
      ASSERT_TRUE(d.extra["peak_fp4_gflops"].is_number());
      EXPECT_GE(d.extra["peak_fp4_gflops"].get<double>(), std::max(d.peak_fp8_gflops, d.peak_bf16_gflops));
    }
    // extra.vendor: NVIDIA where absent (the files of before 2026-12); the source names the vendor's
    // datasheets, product pages or whitepapers.
    const std::string vendor = d.extra.value("vendor", std::string("NVIDIA"));
    EXPECT_TRUE(vendor == "NVIDIA" || vendor == "AMD" || vendor == "Intel") << vendor;
    EXPECT_TRUE(d.extra.contains("source") && d.extra["source"].is_string() &&
                d.extra["source"].get<std::string>().find(vendor) != std::string::npos);
    // FP32 peak = 2 x cores x FP32 lanes per core x boost clock, within 1 %, cores being SMs, CUs or
    // Xe cores and the lanes those of the part's architecture (tables above).
    double want = 0;
    if (vendor == "NVIDIA") {
      // Every NVIDIA part carries its compute capability, one of the table's; no `modelled` note.
      const std::string cc = d.extra.value("compute_capability", std::string());
      ASSERT_EQ(kNvidiaLanesByCc.count(cc), 1u) << "compute_capability=\"" << cc << "\"";
      EXPECT_GT(d.compute_capability(), 0);
      EXPECT_FALSE(d.extra.contains("modelled"));
      want = kNvidiaLanesByCc.at(cc);
      // FP8 tensor cores came with Ada (8.9) and Hopper; FP4 with Blackwell (10.x, 12.0).
      if (d.compute_capability() < 8.9) EXPECT_EQ(d.peak_fp8_gflops, 0) << cc;
      if (d.compute_capability() < 10.0) EXPECT_FALSE(d.extra.contains("peak_fp4_gflops")) << cc;
    } else {
      // AMD and Intel parts: no CUDA compute capability; their architecture, and one sentence on what a
      // prediction for them models (their vendor libraries are in little or none of the training data).
      EXPECT_FALSE(d.extra.contains("compute_capability"));
      EXPECT_EQ(d.compute_capability(), 0);
      EXPECT_TRUE(d.extra.contains("modelled") && d.extra["modelled"].is_string() &&
                  !d.extra["modelled"].get<std::string>().empty());
      want = non_nvidia_lanes(vendor, d.extra.value("architecture", std::string()));
      ASSERT_GT(want, 0) << "architecture not in the lanes table";
    }
    const double lanes = d.peak_fp32_gflops * 1e3 / (2 * d.cores * d.clock_mhz);
    EXPECT_NEAR(lanes, want, 0.01 * want) << d.name;
  }
  // 13 of 2026-11; of 2026-12 17 workstation, consumer, older, AMD and Intel parts and 14 NVIDIA data
  // centre parts (Blackwell, Hopper variants, A40, A30, A10G, L40, P100, P4).
  EXPECT_GE(n, 44);
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
  // Every shipped spec names its memory, and the name of a GPU memory_family knows says the same (it
  // knows no AMD or Intel names nor some older and newer NVIDIA ones: Tesla M40, TITAN Xp, B300; their
  // specs give memory_type, so the name is not read).
  const fs::path dir = fs::path(SCALEDL_SOURCE_DIR) / "models" / "devices";
  int known = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    DeviceRecord d = load_device_spec(e.path().string());
    ASSERT_FALSE(d.memory_type.empty());
    const std::string fam = memory_family(d);
    EXPECT_TRUE(fam == "hbm" || fam == "gddr") << fam;
    d.memory_type.clear();
    const std::string by_name = memory_family(d);
    EXPECT_TRUE(by_name == fam || by_name.empty()) << d.name << ": " << by_name;
    if (!by_name.empty()) ++known;
  }
  EXPECT_GE(known, 13);  // at least the 13 NVIDIA specs of 2026-11
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
