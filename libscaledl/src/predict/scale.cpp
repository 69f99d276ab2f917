// `scaledl scale` (scale.hpp): the speedup curve over GPU counts.
#include "scaledl/predict/scale.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "scaledl/core/error.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/memory/memory.hpp"
#include "scaledl/predict/bundle.hpp"

namespace scaledl {

namespace {
/// `t` as a whole integer in [lo, hi] (nothing before or after it); nullopt otherwise.
std::optional<int64_t> int_in(const std::string& t, int64_t lo, int64_t hi) {
  size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(t, &pos);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (pos != t.size() || t.empty() || v < lo || v > hi) return std::nullopt;
  return static_cast<int64_t>(v);
}
}  // namespace

std::vector<int64_t> parse_gpu_counts(const std::string& spec) {
  auto one = [&](const std::string& t) {
    const std::optional<int64_t> v = int_in(t, 1, int64_t{1} << 20);
    SCALEDL_CHECK(v.has_value(), "--gpus=\"{}\": \"{}\" is not a GPU count in [1, 2^20]", spec, t);
    return *v;
  };
  std::vector<int64_t> out;
  const auto dots = spec.find("..");
  if (dots != std::string::npos) {
    const int64_t lo = one(spec.substr(0, dots)), hi = one(spec.substr(dots + 2));
    SCALEDL_CHECK(lo <= hi, "--gpus=\"{}\": the range is empty", spec);
    for (int64_t n = lo; n <= hi; n *= 2) out.push_back(n);
  } else {
    std::stringstream ss(spec);
    for (std::string t; std::getline(ss, t, ',');) out.push_back(one(t));
  }
  SCALEDL_CHECK(!out.empty(), "--gpus=\"{}\" gives no GPU count", spec);
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& value, const std::string& key, int64_t lo,
                                    int64_t hi) {
  std::vector<int64_t> out;
  std::stringstream ss(value);
  for (std::string t; std::getline(ss, t, ',');) {
    const std::optional<int64_t> v = int_in(t, lo, hi);
    SCALEDL_CHECK(v.has_value(),
                  "{}={}: \"{}\" is not an integer in [{}, {}] (a list is comma-separated: 1,2,4)", key,
                  value, t, lo, hi);
    if (std::find(out.begin(), out.end(), *v) == out.end()) out.push_back(*v);
  }
  SCALEDL_CHECK(!out.empty(), "{}=\"{}\" gives no value", key, value);
  return out;
}

std::string layout_string(const ParallelConfig& c, int64_t dp) {
  std::string s = fmt::format("tp {}", c.tp);
  if (c.cp > 1) s += fmt::format(" x cp {}", c.cp);
  s += fmt::format(" x pp {}", c.pp);
  if (c.vp > 1) s += fmt::format(" (vp {})", c.vp);
  s += fmt::format(" x dp {}", dp);
  if (c.ep > 1) s += fmt::format(" (ep {})", c.ep);
  s += fmt::format(", M {}, ZeRO {}", c.microbatches, c.zero);
  for (const auto& o : layout_options(c)) s += ", " + o;
  return s;
}

std::vector<std::string> layout_options(const ParallelConfig& c) {
  std::vector<std::string> o;
  if (c.sequence_parallel) o.push_back(c.overlap_tp_comm ? "SP (TP comm overlapped)" : "SP");
  if (c.recompute) o.push_back("recompute");
  if (c.selective_recompute) o.push_back("selective recompute");
  return o;
}

nlohmann::json ScaleResult::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : points)
    pts.push_back({{"gpus", p.gpus},
                   {"tp", p.best.plan.cfg.tp},
                   {"pp", p.best.plan.cfg.pp},
                   {"dp", p.best.plan.dp},
                   {"ep", p.best.plan.cfg.ep},
                   {"microbatches", p.best.plan.cfg.microbatches},
                   {"cp", p.best.plan.cfg.cp},
                   {"vp", p.best.plan.cfg.vp},
                   {"zero", p.best.plan.cfg.zero},
                   {"recompute", p.best.plan.cfg.recompute},
                   {"recompute_granularity", to_string(recompute_of(p.best.plan.cfg))},
                   {"sequence_parallel", p.best.plan.cfg.sequence_parallel},
                   {"framework", p.framework.empty() ? nlohmann::json() : nlohmann::json(p.framework)},
                   {"layout", layout_string(p.best.plan.cfg, p.best.plan.dp)},
                   {"micro_batch", p.best.plan.micro_batch},
                   {"global_batch", p.global_batch},
                   {"splits_tried", p.splits},
                   {"splits_skipped_memory", p.skipped_memory},
                   {"peak_bytes_per_gpu", p.peak_bytes},
                   {"t_iter_ms", p.best.t_iter_ms},
                   {"t_epoch_s", p.t_epoch_s},
                   {"speedup", p.speedup},
                   {"efficiency", p.efficiency},
                   {"linear_bound", p.linear_bound},
                   {"cost", p.cost},
                   {"t_compute_ms", p.t_compute_ms},
                   {"t_input_ms", p.t_input_ms},
                   {"bottleneck", p.t_input_ms > p.t_compute_ms ? "input" : "compute"},
                   {"breakdown", p.best.to_json()}});
  nlohmann::json j = {{"points", pts},
                      {"fastest", fastest >= 0 ? nlohmann::json(points[fastest].gpus) : nlohmann::json()},
                      {"best_for_target", best_for_target >= 0 ? nlohmann::json(points[best_for_target].gpus)
                                                               : nlohmann::json()},
                      {"infeasible", infeasible},
                      {"single_gpu_ms", single_gpu_ms}};
  if (!comm_warning.empty()) j["comm_warning"] = comm_warning;
  return j;
}

