#pragma once
// The host-input-pipeline flags shared by `predict` and `scale` (issue #15;
// pipeline.hpp, docs/pipeline.md): --pipeline FILE, --workers W, --vcpus V,
// --input text|image. With them, T_iter = max(T_compute, T_input) (ORION) and
// the output names the bottleneck.
//
// Assumption (stated in docs/pipeline.md): every host runs one input pipeline
// with W worker threads on its V vCPUs, shared by all the GPUs of that host; a
// data-parallel replica's samples are prepared once (its tensor- and
// pipeline-parallel ranks share them), so one host prepares
// batch x (data-parallel replicas on it) samples per iteration.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "scaledl/pipeline/pipeline.hpp"
#include "scaledl/predict/predict.hpp"
#include "scaledl/predict/scale.hpp"

namespace scaledl::cli {

/// The input side of one prediction and what it did to T_iter.
struct InputBound {
  ThroughputModel model;
  InputPrediction input;
  IterationBound bound;

  /// {"input": {...}, "bottleneck", "t_compute_ms"} into a prediction's JSON.
  void add_to(nlohmann::json& j) const {
    nlohmann::json in = bound.to_json();
    in["kind"] = to_string(model.kind);
    in["workers"] = input.workers;
    in["vcpus"] = input.vcpus;
    in["sample_size"] = input.sample_size;
    in["samples_per_s"] = input.samples_per_s;
    in["cpu_samples_per_s"] = input.cpu_samples_per_s;
    in["storage_samples_per_s"] = std::isfinite(input.storage_samples_per_s)
                                      ? nlohmann::json(input.storage_samples_per_s)
                                      : nlohmann::json();
    in["limit"] = input.limit;
    in["extrapolated"] = input.extrapolated;
    in["model"] = model.to_json();
    j["input"] = in;
    j["bottleneck"] = bound.bottleneck;
    j["t_compute_ms"] = bound.t_compute_ms;
  }

  /// A warning when the worker count lies beyond what was measured.
  std::string extrapolation() const {
    return input.extrapolated
               ? fmt::format("\n             EXTRAPOLATED: {} workers measured at most, on {} ({})",
                             model.max_measured_workers, model.host, model.source)
               : std::string();
  }

  /// Lines for the text output of `predict`.
  std::string text() const {
    const std::string unit = model.kind == InputKind::Text ? "tokens" : "px";
    const std::string storage = std::isfinite(input.storage_samples_per_s)
                                    ? fmt::format("{:.1f}", input.storage_samples_per_s)
                                    : std::string("not measured");
    return fmt::format(
               "input        {} pipeline ({} {}), {} workers on {} vCPUs: {:.1f} samples/s (CPU {:.1f}, "
               "storage {}; {}-bound){}\n",
               to_string(model.kind), input.sample_size, unit, input.workers, input.vcpus,
               input.samples_per_s, input.cpu_samples_per_s, storage, input.limit, extrapolation()) +
           fmt::format("T_input      {:10.3f} ms   {:g} samples per host per iteration\n", bound.t_input_ms,
                       bound.samples_per_iter) +
           fmt::format("bottleneck   {}: T_iter = max(T_compute {:.3f}, T_input {:.3f}) ms (ORION)\n",
                       bound.bottleneck, bound.t_compute_ms, bound.t_input_ms);
  }
};

struct PipelineArgs {
  std::string pipeline;  ///< `scaledl bench pipeline --out` JSON, a description of that layout, or a store
  std::optional<int64_t>
      workers;  ///< input worker threads per host, >= 1 (none: --vcpus, else the measured host's)
  std::optional<int64_t> vcpus;  ///< vCPUs of each host, >= 1 (none: the measured host's)
  std::string input;             ///< text | image ("" = from the model: a vision model reads images)

  void add_to(CLI::App& app) {
    app.add_option(
        "--pipeline", pipeline,
        "host input pipeline measurements: `scaledl bench pipeline --out` JSON or a store with pipeline "
        "rows (docs/pipeline.md)");
    app.add_option("--workers", workers, "input worker threads per host (T_iter = max(T_compute, T_input))");
    app.add_option("--vcpus", vcpus, "vCPUs of each host (default: those of the host measured)");
    app.add_option("--input", input, "input pipeline kind: text or image (default: from the model)");
  }

  bool given() const { return !pipeline.empty() || workers || vcpus || !input.empty(); }

  /// The checks that need no model: ranges, the kind, --pipeline present and
  /// readable (so a bad flag is named before a bundle is loaded).
  void check() const {
    if (!given()) return;
    SCALEDL_CHECK(!workers || (*workers >= 1 && *workers <= 4096),
                  "--workers={} must be in [1, 4096] (input worker threads per host)", workers.value_or(0));
    SCALEDL_CHECK(!vcpus || (*vcpus >= 1 && *vcpus <= 4096),
                  "--vcpus={} must be in [1, 4096] (vCPUs of each host)", vcpus.value_or(0));
    if (!input.empty()) parse_input_kind(input, "--input");
    SCALEDL_CHECK(
        !pipeline.empty(),
        "--workers/--vcpus/--input need --pipeline FILE (a `scaledl bench pipeline --out` JSON or a store "
        "with pipeline rows, docs/pipeline.md)");
    SCALEDL_CHECK(
        std::ifstream(pipeline).good(),
        "--pipeline={}: cannot open (a `scaledl bench pipeline --out` JSON or a store with pipeline rows)",
        pipeline);
  }

