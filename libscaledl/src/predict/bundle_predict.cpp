// A bundle's predictions (bundle.hpp): the models, the intervals, the anchor and the physical
// bounds (the roofline, monotonicity along the ladder and among the inputs).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/strided_threads.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/device_intervals.hpp"
#include "scaledl/predict/physics.hpp"

namespace scaledl {

double Bundle::host_node_ms_for(const std::string& device_key) const {
  if (host_node_ms_given) return *host_node_ms_given;
  const auto it = host_node_ms.find(device_key);
  return it == host_node_ms.end() ? 0.0 : it->second;
}

double Bundle::host_node_ms_for(const DeviceRecord& dev, const TrainSettings& s) const {
  if (host_node_ms_given || host_node_ms.count(dev.key())) return host_node_ms_for(dev.key());
  return framework_host_node_ms(s, dev.kind);
}

std::string Bundle::host_node_source(const DeviceRecord& dev, const TrainSettings& s) const {
  if (host_node_ms_given) return *host_node_ms_given > 0 ? "--host-node-us" : "";
  if (host_node_ms.count(dev.key())) return "the bundle's fit of this device";
  return framework_host_node_ms(s, dev.kind) > 0
             ? "Megatron-LM's default (fitted on vTrain's A100 runs; --host-node-us for your own host)"
             : "";
}

IterationPrediction Bundle::predict(const LayerGraph& g, const DeviceRecord& dev, bool physics) const {
  return predict_many({&g}, dev, physics).at(0);
}

namespace {
using MemoValue = Bundle::BoundsMemo::Value;

MemoValue memo_value(const IterationPrediction& p) {
  return {p.t_iter_ms, p.lo80_ms, p.hi80_ms, p.lo95_ms, p.hi95_ms};
}

/// T_iter and its intervals raised to at least `floor` (none is ever lowered);
/// `from` (may be null) is the prediction the floor came from.
void raise_to(IterationPrediction& p, double floor_ms, const MemoValue* from, const std::string& why) {
  if (p.t_iter_ms >= floor_ms) return;
  p.t_iter_ms = floor_ms;
  p.adjusted = why;
  if (std::isfinite(p.lo80_ms)) {
    auto pick = [&](double own, double theirs) {
      return std::max(own, from && std::isfinite(theirs) ? theirs : floor_ms);
    };
    p.lo80_ms = pick(p.lo80_ms, from ? from->lo80_ms : NAN);
    p.hi80_ms = pick(p.hi80_ms, from ? from->hi80_ms : NAN);
    p.lo95_ms = pick(p.lo95_ms, from ? from->lo95_ms : NAN);
    p.hi95_ms = pick(p.hi95_ms, from ? from->hi95_ms : NAN);
  }
}
}  // namespace

void raise_prediction_to(IterationPrediction& p, const IterationPrediction& floor, const std::string& why) {
  const MemoValue v = memo_value(floor);
  raise_to(p, v.t_iter_ms, &v, why);
}

AnchorFit Bundle::fit_anchor(const std::vector<const LayerGraph*>& gs, const std::vector<double>& measured_ms,
                             const DeviceRecord& dev) const {
  const IntervalModel* iv = intervals_for(dev.key());
  SCALEDL_CHECK(iv != nullptr, "--anchor needs a bundle with intervals (one trained with its graph model)");
  SCALEDL_CHECK(gs.size() == measured_ms.size(), "fit_anchor: {} configurations, {} times", gs.size(),
                measured_ms.size());
  const std::vector<IterationPrediction> p = predict_many(gs, dev, /*physics=*/true);
  std::vector<double> r;
  for (size_t i = 0; i < p.size(); ++i) r.push_back(std::log(measured_ms[i] / p[i].t_iter_ms));
  const auto sds = anchor_sds(*iv, without_layer_rows(dev.key()));
  return scaledl::fit_anchor(r, sds.first, sds.second);
}

void Bundle::apply_anchor(IterationPrediction& p, const AnchorFit& a) const {
  const std::optional<IntervalModel>& ivo = p.device_out_refinement ? intervals_device_out : intervals;
  SCALEDL_CHECK(ivo.has_value(), "--anchor needs a bundle with intervals (one trained with its graph model)");
  const IntervalModel& iv = *ivo;
  // Measured runs add information: the anchored interval is never wider, on either side in log
  // terms, than the one the prediction had without them.
  const double before = p.t_iter_ms;
  const bool had = std::isfinite(p.lo80_ms) && std::isfinite(p.hi95_ms) && before > 0;
  const double w[4] = {
      had ? std::log(before / p.lo80_ms) : INFINITY, had ? std::log(p.hi80_ms / before) : INFINITY,
      had ? std::log(before / p.lo95_ms) : INFINITY, had ? std::log(p.hi95_ms / before) : INFINITY};
  p.t_iter_ms *= a.factor();
  const Interval i80 = anchored_interval(iv, a, p.t_iter_ms, p.ood_distance, 0.80, p.t_sum_ms),
                 i95 = anchored_interval(iv, a, p.t_iter_ms, p.ood_distance, 0.95, p.t_sum_ms);
  p.lo80_ms = std::max(i80.lo, p.t_iter_ms * std::exp(-w[0]));
  p.hi80_ms = std::min(i80.hi, p.t_iter_ms * std::exp(w[1]));
  p.lo95_ms = std::max(i95.lo, p.t_iter_ms * std::exp(-w[2]));
  p.hi95_ms = std::min(i95.hi, p.t_iter_ms * std::exp(w[3]));
  p.unseen_device_interval = false;
  p.no_interval.clear();  // the measured runs calibrate it
  if (p.t_roofline_ms > 0) raise_to(p, p.t_roofline_ms, nullptr, "roofline");
}

// ---- predict_many, step by step ---------------------------------------------------

namespace {

/// A rung of an input's ladder: (index, label), the index into Ladders::all or Ladders::known.
using LadderRefs = std::vector<std::vector<std::pair<size_t, std::string>>>;

/// The configurations predict_many predicts: the inputs, then (with physics) every distinct
/// smaller ladder configuration that neither an input nor the memo already holds.
struct Ladders {
  std::vector<const LayerGraph*> all;
  std::vector<std::unique_ptr<LayerGraph>> owned;
  std::vector<std::string> keys;  // memo key of all[k]
  std::vector<MemoValue> known;   // memo hits
  // Ladder of input k: (index in all, label) for points predicted here, and
  // (index in known, label) for memo hits.
  LadderRefs ladder, ladder_known;
};

/// A ladder point still to build (one per distinct memo key, in the order met).
struct Pending {
  size_t input;  // whose model
  TrainSettings settings;
  std::string key;
};

/// A ladder point found before the pending graphs are built.
struct Rung {
  bool is_pending;
  size_t at;  // index in all, or in pending
  std::string label;
};

/// The memo's key of a device: the whole record (two specs may share a name) and the host term
/// and calibration its predictions use.
std::string device_memo_key(const Bundle& b, const DeviceRecord& dev) {
  const LayerCalibration* cal = b.calibration_for(dev.key());
  return dev.to_json().dump() + fmt::format("\nhost {}\n", b.host_node_ms_for(dev.key())) +
         (cal ? cal->to_json().dump() + "\n" : std::string());
}

/// The digest of a configuration's settings but for batch and seq_len, after the `prefix` of its
/// device and model: with batch_seq_key, its memo key.
std::string settings_digest(const std::string& prefix, const TrainSettings& s) {
  TrainSettings t = s;
  t.batch = 1;
  t.seq_len = 1;
  return sha256_hex(prefix + t.to_json().dump());
}
/// A configuration's memo key: the digest of everything else, then batch and seq_len. The points of
/// a ladder's batch x seq grid share their input's digest, so a key costs no hash of its own.
std::string batch_seq_key(const std::string& digest, const TrainSettings& s) {
  return fmt::format("{}|{}|{}", digest, s.batch, s.seq_len);
}

/// Each input's ladder points, each an input (`index`: memo key -> index in all), a memo hit
/// (into L.known and L.ladder_known) or a graph still to build (into `pending`). Under the memo's lock.
std::vector<std::vector<Rung>> collect_rungs(const Bundle& b, const std::vector<const LayerGraph*>& gs,
                                             const std::vector<std::string>& prefix,
                                             const std::vector<std::string>& digest,
                                             const std::map<std::string, size_t>& index, Ladders& L,
                                             std::vector<Pending>& pending) {
  std::map<std::string, size_t> pending_index;  // memo key -> index in pending
  std::vector<std::vector<Rung>> rungs(gs.size());
  for (size_t k = 0; k < gs.size(); ++k)
    for (LadderPoint& lp : monotone_ladder(gs[k]->model, gs[k]->settings)) {
      std::string key =
          batch_seq_key(lp.grid ? digest[k] : settings_digest(prefix[k], lp.settings), lp.settings);
      if (auto it = index.find(key); it != index.end()) {
        rungs[k].push_back({false, it->second, std::move(lp.label)});
        continue;
      }
      if (auto hit = b.bounds_memo->values.find(key); hit != b.bounds_memo->values.end()) {
        L.known.push_back(hit->second);
        L.ladder_known[k].emplace_back(L.known.size() - 1, std::move(lp.label));
        continue;
      }
      auto [pit, fresh] = pending_index.emplace(key, pending.size());
      if (fresh) pending.push_back({k, std::move(lp.settings), std::move(key)});
      rungs[k].push_back({true, pit->second, std::move(lp.label)});
    }
  return rungs;
}

/// The pending graphs, on the hardware threads; null where the point is no valid configuration.
std::vector<std::unique_ptr<LayerGraph>> build_pending(const std::vector<const LayerGraph*>& gs,
                                                       const std::vector<Pending>& pending) {
  // Building the graphs is most of a lone prediction's bounds (a GPT-2 large training at batch
  // 4 x 1,024 has 75 of them); each is independent of the others.
  // Any other exception (out of memory) reaches the caller through for_each_strided.
  std::vector<std::unique_ptr<LayerGraph>> built(pending.size());
  for_each_strided(pending.size(), strided_thread_count(pending.size()), [&](size_t i) {
    try {
      built[i] =
          std::make_unique<LayerGraph>(build_layer_graph(gs[pending[i].input]->model, pending[i].settings));
    } catch (const Error&) {
      // not a valid configuration of this model (no bound from it)
    }
  });
  return built;
}

/// Adds the ladders of the inputs to L (physics): first the ladder points, each an input, a memo
/// hit, or a graph still to build; then those graphs, on the hardware threads; then each input's
/// ladder in its own order, without the points that are no valid configuration.
void add_ladders(const Bundle& b, const std::vector<const LayerGraph*>& gs, const DeviceRecord& dev,
                 Ladders& L) {
  const std::string dev_key = device_memo_key(b, dev);
  std::map<std::string, size_t> index;  // memo key -> index in all
  // A configuration's key is the SHA-256 of (the digest of the device and model, its settings but
  // for batch and seq_len), then batch and seq_len (batch_seq_key): the long prefix and the settings
  // are hashed once per input, not once per ladder point.
  std::vector<std::string> prefix(gs.size()), digest(gs.size());
  for (size_t k = 0; k < gs.size(); ++k) {
    prefix[k] = sha256_hex(dev_key + gs[k]->model.to_json().dump());
    digest[k] = settings_digest(prefix[k], gs[k]->settings);
    L.keys.push_back(batch_seq_key(digest[k], gs[k]->settings));
    index.emplace(L.keys.back(), k);
  }
  std::lock_guard<std::mutex> lock(b.bounds_memo->mu);
  std::vector<Pending> pending;
  std::vector<std::vector<Rung>> rungs = collect_rungs(b, gs, prefix, digest, index, L, pending);
  std::vector<std::unique_ptr<LayerGraph>> built = build_pending(gs, pending);
  std::vector<size_t> placed(pending.size(), SIZE_MAX);  // index in all of each built graph
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!built[i]) continue;
    L.all.push_back(built[i].get());
    L.owned.push_back(std::move(built[i]));
    L.keys.push_back(pending[i].key);
    placed[i] = L.all.size() - 1;
    index.emplace(pending[i].key, placed[i]);
  }
  for (size_t k = 0; k < gs.size(); ++k)
    for (Rung& r : rungs[k]) {
      const size_t at = r.is_pending ? placed[r.at] : r.at;
      if (at != SIZE_MAX) L.ladder[k].emplace_back(at, std::move(r.label));
    }
}

