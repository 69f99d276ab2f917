// Per-layer XGBoost regressors (ScaleDL eq. 6-7) and their persistence.
#include "scaledl/learn/layer_predictor.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/checksum.hpp"
#include "core/stats.hpp"
#include "learn/tree_cache.hpp"
#include "learn/tree_forest.hpp"
#include "learn/xgb.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/core/strided_threads.hpp"

namespace scaledl {

namespace fs = std::filesystem;

namespace {
constexpr int kFormatVersion = 2;  ///< 2: SHA-256 of every model file and of the manifest
constexpr const char* kFormatName = "scaledl-layer-predictor";
/// Floor of a prediction, ms: the "raw" target can predict <= 0; a time is > 0.
constexpr double kMinMs = 1e-6;
/// Rows per feature block in predict_batch (bounds the scratch buffer).
constexpr size_t kBlock = size_t(1) << 16;
/// Batches smaller than this predict on one thread (compiled trees and XGBoost):
/// XGBoost's OpenMP fork/join costs ~1-15 ms per call on a busy 2-core VM against
/// ~0.1 ms single-threaded, and a std::thread start is not free either.
constexpr size_t kParallelRows = 16384;
/// A model's training rows by direction and dtype, as its manifest spells them ("fwd fp32").
using DirDtype = std::pair<Direction, DType>;
std::string dir_dtype_key(const DirDtype& k) {
  return std::string(to_string(k.first)) + " " + to_string(k.second);
}
/// The inverse; throws naming `ctx` for anything else.
DirDtype parse_dir_dtype(const std::string& s, const std::string& ctx) {
  for (Direction d : {Direction::Forward, Direction::Backward, Direction::Update})
    for (DType t : {DType::FP32, DType::TF32, DType::BF16, DType::FP16, DType::FP8})
      if (s == dir_dtype_key({d, t})) return {d, t};
  fail("{}: \"{}\" is not \"<dir> <dtype>\" (e.g. \"fwd fp32\")", ctx, s);
}

const std::set<std::string> kTargets = {"log", "raw", "log_roofline", "log_roofline_floor"};

/// `s` as a JSON string (quoted, control characters escaped, invalid UTF-8 replaced).
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// A name as a one-line message can show it: as is when it is plain printable ASCII,
/// else as a JSON string (control characters escaped, invalid UTF-8 replaced).
std::string printable(const std::string& s) {
  bool plain = !s.empty();
  for (const unsigned char c : s) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  return plain ? s : quoted(s);
}

FeatureOptions feature_options(const TrainOptions& o) {
  FeatureOptions f;
  f.roofline = o.roofline_features;
  f.transfer = o.transfer_features;
  f.device = o.device_features;
  f.arch = o.arch_features;
  f.alignment = o.alignment_features;
  f.dtype_rates = o.dtype_rates;
  return f;
}

/// Target transform y = g(ms, roofline_ms, floor_ms); inverse below. `Target` is
/// the parsed TrainOptions::target (parsed once per batch, not per row).
/// log_roofline_floor: ln(ms / (roofline + floor)), floor = the model's fastest
/// training time (Model::floor_ms, a launch-overhead scale): a residual over the
/// roofline for large layers and over the floor for tiny ones.
enum class Target { Raw, Log, LogRoofline, LogRooflineFloor };
Target target_kind(const std::string& target) {
  if (target == "raw") return Target::Raw;
  if (target == "log") return Target::Log;
  return target == "log_roofline" ? Target::LogRoofline : Target::LogRooflineFloor;
}
float to_target(Target target, double ms, double roof, double floor) {
  switch (target) {
    case Target::Raw:
      return static_cast<float>(ms);
    case Target::Log:
      return static_cast<float>(std::log(ms));
    case Target::LogRoofline:
      return static_cast<float>(std::log(ms / roof));
    case Target::LogRooflineFloor:
      return static_cast<float>(std::log(ms / (roof + floor)));
  }
  return 0;
}
double from_target(Target target, double y, double roof, double floor) {
  double ms = 0;
  switch (target) {
    case Target::Raw:
      ms = y;
      break;
    case Target::Log:
      ms = std::exp(y);
      break;
    case Target::LogRoofline:
      ms = std::exp(y) * roof;
      break;
    case Target::LogRooflineFloor:
      ms = std::exp(y) * (roof + floor);
      break;
  }
  return std::max(ms, kMinMs);
}

const DeviceRecord& device_of(const std::map<std::string, DeviceRecord>& devices, const std::string& key) {
  auto it = devices.find(key);
  if (it == devices.end()) {
    std::string known;
    for (const auto& [k, v] : devices) known += (known.empty() ? "" : ", ") + k;
    fail("device=\"{}\" is unknown (known devices: {}); import or probe it first", key,
         known.empty() ? "none" : known);
  }
  return it->second;
}

/// Whether a type's forward rows measure a device's sustained bandwidth: a plain
/// elementwise kernel that moves its bytes once (sustained_bandwidths).
bool streams_memory(LayerType t) {
  switch (t) {
    case LayerType::Add:
    case LayerType::Mul:
    case LayerType::ReLU:
    case LayerType::GELU:
    case LayerType::SiLU:
      return true;
    case LayerType::Embedding:
    case LayerType::LayerNorm:
    case LayerType::RMSNorm:
    case LayerType::Linear:
    case LayerType::BMM:
    case LayerType::Attention:
    case LayerType::Softmax:
    case LayerType::Dropout:
    case LayerType::Conv2dPatch:
    case LayerType::CrossEntropy:
    case LayerType::Optimizer:
    case LayerType::Pointwise:
    case LayerType::FlashAttention:
      return false;
  }
  return false;
}
}  // namespace

// ---- options ----------------------------------------------------------------

nlohmann::json TrainOptions::to_json() const {
  nlohmann::json j = {{"rounds", rounds},
                      {"max_depth", max_depth},
                      {"eta", eta},
                      {"subsample", subsample},
                      {"colsample", colsample},
                      {"min_child_weight", min_child_weight},
                      {"target", target},
                      {"roofline_features", roofline_features},
                      {"transfer_features", transfer_features},
                      {"device_features", device_features},
                      {"arch_features", arch_features},
                      {"rates", dtype_rates  ? "dtype_peak"
                                : spec_rates ? "spec_peak"
                                             : "measured"},
                      {"kernel_time", kernel_time},
                      {"split_direction", split_direction},
                      {"forest", forest},
                      {"min_rows", min_rows},
                      {"seed", seed}};
  if (sustained_bw) j["sustained_bw"] = true;  // only then: models from before keep their manifests
  if (alignment_features) j["alignment_features"] = true;  // the same
  return j;
}

TrainOptions TrainOptions::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object", ctx);
  TrainOptions o;
  o.rounds = static_cast<int>(get_int_or(j, "rounds", ctx, 1, 100000, o.rounds));
  o.max_depth = static_cast<int>(get_int_or(j, "max_depth", ctx, 1, 20, o.max_depth));
  o.eta = get_num_or(j, "eta", ctx, 1e-6, 1, o.eta);
  o.subsample = get_num_or(j, "subsample", ctx, 1e-6, 1, o.subsample);
  o.colsample = get_num_or(j, "colsample", ctx, 1e-6, 1, o.colsample);
  o.min_child_weight = get_num_or(j, "min_child_weight", ctx, 0, 1e9, o.min_child_weight);
  o.target = get_str_or(j, "target", ctx, o.target);
  o.roofline_features = get_bool_or(j, "roofline_features", ctx, o.roofline_features);
  o.transfer_features =
      get_bool_or(j, "transfer_features", ctx, false);  // absent: a model from before they existed
  o.device_features = get_bool_or(j, "device_features", ctx, true);
  o.arch_features = get_bool_or(j, "arch_features", ctx, false);  // absent: a model from before it existed
  o.alignment_features = get_bool_or(j, "alignment_features", ctx, false);  // the same
  const std::string rates = get_str_or(j, "rates", ctx, "measured");        // absent: from before 2026-11-26
  SCALEDL_CHECK(rates == "dtype_peak" || rates == "spec_peak" || rates == "measured",
                "{}: rates=\"{}\" is not dtype_peak, spec_peak or measured", ctx, rates);
  o.spec_rates = rates != "measured";
  o.dtype_rates = rates == "dtype_peak";
  o.kernel_time = get_bool_or(j, "kernel_time", ctx, false);    // absent: a model from before it existed
  o.sustained_bw = get_bool_or(j, "sustained_bw", ctx, false);  // absent: a model from before it existed
  o.split_direction = get_bool_or(j, "split_direction", ctx, o.split_direction);
  o.forest = get_bool_or(j, "forest", ctx, o.forest);
  o.min_rows = static_cast<int>(get_int_or(j, "min_rows", ctx, 1, 1 << 30, o.min_rows));
  o.seed = static_cast<uint64_t>(get_int_or(j, "seed", ctx, 0, INT64_MAX, 0));
  o.validate();
  return o;
}

