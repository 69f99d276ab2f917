// scaledl predict MODEL.json: per-iteration and per-epoch training time of a
// model config on a device (ScaleDL Algorithm 1; see predict.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.hpp"
#include "model_args.hpp"
#include "pipeline_args.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/core/strided_threads.hpp"
#include "scaledl/gnn/gnn.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "scaledl/learn/neusight.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/parallel.hpp"
#include "scaledl/predict/physics.hpp"
#include "scaledl/predict/predict.hpp"
#include "scaledl/predict/sweep.hpp"

namespace {

using scaledl::Variant;

/// clock_note() of `dev`, but nothing of a power-limited card whose own layer timings trained
/// the bundle (NeuSight's T4): the layer models learnt its times at the clock it held.
std::string clock_assumption(const scaledl::Bundle& b, const scaledl::DeviceRecord& dev) {
  const std::optional<int64_t> rows = b.layer_rows_of(dev.key());
  if (dev.sustained_clock_mhz <= 0 && rows && *rows > 0) return "";
  return scaledl::clock_note(dev);
}

/// For a mixture with a fixed expert capacity (Switch Transformers' expert_capacity) that drops
/// tokens at this length: what the graph assumes of the dispatch, and how to model the other one.
/// Transformers 4.x counts each expert's tokens per sequence and passes those over the capacity
/// by; transformers 5 sends every token to its expert (docs/unseen-gpu.md, "Switch-XL on the
/// H200"). "" when no token is dropped.
std::string dispatch_note(const scaledl::ModelSpec& m, const scaledl::TrainSettings& s) {
  if (m.num_experts <= 0 || m.expert_capacity <= 0 || scaledl::every_expert_runs(m, !s.backward)) return "";
  const int64_t slots = scaledl::expert_capacity_per_sample(m, s.seq_len);
  const int64_t taken = std::min<int64_t>(s.seq_len, slots * m.num_experts);
  if (taken >= s.seq_len) return "";
  return fmt::format(
      "each expert takes at most expert_capacity={} tokens per sequence, as transformers 4.x dispatches: at "
      "least {} of the {} tokens of a sequence pass their FFN by; transformers 5 drops none (--sweep "
      "config.capacity_factor=1.0 models that; docs/unseen-gpu.md)",
      m.expert_capacity, s.seq_len - taken, s.seq_len);
}

/// The attention (and elementwise) kernels the graph costs: Hugging Face's eager kernels, one
/// each, or the fused ones of TrainSettings::fused_kernels.
const char* attention_kind(const scaledl::TrainSettings& s) {
  return s.fused_kernels ? "fused" : "eager";
}

/// "seq 128" for a text model, "image 224" for a vision one.
std::string input_size(const scaledl::ModelSpec& m, const scaledl::TrainSettings& s) {
  if (m.arch == scaledl::Arch::VisionEncoder)
    return fmt::format("image {}", s.image_size > 0 ? s.image_size : m.image_size);
  return fmt::format("seq {}", s.seq_len);
}

struct PredictOptions {
  scaledl::cli::ModelArgs args;  ///< model config and training settings
  std::string bundle;            ///< bundle directory (`scaledl train --out`)
  std::string layers;            ///< LayerPredictor directory (`train layers --out`)
  std::string graph;             ///< graph model file or directory (`train graph --out`); "" = no refinement
  std::string device_spec;       ///< device spec JSON (NeuSight device_configs or ScaleDL format)
  std::string db;                ///< store holding probed device records
  std::string device;            ///< device key in --db (e.g. "cpu:..."); "" = its only device
  int64_t devices = 1;           ///< data-parallel devices N, >= 1
  std::string comm;              ///< all-reduce calibration JSON (needed when N > 1)
  int64_t samples = 0;           ///< training samples per epoch (0 = use --iterations)
  int64_t iterations = 0;        ///< iterations per epoch I (0 = from --samples)
  std::vector<std::string> sweeps;  ///< "KEY=V1,V2,...": predict the cartesian product
  std::string csv;                  ///< CSV of configurations, one per row
  std::string anchor;               ///< CSV of configurations measured on this device (+ measured_ms)
  bool timing = false;              ///< print load and prediction times to stderr
  bool raw = false;                 ///< the models' own T_iter, without the physical bounds
  int threads = 1;                  ///< LibTorch threads of the refinement
  bool json = false;
  scaledl::ParallelConfig par;  ///< --gpus, --nodes, --tp, --pp, --ep, --microbatches, --zero, --recompute
  scaledl::cli::PipelineArgs
      input;               ///< --pipeline, --workers, --vcpus, --input (issue #15, docs/pipeline.md)
  bool par_given = false;  ///< any of those flags was given
  double headroom = 0.10;  ///< fraction of device memory kept free for the fits verdict
  std::optional<double> host_node_us;  ///< --host-node-us: the host's cost per graph node, us
  std::string calibrate;               ///< --calibrate: store with a few layer timings of the device
};

// ---- many configurations: --sweep and --csv -----------------------------------

/// Model, settings, samples per epoch and device count of one variant.
struct Resolved {
  scaledl::ModelSpec m;
  scaledl::TrainSettings s;
  int64_t samples = 0;
  std::string label;
  std::string device_spec;  ///< the variant's device spec JSON; "" = --device-spec / --db
};

/// Parsed configs by model file and config.* overrides (a sweep over settings parses each file once).
struct ConfigCache {
  std::map<std::string, nlohmann::json> files;
  std::map<std::string, std::pair<scaledl::ModelSpec, scaledl::TrainSettings>> parsed;
};

Resolved resolve_variant(const PredictOptions& o, const Variant& v, ConfigCache& cache) {
  using namespace scaledl;
  std::string label = std::filesystem::path(v.model).stem().string();
  for (const auto& [k, val] : v.kv)
    if (k.rfind("config.", 0) == 0) label += fmt::format(" {}={}", k.substr(7), val);
  const std::string key = v.model + "\n" + label;
  auto pit = cache.parsed.find(key);
  if (pit == cache.parsed.end()) {
    auto it = cache.files.find(v.model);
    if (it == cache.files.end()) it = cache.files.emplace(v.model, read_json_file(v.model)).first;
    nlohmann::json config = it->second;
    for (const auto& [k, val] : v.kv)
      if (k.rfind("config.", 0) == 0) config[k.substr(7)] = config_value(val, k);
    for (const auto& [k, val] : v.kv)
      if (k.rfind("config.", 0) == 0) check_config_key_used(config, k.substr(7), v.model);
    ModelSpec m = parse_model_config(config, v.model);
    m.name = label;
    pit = cache.parsed.emplace(key, std::make_pair(m, settings_from_config(config, v.model))).first;
  }
  Resolved r;
  r.m = pit->second.first;
  r.label = label;
  r.s = pit->second.second;
  o.args.apply(r.s);
  r.s.num_devices = o.devices;
  r.samples = o.samples;
  for (const auto& [k, val] : v.kv) {
    if (k == "batch") r.s.batch = parse_setting_int(val, k, 1, int64_t{1} << 24);
    if (k == "seq") r.s.seq_len = parse_setting_int(val, k, 1, int64_t{1} << 24);
    if (k == "image") r.s.image_size = parse_setting_int(val, k, 1, int64_t{1} << 16);
    if (k == "dtype") r.s.dtype = parse_dtype(val, k);
    if (k == "optimizer") r.s.optimizer = parse_optimizer(val, k);
    if (k == "mode") set_run_mode(r.s, parse_run_mode(val, k));
    if (k == "devices") r.s.num_devices = parse_setting_int(val, k, 1, int64_t{1} << 20);
    if (k == "samples") r.samples = parse_setting_int(val, k, 0, int64_t{1} << 50);
    if (k == "device_spec") r.device_spec = val;
  }
  for (const auto& [k, val] : v.kv)
    if (k == "optimizer") scaledl::cli::ModelArgs::check_optimizer_applies(r.s, k, val);
  if (!o.args.optimizer.empty())
    scaledl::cli::ModelArgs::check_optimizer_applies(r.s, "--optimizer", o.args.optimizer);
  int64_t seq = o.args.seq, image = o.args.image;
  for (const auto& [k, val] : v.kv) {
    if (k == "seq") seq = r.s.seq_len;
    if (k == "image") image = r.s.image_size;
  }
  scaledl::cli::check_input_size(r.m, seq, image, "seq", "image");
  return r;
}

/// The resolved variants and their layer graphs; a bad one fails naming its
/// number and model, after `what` ("" or "--anchor=FILE: ").
void resolve_all(const PredictOptions& o, const std::vector<Variant>& vars, const std::string& what,
                 std::vector<Resolved>& res, std::vector<scaledl::LayerGraph>& graphs) {
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
    } catch (const scaledl::Error& e) {
      bad = i;
      bad_what = e.what();
    }
  }
  graphs.assign(res.size(), scaledl::LayerGraph{});
  std::vector<std::optional<std::string>> build_error(res.size());  // the Error of each that failed
  scaledl::for_each_strided(res.size(), scaledl::strided_thread_count(res.size()), [&](size_t i) {
    try {
      graphs[i] = scaledl::build_layer_graph(res[i].m, res[i].s);
    } catch (const scaledl::Error& e) {
      build_error[i] = e.what();
    }
  });
  for (size_t i = 0; i < res.size(); ++i)
    if (build_error[i]) {
      bad = i;
      bad_what = *build_error[i];
      break;
    }
  if (bad < vars.size())
    scaledl::fail("{}configuration {} ({}): {}", what, bad + 1, vars[bad].model, bad_what);
}