/// The models' predictions of `all` (predict_iterations), before intervals and bounds. The graphs
/// are predicted in groups of what they share: the collective model (single-device graphs with the
/// bundle's own, the others with --comm) and the host's cost per node (a framework's default
/// follows each graph's kernels).
std::vector<IterationPrediction> model_predictions(const Bundle& b, const std::vector<const LayerGraph*>& all,
                                                   const DeviceRecord& dev) {
  std::map<std::pair<int, double>, std::vector<size_t>> groups;
  for (size_t k = 0; k < all.size(); ++k) {
    const int multi = b.comm_given && all[k]->settings.num_devices > 1 ? 1 : 0;
    groups[{multi, b.host_node_ms_for(dev, all[k]->settings)}].push_back(k);
  }
  std::vector<IterationPrediction> out(all.size());
  for (const auto& [key, idx] : groups) {
    const CommModel c = key.first ? *b.comm_given : b.comm ? *b.comm : CommModel{};
    std::vector<const LayerGraph*> part;
    for (size_t k : idx) part.push_back(all[k]);
    std::vector<IterationPrediction> got = predict_iterations(part, dev, b.layers, b.graph_for(dev.key()), c,
                                                              256, key.second, b.calibration_for(dev.key()));
    for (size_t i = 0; i < got.size(); ++i) out[idx[i]] = std::move(got[i]);
  }
  return out;
}