namespace {

void check_scale_options(const ScaleOptions& o) {
  SCALEDL_CHECK(!o.gpus.empty(), "--gpus gives no GPU count");
  SCALEDL_CHECK(o.gpus_per_node >= 1, "--gpus-per-node={} must be >= 1", o.gpus_per_node);
  SCALEDL_CHECK(std::isfinite(o.price_per_gpu_hour) && o.price_per_gpu_hour >= 0,
                "--price-per-gpu-hour={} must be >= 0", o.price_per_gpu_hour);
  SCALEDL_CHECK(std::isfinite(o.target_epoch_s) && o.target_epoch_s >= 0, "--target-epoch-s={} must be >= 0",
                o.target_epoch_s);
  SCALEDL_CHECK(o.target_epoch_s == 0 || o.samples > 0,
                "--target-epoch-s needs --samples (the epoch's size)");
  SCALEDL_CHECK(o.samples >= 0, "--samples={} must be >= 0", o.samples);
  SCALEDL_CHECK(!o.zero.empty() && !o.cp.empty() && !o.vp.empty() && !o.recompute.empty() &&
                    !o.sequence_parallel.empty(),
                "scale: an empty list of layouts to search (--zero, --cp, --vp, --recompute, --sp)");
  for (int z : o.zero) SCALEDL_CHECK(z >= 0 && z <= 3, "--zero={} is not a ZeRO stage (0, 1, 2, 3)", z);
  for (int64_t v : o.cp) SCALEDL_CHECK(v >= 1 && v <= (int64_t{1} << 20), "--cp={} must be >= 1", v);
  for (int64_t v : o.vp) SCALEDL_CHECK(v >= 1 && v <= 1024, "--vp={} must be in [1, 1024]", v);
  SCALEDL_CHECK(o.global_batch >= 0 && o.global_batch <= (int64_t{1} << 40),
                "--global-batch={} must be a sample count >= 1 (0 = --batch)", o.global_batch);
  SCALEDL_CHECK(o.per_gpu_batch >= 0 && o.per_gpu_batch <= (int64_t{1} << 24),
                "--per-gpu-batch={} must be a sample count >= 1 (0 = --batch)", o.per_gpu_batch);
  check_headroom(o.headroom);
}

/// What every split of one scale_curve call shares: the job, and the single-GPU anchors. One answer
/// per job: every split's compute is anchored to what `predict` prints for its replica's batch on
/// one GPU (predict_parallel_anchored), memoised by that batch.
struct ScaleJob {
  const Bundle& b;
  const ModelSpec& m;
  TrainSettings s;        ///< the request's settings with this job's kernel recipe
  std::string framework;  ///< that recipe's name ("" = the settings' own)
  const ScaleOptions& o;
  const DeviceRecord& dev;
  const ClusterComm& comm;
  double cap = 0;                              ///< device memory, bytes (0 = unknown)
  std::map<int64_t, SingleGpuAnchor> anchors;  ///< by replica batch

