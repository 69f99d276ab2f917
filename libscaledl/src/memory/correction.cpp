// The learned correction of the analytic peak (and the DNNPerf-style direct
// regression it is compared with), memory.hpp.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "core/stats.hpp"
#include "learn/xgb.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/memory/memory.hpp"

namespace scaledl {

namespace {

double lg(double x) {
  return std::log(std::max(1.0, x));
}

std::map<std::string, std::string> xgb_params(uint64_t seed) {
  return {{"objective", "reg:squarederror"},
          {"max_depth", "3"},
          {"eta", "0.08"},
          {"min_child_weight", "2"},
          {"subsample", "0.9"},
          {"lambda", "1.0"},
          {"nthread", "1"},
          {"seed", std::to_string(seed)}};
}
constexpr int kRounds = 200;

xgb::Booster fit(const std::vector<float>& x, size_t rows, size_t cols, const std::vector<float>& y,
                 uint64_t seed) {
  xgb::DMatrix d(x.data(), rows, cols, y);
  xgb::Booster b;
  b.set_params(xgb_params(seed));
  b.train(d, kRounds);
  return b;
}

}  // namespace

std::vector<MemorySample> load_memory_samples(const std::vector<std::string>& stores) {
  std::vector<MemorySample> out;
  for (const auto& db : stores) {
    Store store(db, /*read_only=*/true);
    std::map<std::string, std::string> kinds;
    for (const auto& d : store.devices()) kinds[d.key()] = d.kind;
    for (const auto& r : store.models("", /*ok_only=*/false)) {
      if (!r.memory.measured() || (r.status != "ok" && r.status != "unstable")) continue;
      const std::string ctx = fmt::format("{}: model run {} ({})", db, r.model_name, r.campaign);
      MemorySample s;
      s.graph = build_layer_graph(model_spec_from_json(r.model, ctx + ": model"),
                                  parse_train_settings(r.settings, ctx + ": settings"));
      s.graph.model.name = r.model_name;
      auto k = kinds.find(r.device);
      s.device_kind = memory_device_kind(k != kinds.end() ? k->second : r.device);
      s.measured_bytes = r.memory.peak_bytes;
      s.family = r.family;
      out.push_back(std::move(s));
    }
  }
  return out;
}

const std::vector<std::string>& memory_feature_names() {
  static const std::vector<std::string> n = {
      "log_analytic_peak", "log_base",   "log_saved",  "saved_fraction", "weights_fraction",
      "log_tokens",        "log_hidden", "layers",     "mode",           "dtype_bytes",
      "log_vocab",         "cuda",       "log_params", "heads",          "log_ffn"};
  return n;
}

std::vector<float> memory_features(const LayerGraph& g, const MemoryEstimate& a, const std::string& kind) {
  const auto& m = g.model;
  const auto& s = g.settings;
  double tokens = static_cast<double>(s.batch * s.seq_len);
  if (m.patch_size > 0) {
    const double img = static_cast<double>(s.image_size > 0 ? s.image_size : m.image_size);
    tokens = s.batch * ((img / m.patch_size) * (img / m.patch_size) + m.num_special_tokens);
  }
  const double peak = std::max(1.0, a.peak);
  return {static_cast<float>(lg(a.peak)),
          static_cast<float>(lg(a.base)),
          static_cast<float>(lg(a.saved)),
          static_cast<float>(a.saved / peak),
          static_cast<float>(a.weights / peak),
          static_cast<float>(lg(tokens)),
          static_cast<float>(lg(static_cast<double>(m.hidden))),
          static_cast<float>(m.num_layers + m.num_decoder_layers),
          static_cast<float>(static_cast<int>(run_mode(s))),
          static_cast<float>(dtype_bytes(s.dtype)),
          static_cast<float>(lg(static_cast<double>(m.vocab_size))),
          kind == "cuda" ? 1.0f : 0.0f,
          static_cast<float>(lg(g.total_params())),
          static_cast<float>(m.num_heads),
          static_cast<float>(lg(static_cast<double>(m.ffn_dim)))};
}

MemoryCorrection MemoryCorrection::train(const std::vector<MemorySample>& samples, bool direct,
                                         uint64_t seed) {
  SCALEDL_CHECK(samples.size() >= 10, "memory model: {} runs with a measured peak; training needs >= 10",
                samples.size());
  const size_t n = samples.size(), cols = memory_feature_names().size();
  std::vector<float> x;
  std::vector<float> y;
  std::vector<double> analytic(n);
  x.reserve(n * cols);
  for (size_t i = 0; i < n; ++i) {
    const auto& s = samples[i];
    SCALEDL_CHECK(std::isfinite(s.measured_bytes) && s.measured_bytes > 0,
                  "memory model: run {} ({}) has peak_bytes={}: not a positive number", i, s.graph.model.name,
                  s.measured_bytes);
    MemoryOptions o;
    o.device_kind = s.device_kind;
    const MemoryEstimate a = estimate_memory(s.graph, o);
    analytic[i] = a.peak;
    auto f = memory_features(s.graph, a, s.device_kind);
    x.insert(x.end(), f.begin(), f.end());
    y.push_back(
        static_cast<float>(direct ? std::log(s.measured_bytes) : std::log(s.measured_bytes / a.peak)));
  }
  // Out-of-fold residuals (5 folds, seeded) for the intervals and the reported error.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 31 + 7);
  std::shuffle(order.begin(), order.end(), rng);
  const size_t folds = std::min<size_t>(5, n);
  std::vector<double> res(n, 0);
  for (size_t f = 0; f < folds; ++f) {
    std::vector<float> tx, ty, vx;
    std::vector<size_t> vi;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = order[k];
      auto* row = &x[i * cols];
      if (k % folds == f) {
        vx.insert(vx.end(), row, row + cols);
        vi.push_back(i);
      } else {
        tx.insert(tx.end(), row, row + cols);
        ty.push_back(y[i]);
      }
    }
    xgb::Booster b = fit(tx, ty.size(), cols, ty, seed);
    std::vector<float> p(vi.size());
    b.predict_dense(vx.data(), vi.size(), cols, p.data());
    for (size_t k = 0; k < vi.size(); ++k) res[vi[k]] = static_cast<double>(p[k]) - y[vi[k]];
  }
  MemoryCorrection c;
  c.direct_ = direct;
  c.n_ = n;
  for (const auto& s : samples)
    if (std::find(c.kinds_.begin(), c.kinds_.end(), s.device_kind) == c.kinds_.end())
      c.kinds_.push_back(s.device_kind);
  std::sort(c.kinds_.begin(), c.kinds_.end());
  std::vector<double> absres;
  double mre = 0;
  for (size_t i = 0; i < n; ++i) {
    absres.push_back(std::fabs(res[i]));
    mre += std::fabs(std::exp(res[i]) - 1);  // predicted / measured - 1
  }
  c.oof_mre_ = mre / static_cast<double>(n);
  c.q80_ = quantile(absres, 0.80);
  c.q95_ = quantile(absres, 0.95);
  c.model_json_ = fit(x, n, cols, y, seed).to_json_string();
  return c;
}

