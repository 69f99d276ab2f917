// Layer campaigns: plan -> timed rows in the store, resumable (bench.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/stats.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/bench/probe.hpp"
#include "scaledl/core/build_info.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/progress.hpp"

namespace scaledl {

namespace {

/// Why a measurement is not trustworthy, "" when it is.
std::string instability(const char* dir, const Measurement& m) {
  if (!m.warm) return fmt::format("{} warm-up did not settle in {} samples", dir, m.warmup_samples);
  if (m.stats.cv > m.unstable_cv_used)
    return fmt::format("{} cv={:.3f} > {:.2f}", dir, m.stats.cv, m.unstable_cv_used);
  return "";
}

/// Bytes a layer touches, forward and backward: activations, weights and
/// temporaries of layer_cost, doubled for their gradients.
double estimated_bytes(const LayerConfig& c) {
  LayerCost k = layer_cost(c.type, c.dims, c.dtype);
  return 2 * (k.in_bytes + k.out_bytes + k.weight_bytes + k.temp_bytes);
}

/// Combined stats of one direction over the passes `ps` (those with samples).
TimingStats combine_stats(const std::vector<const TimingStats*>& ps) {
  std::vector<double> med, cv;
  TimingStats t;
  t.n = 0;
  for (const TimingStats* s : ps) {
    if (s->n <= 0 || !std::isfinite(s->median_ms)) continue;
    med.push_back(s->median_ms);
    cv.push_back(s->cv);
    t.p10_ms = std::isfinite(t.p10_ms) ? std::min(t.p10_ms, s->p10_ms) : s->p10_ms;
    t.p90_ms = std::isfinite(t.p90_ms) ? std::max(t.p90_ms, s->p90_ms) : s->p90_ms;
    t.n += s->n;
  }
  if (med.empty()) return TimingStats{};
  t.median_ms = median(med);
  t.cv = median(cv);
  return t;
}

}  // namespace

LayerMeasurement combine_layer_passes(const std::vector<LayerMeasurement>& passes) {
  SCALEDL_CHECK(!passes.empty(), "combine_layer_passes: no passes");
  const LayerMeasurement& first = passes.front();
  for (const auto& p : passes)
    SCALEDL_CHECK(
        p.type == first.type && p.dims == first.dims && p.dtype == first.dtype && p.device == first.device,
        "combine_layer_passes: passes of different configs ({} and {})",
        layer_key(first.type, first.dims, first.dtype), layer_key(p.type, p.dims, p.dtype));
  for (size_t i = 0; i < passes.size(); ++i)
    if (passes[i].status != "ok" && passes[i].status != "unstable") {
      LayerMeasurement m = passes[i];
      m.reason = fmt::format("pass {}: {}", i + 1, passes[i].reason);
      return m;
    }
  std::vector<const LayerMeasurement*> ok, used;
  for (const auto& p : passes)
    if (p.status == "ok") ok.push_back(&p);
  const bool majority = 2 * ok.size() > passes.size();
  if (majority)
    used = ok;
  else
    for (const auto& p : passes) used.push_back(&p);
  LayerMeasurement m = *used.back();
  std::vector<const TimingStats*> f, b;
  for (const LayerMeasurement* p : used) f.push_back(&p->fwd), b.push_back(&p->bwd);
  m.fwd = combine_stats(f);
  m.bwd = combine_stats(b);
  double lo = INFINITY, hi = 0;
  for (const LayerMeasurement* p : used)
    if (std::isfinite(p->fwd.median_ms))
      lo = std::min(lo, p->fwd.median_ms), hi = std::max(hi, p->fwd.median_ms);
  const std::string spread =
      hi > 0 && lo > 0 ? fmt::format("fwd medians spread {:.1f} %", 100 * (hi / lo - 1)) : "";
  if (majority) {
    m.status = "ok";
    m.reason = fmt::format("{} of {} passes ok; {}", ok.size(), passes.size(), spread);
  } else {
    m.status = "unstable";
    std::string why;
    for (const auto& p : passes)
      if (p.status != "ok") {
        why = p.reason;
        break;
      }
    m.reason = fmt::format("{} of {} passes unstable ({}); {}", passes.size() - ok.size(), passes.size(), why,
                           spread);
  }
  return m;
}

nlohmann::json bench_environment(const torch::Device& dev, DType dtype, const TimingOptions& t) {
  return {{"libtorch", libtorch_version()},
          {"cuda", cuda_runtime_version()},
          {"threads", at::get_num_threads()},
          {"blas_threads", blas_threads()},
          {"device", dev.str()},
          {"dtype", to_string(dtype)},
          {"git_commit", build_commit()},
          {"timing",
           {{"warmup_min", t.warmup_min},
            {"warmup_max", t.warmup_max},
            {"stable_tol", t.stable_tol},
            {"repeats", t.repeats},
            {"min_sample_ms", t.min_sample_ms},
            {"unstable_cv", t.unstable_cv}}}};
}

void check_layer_campaign_options(const LayerCampaignOptions& opt) {
  SCALEDL_CHECK(!opt.campaign.empty(), "--campaign must not be empty");
  SCALEDL_CHECK(opt.threads >= 0, "--threads={} must be >= 0", opt.threads);
  SCALEDL_CHECK(opt.mem_limit_gb >= 0, "--mem-limit-gb={} must be >= 0", opt.mem_limit_gb);
  SCALEDL_CHECK(opt.passes >= 1 && opt.passes <= 100, "--passes={} must be in [1, 100]", opt.passes);
  check_timing_options(opt.timing);
}

LayerCampaignSummary run_layer_campaign(const std::vector<LayerConfig>& configs, Store& store,
                                        const LayerCampaignOptions& opt) {
  check_layer_campaign_options(opt);
  const auto t0 = std::chrono::steady_clock::now();
  torch::Device dev = parse_device(opt.device);
  // One thread count for every pool in the process (LibTorch's and OpenBLAS's).
  set_compute_threads(opt.threads > 0 ? opt.threads : at::get_num_threads());

  // The device row: reuse the store's record of this device, else describe
  // (and measure) it now.
  DeviceRecord rec = describe_device(dev);
  if (!store.device(rec.key())) {
    ProbeOptions quick;
    quick.matmul_n = 256;
    quick.copy_mb = 16;
    quick.repeats = 3;
    rec = opt.full_probe ? probe_device(dev) : probe_device(dev, quick);
    store.put_device(rec);
  }
  LayerCampaignSummary sum;
  sum.total = configs.size();
  sum.device = rec.key();

  const std::set<std::string> done = store.layer_keys(opt.campaign, sum.device);
  // --passes N > 1: the passes already in the store (a resumed campaign), by config key.
  auto stored = opt.passes > 1 ? store.layer_passes(opt.campaign, sum.device)
                               : std::map<std::string, std::map<int, LayerMeasurement>>{};
  std::map<DType, int64_t> env_ids;
  auto measure = [&](const LayerConfig& c) {
    if (!env_ids.count(c.dtype))
      env_ids[c.dtype] = store.put_environment(bench_environment(dev, c.dtype, opt.timing));
    LayerMeasurement m;
    m.campaign = opt.campaign;
    m.type = c.type;
    m.dims = c.dims;
    m.dtype = c.dtype;
    m.device = sum.device;
    m.env_id = env_ids[c.dtype];
    const double est = estimated_bytes(c);
    if (opt.mem_limit_gb > 0 && est > opt.mem_limit_gb * 1e9) {
      m.status = "oom";
      m.reason = fmt::format("estimated {:.2f} GB exceeds --mem-limit-gb={}", est / 1e9, opt.mem_limit_gb);
      return m;
    }
    try {
      LayerTiming t = time_layer(c.type, c.dims, c.dtype, dev, opt.timing);
      m.fwd = t.fwd.stats;
      if (t.has_bwd) m.bwd = t.bwd.stats;
      m.memory = t.memory;
      std::string why = instability("fwd", t.fwd);
      if (t.has_bwd) {
        std::string b = instability("bwd", t.bwd);
        why += (why.empty() || b.empty() ? "" : "; ") + b;
      }
      m.status = why.empty() ? "ok" : "unstable";
      m.reason = why;
    } catch (...) {
      Failure f = classify_current_exception();
      m.status = f.status;
      m.reason = f.reason;
      release_cached_memory(dev);
    }
    return m;
  };
  const size_t steps = configs.size() * static_cast<size_t>(opt.passes);
  Progress bar(steps, opt.progress);
  for (int pass = 1; pass <= opt.passes; ++pass) {
    const bool last = pass == opt.passes;
    for (size_t i = 0; i < configs.size(); ++i) {
      const LayerConfig& c = configs[i];
      const std::string key = c.key();
      const size_t step = static_cast<size_t>(pass - 1) * configs.size() + i + 1;
      if (done.count(key)) {
        if (last) ++sum.skipped;
        bar.update(step, "skip", key);
        continue;
      }
      LayerMeasurement m;
      if (opt.passes > 1) {
        auto& mine = stored[key];
        // A config that failed in an earlier pass is not timed again.
        const bool failed = std::any_of(mine.begin(), mine.end(), [&](const auto& kv) {
          return kv.first < pass && kv.second.status != "ok" && kv.second.status != "unstable";
        });
        PeakMemory mem;
        if (!mine.count(pass) && !failed) {
          LayerMeasurement p = measure(c);
          mem = p.memory;
          store.put_layer_pass(p, pass);
          mine[pass] = std::move(p);
        }
        if (!last) {
          bar.update(step, mine.count(pass) ? mine.at(pass).status : "skip", key);
          continue;
        }
        std::vector<LayerMeasurement> ps;
        for (const auto& kv : mine) ps.push_back(kv.second);
        m = combine_layer_passes(ps);
        m.memory = mem;  // the last pass's, when this process timed it
      } else {
        m = measure(c);
      }
      store.put_layer(m);  // one INSERT = one transaction
      if (m.status == "ok")
        ++sum.ok;
      else if (m.status == "unstable")
        ++sum.unstable;
      else if (m.status == "oom")
        ++sum.oom;
      else
        ++sum.error;
      bar.update(step, m.status, key);
    }
  }
  bar.finish();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace scaledl
