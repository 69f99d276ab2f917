// What `scaledl predict` prints of one configuration (predict_api.hpp): the JSON and the text
// report, on one device and on --gpus N.
#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scaledl/core/message.hpp"
#include "scaledl/gnn/graph_inference.hpp"
#include "scaledl/learn/calibration.hpp"
#include "scaledl/predict/bundle.hpp"
#include "scaledl/predict/domain.hpp"
#include "scaledl/predict/predict_api.hpp"

namespace scaledl {

namespace {

/// ", LoRA rank 16 on q,v" for a LoRA run; "" otherwise.
std::string lora_phrase(const TrainSettings& s) {
  return s.lora_rank > 0 ? fmt::format(", LoRA rank {} on {}", s.lora_rank, lora_targets_string(s)) : "";
}

/// clock_note() of `dev`, but nothing of a power-limited card whose own layer timings trained
/// the bundle (NeuSight's T4): the layer models learnt its times at the clock it held.
std::string clock_assumption(const Bundle& b, const DeviceRecord& dev) {
  const std::optional<int64_t> rows = b.layer_rows_of(dev.key());
  if (dev.sustained_clock_mhz <= 0 && rows && *rows > 0) return "";
  return clock_note(dev);
}

/// For a GPU that is not NVIDIA's (a spec sheet's extra.vendor "AMD" or "Intel"): what the
/// prediction is. Their libraries (rocBLAS / hipBLASLt, oneDNN) are in little of the public data
/// (docs/gpu-data.md), so the layer models give them the share of the roofline learnt mostly from
/// NVIDIA parts. "" for NVIDIA parts and records without a vendor (probes, CPUs).
std::string vendor_note(const DeviceRecord& dev) {
  // A CPU's probe record names its vendor too (GenuineIntel, AuthenticAMD): its own rows train the
  // CPU bundles, so no note.
  if (dev.kind == "cpu" || !dev.extra.is_object() || !dev.extra.contains("vendor") ||
      !dev.extra.at("vendor").is_string())
    return "";
  const std::string v = dev.extra.at("vendor").get<std::string>();
  if (v == "NVIDIA") return "";
  return fmt::format(
      "{} is an {} part: its math libraries are in little or none of the training data, so this is the "
      "share of its spec roofline learnt mostly from NVIDIA GPUs (docs/gpu-data.md)",
      dev.name, v);
}

/// For a mixture with a fixed expert capacity (Switch Transformers' expert_capacity) that drops
/// tokens at this length: what the graph assumes of the dispatch, and how to model the other one.
/// Transformers 4.x counts each expert's tokens per sequence and passes those over the capacity
/// by; transformers 5 sends every token to its expert (docs/unseen-gpu.md, "Switch-XL on the
/// H200"). "" when no token is dropped.
std::string dispatch_note(const ModelSpec& m, const TrainSettings& s) {
  if (m.num_experts <= 0 || m.expert_capacity <= 0 || every_expert_runs(m, !s.backward)) return "";
  const int64_t slots = expert_capacity_per_sample(m, s.seq_len);
  const int64_t taken = std::min<int64_t>(s.seq_len, slots * m.num_experts);
  if (taken >= s.seq_len) return "";
  return fmt::format(
      "each expert takes at most expert_capacity={} tokens per sequence, as transformers 4.x dispatches: at "
      "least {} of the {} tokens of a sequence pass their FFN by; transformers 5 drops none (--sweep "
      "config.capacity_factor=1.0 models that; docs/unseen-gpu.md)",
      m.expert_capacity, s.seq_len - taken, s.seq_len);
}

/// "seq 128" for a text model, "image 224" for a vision one.
std::string input_size(const ModelSpec& m, const TrainSettings& s) {
  if (m.arch == Arch::VisionEncoder)
    return fmt::format("image {}", s.image_size > 0 ? s.image_size : m.image_size);
  return fmt::format("seq {}", s.seq_len);
}

/// "   80 % [lo, hi]   95 % [lo, hi]" of T_iter in ms, or with `iters` > 0 of the epoch in s.
std::string interval_text(const IterationPrediction& p, int64_t iters) {
  if (!std::isfinite(p.lo80_ms)) return "";
  if (iters == 0)
    return fmt::format("   80 % [{:.3f}, {:.3f}]   95 % [{:.3f}, {:.3f}]", p.lo80_ms, p.hi80_ms, p.lo95_ms,
                       p.hi95_ms);
  return fmt::format("   80 % [{:.3f}, {:.3f}]   95 % [{:.3f}, {:.3f}]", iters * p.lo80_ms / 1e3,
                     iters * p.hi80_ms / 1e3, iters * p.lo95_ms / 1e3, iters * p.hi95_ms / 1e3);
}

/// The report from `model` to `T_iter`, and the input pipeline's lines.
void write_times(std::ostream& out, const SinglePrediction& r) {
  const ModelSpec& m = r.model;
  const TrainSettings& s = r.settings;
  const IterationPrediction& p = r.p;
  out << fmt::format(
             "model        {} ({}), batch {} x {} device(s), {}, {}, mode {}, optimizer {}, {} "
             "attention{}\n",
             m.name, to_string(m.family), s.batch, s.num_devices, input_size(m, s), dtype_recipe(s),
             to_string(run_mode(s)), s.optimizer_step ? to_string(s.optimizer) : "none", attention_kind(s),
             lora_phrase(s))
      << (r.assumed.empty() ? std::string() : fmt::format("assumed      {}\n", fmt::join(r.assumed, "; ")))
      << fmt::format("device       {}\n", r.device.key())
      << fmt::format("T_sum        {:10.3f} ms   {} of {} layer predictions{}\n", p.t_sum_ms,
                     p.host_ms > 0 ? "max(host term, sum)" : "sum", r.nodes,
                     p.fallback_nodes
                         ? fmt::format(" ({} without a layer model of their own type)", p.fallback_nodes)
                         : "")
      << (p.host_ms > 0
              ? fmt::format("host term    {:10.3f} ms   {} nodes x {:.1f} us, this device's host issuing "
                            "them ({}){}\n",
                            p.host_ms, r.nodes, 1e3 * p.host_ms / r.nodes, r.host_source,
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
      << fmt::format("T_iter       {:10.3f} ms{}\n", p.t_iter_ms, interval_text(p, 0));
  if (!p.no_interval.empty()) out << "intervals    none: " << p.no_interval << "\n";
  out << r.input_text;
}

/// The bounds, T_epoch, the domain and the memory.
void write_bounds(std::ostream& out, const SinglePrediction& r, const Bundle& b) {
  const IterationPrediction& p = r.p;
  const std::string key = r.device.key();
  if (p.t_roofline_ms > 0)
    out << (p.adjusted.empty()
                ? fmt::format("bounds       roofline {:.3f} ms; monotone in batch and seq: kept\n",
                              p.t_roofline_ms)
                : fmt::format("bounds       RAISED from the model's {:.3f} ms ({}; roofline {:.3f} ms)\n",
                              p.t_model_ms,
                              p.adjusted == "roofline" ? std::string("below the roofline")
                                                       : "below the prediction for the smaller " +
                                                             p.adjusted.substr(p.adjusted.find(": ") + 2),
                              p.t_roofline_ms));
  if (r.iterations)
    out << fmt::format("T_epoch      {:10.3f} s    = {}, {} iterations{}\n", r.iterations * p.t_iter_ms / 1e3,
                       human_duration(r.iterations * p.t_iter_ms / 1e3), r.iterations,
                       interval_text(p, r.iterations));
  if (p.refined)
    out << (p.ood_distance > 0
                ? fmt::format(
                      "domain       OUT OF DOMAIN: distance {:.3f} outside the training range "
                      "(farthest: {}){}{}\n",
                      p.ood_distance, feature_in_words(p.ood_feature),
                      b.graph_for(key)->config().ood_tau > 0
                          ? (p.alpha_from_forward ? "; the refinement trained on no backward run: alpha "
                                                    "is its forward part's, beta shrunk toward 1"
                                                  : "; alpha, beta shrunk toward 1")
                          : "",
                      std::isfinite(p.lo80_ms)
                          ? (b.intervals_for(key)->beyond_calibration(p.ood_distance)
                                 ? "; intervals widened, but this is farther out than any "
                                   "calibration run: read them as a lower bound on the uncertainty"
                                 : "; intervals widened")
                          : "")
                : std::string("domain       inside the graph model's training range\n"));
  const MemoryPrediction& mem = r.memory;
  out << memory_line(mem.peak_bytes, mem.lo80, mem.hi80, mem.method, mem.capacity_bytes, mem.headroom,
                     mem.verdict);
}

/// The sustained bandwidth line ("" = none).
std::string bandwidth_line(const Bundle& b, const DeviceRecord& dev) {
  const std::string from = b.layers.roofline_bandwidth_source(dev);
  if (from.empty()) return "";
  const double gbs = b.layers.roofline_bandwidth_gbs(dev);
  if (from == "layer rows")
    return fmt::format("bandwidth    {:.0f} GB/s sustained: what this device's layer rows move\n", gbs);
  if (from == "measured")
    return fmt::format("bandwidth    {:.0f} GB/s sustained: the record's measured copy bandwidth\n", gbs);
  return fmt::format(
      "bandwidth    {:.0f} GB/s sustained: {:.3f} x the spec's {:.0f} GB/s, the median "
      "share of the training GPUs{} (a probe record's measured copy bandwidth would "
      "replace it: docs/unseen-gpu.md)\n",
      gbs, gbs / dev.peak_mem_bw_gbs, dev.peak_mem_bw_gbs,
      from == "hbm share"    ? " with HBM"
      : from == "gddr share" ? " with GDDR"
                             : "");
}

/// The `layers` line (and the unseen device's interval line) when the bundle records layer rows.
std::string layers_line(const SinglePrediction& r, const Bundle& b) {
  const std::string key = r.device.key();
  const auto rows = b.layer_rows_of(key);
  if (!rows) return "";
  if (*rows > 0)
    return fmt::format(
        "layers       {} layer timings (forward, backward) of this device trained the layer models\n", *rows);
  return std::string(
             "layers       no layer timings of this device in the bundle: its layer times "
             "are carried over from other devices by its record (a `bench layers` "
             "campaign on it, one more --db for `train`: docs/eval.md)\n") +
         (r.p.unseen_device_interval
              ? fmt::format("intervals    at least the error of a left-out training device "
                            "(x/÷ {:.2f} at 80 %, {:.2f} at 95 %: docs/predict.md){}\n",
                            std::exp(b.intervals_for(key)->unseen_q80),
                            std::exp(b.intervals_for(key)->unseen_q95),
                            b.calibration_for(key) ? "; a calibration does not narrow them (not built)" : "")
              : std::string());
}

/// What the prediction rests on: bandwidth, clock, dispatch, layer rows, calibration, anchor; warnings.
void write_notes(std::ostream& out, const SinglePrediction& r, const Bundle& b) {
  const DeviceRecord& dev = r.device;
  out << bandwidth_line(b, dev);
  if (const std::string clock = clock_assumption(b, dev); !clock.empty())
    out << "clock        " << clock << "\n";
  if (const std::string v = vendor_note(dev); !v.empty()) out << "vendor       " << v << "\n";
  if (const std::string d = dispatch_note(r.model, r.settings); !d.empty())
    out << "dispatch     " << d << "\n";
  out << layers_line(r, b);
  if (const LayerCalibration* c = b.calibration_for(dev.key())) out << calibration_line(*c);
  if (const auto& a = r.anchor)
    out << fmt::format(
        "anchor       {} run(s) measured on this device: x{:.3f} applied (log bias {:+.3f}, "
        "posterior sd {:.3f}; prior sd {:.3f}, run noise sd {:.3f}: docs/predict.md)\n",
        a->n, a->factor(), a->log_bias, a->sd_post, a->prior_sd, a->run_sd);
  // The features outside the bundle's training ranges, in words (the JSON has their names).
  for (const OutOfRange& o : r.outside) out << fmt::format("warning      extrapolation: {}\n", o.words());
  if (!r.host_warning.empty()) out << fmt::format("warning      {}\n", r.host_warning);
  if (!r.gemm_warning.empty()) out << fmt::format("warning      {}\n", r.gemm_warning);
}

}  // namespace

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

std::string calibration_line(const LayerCalibration& c) {
  const nlohmann::json j = c.to_json();
  std::vector<std::string> f;
  for (const auto& [kind, v] : j["factors"].items())
    f.push_back(fmt::format("{} x{:.2f}", kind, v["factor"].get<double>()));
  return fmt::format("calibration  {} of {} layer timings of this device in {}: {}\n", c.rows_used(),
                     c.rows_in, c.source, fmt::join(f, ", ")) +
         (c.caution.empty() ? "" : fmt::format("             caution: {}\n", c.caution));
}

nlohmann::json SinglePrediction::to_json(const Bundle& b) const {
  const std::string key = device.key();
  nlohmann::json j = p.to_json();
  j["model"] = model.name;
  j["settings"] = settings.to_json();
  j["mode"] = to_string(run_mode(settings));
  j["device"] = key;
  j["iterations_per_epoch"] = iterations;
  j["t_epoch_s"] = iterations ? nlohmann::json(iterations * p.t_iter_ms / 1000.0) : nlohmann::json();
  j["outside_training_range"] = nlohmann::json::array();
  for (const OutOfRange& o : outside) j["outside_training_range"].push_back(o.raw());
  j["attention"] = attention_kind(settings);
  j["assumed"] = assumed;
  if (!host_warning.empty()) j["host_warning"] = host_warning;
  if (!gemm_warning.empty()) j["gemm_warning"] = gemm_warning;
  if (const auto rows = b.layer_rows_of(key)) j["device_layer_rows"] = *rows;
  if (const std::string from = b.layers.roofline_bandwidth_source(device); !from.empty()) {
    j["sustained_bw_gbs"] = b.layers.roofline_bandwidth_gbs(device);
    j["sustained_bw_from"] = from;
  }
  if (const std::string clock = clock_assumption(b, device); !clock.empty()) j["clock"] = clock;
  if (const std::string v = vendor_note(device); !v.empty()) j["vendor"] = v;
  if (const std::string d = dispatch_note(model, settings); !d.empty()) j["dispatch"] = d;
  if (anchor) j["anchor"] = anchor->to_json();
  if (const LayerCalibration* c = b.calibration_for(key)) j["calibration"] = c->to_json();
  for (const auto& [k, v] : input.items()) j[k] = v;
  j["memory"] = memory.to_json();
  if (iterations && std::isfinite(p.lo80_ms))
    j["t_epoch_interval_s"] = {{"80", {iterations * p.lo80_ms / 1000.0, iterations * p.hi80_ms / 1000.0}},
                               {"95", {iterations * p.lo95_ms / 1000.0, iterations * p.hi95_ms / 1000.0}}};
  return j;
}

void SinglePrediction::write_report(std::ostream& out, const Bundle& b) const {
  write_times(out, *this);
  write_bounds(out, *this, b);
  write_notes(out, *this, b);
}

nlohmann::json ParallelSingle::to_json() const {
  nlohmann::json j = r.to_json();
  j["memory_per_gpu"] = memory.to_json();
  j["memory_per_gpu"]["capacity_bytes"] = capacity_bytes;
  j["memory_per_gpu"]["headroom"] = headroom;
  j["memory_per_gpu"]["verdict"] = verdict;
  j["memory_per_gpu"]["fits"] = verdict == "fits";
  j["model"] = model.name;
  j["settings"] = settings.to_json();
  j["mode"] = to_string(run_mode(settings));
  j["device"] = device.key();
  if (!host_source.empty()) j["host_source"] = host_source;
  j["global_batch"] = settings.batch * r.plan.dp;
  j["attention"] = attention_kind(settings);
  j["assumed"] = assumed;
  j["iterations_per_epoch"] = iterations;
  j["t_epoch_s"] = iterations ? nlohmann::json(iterations * r.t_iter_ms / 1e3) : nlohmann::json();
  if (!host_warning.empty()) j["host_warning"] = host_warning;
  if (!comm_warning.empty()) j["comm_warning"] = comm_warning;
  if (!comm_source.empty()) j["collectives"] = comm_source;
  for (const auto& [k, v] : input.items()) j[k] = v;
  return j;
}

void ParallelSingle::write_report(std::ostream& out) const {
  const ModelSpec& m = model;
  const TrainSettings& s = settings;
  const ParallelPlan& p = r.plan;
  out << fmt::format("model        {} ({}), batch {} per replica, {}, {}, mode {}, {} attention{}\n", m.name,
                     to_string(m.family), s.batch, input_size(m, s), dtype_recipe(s), to_string(run_mode(s)),
                     attention_kind(s), lora_phrase(s))
      << (assumed.empty() ? std::string() : fmt::format("assumed      {}\n", fmt::join(assumed, "; ")))
      << fmt::format("device       {} x {} on {} node(s)\n", device.key(), par.gpus, par.nodes)
      << fmt::format(
             "split        tp {} x {}pp {}{} x dp {}{}; {} micro-batches of {} samples per replica "
             "(global batch {}); ZeRO {}{}{}{}\n",
             par.tp, par.cp > 1 ? fmt::format("cp {} x ", par.cp) : std::string(), par.pp,
             par.vp > 1 ? fmt::format(" ({} virtual stages each)", par.vp) : std::string(), p.dp,
             par.ep > 1 ? fmt::format(" (experts over ep {} of them)", par.ep) : std::string(),
             par.microbatches, p.micro_batch, s.batch * p.dp, par.zero,
             par.recompute             ? "; activation recomputation"
             : par.selective_recompute ? "; selective recomputation (the attention core)"
                                       : "",
             par.overlap_grad_reduce ? "; gradient reduction overlapped" : "",
             par.sequence_parallel ? "; sequence parallel" : "")
      << fmt::format("stage        {} layers per stage, {:.0f} parameters per GPU; bubble {:.1f} %\n",
                     p.layers_per_stage, p.params_per_gpu,
                     r.t_pipeline_ms > 0 ? 100 * r.t_bubble_ms / r.t_pipeline_ms : 100 * p.bubble_fraction)
      << fmt::format(
             "micro-batch  fwd {:.3f} ms, bwd {:.3f} ms, recompute {:.3f} ms, TP {} {:.3f} ms "
             "({} x {:.3g} B{}), pipeline sends {:.3f} ms\n",
             r.t_fwd_ms, r.t_bwd_ms, r.t_recompute_ms,
             par.sequence_parallel ? "reduce-scatters + all-gathers" : "all-reduces", r.t_tp_ms,
             p.tp_allreduces, p.tp_bytes,
             par.overlap_tp_comm ? fmt::format("; {:.3f} ms more hidden under the GEMMs", r.t_tp_hidden_ms)
                                 : std::string(),
             r.t_p2p_ms)
      << (par.ep > 1
              ? fmt::format("experts      all-to-alls {:.3f} ms per micro-batch ({} x {:.3g} B over {} "
                            "GPUs; modelled, not validated: docs/parallel.md)\n",
                            r.t_ep_ms, p.ep_alltoalls, p.ep_bytes, par.ep)
              : std::string())
      << (par.cp > 1 ? fmt::format("context      ring attention: {} steps of {:.3g} B per layer and pass; "
                                   "{:.3f} ms per micro-batch not hidden by the attention\n",
                                   p.cp_steps, p.cp_kv_bytes, r.t_cp_ms)
                     : std::string())
      << fmt::format("pipeline     {:10.3f} ms   ({} + ({} - 1){} slots{}; bubble {:.3f} ms)\n",
                     r.t_pipeline_ms, par.microbatches, par.pp,
                     par.vp > 1 ? fmt::format(" / {}", par.vp) : std::string(),
                     par.pp > 1 ? fmt::format(" of stages up to {:.3f} ms: the blocks, the first stage's "
                                              "embedding +{:.3f} ms, the last's head and loss +{:.3f} ms",
                                              r.t_slot_gpu_ms, r.t_first_ms, r.t_last_ms)
                                : std::string(),
                     r.t_bubble_ms)
      << fmt::format(
             "DP all-red.  {:10.3f} ms   ({:.3g} gradient bytes over {} ranks{}{})\n", r.t_dp_exposed_ms,
             p.grad_bytes - (par.ep > 1 ? p.expert_grad_bytes : 0), p.dp * par.cp,
             par.ep > 1
                 ? fmt::format("; the experts' {:.3g} over {}", p.expert_grad_bytes, p.dp * par.cp / par.ep)
                 : std::string(),
             par.overlap_grad_reduce ? fmt::format("; {:.3f} ms in {} bucket(s), the rest under the backward",
                                                   r.t_dp_ms, p.grad_buckets)
                                     : std::string())
      << (par.host_node_ms > 0
              ? fmt::format(
                    "host term    {:10.3f} ms   per slot: {:.0f} nodes x {:.1f} us ({}){}\n", r.t_host_ms,
                    r.stage_nodes, 1e3 * par.host_node_ms, host_source,
                    !r.host_bound ? ""
                    : r.t_host_ms >= r.t_slot_ms
                        ? fmt::format(": the host sets each slot (the GPU's slot is {:.3f} ms)",
                                      r.t_slot_gpu_ms)
                        : fmt::format(": the host sets a phase of each slot (the slot is {:.3f} ms, the "
                                      "GPU's {:.3f} ms)",
                                      r.t_slot_ms, r.t_slot_gpu_ms))
              : std::string())
      << fmt::format("optimizer    {:10.3f} ms\n", r.t_opt_ms)
      << fmt::format(
             "T_iter       {:10.3f} ms   (layer-model sums composed, compute x{:.3f} to meet one GPU's "
             "{:.3f} ms for the replica's batch, as `predict` alone gives; no intervals)\n",
             r.t_iter_ms, r.anchor_factor, r.single_gpu_ms);
  out << input_text;
  if (iterations)
    out << fmt::format("T_epoch      {:10.3f} s    = {}, {} iterations\n", iterations * r.t_iter_ms / 1e3,
                       human_duration(iterations * r.t_iter_ms / 1e3), iterations);
  out << memory_line(memory.peak, NAN, NAN,
                     fmt::format("per GPU, analytic: weights {:.2f} + grads {:.2f} + optimizer {:.2f} + "
                                 "activations {:.2f} ({} micro-batch(es) in flight) + temporaries {:.2f} GB",
                                 memory.weights / 1e9, memory.grads / 1e9, memory.optimizer / 1e9,
                                 memory.activations / 1e9, memory.in_flight, memory.transient / 1e9),
                     capacity_bytes, headroom, verdict);
  if (!comm_source.empty()) out << fmt::format("collectives  {}\n", comm_source);
  if (!host_warning.empty()) out << fmt::format("warning      per slot: {}\n", host_warning);
  if (!comm_warning.empty()) out << fmt::format("warning      {}\n", comm_warning);
}

}  // namespace scaledl