/// The 80 % and 95 % intervals of every refined prediction (when the bundle has intervals).
void add_intervals(const Bundle& b, const DeviceRecord& dev, std::vector<IterationPrediction>& out) {
  const bool unseen =
      b.without_layer_rows(dev.key());  // no layer timing of this device trained the layer models
  const bool device_out = b.uses_device_out(dev.key());
  const IntervalModel* iv = b.intervals_for(dev.key());
  for (IterationPrediction& p : out) {
    p.device_out_refinement = device_out && p.refined;
    if (!iv || !p.refined) continue;
    if (unseen && dev.kind == "cpu") {
      p.no_interval =
          "no calibrated interval for a CPU whose layer timings are not in the bundle: held out, such "
          "CPUs fell outside the 95 % interval (docs/predict.md, \"Intervals and the out-of-domain flag\"); "
          "time its layers "
          "(`bench layers`) and train with them, or anchor on measured runs (--anchor)";
      continue;
    }
    const Interval a = iv->at(p.t_iter_ms, p.ood_distance, 0.80, p.t_sum_ms, unseen);
    const Interval c = iv->at(p.t_iter_ms, p.ood_distance, 0.95, p.t_sum_ms, unseen);
    p.unseen_device_interval = unseen && iv->has_unseen();
    p.lo80_ms = a.lo;
    p.hi80_ms = a.hi;
    p.lo95_ms = c.lo;
    p.hi95_ms = c.hi;
  }
}

