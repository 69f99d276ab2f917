// The shipped spec sheets by name (device_library.hpp).
#include "scaledl/io/device_library.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scaledl/core/error.hpp"

namespace scaledl {

namespace fs = std::filesystem;

std::vector<std::string> device_spec_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SCALEDL_MODELS"); env && *env)
    dirs.push_back((fs::path(env) / "devices").string());
  dirs.push_back("models/devices");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    dirs.push_back(
        (exe.parent_path() / ".." / "share" / "scaledl" / "models" / "devices").lexically_normal().string());
  return dirs;
}

namespace {
/// The sheet files of the first existing folder of `dirs`, sorted.
std::vector<fs::path> sheet_files(const std::vector<std::string>& dirs) {
  std::error_code ec;
  for (const std::string& d : dirs) {
    if (!fs::is_directory(d, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
  }
  return {};
}
}  // namespace

std::string find_device_spec(const std::string& value, const std::string& key,
                             const std::vector<std::string>& dirs) {
  std::error_code ec;
  const bool looks_like_path = value.find('/') != std::string::npos ||
                               (value.size() > 5 && value.compare(value.size() - 5, 5, ".json") == 0);
  if (value.empty() || looks_like_path || fs::exists(value, ec)) return value;
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / (value + ".json");
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  std::vector<std::string> names;
  for (const auto& f : sheet_files(dirs)) names.push_back(f.stem().string());
  fail("{}=\"{}\" is neither a file nor a shipped spec sheet ({}; `scaledl devices` lists them)", key, value,
       names.empty() ? std::string("no models/devices folder found: give a file")
                     : fmt::format("one of {}", fmt::join(names, ", ")));
}

std::vector<DeviceSheet> list_device_specs(const std::vector<std::string>& dirs) {
  std::vector<DeviceSheet> out;
  for (const auto& f : sheet_files(dirs))
    out.push_back({f.stem().string(), f.string(), load_device_spec(f.string())});
  return out;
}

}  // namespace scaledl