std::vector<double> MemoryCorrection::predict_interval(const LayerGraph& g, const std::string& kind) const {
  if (!booster_)
    booster_ = std::make_shared<xgb::Booster>(xgb::Booster::from_buffer(model_json_, "memory model"));
  MemoryOptions o;
  o.device_kind = kind;
  const MemoryEstimate a = estimate_memory(g, o);
  const auto f = memory_features(g, a, kind);
  float out = 0;
  static_cast<xgb::Booster*>(booster_.get())->predict_dense(f.data(), 1, f.size(), &out);
  const double peak =
      direct_ ? std::exp(static_cast<double>(out)) : a.peak * std::exp(static_cast<double>(out));
  return {peak, peak * std::exp(-q80_), peak * std::exp(q80_), peak * std::exp(-q95_), peak * std::exp(q95_)};
}

bool MemoryCorrection::covers(const std::string& kind) const {
  return std::find(kinds_.begin(), kinds_.end(), kind) != kinds_.end();
}

double MemoryCorrection::predict(const LayerGraph& g, const std::string& kind) const {
  return predict_interval(g, kind)[0];
}

nlohmann::json MemoryCorrection::to_json() const {
  return {{"format", "scaledl-memory-model"},
          {"version", 1},
          {"target", direct_ ? "log(peak)" : "log(measured / analytic peak)"},
          {"features", memory_feature_names()},
          {"samples", n_},
          {"device_kinds", kinds_},
          {"oof_mre", oof_mre_},
          {"log_residual_q80", q80_},
          {"log_residual_q95", q95_},
          {"xgboost", nlohmann::json::parse(model_json_)}};
}