/// The roofline of every configuration in L.all; stores each in the memo and returns its value.
std::vector<MemoValue> apply_roofline(const Bundle& b, const DeviceRecord& dev, const Ladders& L,
                                      std::vector<IterationPrediction>& out) {
  std::vector<MemoValue> vals(L.all.size());
  for (size_t k = 0; k < L.all.size(); ++k) {
    IterationPrediction& p = out[k];
    p.t_model_ms = p.t_iter_ms;
    p.t_roofline_ms = iteration_roofline_ms(*L.all[k], dev);
    raise_to(p, p.t_roofline_ms, nullptr, "roofline");
    vals[k] = memo_value(p);
  }
  {
    std::lock_guard<std::mutex> lock(b.bounds_memo->mu);
    if (b.bounds_memo->values.size() + L.all.size() > 100000) b.bounds_memo->values.clear();
    for (size_t k = 0; k < L.all.size(); ++k) b.bounds_memo->values[L.keys[k]] = vals[k];
  }
  return vals;
}

/// Each input raised to its ladder's points (those predicted here, `vals`, and the memo's).
void apply_ladders(const std::vector<const LayerGraph*>& gs, const DeviceRecord& dev, const Ladders& L,
                   const std::vector<MemoValue>& vals, std::vector<IterationPrediction>& out) {
  for (size_t k = 0; k < gs.size(); ++k) {
    // The train rung also adds the optimizer step's roofline: the step follows the backward pass.
    auto plus = [&](const std::string& label) {
      return label.rfind("mode fwd-bwd", 0) == 0 ? update_roofline_ms(*gs[k], dev) : 0.0;
    };
    auto shifted = [&](MemoValue v, double d) {
      for (double* x : {&v.t_iter_ms, &v.lo80_ms, &v.hi80_ms, &v.lo95_ms, &v.hi95_ms}) *x += d;
      return v;
    };
    for (const auto& [j, label] : L.ladder[k]) {
      const MemoValue v = shifted(vals[j], plus(label));
      raise_to(out[k], v.t_iter_ms, &v, "monotone: " + label);
    }
    for (const auto& [j, label] : L.ladder_known[k]) {
      const MemoValue v = shifted(L.known[j], plus(label));
      raise_to(out[k], v.t_iter_ms, &v, "monotone: " + label);
    }
  }
}

