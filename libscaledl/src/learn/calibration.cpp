// Per-operator calibration of a device from a few of its layer timings (calibration.hpp).
#include "scaledl/learn/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/stats.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/learn/layer_features.hpp"

namespace scaledl {

namespace {
using Key = std::tuple<LayerType, Direction, DType>;

/// Passively cooled cards of at most this TDP (P4 75 W, T4 70 W, L4 72 W) do not hold their
/// boost clock under load: the calibration's caution and the clock note of a spec.
constexpr double kLowPowerW = 75;

std::string key_name(const Key& k) {
  return fmt::format("{}.{}.{}", to_string(std::get<0>(k)), to_string(std::get<1>(k)),
                     to_string(std::get<2>(k)));
}

/// Whether a GEMM row has every dimension a multiple of `align` (other types: true).
bool aligned(const LayerSample& s, int64_t align) {
  double b = 0, m = 0, n = 0, k = 0;
  if (align <= 1 || !gemm_shape(s.type, s.dims.data(), b, m, n, k)) return true;
  const double a = static_cast<double>(align);
  return std::fmod(m, a) == 0 && std::fmod(n, a) == 0 && std::fmod(k, a) == 0;
}
}  // namespace

void CalibrationOptions::validate() const {
  SCALEDL_CHECK(std::isfinite(min_ms) && min_ms >= 0, "calibration min_ms={} must be >= 0", min_ms);
  SCALEDL_CHECK(align >= 1, "calibration align={} must be >= 1", align);
  SCALEDL_CHECK(min_rows >= 1, "calibration min_rows={} must be >= 1", min_rows);
  SCALEDL_CHECK(max_rows >= 0, "calibration max_rows={} must be >= 0", max_rows);
}

double LayerCalibration::factor(LayerType t, Direction dir, DType dtype) const {
  auto it = factors.find({t, dir, dtype});
  // A backward kernel without rows of its own: its forward kernel's factor (the same
  // device's efficiency on GEMMs and streams of the same shapes).
  if (it == factors.end() && dir == Direction::Backward) it = factors.find({t, Direction::Forward, dtype});
  return it == factors.end() ? 1.0 : std::exp(it->second.log_factor);
}

void LayerCalibration::apply(const LayerGraph& g, std::vector<double>& node_ms) const {
  SCALEDL_CHECK(node_ms.size() == g.nodes.size(), "calibration: {} node times for {} nodes", node_ms.size(),
                g.nodes.size());
  for (size_t i = 0; i < node_ms.size(); ++i)
    node_ms[i] *= factor(g.nodes[i].type, g.nodes[i].dir, g.nodes[i].dtype);
}

int64_t LayerCalibration::rows_used() const {
  int64_t used = 0;
  for (const auto& [k, v] : factors) used += v.rows;
  return used;
}

nlohmann::json LayerCalibration::to_json() const {
  nlohmann::json f = nlohmann::json::object();
  for (const auto& [k, v] : factors) f[key_name(k)] = {{"factor", std::exp(v.log_factor)}, {"rows", v.rows}};
  nlohmann::json j = {{"device", device},
                      {"source", source},
                      {"rows_in", rows_in},
                      {"rows_used", rows_used()},
                      {"factors", f}};
  if (!caution.empty()) j["caution"] = caution;
  return j;
}

double tdp_watts(const DeviceRecord& dev) {
  return dev.extra.is_object() && dev.extra.contains("tdp_w") && dev.extra["tdp_w"].is_number()
             ? dev.extra["tdp_w"].get<double>()
             : 0.0;
}

std::string clock_note(const DeviceRecord& dev) {
  if (dev.kind == "cpu" || dev.clock_mhz <= 0) return "";
  if (dev.sustained_clock_mhz > 0)
    return fmt::format(
        "{:g} MHz sustained of the {:g} MHz boost clock (the record's sustained_clock_mhz): compute "
        "rooflines at {:.3f} x the FP32 peak",
        dev.sustained_clock_mhz, dev.clock_mhz, dev.sustained_clock_mhz / dev.clock_mhz);
  const double tdp = tdp_watts(dev);
  if (tdp <= 0 || tdp > kLowPowerW) return "";
  return fmt::format(
      "the {:g} MHz boost clock is assumed held, which a {:g} W card does not do under load (a T4, "
      "70 W, is reported at ~900 MHz): where compute binds the prediction may be too fast; give the "
      "spec a measured sustained_clock_mhz (models/devices/README.md)",
      dev.clock_mhz, tdp);
}

LayerCalibration calibrate_layers(const LayerPredictor& lp, const std::vector<LayerSample>& rows,
                                  const DeviceRecord& dev, const CalibrationOptions& o) {
  o.validate();
  SCALEDL_CHECK(!rows.empty(), "calibration of {}: no layer rows", dev.key());
  std::map<std::string, DeviceRecord> devices;
  for (const auto& s : rows) {
    const size_t colon = s.device.find(':');
    const std::string name = colon == std::string::npos ? s.device : s.device.substr(colon + 1);
    SCALEDL_CHECK(name == dev.name, "calibration of {}: a row of device {} (another device)", dev.key(),
                  s.device);
    devices.emplace(s.device, dev);
  }
  // The times the layer models predict: kernel times when they learnt those, each row less
  // the host's timing floor, kept >= 1/10 of it (as kernel_time_samples() does). The floor is
  // the fastest row, but at most kMaxFloorMs: a calibration store may hold no row near the
  // floor (the hosts we know time 11-58 us), and its fastest GEMM is no floor.
  constexpr double kMaxFloorMs = 0.06;
  std::vector<LayerSample> timed = rows;
  if (lp.options().kernel_time && dev.kind != "cpu") {
    double floor = kMaxFloorMs;
    for (const auto& s : rows) floor = std::min(floor, s.ms);
    for (auto& s : timed) s.ms = std::max(s.ms - floor, 0.1 * s.ms);
  }
  std::map<Key, std::vector<const LayerSample*>> groups;
  for (const auto& s : timed)
    if (s.ms >= o.min_ms && aligned(s, o.align)) groups[{s.type, s.dir, s.dtype}].push_back(&s);
  LayerCalibration c;
  c.device = dev.key();
  c.rows_in = static_cast<int64_t>(rows.size());
  // Low-power cards: in leave-one-GPU-out the two of them (P4, T4) were further off
  // calibrated than from their spec sheets.
  const double tdp = tdp_watts(dev);
  if (tdp > 0 && tdp <= kLowPowerW)
    c.caution = fmt::format(
        "a {:g} W card: operators timed alone may run at a clock it does not hold through a long run; in "
        "leave-one-GPU-out the two cards of <= {:g} W (P4, T4) were further off calibrated (29 %, 15 %) than "
        "from "
        "their spec sheets (16 %, 9 %)",
        tdp, kLowPowerW);
  std::mt19937_64 rng(o.seed);
  for (auto& [k, v] : groups) {
    if (o.max_rows > 0 && static_cast<int64_t>(v.size()) > o.max_rows) {
      std::shuffle(v.begin(), v.end(), rng);
      v.resize(static_cast<size_t>(o.max_rows));
    }
    if (static_cast<int64_t>(v.size()) < o.min_rows) continue;
    std::vector<double> r;
    for (const LayerSample* s : v)
      r.push_back(std::log(s->ms / lp.predict_ms(s->type, s->dims, s->dtype, s->dir, dev)));
    c.factors[k] = {median(r), static_cast<int64_t>(r.size())};
  }
  SCALEDL_CHECK(
      !c.factors.empty(),
      "calibration of {}: none of its {} rows' kinds (type, direction, dtype) has {} usable rows (GEMMs "
      "with M, N and K multiples of {}, {} ms or slower)",
      dev.key(), rows.size(), o.min_rows, o.align, o.min_ms);
  return c;
}

LayerCalibration calibrate_from_store(const LayerPredictor& lp, const std::string& db,
                                      const DeviceRecord& dev, const CalibrationOptions& o,
                                      const std::string& what) {
  SCALEDL_CHECK(std::filesystem::exists(db), "{}={}: no such file", what, db);
  const TrainingData data = load_training_data({db});
  std::map<std::string, DeviceRecord> devices;
  std::vector<std::string> names;
  for (const auto& [key, d] : data.devices) {
    names.push_back(key);
    if (d.name == dev.name) devices.emplace(key, d);
  }
  std::vector<LayerMeasurement> rows;
  for (const auto& r : data.rows)
    if (devices.count(r.device)) rows.push_back(r);
  SCALEDL_CHECK(!rows.empty(), "{}={}: no layer rows of a device named \"{}\" (its devices: {})", what, db,
                dev.name, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  std::vector<LayerSample> samples = samples_from_measurements(rows, devices);
  try {
    LayerCalibration c = calibrate_layers(lp, samples, dev, o);
    c.source = db;
    return c;
  } catch (const Error& e) {
    fail("{}={}: {}", what, db, e.what());
  }
}

}  // namespace scaledl
