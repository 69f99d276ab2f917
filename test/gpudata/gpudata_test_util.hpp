#pragma once
// What the importers' tests share: their options on a root with the shipped spec sheets, and a
// count of a summary's map.
#include <map>
#include <string>

#include "scaledl/gpudata/gpudata.hpp"

namespace scaledl::test {

/// Import options of `root` with the spec sheets of models/devices.
inline GpuImportOptions gpu_import_options(const std::string& root) {
  GpuImportOptions o;
  o.root = root;
  o.devices_dir = std::string(SCALEDL_SOURCE_DIR) + "/models/devices";
  return o;
}

/// m[key], 0 when absent (a summary's refused, skipped or per_kind map).
inline size_t count_of(const std::map<std::string, size_t>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

}  // namespace scaledl::test