/// --anchor: the device's bias from the measured configurations (device_intervals.hpp).
std::optional<scaledl::AnchorFit> anchor_of(const PredictOptions& o, const scaledl::Bundle& b,
                                            const scaledl::DeviceRecord& dev) {
  using namespace scaledl;
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

/// Configurations per chunk of a sweep or CSV: resolved, built, predicted and written before
/// the next, so memory stays that of one chunk whatever the sweep's size (a layer graph is
/// ~0.65 MB; a sweep of 10^6 configurations held whole needed 7.4 GB; 6,000 configurations of
/// GPT-2 in chunks of 512 peak at ~0.5 GB RSS).
constexpr size_t kSweepChunk = 512;

/// --sweep/--csv: every configuration, each on its device (the variant's device_spec, else
/// `dflt`: --device-spec or --db), in chunks of kSweepChunk. Devices are compared in one table:
/// "which GPU to rent" (docs/predict.md). A configuration its device cannot run is a row that
/// says why.
int run_many(const PredictOptions& o, const scaledl::Bundle& b,
             const std::optional<scaledl::DeviceRecord>& dflt, double load_s) {
  using namespace scaledl;
  using Clock = std::chrono::steady_clock;
  const SweepSpace space = o.csv.empty() ? sweep_space(o.args.model, o.sweeps) : SweepSpace{};
  const std::vector<Variant> csv_rows =
      o.csv.empty() ? std::vector<Variant>{} : csv_variants(o.csv, "--csv", o.args.model);
  const size_t total = o.csv.empty() ? space.size() : csv_rows.size();
  // A bad value is named before anything is written: each value of each --sweep list (with the
  // other lists at their first value) and every --csv row is resolved once up front.
  {
    ConfigCache cache;
    auto check = [&](size_t i, const Variant& v) {
      try {
        resolve_variant(o, v, cache);
      } catch (const Error& e) {
        fail("configuration {} ({}): {}", i + 1, v.model, e.what());
      }
    };
    if (o.csv.empty()) {
      size_t stride = total;
      for (size_t k = 0; k < space.axes.size(); ++k) {
        stride /= space.axes[k].second.size();
        for (size_t x = 0; x < space.axes[k].second.size(); ++x) {
          Variant v = space.at(0);
          v.kv[k].second = space.axes[k].second[x];
          check(x * stride, v);
        }
      }
    } else {
      for (size_t i = 0; i < csv_rows.size(); ++i) check(i, csv_rows[i]);
    }
  }
  if (total > kSweepChunk)
    std::fprintf(stderr, "scaledl: %zu configurations, predicted and written %zu at a time\n", total,
                 kSweepChunk);
  std::map<std::string, DeviceRecord> devs;                 // by spec path; "" = the default
  std::map<std::string, std::optional<AnchorFit>> anchors;  // by spec path
  SweepMonotone monotone;
  double build_s = 0, pred_s = 0;
  bool first_row = true;
  auto num = [](double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string(); };
  for (size_t start = 0; start < total; start += kSweepChunk) {
    const auto c0 = Clock::now();
    const size_t n = std::min(kSweepChunk, total - start);
    std::vector<Variant> vars;
    vars.reserve(n);
    for (size_t i = start; i < start + n; ++i) vars.push_back(o.csv.empty() ? space.at(i) : csv_rows[i]);
    std::vector<Resolved> res;
    std::vector<LayerGraph> graphs;
    try {
      resolve_all(o, vars, "", res, graphs);
    } catch (const Error& e) {
      // resolve_all numbers the configurations of this chunk: name the sweep's number instead.
      const std::string w = e.what();
      const size_t k = w.rfind("configuration ", 0) == 0 ? std::strtoull(w.c_str() + 14, nullptr, 10) : 0;
      if (k == 0) throw;
      fail("configuration {}{}", start + k, w.substr(w.find(' ', 14)));
    }
    // The device of each configuration; configurations of one device are predicted together.
    std::map<std::string, std::vector<size_t>> by_dev;
    for (size_t i = 0; i < res.size(); ++i) {
      const std::string& path = res[i].device_spec;
      if (!devs.count(path)) {
        if (path.empty()) {
          SCALEDL_CHECK(
              dflt.has_value(),
              "configuration {} ({}): no device: give --device-spec FILE or --db STORE, or a device_spec "
              "sweep or column",
              start + i + 1, res[i].label);
          devs.emplace(path, *dflt);
        } else {
          try {
            devs.emplace(path, load_device_spec(path));
          } catch (const Error& e) {
            fail("configuration {} ({}): device_spec={}: {}", start + i + 1, res[i].label, path, e.what());
          }
        }
        SCALEDL_CHECK(o.anchor.empty() || devs.size() == 1,
                      "--anchor={}: the measured runs are of one device; the configurations name {} devices",
                      o.anchor, devs.size());
      }
      by_dev[path].push_back(i);
    }
    const auto c1 = Clock::now();
    std::vector<IterationPrediction> preds(res.size());
    std::vector<MemoryPrediction> mems(res.size());
    std::vector<std::string> infeasible(res.size());  // why a configuration cannot run on its device
    for (const auto& [path, all_idx] : by_dev) {
      const DeviceRecord& dev = devs.at(path);
      // A configuration the device cannot run (BF16 on a GPU without BF16 tensor cores) is a row
      // that says why, not the end of the sweep.
      std::vector<size_t> idx;
      for (size_t i : all_idx) {
        infeasible[i] = dtype_refusal(graphs[i].settings.dtype, dev);
        if (infeasible[i].empty()) idx.push_back(i);
      }
      if (idx.empty()) continue;
      std::vector<const LayerGraph*> ptrs;
      for (size_t i : idx) ptrs.push_back(&graphs[i]);
      std::vector<IterationPrediction> got = b.predict_many(ptrs, dev, !o.raw);
      if (!anchors.count(path)) anchors[path] = anchor_of(o, b, dev);
      const auto& a = anchors.at(path);
      for (size_t k = 0; k < idx.size(); ++k) {
        if (a) b.apply_anchor(got[k], *a);
        preds[idx[k]] = std::move(got[k]);
        mems[idx[k]] = predict_memory(graphs[idx[k]], dev, b.memory ? &*b.memory : nullptr, o.headroom);
      }
    }
    graphs.clear();
    for (size_t i = 0; i < res.size(); ++i)
      if (infeasible[i].empty() && !o.raw)
        monotone.apply(preds[i], res[i].label, devs.at(res[i].device_spec).key(), res[i].s);
    const auto c2 = Clock::now();

    if (!o.json &&
        start == 0)  // the header once the first chunk is predicted: an error before it is one line
      std::cout
          << "model,batch,seq,image,dtype,optimizer,devices,t_sum_ms,t_comm_ms,alpha,beta,t_iter_ms,lo80_ms,"
             "hi80_ms,lo95_ms,hi95_ms,out_of_domain,iterations,t_epoch_s,t_model_ms,t_roofline_ms,adjusted,"
             "mode,"
             "device,peak_memory_gb,memory,attention,infeasible\n";
    for (size_t i = 0; i < res.size(); ++i) {
      const DeviceRecord& dev = devs.at(res[i].device_spec);
      const auto& p = preds[i];
      const auto& s = res[i].s;
      const int64_t it = res[i].samples ? iterations_per_epoch(res[i].samples, s) : o.iterations;
      if (o.json) {
        nlohmann::json j = infeasible[i].empty() ? p.to_json() : nlohmann::json::object();
        if (!infeasible[i].empty()) j["infeasible"] = infeasible[i];
        j["model"] = res[i].label;
        j["settings"] = s.to_json();
        j["mode"] = to_string(run_mode(s));
        j["attention"] = attention_kind(s);
        j["iterations_per_epoch"] = it;
        j["t_epoch_s"] =
            it && infeasible[i].empty() ? nlohmann::json(it * p.t_iter_ms / 1e3) : nlohmann::json();
        j["device"] = dev.key();
        if (infeasible[i].empty()) {
          if (const auto rows = b.layer_rows_of(dev.key())) j["device_layer_rows"] = *rows;
          if (const LayerCalibration* c = b.calibration_for(dev.key())) j["calibration"] = c->to_json();
          j["memory"] = mems[i].to_json();
        }
        // One element of a JSON array indented by 2, as nlohmann's dump(2) of the whole array.
        std::string text = j.dump(2);
        std::string indented = "  ";
        for (char ch : text) indented += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
        std::cout << (first_row ? "[\n" : ",\n") << indented;
      } else if (!infeasible[i].empty()) {  // the settings, the device and why; no times
        std::cout << fmt::format("{},{},{},{},{},{},{},,,,,,,,,,,{},,,,,{},{},,,{},{}\n",
                                 csv_quote(res[i].label), s.batch, s.seq_len, s.image_size,
                                 to_string(s.dtype), s.optimizer_step ? to_string(s.optimizer) : "none",
                                 s.num_devices, it, csv_field(to_string(run_mode(s))), csv_quote(dev.key()),
                                 attention_kind(s), csv_field(infeasible[i]));
      } else {
        std::cout << fmt::format(
            "{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},{},{},{},{},{},{},{},{},{},{:."
            "4g},{},{},\n",
            csv_quote(res[i].label), s.batch, s.seq_len, s.image_size, to_string(s.dtype),
            s.optimizer_step ? to_string(s.optimizer) : "none", s.num_devices, p.t_sum_ms, p.t_comm_ms,
            p.alpha, p.beta, p.t_iter_ms, num(p.lo80_ms), num(p.hi80_ms), num(p.lo95_ms), num(p.hi95_ms),
            p.ood_distance > 0 ? 1 : 0, it,
            it ? fmt::format("{:.6g}", it * p.t_iter_ms / 1e3) : std::string(),
            p.t_roofline_ms > 0 ? num(p.t_model_ms) : std::string(),
            p.t_roofline_ms > 0 ? num(p.t_roofline_ms) : std::string(), csv_field(p.adjusted),
            csv_field(to_string(run_mode(s))), csv_quote(dev.key()), mems[i].peak_bytes / 1e9,
            csv_field(mems[i].verdict), attention_kind(s));
      }
      first_row = false;
    }
    std::cout.flush();
    build_s += std::chrono::duration<double>(c1 - c0).count();
    pred_s += std::chrono::duration<double>(c2 - c1).count();
  }
  if (o.json) std::cout << (first_row ? "[]\n" : "\n]\n");
  if (o.timing)
    std::cerr << fmt::format(
        "timing: load {:.3f} s; {} configurations: parse + layer graphs {:.3f} s, prediction "
        "{:.3f} s ({:.0f} configurations per second end to end)\n",
        load_s, total, build_s, pred_s, total / std::max(1e-9, build_s + pred_s));
  return 0;
}

/// "memory      12.3 GB peak ... fits in 80 GB (10 % headroom)".
std::string memory_line(double peak, double lo80, double hi80, const std::string& how, double cap,
                        double headroom, const std::string& verdict) {
  std::string line =
      fmt::format("memory       {:10.3f} GB peak ({}{})", peak / 1e9, how,
                  std::isfinite(lo80) ? fmt::format("; 80 % [{:.3f}, {:.3f}] GB", lo80 / 1e9, hi80 / 1e9)
                                      : std::string());
  if (cap <= 0) return line + "; the device record has no memory size: fit unknown\n";
  return line + fmt::format("; {} in {:.1f} GB with {:.0f} % headroom\n",
                            verdict == "tight"  ? "FITS (tight: the 80 % upper bound does not)"
                            : verdict == "fits" ? "fits"
                                                : "DOES NOT FIT",
                            cap / 1e9, 100 * headroom);
}

/// The `calibration` line: how many rows of which store set which factors.
std::string calibration_line(const scaledl::LayerCalibration& c) {
  const nlohmann::json j = c.to_json();
  std::vector<std::string> f;
  for (const auto& [kind, v] : j["factors"].items())
    f.push_back(fmt::format("{} x{:.2f}", kind, v["factor"].get<double>()));
  return fmt::format("calibration  {} of {} layer timings of this device in {}: {}\n", c.rows_used(),
                     c.rows_in, c.source, fmt::join(f, ", ")) +
         (c.caution.empty() ? "" : fmt::format("             caution: {}\n", c.caution));
}

scaledl::DeviceRecord resolve_device(const PredictOptions& o) {
  using scaledl::fail;
  if (!o.device_spec.empty()) {
    SCALEDL_CHECK(o.db.empty(), "--device-spec and --db both name a device: give one");
    return scaledl::load_device_spec(o.device_spec);
  }
  SCALEDL_CHECK(!o.db.empty(), "no device: give --device-spec FILE or --db STORE [--device KEY]");
  scaledl::Store store(o.db, /*read_only=*/true);
  if (!o.device.empty()) {
    auto d = store.device(o.device);
    SCALEDL_CHECK(d.has_value(), "--device={} is not in {} (see `scaledl db info --db {}`)", o.device, o.db,
                  o.db);
    return *d;
  }
  auto all = store.devices();
  SCALEDL_CHECK(all.size() == 1, "--db={} holds {} devices: choose one with --device KEY", o.db, all.size());
  return all[0];
}

/// --gpus/--tp/--pp...: the parallel composition of parallel.hpp.
int run_parallel(const PredictOptions& o, const scaledl::Bundle& b, const scaledl::DeviceRecord& dev) {
  using namespace scaledl;
  std::vector<std::string> assumed;
  auto [m, s] = o.args.load(&assumed);
  const CommModel comm = b.cluster_comm();
  ParallelConfig par = o.par;
  par.host_node_ms = b.host_node_ms_for(dev.key());  // --host-node-us, else the bundle's term for this device
  ParallelPrediction r = predict_parallel_anchored(b, m, s, par, dev, comm, comm);
  const std::string host_warning = host_bound_warning(r.t_slot_gpu_ms, r.slot_nodes, r.t_host_ms, dev.kind);
  const std::string comm_warning = cross_node_comm_warning(comm, o.par.nodes);  // issue #39 case 27
  // Issue #15 (ORION): T_iter = max(T_compute, T_input); a host prepares batch x its dp/nodes replicas.
  const auto input = o.input.apply(r.t_iter_ms, m, s, static_cast<double>(s.batch) * r.plan.dp / o.par.nodes);
  const ParallelPlan& p = r.plan;
  const int64_t iters =
      o.iterations ? o.iterations : (o.samples ? (o.samples + s.batch * p.dp - 1) / (s.batch * p.dp) : 0);
  // Per-GPU peak: the analytic replay of one micro-batch of the slowest stage's shard.
  const ParallelMemory pm =
      estimate_parallel_memory(build_layer_graph(p.stage, p.micro), o.par.pp, o.par.microbatches, p.dp,
                               o.par.zero, o.par.recompute, s.optimizer, memory_device_kind(dev.kind));
  const double cap = dev.mem_gb > 0 ? dev.mem_gb * 1e9 : 0;
  const std::string verdict = memory_verdict(pm.peak, NAN, cap, o.headroom);
  if (o.json) {
    nlohmann::json j = r.to_json();
    j["memory_per_gpu"] = pm.to_json();
    j["memory_per_gpu"]["capacity_bytes"] = cap;
    j["memory_per_gpu"]["headroom"] = o.headroom;
    j["memory_per_gpu"]["verdict"] = verdict;
    j["memory_per_gpu"]["fits"] = verdict == "fits";
    j["model"] = m.name;
    j["settings"] = s.to_json();
    j["mode"] = to_string(run_mode(s));
    j["device"] = dev.key();
    j["global_batch"] = s.batch * p.dp;
    j["attention"] = attention_kind(s);
    j["assumed"] = assumed;
    j["iterations_per_epoch"] = iters;
    j["t_epoch_s"] = iters ? nlohmann::json(iters * r.t_iter_ms / 1e3) : nlohmann::json();
    if (!host_warning.empty()) j["host_warning"] = host_warning;
    if (!comm_warning.empty()) j["comm_warning"] = comm_warning;
    if (input) input->add_to(j);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("model        {} ({}), batch {} per replica, {}, {}, mode {}, {} attention\n",
                           m.name, to_string(m.family), s.batch, input_size(m, s), to_string(s.dtype),
                           to_string(run_mode(s)), attention_kind(s))
            << (assumed.empty() ? std::string() : fmt::format("assumed      {}\n", fmt::join(assumed, "; ")))
            << fmt::format("device       {} x {} on {} node(s)\n", dev.key(), o.par.gpus, o.par.nodes)
            << fmt::format(
                   "split        tp {} x pp {} x dp {}{}; {} micro-batches of {} samples per replica "
                   "(global batch {}); ZeRO {}{}\n",
                   o.par.tp, o.par.pp, p.dp,
                   o.par.ep > 1 ? fmt::format(" (experts over ep {} of them)", o.par.ep) : std::string(),
                   o.par.microbatches, p.micro_batch, s.batch * p.dp, o.par.zero,
                   o.par.recompute ? "; activation recomputation" : "")
            << fmt::format("stage        {} layers per stage, {:.0f} parameters per GPU; bubble {:.1f} %\n",
                           p.layers_per_stage, p.params_per_gpu, 100 * p.bubble_fraction)
            << fmt::format(
                   "micro-batch  fwd {:.3f} ms, bwd {:.3f} ms, recompute {:.3f} ms, TP all-reduces {:.3f} ms "
                   "({} x {:.3g} B), pipeline sends {:.3f} ms\n",
                   r.t_fwd_ms, r.t_bwd_ms, r.t_recompute_ms, r.t_tp_ms, p.tp_allreduces, p.tp_bytes,
                   r.t_p2p_ms)
            << (o.par.ep > 1
                    ? fmt::format("experts      all-to-alls {:.3f} ms per micro-batch ({} x {:.3g} B over {} "
                                  "GPUs; modelled, not validated: docs/parallel.md)\n",
                                  r.t_ep_ms, p.ep_alltoalls, p.ep_bytes, o.par.ep)
                    : std::string())
            << fmt::format("pipeline     {:10.3f} ms   ({} + {} - 1 slots; bubble {:.3f} ms)\n",
                           r.t_pipeline_ms, o.par.microbatches, o.par.pp, r.t_bubble_ms)
            << fmt::format("DP all-red.  {:10.3f} ms   ({:.3g} gradient bytes over {} ranks{})\n", r.t_dp_ms,
                           p.grad_bytes - (o.par.ep > 1 ? p.expert_grad_bytes : 0), p.dp,
                           o.par.ep > 1 ? fmt::format("; the experts' {:.3g} over {}", p.expert_grad_bytes,
                                                      p.dp / o.par.ep)
                                        : std::string())
            << (par.host_node_ms > 0
                    ? fmt::format("host term    {:10.3f} ms   per slot: {:.0f} nodes x {:.1f} us{}\n",
                                  r.t_host_ms, r.slot_nodes, 1e3 * par.host_node_ms,
                                  r.host_bound ? ": the host sets each slot (the GPU's slot is " +
                                                     fmt::format("{:.3f} ms)", r.t_slot_gpu_ms)
                                               : "")
                    : std::string())
            << fmt::format("optimizer    {:10.3f} ms\n", r.t_opt_ms)
            << fmt::format(
                   "T_iter       {:10.3f} ms   (layer-model sums composed, compute x{:.3f} to meet one GPU's "
                   "{:.3f} ms for the replica's batch, as `predict` alone gives; no intervals)\n",
                   r.t_iter_ms, r.anchor_factor, r.single_gpu_ms);
  if (input) std::cout << input->text();
  if (iters)
    std::cout << fmt::format("T_epoch      {:10.3f} s    {} iterations\n", iters * r.t_iter_ms / 1e3, iters);
  std::cout << memory_line(
      pm.peak, NAN, NAN,
      fmt::format("per GPU, analytic: weights {:.2f} + grads {:.2f} + optimizer {:.2f} + "
                  "activations {:.2f} ({} micro-batch(es) in flight) + temporaries {:.2f} GB",
                  pm.weights / 1e9, pm.grads / 1e9, pm.optimizer / 1e9, pm.activations / 1e9, pm.in_flight,
                  pm.transient / 1e9),
      cap, o.headroom, verdict);
  if (!host_warning.empty()) std::cout << fmt::format("warning      per slot: {}\n", host_warning);
  if (!comm_warning.empty()) std::cout << fmt::format("warning      {}\n", comm_warning);
  return 0;
}

int run(const PredictOptions& o) {
  using namespace scaledl;
  const auto t_start = std::chrono::steady_clock::now();
  const bool many = !o.sweeps.empty() || !o.csv.empty();
  SCALEDL_CHECK(o.sweeps.empty() || o.csv.empty(), "give --sweep or --csv, not both");
  SCALEDL_CHECK(many || !o.args.model.empty(), "predict: MODEL.json is required (or --csv FILE)");
  SCALEDL_CHECK(!many || !o.input.given(),
                "--pipeline/--workers/--vcpus/--input: one configuration at a time");
  o.input.check();  // issue #15: a bad input-pipeline flag is named before the bundle loads
  SCALEDL_CHECK(o.devices >= 1 && o.devices <= (1 << 20), "--devices={} must be in [1, 2^20]", o.devices);
  SCALEDL_CHECK(o.threads >= 1 && o.threads <= 1024, "--threads={} must be in [1, 1024]", o.threads);
  // The refinement runs on small compressed graphs: one thread avoids OpenMP's
  // spinning workers, which cost more than they save here.
  torch::set_num_threads(o.threads);
  SCALEDL_CHECK(o.devices == 1 || !o.comm.empty(),
                "--devices={} needs an all-reduce calibration (--comm FILE, see docs/predict.md)", o.devices);
  SCALEDL_CHECK(o.samples == 0 || o.iterations == 0, "give --samples or --iterations, not both");
  SCALEDL_CHECK(o.samples >= 0 && o.iterations >= 0, "--samples and --iterations must be >= 0");
  check_headroom(o.headroom);
  // --sweep/--csv may name each configuration's device (device_spec); otherwise one device for all.
  const bool per_variant_device = many && o.device_spec.empty() && o.db.empty();
  const std::optional<DeviceRecord> dflt =
      per_variant_device ? std::nullopt : std::optional<DeviceRecord>(resolve_device(o));
  SCALEDL_CHECK(!o.bundle.empty() || !o.layers.empty(),
                "no models: give --bundle DIR (or --layers DIR [--graph ...])");
  SCALEDL_CHECK(o.bundle.empty() || (o.layers.empty() && o.graph.empty()),
                "--bundle={} already holds the layer and graph models: drop --layers/--graph", o.bundle);
  Bundle b;
  if (!o.bundle.empty()) {
    b = load_bundle(o.bundle);
    if (!o.comm.empty()) b.comm_given = load_comm_model(o.comm);  // a calibration of this cluster, for N > 1
    if (!o.anchor.empty()) {
      // Measured runs set the device's bias; the in-domain refinement predicts
      // better once it is removed (docs/unseen-gpu.md, "A refinement for GPUs
      // without layer timings").
      b.graph_device_out.reset();
      b.intervals_device_out.reset();
    }
  } else {
    b.layers = LayerPredictor::load(o.layers);
    if (!o.graph.empty()) {
      std::string path = o.graph;
      if (std::filesystem::is_directory(path)) path += "/graph_model.safetensors";
      b.graph = GraphPredictor::load(path);
    }
    if (!o.comm.empty()) b.comm_given = load_comm_model(o.comm);
  }
  if (o.host_node_us) b.host_node_ms_given = host_node_ms_of_us(*o.host_node_us);
  if (!o.calibrate.empty()) {
    SCALEDL_CHECK(dflt.has_value(),
                  "--calibrate={}: one device (--device-spec or --db), not a device_spec sweep or column",
                  o.calibrate);
    b.calibration = calibrate_from_store(b.layers, o.calibrate, *dflt);
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  // Layer models from before 2026-11-26 normalised a probed GPU's rows by its measured rates;
  // the rooflines now run at its spec peak (DeviceRecord::compute_gflops).
  if (dflt && !b.layers.options().spec_rates && dflt->measured_gflops > 0 && dflt->peak_fp32_gflops > 0)
    std::fprintf(
        stderr,
        "scaledl: warning: the layer models were trained before rooflines used a probed GPU's spec peak "
        "(manifest options.rates=measured): the predictions for %s differ from what they learned; retrain "
        "them (scaledl train)\n",
        dflt->key().c_str());
  if (o.par_given) {
    SCALEDL_CHECK(!many,
                  "--gpus/--tp/--pp/--ep/--microbatches/--zero/--recompute: one configuration at a time "
                  "(no --sweep or --csv; `scaledl scale` sweeps GPU counts)");
    SCALEDL_CHECK(o.devices == 1, "give --gpus N (with --tp/--pp) or --devices N, not both");
    SCALEDL_CHECK(o.anchor.empty(),
                  "--anchor={}: not with --gpus/--tp/--pp (anchor single-device predictions)", o.anchor);
    return run_parallel(o, b, *dflt);
  }
  if (many) return run_many(o, b, dflt, load_s);
  const DeviceRecord& dev = *dflt;
  const auto t_pred = std::chrono::steady_clock::now();
  std::vector<std::string> assumed;
  auto [m, s] = o.args.load(&assumed);
  s.num_devices = o.devices;
  const LayerGraph g = build_layer_graph(m, s);
  IterationPrediction p = b.predict(g, dev, !o.raw);
  const std::optional<AnchorFit> anchor = anchor_of(o, b, dev);
  if (anchor) b.apply_anchor(p, *anchor);
  const std::vector<std::string> outside = b.out_of_range(p);
  const std::string host_warning =
      host_bound_warning(p.t_sum_ms, static_cast<double>(g.nodes.size()), p.host_ms, dev.kind);
  // Issue #15 (ORION): T_iter = max(T_compute, T_input); all devices on one host.
  const auto input = o.input.apply(p, m, s, static_cast<double>(s.batch * s.num_devices));
  const int64_t iters = o.iterations ? o.iterations : (o.samples ? iterations_per_epoch(o.samples, s) : 0);
  const double epoch_s = iters * p.t_iter_ms / 1000.0;
  const MemoryPrediction mem = predict_memory(g, dev, b.memory ? &*b.memory : nullptr, o.headroom);
  if (o.timing)
    std::cerr << fmt::format(
        "timing: load {:.3f} s; 1 configuration: parse + layer graph + prediction {:.3f} s\n", load_s,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pred).count());

  if (o.json) {
    nlohmann::json j = p.to_json();
    j["model"] = m.name;
    j["settings"] = s.to_json();
    j["mode"] = to_string(run_mode(s));
    j["device"] = dev.key();
    j["iterations_per_epoch"] = iters;
    j["t_epoch_s"] = iters ? nlohmann::json(epoch_s) : nlohmann::json();
    j["outside_training_range"] = outside;
    j["attention"] = attention_kind(s);
    j["assumed"] = assumed;
    if (!host_warning.empty()) j["host_warning"] = host_warning;
    if (const auto rows = b.layer_rows_of(dev.key())) j["device_layer_rows"] = *rows;
    if (const std::string from = b.layers.roofline_bandwidth_source(dev); !from.empty()) {
      j["sustained_bw_gbs"] = b.layers.roofline_bandwidth_gbs(dev);
      j["sustained_bw_from"] = from;
    }
    if (const std::string clock = clock_assumption(b, dev); !clock.empty()) j["clock"] = clock;
    if (const std::string d = dispatch_note(m, s); !d.empty()) j["dispatch"] = d;
    if (anchor) j["anchor"] = anchor->to_json();
    if (const LayerCalibration* c = b.calibration_for(dev.key())) j["calibration"] = c->to_json();
    if (input) input->add_to(j);
    j["memory"] = mem.to_json();
    if (iters && std::isfinite(p.lo80_ms))
      j["t_epoch_interval_s"] = {{"80", {iters * p.lo80_ms / 1000.0, iters * p.hi80_ms / 1000.0}},
                                 {"95", {iters * p.lo95_ms / 1000.0, iters * p.hi95_ms / 1000.0}}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout
      << fmt::format(
             "model        {} ({}), batch {} x {} device(s), {}, {}, mode {}, optimizer {}, {} "
             "attention\n",
             m.name, to_string(m.family), s.batch, s.num_devices, input_size(m, s), to_string(s.dtype),
             to_string(run_mode(s)), s.optimizer_step ? to_string(s.optimizer) : "none", attention_kind(s))
      << (assumed.empty() ? std::string() : fmt::format("assumed      {}\n", fmt::join(assumed, "; ")))
      << fmt::format("device       {}\n", dev.key())
      << fmt::format("T_sum        {:10.3f} ms   {} of {} layer predictions{}\n", p.t_sum_ms,
                     p.host_ms > 0 ? "max(host term, sum)" : "sum", g.nodes.size(),
                     p.fallback_nodes
                         ? fmt::format(" ({} without a layer model of their own type)", p.fallback_nodes)
                         : "")
      << (p.host_ms > 0
              ? fmt::format("host term    {:10.3f} ms   {} nodes x {:.1f} us, this device's host issuing "
                            "them ({}){}\n",
                            p.host_ms, g.nodes.size(), 1e3 * p.host_ms / g.nodes.size(),
                            o.host_node_us ? "--host-node-us" : "bundle trained with --host-term",
                            p.host_ms >= p.t_sum_ms ? ": it sets T_sum" : "")
              : std::string())
      << (p.extrapolated_ms > 0
              ? fmt::format("extrapolated {:.0f} % of T_sum is of layer kinds with no training row ({}): "
                            "carried over from other dtypes or directions, not learnt\n",
                            100 * p.extrapolated_ms / std::max(1e-12, p.t_sum_ms),
                            fmt::join(p.extrapolated, ", "))
              : std::string())
      << fmt::format("T_comm       {:10.3f} ms   all-reduce, eq. 15\n", p.t_comm_ms)
      << fmt::format("alpha, beta  {:.4f}, {:.4f}{}\n", p.alpha, p.beta,
                     !p.refined ? "   (no --graph: additive baseline)"
                     : p.device_out_refinement
                         ? "   device-out refinement (trained on sums of GPUs the layer "
                           "models never saw)"
                         : "   graph refinement")
      << fmt::format("T_iter       {:10.3f} ms{}\n", p.t_iter_ms,
                     std::isfinite(p.lo80_ms)
                         ? fmt::format("   80 % [{:.3f}, {:.3f}]   95 % [{:.3f}, {:.3f}]", p.lo80_ms,
                                       p.hi80_ms, p.lo95_ms, p.hi95_ms)
                         : "");
  if (!p.no_interval.empty()) std::cout << "intervals    none: " << p.no_interval << "\n";
  if (input) std::cout << input->text();
  if (p.t_roofline_ms > 0)
    std::cout << (p.adjusted.empty()
                      ? fmt::format("bounds       roofline {:.3f} ms; monotone in batch and seq: kept\n",
                                    p.t_roofline_ms)
                      : fmt::format(
                            "bounds       RAISED from the model's {:.3f} ms ({}; roofline {:.3f} ms)\n",
                            p.t_model_ms,
                            p.adjusted == "roofline" ? std::string("below the roofline")
                                                     : "below the prediction for the smaller " +
                                                           p.adjusted.substr(p.adjusted.find(": ") + 2),
                            p.t_roofline_ms));
  if (iters)
    std::cout << fmt::format(
        "T_epoch      {:10.3f} s    {} iterations{}\n", epoch_s, iters,
        std::isfinite(p.lo80_ms)
            ? fmt::format("   80 % [{:.3f}, {:.3f}]   95 % [{:.3f}, {:.3f}]", iters * p.lo80_ms / 1e3,
                          iters * p.hi80_ms / 1e3, iters * p.lo95_ms / 1e3, iters * p.hi95_ms / 1e3)
            : "");
  if (p.refined)
    std::cout << (p.ood_distance > 0
                      ? fmt::format(
                            "domain       OUT OF DOMAIN: distance {:.3f} outside the training range "
                            "(farthest: {}){}{}\n",
                            p.ood_distance, p.ood_feature,
                            b.graph_for(dev.key())->config().ood_tau > 0
                                ? (p.alpha_from_forward
                                       ? "; the refinement trained on no backward run: alpha "
                                         "is its forward part's, beta shrunk toward 1"
                                       : "; alpha, beta shrunk toward 1")
                                : "",
                            std::isfinite(p.lo80_ms)
                                ? (b.intervals_for(dev.key())->beyond_calibration(p.ood_distance)
                                       ? "; intervals widened, but this is farther out than any "
                                         "calibration run: read them as a lower bound on the uncertainty"
                                       : "; intervals widened")
                                : "")
                      : std::string("domain       inside the graph model's training range\n"));
  std::cout << memory_line(mem.peak_bytes, mem.lo80, mem.hi80, mem.method, mem.capacity_bytes, mem.headroom,
                           mem.verdict);
  if (const std::string from = b.layers.roofline_bandwidth_source(dev); !from.empty()) {
    const double gbs = b.layers.roofline_bandwidth_gbs(dev);
    std::cout << (from == "layer rows"
                      ? fmt::format(
                            "bandwidth    {:.0f} GB/s sustained: what this device's layer rows move\n", gbs)
                  : from == "measured"
                      ? fmt::format(
                            "bandwidth    {:.0f} GB/s sustained: the record's measured copy bandwidth\n", gbs)
                      : fmt::format(
                            "bandwidth    {:.0f} GB/s sustained: {:.3f} x the spec's {:.0f} GB/s, the median "
                            "share of the training GPUs{} (a probe record's measured copy bandwidth would "
                            "replace it: docs/unseen-gpu.md)\n",
                            gbs, gbs / dev.peak_mem_bw_gbs, dev.peak_mem_bw_gbs,
                            from == "hbm share"    ? " with HBM"
                            : from == "gddr share" ? " with GDDR"
                                                   : ""));
  }
  if (const std::string clock = clock_assumption(b, dev); !clock.empty())
    std::cout << "clock        " << clock << "\n";
  if (const std::string d = dispatch_note(m, s); !d.empty()) std::cout << "dispatch     " << d << "\n";
  if (const auto rows = b.layer_rows_of(dev.key()))
    std::cout
        << (*rows > 0
                ? fmt::format("layers       {} layer timings (forward, backward) of this device trained "
                              "the layer models\n",
                              *rows)
                : std::string("layers       no layer timings of this device in the bundle: its layer times "
                              "are carried over from other devices by its record (a `bench layers` "
                              "campaign on it, one more --db for `train`: docs/eval.md)\n") +
                      (p.unseen_device_interval
                           ? fmt::format("intervals    at least the error of a left-out training device "
                                         "(x/÷ {:.2f} at 80 %, {:.2f} at 95 %: docs/predict.md){}\n",
                                         std::exp(b.intervals_for(dev.key())->unseen_q80),
                                         std::exp(b.intervals_for(dev.key())->unseen_q95),
                                         b.calibration_for(dev.key())
                                             ? "; a calibration does not narrow them (not built)"
                                             : "")
                           : std::string()));
  if (const LayerCalibration* c = b.calibration_for(dev.key())) std::cout << calibration_line(*c);
  if (anchor)
    std::cout << fmt::format(
        "anchor       {} run(s) measured on this device: x{:.3f} applied (log bias {:+.3f}, "
        "posterior sd {:.3f}; prior sd {:.3f}, run noise sd {:.3f}: docs/predict.md)\n",
        anchor->n, anchor->factor(), anchor->log_bias, anchor->sd_post, anchor->prior_sd, anchor->run_sd);
  for (const auto& w : outside)
    std::cout << fmt::format("warning      outside the bundle's training data: {} (extrapolation)\n", w);
  if (!host_warning.empty()) std::cout << fmt::format("warning      {}\n", host_warning);
  return 0;
}

scaledl::cli::Registrar reg(
    {"predict"}, "Predict per-iteration and per-epoch training time of a model config", [](CLI::App& app) {
      auto o = std::make_shared<PredictOptions>();
      o->args.add_to(app, /*model_required=*/false);
      o->input.add_to(app);
      app.add_option("--bundle", o->bundle, "bundle directory (`scaledl train --out`)");
      app.add_option("--layers", o->layers,
                     "layer models (`scaledl train layers --out`), instead of --bundle");
      app.add_option("--graph", o->graph, "graph model (`scaledl train graph --out` dir or .safetensors)");
      app.add_option("--device-spec", o->device_spec,
                     "device spec JSON (NeuSight device_configs or `scaledl probe --json`)");
      app.add_option("--db", o->db, "store with probed device records");
      app.add_option("--device", o->device, "device key in --db");
      app.add_option("--devices", o->devices, "data-parallel devices N (default 1)");
      auto par = [o](CLI::Option* opt) {
        opt->each([o](const std::string&) { o->par_given = true; });
        return opt;
      };
      par(app.add_option("--gpus", o->par.gpus, "GPUs N = tp x pp x dp (parallel prediction)"));
      par(app.add_option("--nodes", o->par.nodes, "nodes the GPUs are spread over (default 1)"));
      par(app.add_option("--tp", o->par.tp, "tensor-parallel ways (Megatron)"));
      par(app.add_option("--pp", o->par.pp, "pipeline stages (1F1B)"));
      par(app.add_option("--ep", o->par.ep,
                         "expert-parallel ways: the experts spread over this many of the "
                         "data-parallel GPUs (mixtures of experts)"));
      par(app.add_option("--microbatches", o->par.microbatches,
                         "micro-batches per iteration of one replica (--batch is split)"));
      par(app.add_option("--zero", o->par.zero, "ZeRO stage 0, 1, 2 or 3"));
      par(app.add_flag("--recompute", o->par.recompute, "activation recomputation (Megatron checkpointing)"));
      app.add_option("--comm", o->comm, "all-reduce calibration JSON (for N > 1)");
      app.add_option("--samples", o->samples, "training samples per epoch");
      app.add_option("--iterations", o->iterations, "iterations per epoch");
      app.add_option("--sweep", o->sweeps,
                     "KEY=V1,V2,...: predict every combination (keys batch, seq, image, "
                     "dtype, optimizer, devices, device_spec (a spec JSON per value: GPUs "
                     "compared in one table), config.<key>; repeatable); CSV output");
      app.add_option("--csv", o->csv,
                     "CSV of configurations (header: model and/or the --sweep keys, samples); "
                     "CSV output");
      app.add_option("--anchor", o->anchor,
                     "CSV of configurations measured on this device (columns as --csv plus "
                     "measured_ms): predictions are scaled by the device's bias they show "
                     "(docs/predict.md, \"Anchoring\")");
      app.add_option("--calibrate", o->calibrate,
                     "store with a few layer timings of this device (`bench layers` on it): "
                     "each layer kind's time is scaled by the median ratio of its timings "
                     "to the layer models' (GEMMs with dims multiples of 8, rows of 50 us "
                     "or more; docs/unseen-gpu.md, \"A short calibration benchmark\")");
      app.add_option("--host-node-us", o->host_node_us,
                     "the host's cost per graph node of your framework, microseconds: "
                     "each iteration (each pipeline slot with --gpus) takes at least nodes "
                     "x this (0 = none; default: the bundle's fit for a probed device, none "
                     "for a spec sheet; docs/parallel.md)");
      app.add_flag("--timing", o->timing, "print load and prediction times to stderr");
      app.add_flag("--raw", o->raw,
                   "the models' own T_iter, without the physical bounds (roofline, "
                   "monotone in batch and seq; docs/predict.md)");
      app.add_option("--threads", o->threads, "LibTorch threads (default 1)");
      app.add_flag("--json", o->json, "print the prediction as JSON");
      app.add_option("--headroom", o->headroom,
                     "fraction of device memory kept free when saying whether it fits "
                     "(default 0.10)");
      return [o] { return run(*o); };
    });

}  // namespace
