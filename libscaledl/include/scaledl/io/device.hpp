#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The device record h^dev (ScaleDL eq. 7, PreNeT §3): what a device can do,
// from its spec sheet and/or measured by `scaledl probe`. A GPU the user does
// not have can be described by a spec JSON (NeuSight device_configs format or
// our own to_json()).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace scaledl {

struct DeviceRecord {
  std::string name;             ///< e.g. "NVIDIA H100 80GB HBM3", "Intel Xeon ... (2 threads)"
  std::string kind;             ///< "cpu", "cuda" or "spec" (described, not probed)
  int64_t cores = 0;            ///< CPU threads used or GPU streaming multiprocessors
  double clock_mhz = 0;         ///< boost/max clock, MHz; 0 = unknown
  double mem_gb = 0;            ///< device memory capacity, GB; 0 = unknown
  double l2_mb = 0;             ///< last-level cache, MB; 0 = unknown
  double peak_fp32_gflops = 0;  ///< spec-sheet peak FP32, GFLOP/s; 0 = unknown
  double peak_tf32_gflops = 0;  ///< spec-sheet dense TF32 tensor-core, GFLOP/s; 0 = unknown
  double peak_bf16_gflops = 0;  ///< spec-sheet dense BF16/FP16 tensor-core, GFLOP/s; 0 = unknown
  double peak_mem_bw_gbs = 0;   ///< spec-sheet memory bandwidth, GB/s; 0 = unknown
  /// spec-sheet dense FP8 (E4M3) tensor-core rate, GFLOP/s; 0 = the part has none (Ampere
  /// and older) or it is unknown. FP4 rates, where a part has them, go in extra.peak_fp4_gflops
  /// (noted, not modelled). Not among features(): bundles' h^dev columns are unchanged.
  double peak_fp8_gflops = 0;
  double measured_gflops = 0;  ///< measured FP32 matmul rate, GFLOP/s; 0 = not measured
  double measured_bw_gbs = 0;  ///< measured copy bandwidth (read+write), GB/s; 0 = not measured
  /// Clock a power-limited part holds under sustained load (L4 72 W, T4 70 W), MHz;
  /// 0 = unknown (the boost clock is held). When set, a spec's FP32 peak is scaled
  /// by sustained / boost in compute_gflops(). Where the figure comes from goes in
  /// extra.source. Must be <= clock_mhz.
  double sustained_clock_mhz = 0;
  /// Memory technology of the spec sheet ("HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR5",
  /// "GDDR6", "GDDR6X", ...); "" = not given (memory_family() then reads the name)
  std::string memory_type;
  nlohmann::json extra;  ///< free-form details (driver, versions, source, tdp_w); not used as features

  nlohmann::json to_json() const;
  /// Accepts our own format or NeuSight's device_configs format; throws naming the key.
  static DeviceRecord from_json(const nlohmann::json& j, const std::string& ctx = "device");
  /// FP32 compute rate of the rooflines and features, GFLOP/s: the spec peak where the
  /// record has one (scaled by sustained_clock_mhz / clock_mhz when a sustained clock
  /// is given), else the measured rate (CPU probes). Since 2026-11-26 a probed GPU's
  /// measured rate no longer replaces its spec peak: the layer models learn one
  /// quantity, the share of the spec peak, for spec-described and probed GPUs alike
  /// (docs/unseen-gpu.md); TrainOptions::spec_rates marks models trained so.
  double compute_gflops() const;
  /// Bandwidth of the rooflines and features: the spec peak where known, else measured (GB/s).
  double bandwidth_gbs() const;
  /// h^dev as a fixed-length numeric vector (see feature_names()).
  std::vector<double> features() const;
  static const std::vector<std::string>& feature_names();
  /// Key used in the store: name + kind.
  std::string key() const { return kind + ":" + name; }
  /// extra.compute_capability ("7.5", as `scaledl probe` writes it and spec sheets under
  /// models/devices/ give it) as 7.5; 0 = not given (CPU records, older records).
  double compute_capability() const;
};

/// "MAJOR.MINOR" (e.g. "8.9") as MAJOR + MINOR / 10; 0 for anything else.
double compute_capability_of(const std::string& text);

/// Reads a device spec JSON file (either format).
DeviceRecord load_device_spec(const std::string& path);

/// "hbm" or "gddr": the record's memory_type, else what its name says of a known NVIDIA
/// GPU (A100, A30, H100, H200, H800, B100, B200, V100, P100 have HBM; T4, P4, P40, L4,
/// L40, A10, A16, A40, RTX, GeForce, Quadro parts GDDR); "" for any other record
/// (CPUs, unknown names). HBM sustains a larger share of its spec bandwidth than GDDR on
/// the GPUs we have rows of (docs/unseen-gpu.md, "Sustained bandwidth").
std::string memory_family(const DeviceRecord& d);

}  // namespace scaledl
