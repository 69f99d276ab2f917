// What the GPU-data importers share (gpudata.hpp): spec catalogue, provenance,
// the plausibility check and the one-transaction writer.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/gpudata/gpudata.hpp"
#include "scaledl/learn/layer_features.hpp"

namespace scaledl {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Lower case, runs of spaces, '_' and '-' as one space, trimmed: "NVIDIA_A100-SXM4" ~ "nvidia a100 sxm4".
std::string normalise(const std::string& s) {
  std::string out;
  bool sep = false;
  for (char c : s) {
    if (c == ' ' || c == '_' || c == '-' || c == '\t') {
      sep = !out.empty();
      continue;
    }
    if (sep) out += ' ';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

nlohmann::json Provenance::to_json() const {
  return {{"provenance",
           {{"source", source},
            {"repository", repository},
            {"commit", commit},
            {"license", license},
            {"framework", framework},
            {"timed", timed}}}};
}

SpecCatalog::SpecCatalog(const std::string& dir) {
  namespace fs = std::filesystem;
  SCALEDL_CHECK(fs::is_directory(dir), "--devices=\"{}\" is not a folder of spec sheets", dir);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    DeviceRecord d = load_device_spec(f);
    std::vector<std::string> names = {d.name};
    if (d.extra.is_object() && d.extra.contains("aliases")) {
      const auto& a = d.extra.at("aliases");
      SCALEDL_CHECK(a.is_array(), "{}: extra.aliases must be an array of names", f);
      for (const auto& n : a) {
        SCALEDL_CHECK(n.is_string(), "{}: extra.aliases must be an array of names", f);
        names.push_back(n.get<std::string>());
      }
    }
    const size_t idx = records_.size();
    records_.push_back(std::move(d));
    for (const auto& n : names) {
      const auto [it, fresh] = by_name_.emplace(normalise(n), idx);
      SCALEDL_CHECK(fresh || it->second == idx, "{}: the name \"{}\" is also given by the spec of \"{}\"", f,
                    n, records_[it->second].name);
    }
  }
}

const DeviceRecord* SpecCatalog::find(const std::string& name) const {
  const auto it = by_name_.find(normalise(name));
  return it == by_name_.end() ? nullptr : &records_[it->second];
}

std::string implausible_layer_row(const LayerMeasurement& m, const DeviceRecord& dev, double tolerance) {
  auto bad_time = [](const TimingStats& t) { return !std::isfinite(t.median_ms) || t.median_ms <= 0; };
  if (bad_time(m.fwd)) return "time not positive and finite";
  const bool has_bwd = !std::isnan(m.bwd.median_ms);
  if (has_bwd && bad_time(m.bwd)) return "time not positive and finite";
  const LayerCost c = layer_cost(m.type, m.dims, m.dtype);
  FeatureOptions fo;
  fo.dtype_rates = true;
  std::vector<std::pair<Direction, double>> dirs = {{Direction::Forward, m.fwd.median_ms}};
  if (has_bwd) dirs.emplace_back(Direction::Backward, m.bwd.median_ms);
  for (const auto& [dir, ms] : dirs) {
    FeatureWriter w(m.type, m.dtype, dir, dev, fo);
    w.write(m.dims.data(), nullptr);
    if (w.peak_floor_ms() > 0 && ms * (1 + tolerance) < w.peak_floor_ms())
      return fmt::format("faster than the {} spec peak by more than {:.0f} %", to_string(m.dtype),
                         100 * tolerance);
    // An embedding lookup reads the rows it gathers, not the table that traffic_bytes counts.
    const double bytes =
        m.type == LayerType::Embedding ? c.in_bytes + 2 * c.out_bytes : traffic_bytes(c, dir);
    const double bw = dev.peak_mem_bw_gbs > 0 ? dev.peak_mem_bw_gbs : dev.bandwidth_gbs();
    if (bw > 0 && bytes > 2 * dev.l2_mb * 1e6 && ms * (1 + tolerance) < bytes / (bw * 1e6))
      return fmt::format("faster than the spec bandwidth by more than {:.0f} %", 100 * tolerance);
  }
  return "";
}

size_t GpuImportSummary::refused_total() const {
  size_t n = 0;
  for (const auto& [k, v] : refused) n += v;
  return n;
}

nlohmann::json GpuImportSummary::to_json() const {
  return {{"source", source},
          {"files", files},
          {"rows", rows},
          {"layer_rows", layer_rows},
          {"layers_inserted", layers_inserted},
          {"collective_rows", collective_rows},
          {"collectives_inserted", collectives_inserted},
          {"refused", refused},
          {"refused_total", refused_total()},
          {"skipped", skipped},
          {"per_device", per_device},
          {"per_kind", per_kind},
          {"seconds", seconds}};
}

std::string GpuImportSummary::to_text() const {
  std::string s = fmt::format(
      "{}: {} files, {} rows: {} layer rows ({} new), {} collective rows ({} new), {} refused, {:.2f} s\n",
      source, files, rows, layer_rows, layers_inserted, collective_rows, collectives_inserted,
      refused_total(), seconds);
  for (const auto& [k, n] : per_device) s += fmt::format("  {:<52} {:>7} rows\n", k, n);
  for (const auto& [k, n] : per_kind) s += fmt::format("  {:<52} {:>7} rows\n", k, n);
  for (const auto& [k, n] : refused) s += fmt::format("  refused {:>7} rows: {}\n", n, k);
  for (const auto& [k, n] : skipped)
    s += fmt::format("  skipped {:>7} rows: {} (no layer type of ours)\n", n, k);
  return s;
}

GpuImport::GpuImport(std::string source, const GpuImportOptions& opt)
    : source_(std::move(source)), opt_(opt), catalog_(opt.devices_dir), t0_(now_s()) {
  SCALEDL_CHECK(std::isfinite(opt.tolerance) && opt.tolerance >= 0 && opt.tolerance <= 1,
                "--tolerance={} is not a share in [0, 1]", opt.tolerance);
  if (opt_.campaign.empty()) opt_.campaign = source_;
  sum_.source = source_;
}

const DeviceRecord* GpuImport::device_or_refuse(const std::string& name) {
  if (name.empty()) {
    refuse("no GPU name");
    return nullptr;
  }
  const DeviceRecord* dev = device(name);
  if (!dev) refuse(no_spec_sheet(name));
  return dev;
}

bool GpuImport::add_layer(LayerMeasurement m, const DeviceRecord& dev, const Provenance& prov) {
  validate_dims(m.type, m.dims);
  if (m.campaign.empty()) m.campaign = opt_.campaign;
  m.device = dev.key();
  m.source = source_;
  if (const std::string why = implausible_layer_row(m, dev, opt_.tolerance); !why.empty()) {
    refuse(why);
    return false;
  }
  const std::string pk = keep(dev, prov);
  ++sum_.layer_rows;
  ++sum_.per_kind[fmt::format("{} {}{} {}", to_string(m.type), "fwd",
                              std::isnan(m.bwd.median_ms) ? "" : "+bwd", to_string(m.dtype))];
  layers_.emplace_back(pk, std::move(m));
  return true;
}

bool GpuImport::add_collective(CollectiveMeasurement c, const DeviceRecord& dev, const Provenance& prov) {
  if (!std::isfinite(c.time_s) || c.time_s <= 0 || !std::isfinite(c.bytes) || c.bytes <= 0 || c.world < 2) {
    refuse("collective: time, size or ranks not positive");
    return false;
  }
  if (c.campaign.empty() || c.campaign == "default") c.campaign = opt_.campaign;
  c.device = dev.key();
  c.source = source_;
  keep(dev, prov);
  ++sum_.collective_rows;
  collectives_.push_back(std::move(c));
  return true;
}

std::string GpuImport::keep(const DeviceRecord& dev, const Provenance& prov) {
  std::string pk = prov.to_json().dump();
  provs_.emplace(pk, prov);
  devices_.emplace(dev.key(), dev);
  ++sum_.per_device[dev.key()];
  return pk;
}

GpuImportSummary GpuImport::write(Store& store) {
  Store::Transaction tx(store);
  for (const auto& [k, d] : devices_) store.put_device(d);
  std::map<std::string, int64_t> env;
  for (const auto& [k, p] : provs_) env[k] = store.put_environment(p.to_json());
  std::vector<LayerMeasurement> ls;
  ls.reserve(layers_.size());
  for (auto& [k, m] : layers_) {
    m.env_id = env.at(k);
    ls.push_back(std::move(m));
  }
  sum_.layers_inserted = store.put_layers(ls);
  if (!collectives_.empty()) sum_.collectives_inserted = store.put_collectives(collectives_);
  tx.commit();
  layers_.clear();
  collectives_.clear();
  sum_.seconds = now_s() - t0_;
  return sum_;
}

}  // namespace scaledl
