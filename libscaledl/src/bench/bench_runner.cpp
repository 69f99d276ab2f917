// Layer campaigns: plan -> timed rows in the store, resumable (bench.hpp).
#include <cstdio>
#include <cstdlib>
#include <map>

#include "scaledl/bench.hpp"
#include "scaledl/build_info.hpp"
#include "scaledl/error.hpp"
#include "scaledl/probe.hpp"
#include "scaledl/progress.hpp"

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

}  // namespace

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

LayerCampaignSummary run_layer_campaign(const std::vector<LayerConfig>& configs, Store& store,
                                        const LayerCampaignOptions& opt) {
  SCALEDL_CHECK(!opt.campaign.empty(), "--campaign must not be empty");
  SCALEDL_CHECK(opt.threads >= 0, "--threads={} must be >= 0", opt.threads);
  SCALEDL_CHECK(opt.mem_limit_gb >= 0, "--mem-limit-gb={} must be >= 0", opt.mem_limit_gb);
  check_timing_options(opt.timing);
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
  std::map<DType, int64_t> env_ids;
  Progress bar(configs.size(), opt.progress);
  for (size_t i = 0; i < configs.size(); ++i) {
    const LayerConfig& c = configs[i];
    const std::string key = c.key();
    if (done.count(key)) {
      ++sum.skipped;
      bar.update(i + 1, "skip", key);
      continue;
    }
    if (!env_ids.count(c.dtype)) env_ids[c.dtype] = store.put_environment(bench_environment(dev, c.dtype, opt.timing));

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
    } else {
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
    }
    store.put_layer(m);  // one INSERT = one transaction
    if (m.status == "ok") ++sum.ok;
    else if (m.status == "unstable") ++sum.unstable;
    else if (m.status == "oom") ++sum.oom;
    else ++sum.error;
    bar.update(i + 1, m.status, key);
  }
  bar.finish();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace scaledl