/// Among the inputs themselves (a sweep, a CSV): a running maximum along batch,
/// then along seq, among inputs that differ in that one setting only. The
/// second pass keeps the first one's order (a maximum of ordered rows is ordered).
void monotone_among_inputs(const std::vector<const LayerGraph*>& gs, std::vector<IterationPrediction>& out) {
  for (const bool batch_axis : {true, false}) {
    std::map<std::string, std::vector<size_t>> groups;
    for (size_t k = 0; k < gs.size(); ++k) {
      TrainSettings t = gs[k]->settings;
      (batch_axis ? t.batch : t.seq_len) = 0;
      groups[gs[k]->model.to_json().dump() + t.to_json().dump()].push_back(k);
    }
    auto axis = [&](size_t k) { return batch_axis ? gs[k]->settings.batch : gs[k]->settings.seq_len; };
    for (auto& [gk, ks] : groups) {
      if (ks.size() < 2) continue;
      std::stable_sort(ks.begin(), ks.end(), [&](size_t a, size_t b) { return axis(a) < axis(b); });
      size_t best = ks[0];
      for (size_t k : ks) {
        if (axis(best) < axis(k)) {
          const MemoValue v = memo_value(out[best]);
          raise_to(out[k], v.t_iter_ms, &v,
                   fmt::format("monotone: {} {}", batch_axis ? "batch" : "seq", axis(best)));
        }
        if (out[k].t_iter_ms >= out[best].t_iter_ms) best = k;
      }
    }
  }
}

}  // namespace

std::vector<IterationPrediction> Bundle::predict_many(const std::vector<const LayerGraph*>& gs,
                                                      const DeviceRecord& dev, bool physics) const {
  for (const LayerGraph* g : gs)
    SCALEDL_CHECK(g->settings.num_devices == 1 || comm.has_value() || comm_given.has_value(),
                  "--devices={} but the bundle has no all-reduce calibration (train it with --comm FILE)",
                  g->settings.num_devices);
  Ladders L;
  L.all = gs;
  L.ladder.resize(gs.size());
  L.ladder_known.resize(gs.size());
  if (physics) add_ladders(*this, gs, dev, L);
  std::vector<IterationPrediction> out = model_predictions(*this, L.all, dev);
  add_intervals(*this, dev, out);
  if (physics) {
    const std::vector<MemoValue> vals = apply_roofline(*this, dev, L, out);
    apply_ladders(gs, dev, L, vals, out);
    monotone_among_inputs(gs, out);
  }
  out.resize(gs.size());
  return out;
}

std::vector<OutOfRange> Bundle::out_of_range(const IterationPrediction& p) const {
  return features_out_of_range(global_feature_names(),
                               std::vector<double>(p.global_features.begin(), p.global_features.end()),
                               global_ranges);
}

}  // namespace scaledl
