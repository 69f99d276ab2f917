#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The shipped spec sheets by name: `--device-spec h100-sxm` is models/devices/h100-sxm.json, and
// `scaledl devices` lists them. A value that names a file is that file.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scaledl/io/device.hpp"

namespace scaledl {

/// The folders a sheet's name is looked up in, in order: $SCALEDL_MODELS/devices, ./models/devices,
/// and the install's share/scaledl/models/devices beside the running program's bin/.
std::vector<std::string> device_spec_dirs();

/// A --device-spec value as a path: a file (or a value with a '/' or ending in .json) as given,
/// else the sheet `<dir>/<value>.json` of the first of `dirs` that has it. Neither: an Error
/// naming `key` and the value and listing the sheets' names.
std::string find_device_spec(const std::string& value, const std::string& key = "--device-spec",
                             const std::vector<std::string>& dirs = device_spec_dirs());

/// One shipped sheet: its name (the file stem), path and record.
struct DeviceSheet {
  std::string name;
  std::string path;
  DeviceRecord record;
};
/// Every *.json sheet of the first of `dirs` that exists, sorted by name (an unreadable sheet is
/// an Error naming its file).
std::vector<DeviceSheet> list_device_specs(const std::vector<std::string>& dirs = device_spec_dirs());

/// The price of one GPU hour in a price table.
struct GpuPrice {
  double per_gpu_hour = 0;  ///< in the table's currency, > 0
  std::string instance;     ///< what was priced ("8x HGX H100, $49.24/h"), may be empty
};

/// GPU-hour prices by sheet name: models/prices.json (shipped, dated, with its source) or a user's
/// file of the same schema ({"currency", "date", "source", "gpus": {"<sheet>": {"usd_per_gpu_hour"
/// or "per_gpu_hour": X, "instance": "..."}}}).
struct PriceTable {
  std::string path, currency = "USD", date, source, caution;
  std::map<std::string, GpuPrice> gpus;
  /// The price of a --device-spec value (a sheet's name, or a path whose stem is one); nullptr
  /// when the table has none.
  const GpuPrice* find(const std::string& device_spec) const;
  /// "USD 6.16 per GPU hour (models/prices.json, 2026-02)" for the report.
  std::string describe(const std::string& device_spec) const;
};

/// Reads a price table; an Error naming the file and the key of anything malformed (a price that
/// is not a finite number > 0, an unknown key).
PriceTable load_price_table(const std::string& path);

/// The shipped table: prices.json in the parent of the first of `dirs` that holds one (beside
/// models/devices); nullopt when none is installed.
std::optional<PriceTable> shipped_price_table(const std::vector<std::string>& dirs = device_spec_dirs());

/// The bundle `predict` takes when none is given: bundles/default (trained on GPU data, for spec
/// sheets and probed GPUs) or, for a CPU (`cpu`), bundles/cpu, which scripts/build_cpu_bundle.sh
/// builds (it is not committed); in the parent of the first of `dirs` that has it (models/bundles
/// beside models/devices). Neither: an Error saying how to get one or to give --bundle.
std::string shipped_bundle_dir(bool cpu, const std::vector<std::string>& dirs = device_spec_dirs());

}  // namespace scaledl
