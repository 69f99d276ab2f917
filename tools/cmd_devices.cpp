// scaledl devices: the shipped GPU spec sheets by name (`--device-spec NAME` takes any of them),
// with the figures a prediction reads from each.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/io/device_library.hpp"

namespace {

struct DevicesOptions {
  bool json = false;  ///< print the list as JSON
};

int run(const DevicesOptions& o) {
  using namespace scaledl;
  const std::vector<DeviceSheet> sheets = list_device_specs();
  SCALEDL_CHECK(!sheets.empty(), "no spec sheets found (looked in {}; set SCALEDL_MODELS to a models folder)",
                fmt::format("{}", fmt::join(device_spec_dirs(), ", ")));
  const std::optional<PriceTable> prices = shipped_price_table();
  auto price_of = [&](const std::string& name) -> const GpuPrice* {
    return prices ? prices->find(name) : nullptr;
  };
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& s : sheets) {
      j.push_back({{"name", s.name}, {"path", s.path}, {"device", s.record.to_json()}});
      if (const GpuPrice* p = price_of(s.name)) j.back()["price_per_gpu_hour"] = p->per_gpu_hour;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<22} {:<48} {:>7} {:>11} {:>10} {:>9} {:>8}\n", "name (--device-spec)", "GPU",
                           "mem GB", "BF16 TFLOPS", "FP8 TFLOPS", "mem GB/s", "$/GPU-h");
  for (const auto& s : sheets) {
    const DeviceRecord& d = s.record;
    const GpuPrice* p = price_of(s.name);
    std::cout << fmt::format("{:<22} {:<48} {:>7.0f} {:>11.0f} {:>10} {:>9.0f} {:>8}\n", s.name, d.name,
                             d.mem_gb, d.peak_bf16_gflops / 1e3,
                             d.peak_fp8_gflops > 0 ? fmt::format("{:.0f}", d.peak_fp8_gflops / 1e3) : "-",
                             d.peak_mem_bw_gbs, p ? fmt::format("{:.2f}", p->per_gpu_hour) : "-");
  }
  std::cout << fmt::format("{} sheets in {}\n", sheets.size(),
                           std::filesystem::path(sheets.front().path).parent_path().string());
  if (prices)
    std::cout << fmt::format("prices: {} per GPU hour, {} ({}); {}\n", prices->currency, prices->path,
                             prices->date, prices->caution);
  return 0;
}

static scaledl::cli::Registrar reg({"devices"}, "List the shipped GPU spec sheets (names for --device-spec)",
                                   [](CLI::App& app) {
                                     auto o = std::make_shared<DevicesOptions>();
                                     app.add_flag("--json", o->json, "print the list as JSON");
                                     return [o] { return run(*o); };
                                   });

}  // namespace
