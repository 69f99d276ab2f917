#include "scaledl/io/device.hpp"

#include <cctype>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

nlohmann::json DeviceRecord::to_json() const {
  nlohmann::json j = {{"name", name},
                      {"kind", kind},
                      {"cores", cores},
                      {"clock_mhz", clock_mhz},
                      {"mem_gb", mem_gb},
                      {"l2_mb", l2_mb},
                      {"peak_fp32_gflops", peak_fp32_gflops},
                      {"peak_tf32_gflops", peak_tf32_gflops},
                      {"peak_bf16_gflops", peak_bf16_gflops},
                      {"peak_mem_bw_gbs", peak_mem_bw_gbs},
                      {"measured_gflops", measured_gflops},
                      {"measured_bw_gbs", measured_bw_gbs},
                      {"extra", extra.is_null() ? nlohmann::json::object() : extra}};
  if (sustained_clock_mhz > 0)
    j["sustained_clock_mhz"] = sustained_clock_mhz;                 // only then: earlier records unchanged
  if (!memory_type.empty()) j["memory_type"] = memory_type;         // likewise
  if (peak_fp8_gflops > 0) j["peak_fp8_gflops"] = peak_fp8_gflops;  // likewise
  return j;
}

DeviceRecord DeviceRecord::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object", ctx);
  DeviceRecord d;
  constexpr double kBig = 1e9;
  // Rates are 0 (unknown) or physically plausible for any device from a small
  // CPU to a future GPU; anything else is a typo that would turn every
  // prediction into nonsense far from here.
  constexpr double kMinGflops = 0.01, kMaxGflops = 1e8;  // 10 MFLOP/s .. 100 PFLOP/s
  constexpr double kMinGbs = 0.01, kMaxGbs = 1e6;        // 10 MB/s .. 1 PB/s
  auto rate = [&](const char* key, double lo, double hi, const char* unit) {
    const double v = get_num_or(j, key, ctx, 0, hi, 0);
    SCALEDL_CHECK(v == 0 || v >= lo, "{}.{}={} {} is implausible: give 0 (unknown) or a value in [{}, {}]",
                  ctx, key, v, unit, lo, hi);
    return v;
  };
  if (j.contains("Device")) {  // NeuSight device_configs format (spec sheet)
    d.name = get_str_or(j, "Device", ctx, "");
    SCALEDL_CHECK(!d.name.empty(), "{}.Device is empty", ctx);
    d.kind = "spec";
    d.mem_gb = get_num_or(j, "Dev_Mem", ctx, 0.001, kBig, 0);
    d.peak_mem_bw_gbs = rate("Mem_Bw", kMinGbs, kMaxGbs, "GB/s");
    d.cores = get_int_or(j, "Num_Sm", ctx, 1, 1 << 20, 0);
    d.clock_mhz = get_num_or(j, "Freq", ctx, 1, 1e5, 0);
    d.peak_fp32_gflops = rate("SingleFLOPs", kMinGflops, kMaxGflops, "GFLOP/s");
    d.l2_mb = get_num_or(j, "L2Cache", ctx, 0, 1e6, 0);
    SCALEDL_CHECK(d.peak_fp32_gflops > 0, "{}.SingleFLOPs is missing: a spec needs the FP32 peak", ctx);
    SCALEDL_CHECK(d.peak_mem_bw_gbs > 0, "{}.Mem_Bw is missing: a spec needs the memory bandwidth", ctx);
    d.extra = {{"core_per_sm", get_int_or(j, "Core_Per_SM", ctx, 1, 1 << 20, 0)}};
    return d;
  }
  d.name = get_str_or(j, "name", ctx, "");
  SCALEDL_CHECK(!d.name.empty(), "{}.name is missing", ctx);
  d.kind = get_str_or(j, "kind", ctx, "spec");
  SCALEDL_CHECK(d.kind == "cpu" || d.kind == "cuda" || d.kind == "spec",
                "{}.kind=\"{}\" is not a device kind (cpu, cuda or spec)", ctx, d.kind);
  d.cores = get_int_or(j, "cores", ctx, 0, 1 << 20, 0);
  d.clock_mhz = get_num_or(j, "clock_mhz", ctx, 0, 1e5, 0);
  d.mem_gb = get_num_or(j, "mem_gb", ctx, 0, kBig, 0);
  d.l2_mb = get_num_or(j, "l2_mb", ctx, 0, 1e6, 0);
  d.peak_fp32_gflops = rate("peak_fp32_gflops", kMinGflops, kMaxGflops, "GFLOP/s");
  d.peak_tf32_gflops = rate("peak_tf32_gflops", kMinGflops, kMaxGflops, "GFLOP/s");
  d.peak_bf16_gflops = rate("peak_bf16_gflops", kMinGflops, kMaxGflops, "GFLOP/s");
  d.peak_mem_bw_gbs = rate("peak_mem_bw_gbs", kMinGbs, kMaxGbs, "GB/s");
  d.peak_fp8_gflops = rate("peak_fp8_gflops", kMinGflops, kMaxGflops, "GFLOP/s");
  d.measured_gflops = rate("measured_gflops", kMinGflops, kMaxGflops, "GFLOP/s");
  d.measured_bw_gbs = rate("measured_bw_gbs", kMinGbs, kMaxGbs, "GB/s");
  if (j.contains("extra")) d.extra = j.at("extra");
  d.sustained_clock_mhz = get_num_or(j, "sustained_clock_mhz", ctx, 0, 1e5, 0);
  SCALEDL_CHECK(d.sustained_clock_mhz == 0 || (d.clock_mhz > 0 && d.sustained_clock_mhz <= d.clock_mhz),
                "{}.sustained_clock_mhz={} must be at most clock_mhz={} (the boost clock) and needs it", ctx,
                d.sustained_clock_mhz, d.clock_mhz);
  d.memory_type = get_str_or(j, "memory_type", ctx, "");
  SCALEDL_CHECK(d.memory_type.empty() || d.memory_type.rfind("HBM", 0) == 0 ||
                    d.memory_type.rfind("GDDR", 0) == 0 || d.memory_type.rfind("LPDDR", 0) == 0 ||
                    d.memory_type.rfind("DDR", 0) == 0,
                "{}.memory_type=\"{}\" is not a memory technology (HBM..., GDDR..., LPDDR... or DDR...)", ctx,
                d.memory_type);
  SCALEDL_CHECK(d.compute_gflops() > 0, "{}: neither measured_gflops nor peak_fp32_gflops is set", ctx);
  SCALEDL_CHECK(d.bandwidth_gbs() > 0, "{}: neither measured_bw_gbs nor peak_mem_bw_gbs is set", ctx);
  return d;
}

