// Whole-iteration model benchmarks and model campaigns (model_bench.hpp, docs/zoo.md).
#include "scaledl/bench/model_bench.hpp"

#include <algorithm>
#include <memory>

#include "bench/memory_meter.hpp"
#include "bench/zoo.hpp"
#include "scaledl/bench/bench.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl {

namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind k, std::vector<torch::Tensor> params) {
  // Learning rates are small and fixed: the cost of a step does not depend on them.
  switch (k) {
    case OptimizerKind::SGD:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-4).momentum(0.9));
    case OptimizerKind::Adam:
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-4));
    case OptimizerKind::AdamW:
      return std::make_unique<torch::optim::AdamW>(params,
                                                   torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
  }
  fail("optimizer id {} is unknown", static_cast<int>(k));
}

/// Drops gradients (set-to-none, identical in LibTorch 1.13 and 2.x).
void clear_grads(std::vector<torch::Tensor>& params) {
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
}

void check_options(const ModelBenchOptions& o) {
  SCALEDL_CHECK(o.warmup >= 0, "--warmup={} must be >= 0", o.warmup);
  SCALEDL_CHECK(o.warmup_extra >= 0, "warmup_extra={} must be >= 0", o.warmup_extra);
  SCALEDL_CHECK(o.repeats >= 1, "--repeats={} must be >= 1", o.repeats);
  SCALEDL_CHECK(o.probe_repeats >= 0, "--probe-repeats={} must be >= 0", o.probe_repeats);
  SCALEDL_CHECK(o.unstable_cv > 0, "unstable_cv={} must be > 0", o.unstable_cv);
  SCALEDL_CHECK(o.max_seconds > 0, "max_seconds={} must be > 0", o.max_seconds);
}

std::string family_name(const ModelSpec& m) {
  return to_string(m.family);
}

TimingOptions timing_options(const ModelBenchOptions& opt) {
  TimingOptions t;
  t.warmup_min = opt.warmup;
  t.warmup_max = opt.warmup + opt.warmup_extra;
  t.repeats = opt.repeats;
  t.min_sample_ms = 1e-9;  // one iteration per sample: iterations are never batched
  t.max_launches = 1;
  t.unstable_cv = opt.unstable_cv;
  t.max_seconds = opt.max_seconds;
  return t;
}

}  // namespace

ModelMeasurement bench_model(const ModelSpec& m, const TrainSettings& s, const torch::Device& dev,
                             const ModelBenchOptions& opt) {
  check_options(opt);
  ModelMeasurement r;
  r.model_name = m.name;
  r.family = family_name(m);
  r.model = m.to_json();
  r.settings = s.to_json();
  r.device = dev.str();
  try {
    validate_settings(m, s);
    torch::manual_seed(opt.seed);
    apply_dtype_mode(s.dtype);
    memory_meter_install(dev);  // before the model is built: weights and batch are counted
    auto model = build_zoo_model(m, s, dev);
    auto batch = make_zoo_batch(m, s, dev, opt.seed);
    auto params = model->parameters();
    auto optimizer = make_optimizer(s.optimizer, params);

    const bool inference = run_mode(s) == RunMode::Inference;
    TimingOptions t = timing_options(opt);
    Measurement with, without;
    if (inference) {
      // Inference: eval mode (dropout is the identity), forward only under
      // no-grad, no loss (the model returns its logits), as the layer graph has it.
      model->eval();
      auto forward = [&] {
        torch::NoGradGuard no_grad;
        model->loss(batch, nullptr);
      };
      with = measure(forward, dev, t);
      without = with;  // no optimizer step to leave out
    } else {
      auto iteration = [&](bool with_step) {
        clear_grads(params);
        auto loss = model->loss(batch, nullptr);
        loss.backward();
        if (with_step) optimizer->step();
      };
      // iter: the iteration as settings say (with the optimizer step unless optimizer_step=false).
      with = measure([&] { iteration(s.optimizer_step); }, dev, t);
      without = measure([&] { iteration(false); }, dev, t);
    }
    r.iter = with.stats;
    r.iter_noopt = without.stats;

    // Peak memory of one more (untimed) iteration as settings say, from a
    // steady state: last iteration's gradients dropped, optimizer state present.
    clear_grads(params);
    synchronize(dev);
    const MemoryReading before = memory_meter_read(dev);
    if (!before.method.empty()) {
      memory_meter_reset_peak(dev);
      if (inference) {
        torch::NoGradGuard no_grad;
        model->loss(batch, nullptr);
      } else {
        auto loss = model->loss(batch, nullptr);
        loss.backward();
        if (s.optimizer_step) optimizer->step();
      }
      synchronize(dev);
      const MemoryReading after = memory_meter_read(dev);
      r.memory.base_bytes = before.current_bytes;
      r.memory.peak_bytes = std::max(after.peak_bytes, before.current_bytes);
      r.memory.method = after.method;
    }

    if (opt.probe_repeats > 0) {
      NodeProbe probe(dev);
      for (int i = 0; i < opt.probe_repeats; ++i) {
        probe.begin_iteration();
        if (inference) {
          torch::NoGradGuard no_grad;
          model->loss(batch, &probe);
        } else {
          clear_grads(params);
          auto loss = model->loss(batch, &probe);
          probe.begin_backward();
          loss.backward();
          probe.end_backward();
          if (s.optimizer_step) probe.time("optim.step", [&] { optimizer->step(); });
        }
        probe.end_iteration();
      }
      r.node_times = probe.node_times();
    }
    if (!with.stable() || !without.stable()) {
      r.status = "unstable";
      r.reason = fmt::format("iter cv={:.3f} ({}), iter_noopt cv={:.3f} ({}), threshold {:.2f}",
                             with.stats.cv, with.warm ? "warm" : "warm-up did not settle", without.stats.cv,
                             without.warm ? "warm" : "warm-up did not settle", opt.unstable_cv);
    }
  } catch (...) {
    Failure f = classify_current_exception();
    release_cached_memory(dev);
    r.status = f.status;
    r.reason = f.reason;
    r.node_times.clear();
  }
  return r;
}