  const SingleGpuAnchor& anchor_of(int64_t batch) {
    auto it = anchors.find(batch);
    if (it != anchors.end()) return it->second;
    TrainSettings t = s;
    t.batch = batch;
    return anchors[batch] = single_gpu_anchor(b, m, t, dev, b.host_node_ms_for(dev, t));
  }
};

/// The search over the splits of one GPU count: the fastest that fits, and why none did.
struct SplitSearch {
  ScalePoint pt;
  bool found = false;
  std::string why = "no split of the model fits";
  double min_peak = INFINITY;
};

/// Nodes of gpus_per_node GPUs; a count that does not fill whole nodes is costed as one node.
int64_t nodes_for(int64_t n, int64_t gpus_per_node) {
  int64_t nodes = n <= gpus_per_node ? 1 : (n + gpus_per_node - 1) / gpus_per_node;
  if (n % nodes) nodes = 1;
  return nodes;
}

/// The micro-batch sizes of a replica's batch (powers of two dividing it, and itself), largest first.
std::vector<int64_t> micro_batch_sizes(int64_t per_replica) {
  std::vector<int64_t> mbs;
  for (int64_t mb = 1; mb <= per_replica; mb *= 2)
    if (per_replica % mb == 0) mbs.push_back(mb);
  if (mbs.empty() || mbs.back() != per_replica) mbs.push_back(per_replica);
  std::reverse(mbs.begin(), mbs.end());
  return mbs;
}

/// One split: predicted and its per-GPU memory checked; true when it fits (then it is counted,
/// and kept when it is the fastest so far).
bool try_split(ScaleJob& job, const ParallelConfig& c, int64_t per_replica, int64_t dp, SplitSearch& sr) {
  TrainSettings t = job.s;
  t.batch = per_replica;
  ParallelPrediction p;
  try {
    p = predict_parallel_anchored(job.b, job.m, t, c, job.dev, job.comm, &job.anchor_of(per_replica));
  } catch (const Error& e) {
    sr.why = e.what();
    return false;
  }
  const ParallelMemory pm = estimate_parallel_memory(
      build_layer_graph(p.plan.stage, p.plan.micro), c.pp, c.microbatches, dp * c.cp, c.zero, c.recompute,
      job.s.optimizer, memory_device_kind(job.dev.kind), c.selective_recompute);
  if (memory_verdict(pm.peak, NAN, job.cap, job.o.headroom) == "does not fit") {
    ++sr.pt.skipped_memory;
    sr.why = fmt::format(
        "no split fits in {:.1f} GB with {:.0f} % headroom (smallest per-GPU peak tried {:.1f} GB)",
        job.cap / 1e9, 100 * job.o.headroom, (sr.min_peak = std::min(sr.min_peak, pm.peak)) / 1e9);
    return false;
  }
  ++sr.pt.splits;
  if (!sr.found || p.t_iter_ms < sr.pt.best.t_iter_ms) {
    sr.pt.best = p;
    sr.pt.peak_bytes = pm.peak;
    sr.pt.framework = job.framework;
    sr.found = true;
  }
  return true;
}

/// The searched layouts (ScaleOptions: virtual stages, ZeRO, recomputation, sequence parallelism)
/// and micro-batch sizes of one shape `base` (gpus, nodes, tp, cp, pp, ep set): each predicted by
/// try_split.
void search_layouts(ScaleJob& job, const ParallelConfig& base, int64_t per_replica, int64_t dp,
                    SplitSearch& sr) {
  const ScaleOptions& o = job.o;
  const bool replicas = dp * base.cp > 1;
  for (int64_t vp : o.vp) {
    if (vp > 1 && base.pp == 1) continue;
    for (size_t zi = 0; zi < (replicas ? o.zero.size() : 1); ++zi) {  // one replica: no ZeRO stage
      for (Recompute rc : o.recompute) {
        // The attention core of a fused (flash) kernel keeps no scores: recomputing it saves nothing.
        if (rc == Recompute::Selective && job.s.attention != AttentionImpl::Eager) continue;
        for (bool sp : o.sequence_parallel) {
          if (sp && base.tp == 1) continue;
          // Largest micro-batch first: without pipeline stages, accumulating gradients over several
          // micro-batches is never faster than one pass over the batch, only smaller in memory, so
          // there the first split that fits is taken.
          bool fitted = false;
          for (int64_t mb : micro_batch_sizes(per_replica)) {
            if (fitted && base.pp == 1) break;
            ParallelConfig c = base;
            c.vp = vp;
            c.microbatches = per_replica / mb;
            c.zero = replicas ? o.zero[zi] : 0;
            set_recompute(c, rc);
            c.sequence_parallel = sp;
            c.overlap_tp_comm = o.overlap_tp_comm && sp;
            if (try_split(job, c, per_replica, dp, sr)) fitted = true;
          }
        }
      }
    }
  }
}

/// Every feasible (tp, cp, pp, dp, ep) shape of n GPUs on `nodes` nodes for global batch gb, each
/// with every searched layout (search_layouts).
void search_splits(ScaleJob& job, int64_t n, int64_t gb, int64_t nodes, SplitSearch& sr) {
  const ModelSpec& m = job.m;
  const ScaleOptions& o = job.o;
  ParallelConfig base;
  base.gpus = n;
  base.nodes = nodes;
  base.overlap_grad_reduce = o.overlap_grad_reduce;
  base.host_node_ms = job.b.host_node_ms_for(job.dev, job.s);
  for (int64_t tp = 1; tp <= std::min(n, o.gpus_per_node); tp *= 2) {
    if (m.num_heads % tp || m.num_kv_heads % tp || m.ffn_dim % tp) continue;
    for (int64_t cp : o.cp) {
      for (int64_t pp = 1; tp * cp * pp <= n; pp *= 2) {
        if (n % (tp * cp * pp)) continue;
        if (pp > m.num_layers || (pp > 1 && m.arch == Arch::EncoderDecoder)) continue;
        const int64_t dp = n / (tp * cp * pp);
        if (gb % dp) {
          sr.why = fmt::format("global batch {} is not divisible by the data-parallel ways", gb);
          continue;
        }
        // Mixtures of experts: the experts spread over ep of the dp ranks (ep = 1 for dense models).
        for (int64_t ep = 1; ep <= dp; ep *= 2) {
          if (dp % ep || (ep > 1 && (m.num_experts == 0 || m.num_experts % ep))) continue;
          ParallelConfig c = base;
          c.tp = tp;
          c.cp = cp;
          c.pp = pp;
          c.ep = ep;
          search_layouts(job, c, gb / dp, dp, sr);
        }
      }
    }
  }
}

/// The best split's input bound (issue #15), speedup against `t1` (ms per sample on one GPU),
/// epoch time and cost.
void finish_point(ScalePoint& pt, const ScaleOptions& o, int64_t nodes, double t1) {
  const int64_t n = pt.gpus, gb = pt.global_batch;
  pt.t_compute_ms = pt.best.t_iter_ms;
  if (o.input_ms) {  // issue #15: ORION's max(T_compute, T_input); the same for every split of this N
    pt.t_input_ms = o.input_ms(n, nodes, gb);
    pt.best.t_iter_ms = std::max(pt.t_compute_ms, pt.t_input_ms);
  }
  // n GPUs never do the work in less than 1/n of one GPU's time (at most a linear speedup): the
  // layer sums are near linear in the batch, but the refinement's alpha of a smaller per-GPU batch
  // can come out lower than the one of the whole batch (0.92 at 16 samples of GPT-2 against 0.95
  // at 32 on an A100), which alone would read as a superlinear speedup.
  pt.linear_bound = pt.best.t_iter_ms < t1 * static_cast<double>(gb) / static_cast<double>(n);
  if (pt.linear_bound) pt.best.t_iter_ms = t1 * static_cast<double>(gb) / static_cast<double>(n);
  const double per_sample = pt.best.t_iter_ms / static_cast<double>(gb);
  pt.speedup = t1 / per_sample;
  pt.efficiency = pt.speedup / static_cast<double>(n);
  if (o.samples > 0) {
    const int64_t iters = (o.samples + gb - 1) / gb;
    pt.t_epoch_s = static_cast<double>(iters) * pt.best.t_iter_ms / 1e3;
    if (o.price_per_gpu_hour > 0)
      pt.cost = o.price_per_gpu_hour * static_cast<double>(n) * pt.t_epoch_s / 3600.0;
  }
}

/// The fastest point (per sample) and the one that best meets the epoch target.
void pick_points(ScaleResult& res, const ScaleOptions& o) {
  for (size_t i = 0; i < res.points.size(); ++i) {
    const auto& p = res.points[i];
    if (res.fastest < 0 || p.best.t_iter_ms / p.global_batch <
                               res.points[res.fastest].best.t_iter_ms / res.points[res.fastest].global_batch)
      res.fastest = static_cast<int64_t>(i);
    if (o.target_epoch_s > 0 && p.t_epoch_s <= o.target_epoch_s) {
      const auto& q = res.best_for_target >= 0 ? res.points[res.best_for_target] : p;
      const bool better =
          res.best_for_target < 0 || (o.price_per_gpu_hour > 0 ? p.cost < q.cost : p.gpus < q.gpus);
      if (better) res.best_for_target = static_cast<int64_t>(i);
    }
  }
}

}  // namespace

