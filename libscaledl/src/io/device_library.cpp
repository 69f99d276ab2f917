// The shipped spec sheets by name (device_library.hpp).
#include "scaledl/io/device_library.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

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
       names.empty()
           ? fmt::format(
                 "no spec sheets in any of {}: give a file, or set SCALEDL_MODELS to the models folder",
                 fmt::join(dirs, ", "))
           : fmt::format("one of {}", fmt::join(names, ", ")));
}

std::vector<DeviceSheet> list_device_specs(const std::vector<std::string>& dirs) {
  std::vector<DeviceSheet> out;
  for (const auto& f : sheet_files(dirs))
    out.push_back({f.stem().string(), f.string(), load_device_spec(f.string())});
  return out;
}

const GpuPrice* PriceTable::find(const std::string& device_spec) const {
  auto it = gpus.find(device_spec);
  if (it == gpus.end()) it = gpus.find(fs::path(device_spec).stem().string());
  return it == gpus.end() ? nullptr : &it->second;
}

std::string PriceTable::describe(const std::string& device_spec) const {
  const GpuPrice* p = find(device_spec);
  if (!p) return "";
  return fmt::format("{} {:.2f} per GPU hour ({}{})", currency, p->per_gpu_hour, path,
                     date.empty() ? std::string() : ", " + date);
}

PriceTable load_price_table(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  SCALEDL_CHECK(j.is_object(), "{}: a price table is a JSON object, got {}", path, show(j));
  PriceTable t;
  t.path = path;
  t.currency = get_str_or(j, "currency", path, t.currency);
  t.date = get_str_or(j, "date", path, "");
  t.source = get_str_or(j, "source", path, "");
  t.caution = get_str_or(j, "caution", path, "");
  SCALEDL_CHECK(j.contains("gpus") && j["gpus"].is_object() && !j["gpus"].empty(),
                "{}: \"gpus\" must be an object of sheet name -> {{\"per_gpu_hour\": X}}", path);
  for (const auto& [name, v] : j["gpus"].items()) {
    const std::string ctx = fmt::format("{}: gpus.{}", path, name);
    SCALEDL_CHECK(v.is_object(), "{} must be an object, got {}", ctx, show(v));
    GpuPrice g;
    for (const auto& [k, x] : v.items()) {
      if (k == "usd_per_gpu_hour" || k == "per_gpu_hour") {
        SCALEDL_CHECK(x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() > 0,
                      "{}.{}={} must be a price > 0", ctx, k, show(x));
        g.per_gpu_hour = x.get<double>();
      } else if (k == "instance") {
        SCALEDL_CHECK(x.is_string(), "{}.instance must be a string, got {}", ctx, show(x));
        g.instance = x.get<std::string>();
      } else {
        fail("{}.{} is not a price key (per_gpu_hour or usd_per_gpu_hour, instance)", ctx, k);
      }
    }
    SCALEDL_CHECK(g.per_gpu_hour > 0, "{} has no price (per_gpu_hour)", ctx);
    t.gpus[name] = g;
  }
  return t;
}

std::optional<PriceTable> shipped_price_table(const std::vector<std::string>& dirs) {
  std::error_code ec;
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d).parent_path() / "prices.json";
    if (fs::is_regular_file(p, ec)) return load_price_table(p.lexically_normal().string());
  }
  return std::nullopt;
}

std::string shipped_bundle_dir(bool cpu, const std::vector<std::string>& dirs) {
  const std::string name = cpu ? "cpu" : "default";
  std::error_code ec;
  for (const std::string& d : dirs) {
    const fs::path b = fs::path(d).parent_path() / "bundles" / name;
    if (fs::is_regular_file(b / "manifest.json", ec)) return b.string();
  }
  SCALEDL_CHECK(!cpu,
                "no --bundle and no CPU bundle (models/bundles/cpu): build it from the committed CPU "
                "campaigns with scripts/build_cpu_bundle.sh (about 2 min), or give --bundle DIR");
  fail("no --bundle and no shipped default bundle (models/bundles/default) beside {}: give --bundle DIR",
       fmt::join(dirs, ", "));
}

}  // namespace scaledl