MemoryCorrection MemoryCorrection::from_json(const nlohmann::json& j, const std::string& ctx) {
  // Every field type-checked and in a plausible range (issue #39): a bundle's memory.json is
  // read through a manifest that its checksums do not cover.
  SCALEDL_CHECK(j.is_object() && j.contains("format") && j["format"] == "scaledl-memory-model",
                "{}: format is not \"scaledl-memory-model\"", ctx);
  SCALEDL_CHECK(j.contains("version") && j["version"].is_number_integer() && j["version"] == 1,
                "{}: version={} but this scaledl reads 1", ctx,
                j.contains("version") ? show(j["version"]) : "(none)");
  SCALEDL_CHECK(j.contains("features") && j["features"] == nlohmann::json(memory_feature_names()),
                "{}: features differ from this build's memory features", ctx);
  // A number at `k` in [lo, hi]; `what` says what it is.
  auto num = [&](const char* k, double lo, double hi, const char* what) {
    SCALEDL_CHECK(j.contains(k), "{}: {} is missing", ctx, k);
    const nlohmann::json& v = j[k];
    SCALEDL_CHECK(
        v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= lo && v.get<double>() <= hi,
        "{}: {}={} must be a number in [{}, {}] ({})", ctx, k, show(v), lo, hi, what);
    return v.get<double>();
  };
  const double samples = num("samples", 0, 1e9, "training runs");
  SCALEDL_CHECK(samples == std::floor(samples), "{}: samples={} is not a whole number of runs", ctx, samples);
  SCALEDL_CHECK(j.contains("xgboost") && j["xgboost"].is_object(), "{}: xgboost is missing", ctx);
  MemoryCorrection c;
  const std::string target = get_str_or(j, "target", ctx, "");
  SCALEDL_CHECK(target == "log(peak)" || target == "log(measured / analytic peak)",
                "{}: target={} is not \"log(peak)\" or \"log(measured / analytic peak)\"", ctx,
                j.contains("target") ? show(j["target"]) : "(none)");
  c.direct_ = target == "log(peak)";
  c.n_ = static_cast<size_t>(samples);
  c.oof_mre_ = num("oof_mre", 0, 1e3, "the out-of-fold mean relative error");
  // |log(measured / predicted)| quantiles: beyond 10 (a factor 22,000) no peak estimate is corrected.
  c.q80_ = num("log_residual_q80", 0, 10, "a log-residual quantile");
  c.q95_ = num("log_residual_q95", 0, 10, "a log-residual quantile");
  SCALEDL_CHECK(c.q80_ <= c.q95_, "{}: log_residual_q80={} exceeds log_residual_q95={}", ctx, c.q80_, c.q95_);
  c.model_json_ = j["xgboost"].dump();
  SCALEDL_CHECK(j.contains("device_kinds") && j["device_kinds"].is_array() && !j["device_kinds"].empty(),
                "{}: device_kinds is missing or empty", ctx);
  for (const auto& k : j["device_kinds"]) {
    SCALEDL_CHECK(k.is_string() && (k == "cpu" || k == "cuda"), "{}: device_kinds has {}: not cpu or cuda",
                  ctx, k.dump());
    c.kinds_.push_back(k.get<std::string>());
  }
  // Parse now: a corrupt tree is an error at load time, not at the first prediction.
  c.booster_ = std::make_shared<xgb::Booster>(xgb::Booster::from_buffer(c.model_json_, ctx + ": xgboost"));
  return c;
}