  /// The input rate for the model and settings; nullopt when no flag was given.
  std::optional<InputBound> resolve(const ModelSpec& m, const TrainSettings& s) const {
    if (!given()) return std::nullopt;
    check();
    const bool vision = m.arch == Arch::VisionEncoder;
    InputKind kind = vision ? InputKind::Image : InputKind::Text;
    if (!input.empty()) {
      kind = parse_input_kind(input, "--input");
      SCALEDL_CHECK((kind == InputKind::Image) == vision, "--input={} does not match {}: a {} model reads {}",
                    input, m.name, vision ? "vision" : "text",
                    vision ? "images (--input image)" : "text (--input text)");
    }
    InputBound r;
    r.model = load_throughput_model(pipeline, kind, "--pipeline");
    const int64_t v = vcpus ? *vcpus : r.model.measured_vcpus;
    const int64_t w = workers ? *workers : v;
    const int64_t size =
        kind == InputKind::Text ? s.seq_len : (s.image_size > 0 ? s.image_size : m.image_size);
    r.input = predict_input(r.model, w, v, size);
    return r;
  }

  /// resolve(), then ORION's bound on `p` for `samples_per_host` samples per
  /// iteration: T_iter and its interval become max(., T_input) (max is monotone,
  /// so the quantiles of T_compute map through it).
  std::optional<InputBound> apply(IterationPrediction& p, const ModelSpec& m, const TrainSettings& s,
                                  double samples_per_host) const {
    auto r = resolve(m, s);
    if (!r) return r;
    r->bound = bound_iteration(p.t_iter_ms, samples_per_host, r->input);
    p.t_iter_ms = r->bound.t_iter_ms;
    // Quantiles of max(T_compute, T_input): the larger of the two sides' (each side's own interval;
    // an input-bound prediction is as uncertain as the input rate, not exact).
    const auto in80 = input_interval_ms(r->bound.t_input_ms, 0.80),
               in95 = input_interval_ms(r->bound.t_input_ms, 0.95);
    if (std::isfinite(p.lo80_ms)) {
      p.lo80_ms = std::max(p.lo80_ms, in80.first);
      p.hi80_ms = std::max(p.hi80_ms, in80.second);
      p.lo95_ms = std::max(p.lo95_ms, in95.first);
      p.hi95_ms = std::max(p.hi95_ms, in95.second);
    }
    return r;
  }

  /// For `scale` (ScaleOptions::input_ms): a host prepares global batch / hosts
  /// samples per iteration, T_input = that / R (ms).
  static std::function<double(int64_t, int64_t, int64_t)> scale_input_ms(const InputBound& in) {
    const double rate = in.input.samples_per_s;
    return [rate](int64_t, int64_t nodes, int64_t global_batch) {
      return 1e3 * static_cast<double>(global_batch) / static_cast<double>(std::max<int64_t>(nodes, 1)) /
             rate;
    };
  }

  /// `scale`'s text output: T_compute against T_input per GPU count, and where
  /// the input stops more GPUs from helping.
  static std::string scale_table(const InputBound& in, const ScaleResult& r) {
    std::string t = fmt::format(
        "input pipeline per host: {} ({} {}), {} workers on {} vCPUs, {:.1f} samples/s ({}-bound); T_iter = "
        "max(T_compute, T_input) (ORION){}\n{:>6} {:>12} {:>12} {:>10}\n",
        to_string(in.model.kind), in.input.sample_size, in.model.kind == InputKind::Text ? "tokens" : "px",
        in.input.workers, in.input.vcpus, in.input.samples_per_s, in.input.limit,
        in.input.extrapolated ? fmt::format("\nEXTRAPOLATED: {} workers measured at most, on {}",
                                            in.model.max_measured_workers, in.model.host)
                              : std::string(),
        "gpus", "T_compute_ms", "T_input_ms", "bottleneck");
    int64_t first_input = -1;
    for (const auto& p : r.points) {
      const bool input_bound = p.t_input_ms > p.t_compute_ms;
      if (input_bound && first_input < 0) first_input = p.gpus;
      t += fmt::format("{:>6} {:>12.2f} {:>12.2f} {:>10}\n", p.gpus, p.t_compute_ms, p.t_input_ms,
                       input_bound ? "input" : "compute");
    }
    t += first_input < 0 ? std::string("the input keeps up at every GPU count\n")
                         : fmt::format(
                               "from {} GPUs the input pipeline is the bottleneck: more GPUs per host stop "
                               "helping (more workers, vCPUs or hosts would)\n",
                               first_input);
    return t;
  }

  /// The same for a parallel prediction's T_iter.
  std::optional<InputBound> apply(double& t_iter_ms, const ModelSpec& m, const TrainSettings& s,
                                  double samples_per_host) const {
    auto r = resolve(m, s);
    if (!r) return r;
    r->bound = bound_iteration(t_iter_ms, samples_per_host, r->input);
    t_iter_ms = r->bound.t_iter_ms;
    return r;
  }
};

}  // namespace scaledl::cli
