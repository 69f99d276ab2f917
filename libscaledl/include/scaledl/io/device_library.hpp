#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The shipped spec sheets by name: `--device-spec h100-sxm` is models/devices/h100-sxm.json, and
// `scaledl devices` lists them. A value that names a file is that file.
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

}  // namespace scaledl