// ---- parallel ---------------------------------------------------------------

nlohmann::json ParallelMemory::to_json() const {
  return {{"weights_bytes", weights},           {"grads_bytes", grads},
          {"optimizer_bytes", optimizer},       {"activations_bytes", activations},
          {"transient_bytes", transient},       {"peak_bytes", peak},
          {"in_flight_microbatches", in_flight}};
}

ParallelMemory estimate_parallel_memory(const LayerGraph& g, int64_t pp, int64_t microbatches, int64_t dp,
                                        int zero, bool recompute, OptimizerKind opt, const std::string& kind,
                                        bool selective_recompute) {
  SCALEDL_CHECK(pp >= 1 && microbatches >= 1 && dp >= 1,
                "parallel memory: pp={} microbatches={} dp={} must be >= 1", pp, microbatches, dp);
  MemoryOptions o;
  o.device_kind = kind;
  const MemoryEstimate a = estimate_memory(g, o);  // one micro-batch, weights + grads, no optimizer state
  ParallelMemory r;
  const double P = g.total_params(), T = g.trainable_params();  // T < P: LoRA's adapters
  const bool masters = fp32_master_weights(g.settings);
  const double e = dtype_bytes(g.settings.dtype);
  // Megatron mixed precision: half weights + half grads + FP32 master + 2 FP32 moments (of the
  // trainable parameters). Autocast (amp): FP32 weights and grads, FP32 moments, no master copy;
  // the weights' half-precision casts held for the backward (2 bytes per parameter, in the
  // replay's base) are not counted here. A model loaded in a half type without masters (Hugging
  // Face's recipes) keeps its moments in that type.
  const double moments = opt == OptimizerKind::SGD ? 1.0 : 2.0;
  if (g.settings.amp) {
    r.weights = P * 4;
    r.grads = T * 4;
    r.optimizer = T * 4 * moments;
  } else {
    r.weights = P * e;
    r.grads = T * e;
    r.optimizer = masters ? T * 4 * (1 + moments) : T * e * moments;
  }
  if (zero >= 1) r.optimizer /= static_cast<double>(dp);
  if (zero >= 2) r.grads /= static_cast<double>(dp);
  if (zero >= 3) r.weights /= static_cast<double>(dp);
  r.in_flight = std::min(pp, microbatches);
  // Activations of one micro-batch of this stage = what the replay keeps at the end of forward.
  double act = a.saved;
  if (recompute) {
    // Only each block's input [mb, s, h] stays; one block's activations are rebuilt at a time.
    const int64_t blocks = std::max<int64_t>(1, g.model.num_layers + g.model.num_decoder_layers);
    double block_in = 0;
    for (const auto& n : g.nodes)
      if (n.dir == Direction::Forward && n.block == 0 && block_in == 0) {
        double k = e;
        for (int64_t d : n.out_shape) k *= static_cast<double>(d);
        block_in = k;
      }
    const double per_block = act / static_cast<double>(blocks);
    act = blocks * block_in + per_block;
  } else if (selective_recompute) {
    // The cores' softmax output, dropout mask (one byte an element) and dropout output are not kept.
    const std::vector<bool> core = g.attention_core();
    double core_kept = 0;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const LayerNode& n = g.nodes[i];
      if (!core[i] || (n.type != LayerType::Softmax && n.type != LayerType::Dropout)) continue;
      core_kept +=
          n.cost.out_bytes + (n.type == LayerType::Dropout ? n.cost.out_bytes / dtype_bytes(n.dtype) : 0.0);
    }
    act = std::max(0.0, act - core_kept);
  }
  r.activations = act * static_cast<double>(r.in_flight);
  // What the replay peaks at beyond its persistent bytes and saved activations (the
  // loss's buffers, gradients in flight), once.
  r.transient = std::max(0.0, a.peak - a.base - a.saved - a.grads);
  r.peak = r.weights + r.grads + r.optimizer + r.activations + r.transient;
  return r;
}

}  // namespace scaledl
