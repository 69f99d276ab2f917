// Many configurations of one request (predict_api.hpp): --sweep and --csv streamed in chunks,
// and the --anchor runs, which are resolved the same way.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/core/strided_threads.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/physics.hpp"
#include "scaledl/predict/predict_api.hpp"
#include "scaledl/predict/sweep.hpp"

namespace scaledl {

namespace {

/// Model, settings, samples per epoch and device of one variant.
struct Resolved {
  ModelSpec m;
  TrainSettings s;
  int64_t samples = 0;
  std::string label;
  std::string device_spec;  ///< the variant's device spec JSON; "" = --device-spec / --db
};

/// Parsed configs by model file and config.* overrides (a sweep over settings parses each file once).
struct ConfigCache {
  std::map<std::string, nlohmann::json> files;
  std::map<std::string, std::pair<ModelSpec, TrainSettings>> parsed;
};

bool is_config_key(const std::string& k) {
  return k.rfind("config.", 0) == 0;
}

/// The model and config settings of `v` (its file with the config.* overrides), parsed once.
const std::pair<ModelSpec, TrainSettings>& parsed_config(const Variant& v, const std::string& label,
                                                         ConfigCache& cache) {
  const std::string key = v.model + "\n" + label;
  auto pit = cache.parsed.find(key);
  if (pit != cache.parsed.end()) return pit->second;
  auto it = cache.files.find(v.model);
  if (it == cache.files.end()) it = cache.files.emplace(v.model, read_json_file(v.model)).first;
  nlohmann::json config = it->second;
  for (const auto& [k, val] : v.kv)
    if (is_config_key(k)) config[k.substr(7)] = config_value(val, k);
  for (const auto& [k, val] : v.kv)
    if (is_config_key(k)) check_config_key_used(config, k.substr(7), v.model);
  ModelSpec m = parse_model_config(config, v.model);
  m.name = label;
  return cache.parsed.emplace(key, std::make_pair(m, settings_from_config(config, v.model))).first->second;
}

Resolved resolve_variant(const PredictRequest& o, const Variant& v, ConfigCache& cache) {
  std::string label = std::filesystem::path(v.model).stem().string();
  for (const auto& [k, val] : v.kv) {
    if (is_config_key(k)) label += fmt::format(" {}={}", k.substr(7), val);
    if (k == "framework") label += fmt::format(" framework={}", val);  // the recipe tells rows apart
  }
  const auto& parsed = parsed_config(v, label, cache);
  Resolved r;
  r.m = parsed.first;
  r.label = label;
  r.s = parsed.second;
  o.args.apply(r.s);
  r.s.num_devices = o.devices;
  r.samples = o.samples;
  for (const auto& [k, val] : v.kv) {
    if (k == "batch") r.s.batch = parse_setting_int(val, k, 1, int64_t{1} << 24);
    if (k == "seq") r.s.seq_len = parse_setting_int(val, k, 1, int64_t{1} << 24);
    if (k == "image") r.s.image_size = parse_setting_int(val, k, 1, int64_t{1} << 16);
    if (k == "dtype") set_dtype_recipe(r.s, val, k);
    if (k == "optimizer") r.s.optimizer = parse_optimizer(val, k);
    if (k == "mode") set_run_mode(r.s, parse_run_mode(val, k));
    if (k == "devices") r.s.num_devices = parse_setting_int(val, k, 1, int64_t{1} << 20);
    if (k == "samples") r.samples = parse_setting_int(val, k, 0, int64_t{1} << 50);
    if (k == "device_spec") r.device_spec = val;
    if (k == "framework") {
      SCALEDL_CHECK(o.args.attention.empty(),
                    "--attention={} with framework={}: a framework sets its attention core; sweep the "
                    "frameworks without --attention",
                    o.args.attention, val);
      apply_framework(r.s, parse_framework(val, k));
    }
  }
  for (const auto& [k, val] : v.kv)
    if (k == "optimizer") ModelRequest::check_optimizer_applies(r.s, k, val);
  if (!o.args.optimizer.empty()) ModelRequest::check_optimizer_applies(r.s, "--optimizer", o.args.optimizer);
  int64_t seq = o.args.seq, image = o.args.image;
  for (const auto& [k, val] : v.kv) {
    if (k == "seq") seq = r.s.seq_len;
    if (k == "image") image = r.s.image_size;
  }
  check_input_size(r.m, seq, image, "seq", "image");
  return r;
}

/// The resolved variants and their layer graphs; a bad one fails naming its
/// number and model, after `what` ("" or "--anchor=FILE: ").
void resolve_all(const PredictRequest& o, const std::vector<Variant>& vars, const std::string& what,
                 std::vector<Resolved>& res, std::vector<LayerGraph>& graphs) {
  // Resolved in order (the config cache is shared) up to the first that fails; the graphs of
  // those before it built on the hardware threads. The error named is that of the lowest
  // configuration that fails either way, as when each was resolved and built in turn.
  ConfigCache configs;
  res.reserve(vars.size());
  size_t bad = vars.size();
  std::string bad_what;
  for (size_t i = 0; i < vars.size() && bad == vars.size(); ++i) {
    try {
      res.push_back(resolve_variant(o, vars[i], configs));
    } catch (const Error& e) {
      bad = i;
      bad_what = e.what();
    }
  }
  graphs.assign(res.size(), LayerGraph{});
  std::vector<std::optional<std::string>> build_error(res.size());  // the Error of each that failed
  for_each_strided(res.size(), strided_thread_count(res.size()), [&](size_t i) {
    try {
      graphs[i] = build_layer_graph(res[i].m, res[i].s);
    } catch (const Error& e) {
      build_error[i] = e.what();
    }
  });
  for (size_t i = 0; i < res.size(); ++i)
    if (build_error[i]) {
      bad = i;
      bad_what = *build_error[i];
      break;
    }
  if (bad < vars.size()) fail("{}configuration {} ({}): {}", what, bad + 1, vars[bad].model, bad_what);
}

/// The configurations of a --sweep (an index space) or a --csv (its rows).
struct SweepSource {
  SweepSpace space;
  std::vector<Variant> rows;
  bool csv = false;
  size_t size() const { return csv ? rows.size() : space.size(); }
  Variant at(size_t i) const { return csv ? rows[i] : space.at(i); }
};

/// A bad value is named before anything is written: each value of each --sweep list (with the
/// other lists at their first value) and every --csv row is resolved once up front.
void check_sweep_values(const PredictRequest& o, const SweepSource& src) {
  ConfigCache cache;
  auto check = [&](size_t i, const Variant& v) {
    try {
      resolve_variant(o, v, cache);
    } catch (const Error& e) {
      fail("configuration {} ({}): {}", i + 1, v.model, e.what());
    }
  };
  if (src.csv) {
    for (size_t i = 0; i < src.rows.size(); ++i) check(i, src.rows[i]);
    return;
  }
  const auto& axes = src.space.axes;
  size_t stride = src.size();
  for (size_t k = 0; k < axes.size(); ++k) {
    stride /= axes[k].second.size();
    for (size_t x = 0; x < axes[k].second.size(); ++x) {
      Variant v = src.space.at(0);
      v.kv[k].second = axes[k].second[x];
      check(x * stride, v);
    }
  }
}

/// What persists across the chunks of one sweep: the devices by spec path ("" = the default),
/// the anchor of each, and the running maximum along batch and seq.
struct SweepState {
  std::map<std::string, DeviceRecord> devs;
  std::optional<PriceTable> prices;  ///< --prices, else the shipped table (none when not installed)
  std::map<std::string, std::optional<AnchorFit>> anchors;
  SweepMonotone monotone;
};

/// The configurations of one chunk by device path, loading each new device (numbered from `start`).
std::map<std::string, std::vector<size_t>> group_by_device(const PredictRequest& o,
                                                           const std::vector<Resolved>& res,
                                                           const std::optional<DeviceRecord>& dflt,
                                                           size_t start, SweepState& st) {
  std::map<std::string, std::vector<size_t>> by_dev;
  for (size_t i = 0; i < res.size(); ++i) {
    const std::string& path = res[i].device_spec;
    if (!st.devs.count(path)) {
      if (path.empty()) {
        SCALEDL_CHECK(dflt.has_value(),
                      "configuration {} ({}): no device: give --device-spec FILE or --db STORE, or a "
                      "device_spec sweep or column",
                      start + i + 1, res[i].label);
        st.devs.emplace(path, *dflt);
      } else {
        try {
          st.devs.emplace(path, load_device_spec(path));
        } catch (const Error& e) {
          fail("configuration {} ({}): device_spec={}: {}", start + i + 1, res[i].label, path, e.what());
        }
      }
      SCALEDL_CHECK(o.anchor.empty() || st.devs.size() == 1,
                    "--anchor={}: the measured runs are of one device; the configurations name {} devices",
                    o.anchor, st.devs.size());
    }
    by_dev[path].push_back(i);
  }
  return by_dev;
}

/// The rows of one chunk: each device's configurations predicted together; one it cannot run
/// (BF16 on a GPU without BF16 tensor cores) is a row that says why, not the end of the sweep.
std::vector<PredictRow> predict_chunk(const PredictRequest& o, const Bundle& b,
                                      const std::vector<Resolved>& res, std::vector<LayerGraph>& graphs,
                                      const std::map<std::string, std::vector<size_t>>& by_dev,
                                      SweepState& st) {
  std::vector<PredictRow> rows(res.size());
  for (const auto& [path, all_idx] : by_dev) {
    const DeviceRecord& dev = st.devs.at(path);
    std::vector<size_t> idx;
    for (size_t i : all_idx) {
      rows[i].infeasible = settings_refusal(graphs[i].settings, dev);
      if (rows[i].infeasible.empty()) idx.push_back(i);
    }
    if (idx.empty()) continue;
    std::vector<const LayerGraph*> ptrs;
    for (size_t i : idx) ptrs.push_back(&graphs[i]);
    std::vector<IterationPrediction> got = b.predict_many(ptrs, dev, !o.raw);
    if (!st.anchors.count(path)) st.anchors[path] = request_anchor(o, b, dev);
    const auto& a = st.anchors.at(path);
    for (size_t k = 0; k < idx.size(); ++k) {
      if (a) b.apply_anchor(got[k], *a);
      rows[idx[k]].p = std::move(got[k]);
      rows[idx[k]].memory =
          predict_memory(graphs[idx[k]], dev, b.memory ? &*b.memory : nullptr, o.headroom, o.keep_outputs);
    }
  }
  graphs.clear();
  for (size_t i = 0; i < res.size(); ++i) {
    PredictRow& row = rows[i];
    const DeviceRecord& dev = st.devs.at(res[i].device_spec);
    if (row.infeasible.empty() && !o.raw) st.monotone.apply(row.p, res[i].label, dev.key(), res[i].s);
    row.label = res[i].label;
    row.settings = res[i].s;
    row.device = dev.key();
    row.iterations = res[i].samples ? iterations_per_epoch(res[i].samples, res[i].s) : o.iterations;
    if (st.prices)  // the configuration's device_spec, else the request's
      if (const GpuPrice* g =
              st.prices->find(res[i].device_spec.empty() ? o.device_spec : res[i].device_spec))
        row.price_per_gpu_hour = g->per_gpu_hour;
    if (row.infeasible.empty()) {
      row.device_layer_rows = b.layer_rows_of(dev.key());
      if (const LayerCalibration* c = b.calibration_for(dev.key())) row.calibration = c->to_json();
    }
  }
  return rows;
}

/// resolve_all of one chunk, its errors numbered as configurations of the whole sweep.
void resolve_chunk(const PredictRequest& o, const std::vector<Variant>& vars, size_t start,
                   std::vector<Resolved>& res, std::vector<LayerGraph>& graphs) {
  try {
    resolve_all(o, vars, "", res, graphs);
  } catch (const Error& e) {
    const std::string w = e.what();
    const size_t k = w.rfind("configuration ", 0) == 0 ? std::strtoull(w.c_str() + 14, nullptr, 10) : 0;
    if (k == 0) throw;
    fail("configuration {}{}", start + k, w.substr(w.find(' ', 14)));
  }
}

}  // namespace

std::optional<AnchorFit> request_anchor(const PredictRequest& o, const Bundle& b, const DeviceRecord& dev) {
  if (o.anchor.empty()) return std::nullopt;
  std::vector<double> ms;
  std::vector<Resolved> res;
  std::vector<LayerGraph> graphs;
  resolve_all(o, csv_variants(o.anchor, "--anchor", o.args.model, &ms), "--anchor=" + o.anchor + ": ", res,
              graphs);
  std::vector<const LayerGraph*> ptrs;
  for (const auto& g : graphs) ptrs.push_back(&g);
  // A measured run counts only for the device it was measured on, and only if it is physically
  // possible there: no faster than the roofline of its configuration.
  for (size_t i = 0; i < res.size(); ++i) {
    if (!res[i].device_spec.empty()) {
      const DeviceRecord d = load_device_spec(res[i].device_spec);
      SCALEDL_CHECK(
          d.key() == dev.key(),
          "--anchor={}: run {} ({}) was measured on device_spec={} ({}), not on the device predicted ({})",
          o.anchor, i + 1, res[i].label, res[i].device_spec, d.key(), dev.key());
    }
    const double floor = iteration_roofline_ms(graphs[i], dev);
    SCALEDL_CHECK(
        ms[i] >= floor,
        "--anchor={}: run {} ({}): measured_ms={:.6g} is faster than the roofline of its configuration on "
        "{} ({:.6g} ms): not a measurement of this device",
        o.anchor, i + 1, res[i].label, ms[i], dev.key(), floor);
  }
  return b.fit_anchor(ptrs, ms, dev);
}

SweepStats predict_sweep(const PredictRequest& o, const Bundle& b, const std::optional<DeviceRecord>& dflt,
                         const std::function<void(const std::vector<PredictRow>&)>& on_chunk,
                         const std::function<void(size_t total)>& on_total) {
  using Clock = std::chrono::steady_clock;
  SweepSource src;
  src.csv = !o.csv.empty();
  if (src.csv)
    src.rows = csv_variants(o.csv, "--csv", o.args.model);
  else
    src.space = sweep_space(o.args.model, o.sweeps);
  SweepStats stats;
  stats.total = src.size();
  check_sweep_values(o, src);
  if (on_total) on_total(stats.total);
  SweepState st;
  st.prices =
      o.prices.empty() ? shipped_price_table() : std::optional<PriceTable>(load_price_table(o.prices));
  for (size_t start = 0; start < stats.total; start += kSweepChunk) {
    const auto c0 = Clock::now();
    const size_t n = std::min(kSweepChunk, stats.total - start);
    std::vector<Variant> vars;
    vars.reserve(n);
    for (size_t i = start; i < start + n; ++i) vars.push_back(src.at(i));
    std::vector<Resolved> res;
    std::vector<LayerGraph> graphs;
    resolve_chunk(o, vars, start, res, graphs);
    const auto by_dev = group_by_device(o, res, dflt, start, st);
    const auto c1 = Clock::now();
    const std::vector<PredictRow> rows = predict_chunk(o, b, res, graphs, by_dev, st);
    const auto c2 = Clock::now();
    on_chunk(rows);
    stats.build_s += std::chrono::duration<double>(c1 - c0).count();
    stats.pred_s += std::chrono::duration<double>(c2 - c1).count();
  }
  return stats;
}

}  // namespace scaledl