ScaleResult scale_curve(const Bundle& b, const ModelSpec& m, const TrainSettings& s, const ScaleOptions& o,
                        const DeviceRecord& dev, const ClusterComm& comm) {
  check_scale_options(o);
  // One job per kernel recipe searched (its settings and its own single-GPU anchors).
  std::vector<ScaleJob> jobs;
  const double cap = dev.mem_gb > 0 ? dev.mem_gb * 1e9 : 0;
  if (o.frameworks.empty()) jobs.push_back(ScaleJob{b, m, s, "", o, dev, comm, cap, {}});
  for (Framework f : o.frameworks) {
    TrainSettings t = s;
    apply_framework(t, f);
    jobs.push_back(ScaleJob{b, m, t, to_string(f), o, dev, comm, cap, {}});
  }
  ScaleResult res;
  // Speedup and efficiency are against one GPU running the same batch (the global batch, or in weak
  // scaling the per-GPU one), predicted whether or not 1 is among the counts asked (and whether
  // or not it fits in memory there).
  const int64_t base_batch = o.weak ? (o.per_gpu_batch > 0 ? o.per_gpu_batch : s.batch)
                                    : (o.global_batch > 0 ? o.global_batch : s.batch);
  // (with several recipes, the fastest one GPU among them)
  res.single_gpu_ms = INFINITY;
  for (ScaleJob& job : jobs)
    res.single_gpu_ms = std::min(res.single_gpu_ms, job.anchor_of(base_batch).single_ms);
  // ms per sample on one GPU, its host's input pipeline included (issue #15) when it is modelled
  const double t1 = std::max(res.single_gpu_ms, o.input_ms ? o.input_ms(1, 1, base_batch) : 0.0) /
                    static_cast<double>(base_batch);
  int64_t most_nodes = 1;  // the most nodes a feasible point spans (for the cross-node warning)
  for (int64_t n : o.gpus) {
    SCALEDL_CHECK(n >= 1, "--gpus: {} is not a GPU count", n);
    SplitSearch sr;
    sr.pt.gpus = n;
    sr.pt.global_batch = o.weak ? (o.per_gpu_batch > 0 ? o.per_gpu_batch : s.batch) * n
                                : (o.global_batch > 0 ? o.global_batch : s.batch);
    const int64_t nodes = nodes_for(n, o.gpus_per_node);
    for (ScaleJob& job : jobs) search_splits(job, n, sr.pt.global_batch, nodes, sr);
    if (!sr.found) {
      res.infeasible.push_back(fmt::format("{}: {}", n, sr.why));
      continue;
    }
    most_nodes = std::max(most_nodes, nodes);
    finish_point(sr.pt, o, nodes, t1);
    res.points.push_back(sr.pt);
  }
  SCALEDL_CHECK(!res.points.empty(), "no GPU count has a feasible split ({})", res.infeasible.front());
  res.comm_warning = cross_node_comm_warning(comm.inter, most_nodes);
  pick_points(res, o);
  return res;
}