void TrainOptions::validate() const {
  SCALEDL_CHECK(rounds >= 1, "rounds={} must be >= 1", rounds);
  SCALEDL_CHECK(max_depth >= 1 && max_depth <= 20, "max_depth={} must be in [1, 20]", max_depth);
  SCALEDL_CHECK(eta > 0 && eta <= 1, "eta={} must be in (0, 1]", eta);
  SCALEDL_CHECK(subsample > 0 && subsample <= 1, "subsample={} must be in (0, 1]", subsample);
  SCALEDL_CHECK(colsample > 0 && colsample <= 1, "colsample={} must be in (0, 1]", colsample);
  SCALEDL_CHECK(min_child_weight >= 0, "min_child_weight={} must be >= 0", min_child_weight);
  SCALEDL_CHECK(kTargets.count(target),
                "target=\"{}\" is not a target transform (log, raw, log_roofline, log_roofline_floor)",
                target);
  SCALEDL_CHECK(min_rows >= 1, "min_rows={} must be >= 1", min_rows);
  SCALEDL_CHECK(nthread >= 0, "nthread={} must be >= 0", nthread);
}

// ---- samples ----------------------------------------------------------------

std::vector<LayerSample> samples_from_measurements(const std::vector<LayerMeasurement>& rows,
                                                   const std::map<std::string, DeviceRecord>& devices) {
  std::vector<LayerSample> out;
  out.reserve(rows.size());
  for (const auto& m : rows) {
    const std::string key = layer_key(m.type, m.dims, m.dtype);
    try {
      validate_dims(m.type, m.dims);
    } catch (const Error& e) {
      fail("layer row {} on {}: {}", key, m.device, e.what());
    }
    device_of(devices, m.device);
    auto check_time = [&](double v, const char* what) {
      SCALEDL_CHECK(std::isnan(v) || (std::isfinite(v) && v > 0),
                    "layer row {} on {}: {}_median_ms={} must be > 0 and finite (NaN = not measured)", key,
                    m.device, what, v);
    };
    check_time(m.fwd.median_ms, "fwd");
    check_time(m.bwd.median_ms, "bwd");
    SCALEDL_CHECK(!std::isnan(m.fwd.median_ms) || !std::isnan(m.bwd.median_ms),
                  "layer row {} on {}: neither fwd_median_ms nor bwd_median_ms is set", key, m.device);
    const bool opt = m.type == LayerType::Optimizer;
    SCALEDL_CHECK(!(opt && !std::isnan(m.bwd.median_ms)),
                  "layer row {} on {}: bwd_median_ms={} but optimizer rows have no backward", key, m.device,
                  m.bwd.median_ms);
    if (!std::isnan(m.fwd.median_ms))
      out.push_back({m.type, m.dims, m.dtype, opt ? Direction::Update : Direction::Forward, m.device,
                     m.fwd.median_ms, "", m.source});
    if (!std::isnan(m.bwd.median_ms))
      out.push_back({m.type, m.dims, m.dtype, Direction::Backward, m.device, m.bwd.median_ms, "", m.source});
  }
  return out;
}

// ---- the predictor ----------------------------------------------------------