std::string model_plan_key(const ModelConfig& c) {
  ModelMeasurement m;
  m.model_name = c.model.name;
  m.settings = c.settings.to_json();
  return model_key(m);
}

// ---- campaigns ------------------------------------------------------------------

ModelCampaignSummary run_model_campaign(const std::vector<ModelConfig>& plan, Store& store,
                                        const torch::Device& dev, const DeviceRecord& device,
                                        const ModelCampaignOptions& opt, const ModelProgress& progress) {
  check_options(opt.bench);
  SCALEDL_CHECK(!opt.campaign.empty(), "--campaign must not be empty");
  if (!store.device(device.key())) store.put_device(device);
  TimingOptions timing = timing_options(opt.bench);
  nlohmann::json env_json =
      bench_environment(dev, plan.empty() ? DType::FP32 : plan[0].settings.dtype, timing);
  env_json["tool"] = "scaledl bench models";
  env_json["probe_repeats"] = opt.bench.probe_repeats;
  const int64_t env = store.put_environment(env_json);
  auto done = store.model_keys(opt.campaign, device.key());
  ModelCampaignSummary sum;
  sum.total = plan.size();
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& e = plan[i];
    const std::string key = model_plan_key(e);
    if (done.count(key)) {
      ++sum.skipped;
      if (progress) progress(i + 1, plan.size(), key, "skip");
      continue;
    }
    // Never allocate what cannot fit: a model beyond the device's memory (or
    // beyond 1 TB when the record has no size) is recorded as oom, not built.
    const double need = training_memory_bytes(e.model, e.settings);
    const double have = device.mem_gb > 0 ? device.mem_gb * 1e9 : 1e12;
    ModelMeasurement r;
    if (need > have) {
      r.model_name = e.model.name;
      r.family = family_name(e.model);
      r.model = e.model.to_json();
      r.settings = e.settings.to_json();
      r.status = "oom";
      r.reason = fmt::format("not run: estimated training memory {:.3g} GB exceeds the device's {:.3g} GB",
                             need / 1e9, have / 1e9);
    } else {
      r = bench_model(e.model, e.settings, dev, opt.bench);
    }
    r.campaign = opt.campaign;
    r.device = device.key();
    r.env_id = env;
    store.put_model(r);
    done.insert(key);
    if (r.status == "ok")
      ++sum.ok;
    else if (r.status == "unstable")
      ++sum.unstable;
    else
      ++sum.failed;
    if (progress) progress(i + 1, plan.size(), key, r.status);
  }
  return sum;
}

}  // namespace scaledl