int64_t pick_point(const ScaleResult& r, const ScaleOptions& o) {
  if (o.target_epoch_s > 0) return r.best_for_target;
  int64_t best = r.fastest;
  if (o.price_per_gpu_hour > 0 && o.samples > 0)
    for (size_t i = 0; i < r.points.size(); ++i) {
      // The cheapest; at the same cost (a linear speedup), the faster.
      const ScalePoint& p = r.points[i];
      if (best < 0 || p.cost < r.points[best].cost * (1 - 1e-9) ||
          (p.cost <= r.points[best].cost * (1 + 1e-9) && p.t_epoch_s < r.points[best].t_epoch_s))
        best = static_cast<int64_t>(i);
    }
  return best;
}

void rank_device_curves(std::vector<DeviceCurve>& curves) {
  bool all_costed = true;
  for (const DeviceCurve& c : curves)
    if (c.pick >= 0 && !(c.result.points[c.pick].cost > 0)) all_costed = false;
  auto key = [&](const DeviceCurve& c) -> double {
    if (c.pick < 0) return INFINITY;
    const ScalePoint& p = c.result.points[c.pick];
    return all_costed ? p.cost : p.best.t_iter_ms / static_cast<double>(p.global_batch);
  };
  std::stable_sort(curves.begin(), curves.end(),
                   [&](const DeviceCurve& a, const DeviceCurve& b) { return key(a) < key(b); });
}

}  // namespace scaledl