struct LayerPredictor::Model {
  LayerType type = LayerType::Linear;
  std::vector<std::string> features;
  size_t rows = 0;
  /// mutable: predict_batch switches XGBoost's nthread by batch size (below); a
  /// model loaded from a bundle whose trees compiled gets it on first use (xgb()).
  mutable xgb::Booster booster;
  mutable std::string text;  ///< the model file's JSON while `booster` is not loaded from it
  std::string source;        ///< the model file (errors)
  /// The model file's SHA-256 when its trees came from the tree cache (tree_cache.hpp):
  /// the JSON was checked but not read, and is read (and checked again) only for XGBoost.
  std::string unread_sha256;
  mutable std::once_flag booster_once;
  /// The booster, loaded from `text` the first time it is needed (XGBoost's own
  /// predictor, or save()): a prediction by the compiled trees never parses the
  /// model a second time.
  xgb::Booster& xgb() const {
    std::call_once(booster_once, [this] {
      if (!unread_sha256.empty()) {
        // Trees from the cache: the file was checked at load; it may have changed since.
        std::string json = read_text_file(source);
        SCALEDL_CHECK(sha256_hex(json) == unread_sha256,
                      "{}: SHA-256 differs from the one checked at load: the model file was altered since",
                      source);
        booster = xgb::Booster::from_buffer(json, source);  // the checks of parse_model() first
        return;
      }
      if (text.empty()) return;
      booster = xgb::Booster::from_checked_buffer(text, source);
      text.clear();
    });
    return booster;
  }
  mutable int threads = 0;  ///< nthread last set, 0 = not yet
  double floor_ms = 0;      ///< fastest training time (target log_roofline_floor), else 0
  /// Direction and dtype of its training rows; empty = not recorded (a manifest
  /// written before 2026-11-26)
  std::set<DirDtype> trained_on;
  bool has_dtype(DType d) const {
    return std::any_of(trained_on.begin(), trained_on.end(),
                       [d](const DirDtype& k) { return k.second == d; });
  }
  std::vector<std::string> trained_on_keys() const {
    std::vector<std::string> out;
    for (const auto& k : trained_on) out.push_back(dir_dtype_key(k));
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The booster's trees compiled for prediction (tree_forest.hpp); empty when
  /// the model is outside what TreeForest covers: then XGBoost predicts.
  std::optional<TreeForest> forest;
  std::string forest_refused;  ///< why `forest` is empty

  void compile() {
    forest = TreeForest::compile(booster.to_json_string(), &forest_refused);
    if (forest && forest->num_features() != features.size()) {
      forest_refused =
          fmt::format("compiled {} features, model has {}", forest->num_features(), features.size());
      forest.reset();
    }
  }
};

std::string model_name(LayerType t, Direction dir, bool split_direction) {
  std::string n = to_string(t);
  if (split_direction && t != LayerType::Optimizer) n += dir == Direction::Backward ? ".bwd" : ".fwd";
  return n;
}

LayerPredictor::LayerPredictor() = default;
LayerPredictor::~LayerPredictor() = default;
LayerPredictor::LayerPredictor(LayerPredictor&&) noexcept = default;
LayerPredictor& LayerPredictor::operator=(LayerPredictor&&) noexcept = default;

LayerPredictor LayerPredictor::train(const std::vector<LayerMeasurement>& rows,
                                     const std::map<std::string, DeviceRecord>& devices,
                                     const TrainOptions& o) {
  return train_samples(samples_from_measurements(rows, devices), devices, o);
}

std::map<std::pair<std::string, std::string>, double> timing_floors(
    const std::vector<LayerSample>& samples, const std::map<std::string, DeviceRecord>& devices) {
  std::map<std::pair<std::string, std::string>, double> f;
  for (const auto& s : samples) {
    if (device_of(devices, s.device).kind == "cpu")
      continue;  // a CPU runs an operator alone as it does in a model
    auto [it, added] = f.emplace(std::make_pair(s.device, s.harness), s.ms);
    if (!added) it->second = std::min(it->second, s.ms);
  }
  // A GPU whose fastest row is slower than any launch-bound kernel (KernelBench's H100 PCIe
  // timed only its large problems) shows no floor: subtracting its fastest row would cut
  // real kernel time.
  for (auto it = f.begin(); it != f.end();) it = it->second > kMaxTimingFloorMs ? f.erase(it) : std::next(it);
  return f;
}

std::vector<LayerSample> kernel_time_samples(const std::vector<LayerSample>& samples,
                                             const std::map<std::string, DeviceRecord>& devices) {
  const auto floors = timing_floors(samples, devices);
  std::vector<LayerSample> out = samples;
  for (auto& s : out) {
    auto it = floors.find({s.device, s.harness});
    if (it != floors.end()) s.ms = std::max(s.ms - it->second, 0.1 * s.ms);
  }
  return out;
}

std::map<std::string, double> sustained_bandwidths(const std::vector<LayerSample>& samples,
                                                   const std::map<std::string, DeviceRecord>& devices) {
  struct Row {
    double bytes, gbs, ms;
  };
  std::map<std::string, std::vector<Row>> by_dev;
  for (const auto& s : samples) {
    if (s.dir != Direction::Forward) continue;
    if (!streams_memory(s.type)) continue;
    const DeviceRecord& d = device_of(devices, s.device);
    if (d.kind == "cpu" || d.peak_mem_bw_gbs <= 0) continue;
    const double bytes = traffic_bytes(layer_cost(s.type, s.dims, s.dtype), s.dir);
    // Only rows that stream from DRAM: KernelBench's small problem set moves 2 MB, which
    // the L2 holds and the launch dominates.
    if (bytes < std::max(4e6 * d.l2_mb, kMinStreamBytes)) continue;
    by_dev[s.device].push_back({bytes, bytes / (s.ms * 1e6), s.ms});
  }
  std::map<std::string, double> out;
  for (auto& [key, all] : by_dev) {
    if (all.size() < 5) continue;
    // Rows at 10x the fastest or more, so that the host's timing floor is under a tenth
    // of each (a GPU whose set is mostly small shapes, like our H200's, would otherwise
    // show its floor); all rows when fewer than 5 are that slow.
    double fastest = all.front().ms;
    for (const Row& r : all) fastest = std::min(fastest, r.ms);
    std::vector<Row> rows;
    for (const Row& r : all)
      if (r.ms >= 10 * fastest) rows.push_back(r);
    if (rows.size() < 5) rows = all;
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.bytes > b.bytes; });
    std::vector<double> rate;
    for (size_t i = 0; i < std::max<size_t>(5, rows.size() / 10); ++i) rate.push_back(rows[i].gbs);
    std::nth_element(rate.begin(), rate.begin() + rate.size() / 2, rate.end());
    out[key] = rate[rate.size() / 2];
  }
  return out;
}

size_t set_probe_bandwidths(std::map<std::string, DeviceRecord>& devices,
                            const std::vector<LayerSample>& samples) {
  size_t n = 0;
  for (const auto& [key, gbs] : sustained_bandwidths(samples, devices)) {
    auto it = devices.find(key);
    if (it == devices.end()) continue;
    it->second.measured_bw_gbs = gbs;
    ++n;
  }
  return n;
}

std::pair<double, std::string> LayerPredictor::sustained_bw_of(const DeviceRecord& dev) const {
  if (!opts_.sustained_bw || dev.kind == "cpu" || dev.peak_mem_bw_gbs <= 0) return {dev.bandwidth_gbs(), ""};
  if (auto it = bw_.find(dev.key()); it != bw_.end()) return {it->second, "layer rows"};
  if (dev.measured_bw_gbs > 0) return {dev.measured_bw_gbs, "measured"};  // a probe's copy bandwidth
  const std::string fam = memory_family(dev);
  const bool by_family = bw_share_by_family_.count(fam) > 0;
  const double share = sustained_bw_share(fam);
  return {share > 0 ? dev.peak_mem_bw_gbs * share : dev.peak_mem_bw_gbs,
          by_family ? fam + " share" : "share"};
}

double LayerPredictor::roofline_bandwidth_gbs(const DeviceRecord& dev) const {
  return sustained_bw_of(dev).first;
}

std::string LayerPredictor::roofline_bandwidth_source(const DeviceRecord& dev) const {
  return sustained_bw_of(dev).second;
}

double LayerPredictor::sustained_bw_share(const std::string& family) const {
  auto it = bw_share_by_family_.find(family);
  return it != bw_share_by_family_.end() ? it->second : bw_share_;
}

DeviceRecord LayerPredictor::feature_device(const DeviceRecord& dev) const {
  DeviceRecord d = dev;
  const auto [gbs, source] = sustained_bw_of(dev);
  if (!source.empty()) d.peak_mem_bw_gbs = gbs;
  return d;
}