double DeviceRecord::compute_gflops() const {
  if (peak_fp32_gflops <= 0) return measured_gflops;
  // A power-limited part holds its sustained clock, not its boost clock, under load.
  if (sustained_clock_mhz > 0 && clock_mhz > 0) return peak_fp32_gflops * sustained_clock_mhz / clock_mhz;
  return peak_fp32_gflops;
}
double compute_capability_of(const std::string& text) {
  const auto dot = text.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 >= text.size() || text.size() > 8) return 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (i != dot && !std::isdigit(static_cast<unsigned char>(text[i]))) return 0;
  const int major = std::stoi(text.substr(0, dot)), minor = std::stoi(text.substr(dot + 1));
  return minor < 10 ? major + minor / 10.0 : 0;
}

double DeviceRecord::compute_capability() const {
  if (!extra.is_object() || !extra.contains("compute_capability")) return 0;
  const auto& v = extra.at("compute_capability");
  return v.is_string() ? compute_capability_of(v.get<std::string>()) : 0;
}

double DeviceRecord::bandwidth_gbs() const {
  return peak_mem_bw_gbs > 0 ? peak_mem_bw_gbs : measured_bw_gbs;
}

const std::vector<std::string>& DeviceRecord::feature_names() {
  static const std::vector<std::string> n = {"dev_gflops",    "dev_bw_gbs", "dev_cores",
                                             "dev_clock_mhz", "dev_mem_gb", "dev_l2_mb"};
  return n;
}

std::vector<double> DeviceRecord::features() const {
  return {compute_gflops(), bandwidth_gbs(), static_cast<double>(cores), clock_mhz, mem_gb, l2_mb};
}

DeviceRecord load_device_spec(const std::string& path) {
  return DeviceRecord::from_json(read_json_file(path), path);
}

std::string memory_family(const DeviceRecord& d) {
  if (d.memory_type.rfind("HBM", 0) == 0) return "hbm";
  if (d.memory_type.rfind("GDDR", 0) == 0) return "gddr";
  if (!d.memory_type.empty() || d.kind == "cpu") return "";
  // HBM names first: "A100" holds "A10", "H100" nothing of the GDDR list.
  for (const char* n : {"A100", "A800", "A30", "H100", "H200", "H800", "H20", "B100", "B200", "B300", "GB200",
                        "GB300", "GH200", "V100", "P100"})
    if (d.name.find(n) != std::string::npos) return "hbm";
  for (const char* n : {"T4", "P4", "P40", "L4", "L40", "A10", "A16", "A40", "RTX", "GeForce", "Quadro"})
    if (d.name.find(n) != std::string::npos) return "gddr";
  return "";
}

}  // namespace scaledl