LayerPredictor LayerPredictor::train_samples(const std::vector<LayerSample>& samples,
                                             const std::map<std::string, DeviceRecord>& devices,
                                             const TrainOptions& o) {
  o.validate();
  for (const auto& s : samples) {  // before kernel_time changes any time: an error names the measured one
    SCALEDL_CHECK(std::isfinite(s.ms) && s.ms > 0,
                  "training sample {} ({}) on {}: ms={} must be > 0 and finite",
                  layer_key(s.type, s.dims, s.dtype), to_string(s.dir), s.device, s.ms);
    check_direction(s.type, s.dir);
  }
  if (o.kernel_time) {  // the same models, trained on kernel times; the manifest says so
    TrainOptions k = o;
    k.kernel_time = false;
    LayerPredictor p = train_samples(kernel_time_samples(samples, devices), devices, k);
    p.opts_.kernel_time = true;
    return p;
  }
  LayerPredictor p;
  p.opts_ = o;
  p.opts_.spec_rates = true;  // what DeviceRecord::compute_gflops() does now, whatever `o` says
  const FeatureOptions fo = feature_options(o);
  std::map<std::string, DeviceRecord> feature_devices;  // as the features see them
  if (o.sustained_bw) {
    p.bw_ = sustained_bandwidths(samples, devices);
    std::vector<double> share;
    std::map<std::string, std::vector<double>> by_family;
    for (const auto& [key, gbs] : p.bw_) {
      const DeviceRecord& d = device_of(devices, key);
      share.push_back(gbs / d.peak_mem_bw_gbs);
      const std::string fam = memory_family(d);
      if (!fam.empty()) by_family[fam].push_back(gbs / d.peak_mem_bw_gbs);
    }
    if (!share.empty()) p.bw_share_ = median(share);
    for (const auto& [fam, v] : by_family) p.bw_share_by_family_[fam] = median(v);
  }
  for (const auto& s : samples)
    if (!feature_devices.count(s.device))
      feature_devices.emplace(s.device, p.feature_device(device_of(devices, s.device)));
  std::map<std::string, std::vector<const LayerSample*>> groups;
  for (const auto& s : samples) groups[model_name(s.type, s.dir, o.split_direction)].push_back(&s);
  for (const auto& [name, rows] : groups) {
    if (rows.size() < static_cast<size_t>(o.min_rows)) {
      if (o.verbose)
        std::cerr << fmt::format("learn: {} has {} rows < min_rows={}: roofline fallback\n", name,
                                 rows.size(), o.min_rows);
      continue;
    }
    const LayerType t = rows.front()->type;
    const size_t nf = feature_count(t, fo);
    std::vector<float> x(rows.size() * nf);
    std::vector<float> y(rows.size());
    double floor = 0;
    if (target_kind(o.target) == Target::LogRooflineFloor) {
      floor = rows.front()->ms;
      for (const LayerSample* r : rows) floor = std::min(floor, r->ms);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const LayerSample& s = *rows[i];
      const DeviceRecord& dev = feature_devices.at(s.device);
      layer_features(t, s.dims, s.dtype, s.dir, dev, fo, &x[i * nf]);
      const double roof = roofline_ms(t, s.dims, s.dtype, s.dir, dev, fo.dtype_rates);
      y[i] = to_target(target_kind(o.target), s.ms, roof, floor);
    }
    auto t0 = std::chrono::steady_clock::now();
    xgb::DMatrix dm(x.data(), rows.size(), nf, y);
    auto m = std::make_unique<Model>();
    m->type = t;
    m->features = feature_names(t, fo);
    m->rows = rows.size();
    m->floor_ms = floor;
    for (const LayerSample* r : rows) m->trained_on.insert({r->dir, r->dtype});
    // nthread 0 = automatic: one thread below kParallelRows rows. On these small
    // per-type sets OpenMP's fork/join costs more than it saves, and with the
    // other core busy its spinning barrier made a 5-fold `train layers` of the
    // 144-row CPU campaign run for minutes instead of seconds.
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const int train_threads = o.nthread > 0                  ? o.nthread
                              : rows.size() >= kParallelRows ? static_cast<int>(hw)
                                                             : 1;
    m->booster.set_param("nthread", std::to_string(train_threads));
    m->booster.set_params({{"objective", "reg:squarederror"},
                           {"tree_method", "hist"},
                           {"max_depth", std::to_string(o.max_depth)},
                           {"min_child_weight", fmt::format("{}", o.min_child_weight)},
                           {"seed", std::to_string(o.seed)}});
    int rounds = o.rounds;
    if (o.forest) {
      m->booster.set_params(
          {{"num_parallel_tree", "100"}, {"subsample", "0.632"}, {"colsample_bynode", "0.6"}, {"eta", "1"}});
      rounds = 1;
    } else {
      m->booster.set_params({{"eta", fmt::format("{}", o.eta)},
                             {"subsample", fmt::format("{}", o.subsample)},
                             {"colsample_bytree", fmt::format("{}", o.colsample)}});
    }
    m->booster.train(dm, rounds);
    m->compile();
    if (o.verbose)
      std::cerr << fmt::format("learn: {:<16} {:>7} rows {:>3} features {:>7.2f} s\n", name, rows.size(), nf,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    p.models_[name] = std::move(m);
  }
  return p;
}

const LayerPredictor::Model* LayerPredictor::find(LayerType t, Direction dir) const {
  auto it = models_.find(model_name(t, dir, opts_.split_direction));
  // Split by direction, a kind timed in one direction only (NeuSight's and KernelBench's forward
  // rows: mul, relu, pointwise) has no model of the other: the one it has serves it, carried over
  // as the single model of both directions would (trained_on says so, and predict reports it).
  if (it == models_.end() && opts_.split_direction && dir != Direction::Update)
    it = models_.find(
        model_name(t, dir == Direction::Forward ? Direction::Backward : Direction::Forward, true));
  return it == models_.end() ? nullptr : it->second.get();
}

bool LayerPredictor::has_model(LayerType t, Direction dir) const {
  return find(t, dir) != nullptr;
}

std::optional<bool> LayerPredictor::trained_on(LayerType t, Direction dir, DType dtype) const {
  const Model* m = find(t, dir);
  if (!m || m->trained_on.empty()) return std::nullopt;
  return m->trained_on.count({dir, dtype}) > 0;
}

bool LayerPredictor::concurrent_predict() const {
  if (!compiled_trees_) return false;
  for (const auto& [name, m] : models_)
    if (!m->forest) return false;
  return true;
}

bool LayerPredictor::predict_batch(LayerType t, const int64_t* dims, size_t rows, DType dtype, Direction dir,
                                   const DeviceRecord& dev, double* out_ms) const {
  if (!opts_.sustained_bw) return predict_batch_as(t, dims, rows, dtype, dir, dev, out_ms);
  return predict_batch_as(t, dims, rows, dtype, dir, feature_device(dev), out_ms);
}

bool LayerPredictor::predict_batch_as(LayerType t, const int64_t* dims, size_t rows, DType dtype,
                                      Direction dir, const DeviceRecord& dev, double* out_ms) const {
  const size_t nd = layer_info(t).dims.size();
  const FeatureOptions fo = feature_options(opts_);
  FeatureWriter writer(t, dtype, dir, dev, fo);  // checks direction and device
  const Model* m = find(t, dir);
  if (!m && t == LayerType::Pointwise) {
    // No pointwise rows (stores of the zoo's layer space, such as the CPU campaigns):
    // a unary elementwise kernel of n elements costs what the device's other
    // elementwise kernels of n elements cost, per byte moved. The first of these
    // with a model predicts it, scaled by the ratio of the bytes each moves.
    for (LayerType proxy : {LayerType::ReLU, LayerType::GELU, LayerType::SiLU, LayerType::Mul}) {
      if (!find(proxy, dir)) continue;
      std::vector<int64_t> n(rows);
      for (size_t i = 0; i < rows; ++i) n[i] = dims[i * nd];
      predict_batch_as(proxy, n.data(), rows, dtype, dir, dev, out_ms);
      for (size_t i = 0; i < rows; ++i) {
        const LayerCost a = layer_cost(t, {dims + i * nd, dims + (i + 1) * nd}, dtype),
                        b = layer_cost(proxy, {n[i]}, dtype);
        out_ms[i] = std::max(out_ms[i] * (a.in_bytes + a.out_bytes) / (b.in_bytes + b.out_bytes), kMinMs);
      }
      return true;
    }
  }
  if (!m) {
    for (size_t i = 0; i < rows; ++i) out_ms[i] = std::max(writer.write(dims + i * nd, nullptr), kMinMs);
    return true;
  }
  if (!m->trained_on.empty() && !m->has_dtype(dtype)) {
    // A dtype this model never saw (bf16 on fp32-only rows): the trees know nothing
    // of its speed, and the roofline of the features and target runs at the fp32
    // rate. Carry the utilisation over instead: the time of a dtype the model knows
    // (in this direction, as the model predicts it), as a fraction of that dtype's
    // roofline (+ floor), on this dtype's roofline (its spec peak, e.g. the tensor
    // cores', and its bytes); never under this dtype's peak bound.
    for (DType ref : {DType::FP32, DType::TF32, DType::BF16, DType::FP16, DType::FP8}) {
      if (ref == dtype || !m->has_dtype(ref)) continue;
      predict_batch_as(t, dims, rows, ref, dir, dev, out_ms);
      FeatureWriter from(t, ref, dir, dev, fo);
      const double floor = target_kind(opts_.target) == Target::LogRooflineFloor ? m->floor_ms : 0.0;
      for (size_t i = 0; i < rows; ++i) {
        from.write(dims + i * nd, nullptr);
        writer.write(dims + i * nd, nullptr);
        const double ratio =
            (writer.dtype_roofline_ms() + floor) / std::max(from.dtype_roofline_ms() + floor, 1e-12);
        out_ms[i] = std::max({out_ms[i] * ratio, writer.peak_floor_ms(), kMinMs});
      }
      return false;
    }
  }
  const size_t nf = writer.size();
  const Target tk = target_kind(opts_.target);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads =
      rows >= kParallelRows ? static_cast<size_t>(opts_.nthread > 0 ? opts_.nthread : hw) : 1;
  if (m->forest && compiled_trees_) {
    // Compiled trees: the rows are split into one contiguous range per thread;
    // each computes its features and walks the trees. The first failing range's
    // error (the lowest bad row) is rethrown.
    auto range = [&](size_t begin, size_t end, FeatureWriter& w) {
      constexpr size_t kChunk = 1024;  // features of a chunk stay in L2
      std::vector<float> x(std::min(end - begin, kChunk) * nf), y(std::min(end - begin, kChunk));
      std::vector<double> roof(y.size()), peak(y.size());
      for (size_t b0 = begin; b0 < end; b0 += kChunk) {
        const size_t n = std::min(kChunk, end - b0);
        for (size_t i = 0; i < n; ++i) {
          roof[i] = w.write(dims + (b0 + i) * nd, &x[i * nf]);
          peak[i] = w.peak_floor_ms();
        }
        m->forest->predict(x.data(), n, y.data());
        for (size_t i = 0; i < n; ++i)
          out_ms[b0 + i] = std::max(from_target(tk, y[i], roof[i], m->floor_ms), peak[i]);
      }
    };
    if (threads <= 1) {
      range(0, rows, writer);
      return false;
    }
    std::vector<std::exception_ptr> errors(threads);
    std::vector<std::thread> pool;
    const size_t per = (rows + threads - 1) / threads;
    for (size_t k = 0; k < threads; ++k) {
      const size_t begin = std::min(rows, k * per), end = std::min(rows, begin + per);
      pool.emplace_back([&, k, begin, end] {
        try {
          FeatureWriter w(t, dtype, dir, dev, fo);
          range(begin, end, w);
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    return false;
  }
  // XGBoost's own predictor (models TreeForest does not cover).
  const int want = static_cast<int>(threads);
  if (m->threads != want) {
    m->xgb().set_param("nthread", std::to_string(want));
    m->threads = want;
  }
  std::vector<float> x(std::min(rows, kBlock) * nf);
  std::vector<float> y(std::min(rows, kBlock));
  std::vector<double> roof(y.size()), peak(y.size());
  for (size_t b0 = 0; b0 < rows; b0 += kBlock) {
    const size_t n = std::min(kBlock, rows - b0);
    for (size_t i = 0; i < n; ++i) {
      roof[i] = writer.write(dims + (b0 + i) * nd, &x[i * nf]);
      peak[i] = writer.peak_floor_ms();
    }
    m->xgb().predict_dense(x.data(), n, nf, y.data());
    for (size_t i = 0; i < n; ++i)
      out_ms[b0 + i] = std::max(from_target(tk, y[i], roof[i], m->floor_ms), peak[i]);
  }
  return false;
}

LayerPrediction LayerPredictor::predict(LayerType t, const std::vector<int64_t>& dims, DType dtype,
                                        Direction dir, const DeviceRecord& dev) const {
  validate_dims(t, dims);
  LayerPrediction r;
  r.fallback = predict_batch(t, dims.data(), 1, dtype, dir, dev, &r.ms);
  return r;
}

double LayerPredictor::predict_ms(LayerType t, const std::vector<int64_t>& dims, DType dtype, Direction dir,
                                  const DeviceRecord& dev) const {
  return predict(t, dims, dtype, dir, dev).ms;
}

namespace {
/// The share of a GPU's sustained memory bandwidth (roofline_bandwidth_gbs) that a fused optimizer
/// step reaches: PyTorch's fused AdamW over 1.07 B FP32 parameters moved its 28 bytes per parameter
/// at 3,288 GB/s on our H200 (datasets/h200/training-kinds/optimizer.csv; 3,212-3,362 over 134 M to
/// 1.07 B parameters), whose sustained bandwidth in the default bundle is 4,248 GB/s.
constexpr double kFusedStepBandwidthShare = 3288.0 / 4248.0;

/// A fused optimizer step (TrainSettings::fused_optimizer) on a GPU, ms: it reads the parameters,
/// their gradients and the moments and writes the parameters and the moments once, in the step's
/// dtype (FP32 masters under mixed precision), at kFusedStepBandwidthShare of the bandwidth.
double fused_step_ms(const LayerNode& n, double bandwidth_gbs) {
  const double params = static_cast<double>(n.dims[0]);
  const double moments = n.dims[1] == static_cast<int64_t>(OptimizerKind::SGD) ? 0.0 : 2.0;
  const double bytes = params * dtype_bytes(n.dtype) * (3.0 + 2.0 * moments);
  return bytes / (kFusedStepBandwidthShare * bandwidth_gbs * 1e9) * 1e3;
}

/// Whether a node's backward is predicted as the forward GEMMs of its own two products rather than
/// by the backward's layer model: a linear layer's backward in half precision or FP8 on a GPU. The
/// H200 ran the dgrad (NN) and wgrad (TN) layouts within 1 % of the forward (NT) at equal shapes
/// (datasets/h200/training-kinds/gemm.csv, docs/gpu-data.md "Backward GEMMs"), and the forward's
/// models learnt from thousands of GEMMs of ten GPU types where the backward's had our H100's ten
/// half-precision rows (LibTorch's autograd, 2.1-2.7x their forward where the GEMMs are 2x).
bool backward_as_forward_gemms(LayerType t, Direction dir, DType dtype, const DeviceRecord& dev) {
  return t == LayerType::Linear && dir == Direction::Backward && dev.kind != "cpu" &&
         (dtype == DType::BF16 || dtype == DType::FP16 || dtype == DType::FP8);
}

/// The layer model that costs a node of type t: an RMSNorm of a framework that fuses its kernels
/// (TrainSettings::fused_kernels: Megatron-LM / Transformer Engine, Apex) is one fused norm kernel,
/// costed by the LayerNorm model, whose every row is a fused kernel (PyTorch's layer_norm, phi-2's
/// in Vidur's tables). The RMSNorm model's backward learnt the eager form alone (Hugging Face's
/// LlamaRMSNorm, our layer benchmark: pow, mean, rsqrt and two products, 7-8x a fused norm's time
/// on the H200: datasets/h200/training-kinds/kernels.csv, rmsnorm_hf against rmsnorm_fused, which
/// ran within 10-25 % of layernorm); its half-precision forward is mostly Vidur's fused kernel.
LayerType costed_as(LayerType t, const TrainSettings& s) {
  return t == LayerType::RMSNorm && s.fused_kernels ? LayerType::LayerNorm : t;
}

/// Whether a softmax's backward is costed as its forward's prediction times the ratio of their
/// bytes (y and dy read, dx written: 1.5x the forward's x read and y written) rather than by the
/// backward's layer model: a framework that fuses its kernels (Megatron-LM's scaled-masked-softmax,
/// one bandwidth-bound pass each way) on a GPU. The backward's model learnt PyTorch's eager
/// softmax_backward alone, from our H100's rows (datasets/h100: 1.7-2.6x its forward at 10^8-10^9
/// elements). Not measured here for the fused kernel; on vTrain's Megatron-LM runs it moved the
/// shipped path from 10.9 to 10.7 % (docs/parallel.md).
bool fused_softmax_backward(LayerType t, Direction dir, const TrainSettings& s, const DeviceRecord& dev) {
  return t == LayerType::Softmax && dir == Direction::Backward && s.fused_kernels && dev.kind != "cpu";
}

/// The share of a whole backward that a node runs: 1, or for a frozen weight's node (LoRA) its
/// cost's backward FLOP over an unfrozen one's.
double frozen_backward_share(const LayerNode& n) {
  // The layer models time a whole backward (a linear's dX and dW GEMMs, of equal work and, as the
  // H200 measured, equal speed at equal shapes: docs/gpu-data.md, "Backward GEMMs"); a frozen
  // weight (LoRA) skips its share, which frozen_cost took out of the node's cost.
  if (!n.frozen || n.dir != Direction::Backward) return 1.0;
  const double full = layer_cost(n.type, n.dims, n.dtype).flops_bwd;
  return full > 0 ? std::clamp(n.cost.flops_bwd / full, 0.0, 1.0) : 1.0;
}
}  // namespace

GemmAlignment dim_alignment(int64_t d, DType dtype) {
  int64_t full = 0;  // elements in 16 bytes
  if (dtype == DType::BF16 || dtype == DType::FP16)
    full = 8;
  else if (dtype == DType::TF32)
    full = 4;
  else
    return GemmAlignment::Aligned;
  if (d % 2 != 0) return GemmAlignment::Odd;
  return d % full != 0 ? GemmAlignment::Even : GemmAlignment::Aligned;
}

GemmAlignment linear_alignment(const std::vector<int64_t>& dims, DType dtype) {
  if (dims.size() < 3) return GemmAlignment::Aligned;
  // The worse of d_in's and d_out's (the enum runs from best to worst).
  return std::max(dim_alignment(dims[1], dtype), dim_alignment(dims[2], dtype));
}

double misaligned_gemm_ms(const LayerNode& n, const DeviceRecord& dev) {
  // The alignment first: most nodes are aligned, and it is integer arithmetic (no string or JSON
  // lookup per node of a sweep).
  const GemmAlignment a =
      n.type == LayerType::Linear ? linear_alignment(n.dims, n.dtype) : GemmAlignment::Aligned;
  if (a == GemmAlignment::Aligned) return 0.0;
  if (dev.kind == "cpu" || dev.cores <= 0 || dev.clock_mhz <= 0) return 0.0;
  if (dev.extra.is_object() && dev.extra.contains("vendor") && dev.extra.at("vendor") != "NVIDIA") return 0.0;
  const double per_sm_clock = a == GemmAlignment::Odd ? kOddGemmFlopPerSmClock : kEvenGemmFlopPerSmClock;
  const double flops = n.dir == Direction::Backward ? n.cost.flops_bwd : n.cost.flops_fwd;
  const double mhz = dev.sustained_clock_mhz > 0 ? dev.sustained_clock_mhz : dev.clock_mhz;
  return flops / (per_sm_clock * static_cast<double>(dev.cores) * mhz * 1e6) * 1e3;
}

std::vector<LayerPrediction> LayerPredictor::predict_nodes_detail(const LayerGraph& g,
                                                                  const DeviceRecord& dev) const {
  // Group nodes by (type, direction) so each model is called once per graph.
  // Group nodes by (type, direction, dtype) so each model is called once per graph and dtype (the
  // FP8 recipe runs the blocks' linear layers in FP8, the rest in the settings' dtype).
  std::map<std::tuple<int, int, int>, std::vector<int>> groups;
  for (const auto& n : g.nodes)
    groups[{static_cast<int>(n.type), static_cast<int>(n.dir), static_cast<int>(n.dtype)}].push_back(n.id);
  std::vector<LayerPrediction> out(g.nodes.size());
  // The device as the features see it, once per graph rather than once per group.
  const DeviceRecord fdev = feature_device(dev);
  for (const auto& [key, ids] : groups) {
    const LayerType t = static_cast<LayerType>(std::get<0>(key));
    const Direction dir = static_cast<Direction>(std::get<1>(key));
    const DType dtype = static_cast<DType>(std::get<2>(key));
    const size_t nd = layer_info(t).dims.size();
    // Equal dims (the repeated blocks of a Transformer) are predicted once.
    std::map<std::vector<int64_t>, size_t> uniq;
    std::vector<size_t> row_of(ids.size());
    std::vector<int64_t> dims;
    for (size_t i = 0; i < ids.size(); ++i) {
      const LayerNode& n = g.nodes.at(ids[i]);
      SCALEDL_CHECK(n.dims.size() == nd, "node {} ({}): {} dims, expected {}", n.name, to_string(t),
                    n.dims.size(), nd);
      auto [it, added] = uniq.emplace(n.dims, uniq.size());
      if (added) dims.insert(dims.end(), n.dims.begin(), n.dims.end());
      row_of[i] = it->second;
    }
    std::vector<double> ms(uniq.size()), dgrad_ms;
    bool fb = false, extrapolated = false;
    const bool gemms = backward_as_forward_gemms(t, dir, dtype, dev);
    if (gemms) {
      // dX[t, d_in] = dY[t, d_out] W is the forward GEMM of Linear(t, d_out, d_in), dW[d_out, d_in] =
      // dY^T X that of Linear(d_out, t, d_in), and a bias gradient reads dY once.
      const size_t rows = uniq.size();
      std::vector<int64_t> dx(4 * rows), dw(4 * rows);
      for (size_t r = 0; r < rows; ++r) {
        const int64_t* d = &dims[4 * r];
        int64_t* x = &dx[4 * r];
        int64_t* w = &dw[4 * r];
        x[0] = d[0], x[1] = d[2], x[2] = d[1], x[3] = 0;
        w[0] = d[2], w[1] = d[0], w[2] = d[1], w[3] = 0;
      }
      std::vector<double> wgrad_ms(rows);
      dgrad_ms.resize(rows);
      fb = predict_batch_as(t, dx.data(), rows, dtype, Direction::Forward, fdev, dgrad_ms.data());
      fb = predict_batch_as(t, dw.data(), rows, dtype, Direction::Forward, fdev, wgrad_ms.data()) || fb;
      const double bw = roofline_bandwidth_gbs(dev);
      for (size_t r = 0; r < rows; ++r) {
        const int64_t* d = &dims[4 * r];
        const double bias_ms = d[3] != 0 ? static_cast<double>(d[0]) * static_cast<double>(d[2]) *
                                               dtype_bytes(dtype) / (bw * 1e9) * 1e3
                                         : 0.0;
        ms[r] = dgrad_ms[r] + wgrad_ms[r] + bias_ms;
      }
      extrapolated = !fb && trained_on(t, Direction::Forward, dtype) == std::optional<bool>(false);
    } else if (fused_softmax_backward(t, dir, g.settings, dev)) {
      fb = predict_batch_as(t, dims.data(), uniq.size(), dtype, Direction::Forward, fdev, ms.data());
      for (size_t r = 0; r < uniq.size(); ++r) {
        const LayerCost c = layer_cost(t, {dims[2 * r], dims[2 * r + 1]}, dtype);
        ms[r] *= traffic_bytes(c, Direction::Backward) / traffic_bytes(c, Direction::Forward);
      }
      extrapolated = !fb && trained_on(t, Direction::Forward, dtype) == std::optional<bool>(false);
    } else {
      const LayerType mt = costed_as(t, g.settings);
      fb = predict_batch_as(mt, dims.data(), uniq.size(), dtype, dir, fdev, ms.data());
      extrapolated = !fb && trained_on(mt, dir, dtype) == std::optional<bool>(false);
    }
    const bool fused_step = t == LayerType::Optimizer && g.settings.fused_optimizer && dev.kind != "cpu";
    for (size_t i = 0; i < ids.size(); ++i) {
      const LayerNode& n = g.nodes[ids[i]];
      if (fused_step)  // a roofline of the fused step, not the layer model of the unfused one
        out[ids[i]] = {fused_step_ms(n, roofline_bandwidth_gbs(dev)), false, false};
      else if (gemms && n.frozen)  // dX alone, no bias gradient
        out[ids[i]] = {dgrad_ms[row_of[i]], fb, extrapolated};
      else
        out[ids[i]] = {ms[row_of[i]] * frozen_backward_share(n), fb, extrapolated};
      if (t == LayerType::Linear)
        if (const double slow = misaligned_gemm_ms(n, dev); slow > out[ids[i]].ms)
          out[ids[i]] = {slow, false, false, true};
    }
  }
  return out;
}

std::vector<double> LayerPredictor::predict_nodes(const LayerGraph& g, const DeviceRecord& dev) const {
  auto d = predict_nodes_detail(g, dev);
  std::vector<double> ms(d.size());
  for (size_t i = 0; i < d.size(); ++i) ms[i] = d[i].ms;
  return ms;
}

nlohmann::json LayerPredictor::summary() const {
  nlohmann::json models = nlohmann::json::object();
  for (const auto& [name, m] : models_)
    models[name] = {{"type", to_string(m->type)},
                    {"rows", m->rows},
                    {"features", m->features.size()},
                    {"trained_on", m->trained_on_keys()},
                    {"predictor", m->forest ? "compiled trees" : "xgboost (" + m->forest_refused + ")"}};
  std::vector<std::string> fallback;
  for (const auto& info : all_layer_infos()) {
    Direction d = info.type == LayerType::Optimizer ? Direction::Update : Direction::Forward;
    if (!has_model(info.type, d)) fallback.push_back(info.name);
  }
  return {{"models", models}, {"roofline_fallback", fallback}, {"options", opts_.to_json()}};
}

// ---- persistence ------------------------------------------------------------

void LayerPredictor::save(const std::string& dir) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SCALEDL_CHECK(!ec, "{}: cannot create directory: {}", dir, ec.message());
  nlohmann::json models = nlohmann::json::object();
  for (const auto& [name, m] : models_) {
    const std::string file = name + ".json";
    const std::string text = m->xgb().to_json_string();
    write_text_file_atomic((fs::path(dir) / file).string(), text);
    models[name] = {{"file", file},           {"type", to_string(m->type)}, {"rows", m->rows},
                    {"bytes", text.size()},   {"sha256", sha256_hex(text)}, {"floor_ms", m->floor_ms},
                    {"features", m->features}};
    if (!m->trained_on.empty()) models[name]["trained_on"] = m->trained_on_keys();
  }
  nlohmann::json man = {
      {"format", kFormatName},  {"version", kFormatVersion},  {"xgboost_version", xgb::version()},
      {"target", opts_.target}, {"options", opts_.to_json()}, {"models", models}};
  if (opts_.sustained_bw)
    man["sustained_bw"] = {{"share", bw_share_}, {"share_by_memory", bw_share_by_family_}, {"gbs", bw_}};
  man["manifest_sha256"] = sha256_hex(man.dump());
  write_json_file((fs::path(dir) / "manifest.json").string(), man);
}

OwnedFiles LayerPredictor::output_files() {
  return owned_by_manifest("manifest.json", kFormatName, [](const nlohmann::json& m) {
    std::set<std::string> files;
    for (const auto& [name, v] : m.at("models").items()) files.insert(v.at("file").get<std::string>());
    return files;
  });
}

namespace {

// The manifest of a layer-models folder: its format, version and own checksum
// (which covers every other key: floor_ms, options, ...).
nlohmann::json read_checked_manifest(const std::string& mpath) {
  SCALEDL_CHECK(fs::exists(mpath),
                "{}: no manifest.json; is this a directory written by `scaledl train layers`?", mpath);
  const nlohmann::json man = read_json_file(mpath);
  SCALEDL_CHECK(man.is_object() && get_str_or(man, "format", mpath, "") == kFormatName,
                "{}: format is not \"{}\"", mpath, kFormatName);
  const int64_t ver = get_int(man, "version", mpath, 0, 1000);
  SCALEDL_CHECK(ver == kFormatVersion,
                "{}: version={} is not supported (expected {}; retrain with this build)", mpath, ver,
                kFormatVersion);
  nlohmann::json rest = man;
  const std::string want = get_str_or(man, "manifest_sha256", mpath, "");
  rest.erase("manifest_sha256");
  SCALEDL_CHECK(!want.empty() && sha256_hex(rest.dump()) == want,
                "{}: manifest_sha256 does not match the manifest's contents: the file was altered or damaged",
                mpath);
  return man;
}

// The manifest's "sustained_bw": the training GPUs' median share of their spec
// bandwidth, the same per memory family, and each one's GB/s.
void read_sustained_bw(const nlohmann::json& man, const std::string& mpath, double& share,
                       std::map<std::string, double>& share_by_family, std::map<std::string, double>& gbs) {
  const std::string ctx = mpath + ".sustained_bw";
  SCALEDL_CHECK(man.contains("sustained_bw") && man.at("sustained_bw").is_object(),
                "{}: key 'sustained_bw' is missing (options.sustained_bw is true)", mpath);
  const nlohmann::json& b = man.at("sustained_bw");
  SCALEDL_CHECK(b.contains("share"), "{}: key 'share' is missing", ctx);
  share = get_num_or(b, "share", ctx, 0, 1.5, 0);
  SCALEDL_CHECK(b.contains("gbs") && b.at("gbs").is_object(), "{}.gbs: expected an object of GB/s by device",
                ctx);
  if (b.contains("share_by_memory")) {  // absent: a model from before memory families
    SCALEDL_CHECK(b.at("share_by_memory").is_object(), "{}.share_by_memory: expected an object of shares",
                  ctx);
    for (const auto& [fam, v] : b.at("share_by_memory").items()) {
      SCALEDL_CHECK(
          v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0 && v.get<double>() <= 1.5,
          "{}.share_by_memory[{}]={} must be a number in (0, 1.5]", ctx, quoted(fam), show(v));
      share_by_family[fam] = v.get<double>();
    }
  }
  for (const auto& [key, v] : b.at("gbs").items()) {
    // The range of a device's rates (device.cpp): a sustained bandwidth beyond 1e6 GB/s is no device.
    SCALEDL_CHECK(
        v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0 && v.get<double>() <= 1e6,
        "{}.gbs[{}]={} must be a number > 0 and at most 1e6 (GB/s)", ctx, quoted(key), show(v));
    gbs[key] = v.get<double>();
  }
}

}  // namespace

LayerPredictor LayerPredictor::load(const std::string& dir) {
  const std::string mpath = (fs::path(dir) / "manifest.json").string();
  const nlohmann::json man = read_checked_manifest(mpath);
  SCALEDL_CHECK(man.contains("options"), "{}: key 'options' is missing", mpath);
  LayerPredictor p;
  p.opts_ = TrainOptions::from_json(man.at("options"), mpath + ".options");
  SCALEDL_CHECK(man.contains("models") && man.at("models").is_object(), "{}: key 'models' is missing", mpath);
  if (p.opts_.sustained_bw) read_sustained_bw(man, mpath, p.bw_share_, p.bw_share_by_family_, p.bw_);
  const FeatureOptions fo = feature_options(p.opts_);
  // The model files are checked, read and parsed on the hardware threads, one file each (the
  // parse is most of loading a bundle); the first error in the manifest's order is the one
  // raised, as when they were read one after the other.
  std::vector<std::pair<std::string, const nlohmann::json*>> entries;
  for (const auto& [name, e] : man.at("models").items()) entries.emplace_back(name, &e);
  std::vector<std::unique_ptr<Model>> loaded(entries.size());
  std::vector<std::exception_ptr> failed(entries.size());
  auto load_one = [&](size_t i) {
    try {
      const std::string& name = entries[i].first;
      const nlohmann::json& e = *entries[i].second;
      const std::string ctx = mpath + ".models." + printable(name);
      SCALEDL_CHECK(e.is_object(), "{}: expected an object", ctx);
      auto m = std::make_unique<Model>();
      m->type = parse_layer_type(get_str_or(e, "type", ctx, ""), ctx + ".type");
      m->rows = static_cast<size_t>(get_int(e, "rows", ctx, 0, INT64_MAX));
      m->floor_ms = get_num_or(e, "floor_ms", ctx, 0, 1e5, 0);  // a layer type's fastest time: under 100 s
      if (e.contains("trained_on")) {
        SCALEDL_CHECK(e.at("trained_on").is_array(), "{}.trained_on: expected an array of \"<dir> <dtype>\"",
                      ctx);
        for (const auto& k : e.at("trained_on")) {
          SCALEDL_CHECK(k.is_string(), "{}.trained_on: {} is not a string", ctx, k.dump());
          m->trained_on.insert(parse_dir_dtype(k.get<std::string>(), ctx + ".trained_on"));
        }
      }
      SCALEDL_CHECK(e.contains("features") && e.at("features").is_array(), "{}.features is missing", ctx);
      for (size_t k = 0; k < e.at("features").size(); ++k)
        SCALEDL_CHECK(e.at("features")[k].is_string(), "{}.features[{}]={} is not a string", ctx, k,
                      show(e.at("features")[k]));
      m->features = e.at("features").get<std::vector<std::string>>();
      SCALEDL_CHECK(m->features == feature_names(m->type, fo),
                    "{}.features differ from this build's feature columns for {}: retrain the model", ctx,
                    to_string(m->type));
      // Inside the folder (whose manifest a bundle checksums), and a regular file (a FIFO would block).
      const std::string rel = get_str_or(e, "file", ctx, "");
      if (const std::string why = path_outside(dir, rel, "the folder"); !why.empty())
        fail("{}.file={} {}: a model file stays inside its folder", ctx, printable(rel), why);
      const std::string file = (fs::path(dir) / rel).string();
      const std::string kind = file_kind(file);
      SCALEDL_CHECK(kind != "missing", "{}: model file is missing (listed in {})", file, mpath);
      SCALEDL_CHECK(kind == "a regular file", "{}: model file is {}, not a regular file (listed in {})", file,
                    kind, mpath);
      const auto bytes = static_cast<int64_t>(fs::file_size(file));
      const int64_t want = get_int(e, "bytes", ctx, 1, INT64_MAX);
      SCALEDL_CHECK(bytes == want, "{}: {} bytes, manifest says {}: the file is truncated or was replaced",
                    file, bytes, want);
      const std::string sha = get_str_or(e, "sha256", ctx, "");
      SCALEDL_CHECK(sha256_file(file) == sha,
                    "{}: SHA-256 differs from {}.sha256: the model file was altered or damaged", file, ctx);
      m->source = file;
      // The compiled trees of a file with this SHA-256, when a load before stored them
      // (tree_cache.hpp): no JSON parse at all. A missing, stale or damaged entry is
      // ignored. The checked SHA-256 above is the entry's key, so the file's checks hold.
      if (std::optional<TreeForest> cached = tree_cache::read(sha);
          cached && cached->num_features() == m->features.size()) {
        m->forest = std::move(cached);
        m->unread_sha256 = sha;
        loaded[i] = std::move(m);
        return;
      }
      // One parse: the checks of xgb::Booster::from_buffer, then the compiled trees from
      // the same document; XGBoost loads the model only if they do not cover it.
      m->text = read_text_file(file);
      const nlohmann::json doc = xgb::parse_model(m->text, file);
      m->forest = TreeForest::compile_document(doc, &m->forest_refused);
      // Best effort: the next load skips the parse. Keyed to the bytes parsed (the file could
      // have changed since its check).
      if (m->forest && m->forest->num_features() == m->features.size() && !tree_cache::directory().empty() &&
          sha256_hex(m->text) == sha)
        tree_cache::write(*m->forest, sha);
      loaded[i] = std::move(m);
    } catch (...) {
      failed[i] = std::current_exception();
    }
  };
  for_each_strided(entries.size(), strided_thread_count(entries.size()), load_one);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (failed[i]) std::rethrow_exception(failed[i]);
    std::unique_ptr<Model>& m = loaded[i];
    // XGBoost itself (when the compiled trees do not cover the model) on this thread only.
    const size_t nf = m->forest ? m->forest->num_features() : m->xgb().num_features();
    SCALEDL_CHECK(nf == m->features.size(), "{}: model has {} features, manifest lists {}", m->source, nf,
                  m->features.size());
    p.models_[entries[i].first] = std::move(m);
  }
  return p;
}

}  // namespace scaledl
