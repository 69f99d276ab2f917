// The refinement's domain in words (domain.hpp).
#include "scaledl/predict/domain.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace scaledl {

namespace {

/// How a feature maps back to a quantity: exp (log_*), expm1 (log1p_*), a share, a 0/1 flag.
enum class Scale { Log, Log1p, Share, Flag, Plain };

struct Described {
  Scale scale;
  const char* what;  ///< "the batch"
  const char* unit;  ///< "samples" ("" = none)
};

Described describe(const std::string& f) {
  static const std::map<std::string, Described> d = {
      {"log_batch", {Scale::Log, "the batch", "samples"}},
      {"log_seq_len", {Scale::Log, "the sequence", "tokens"}},
      {"log1p_image_size", {Scale::Log1p, "the image side", "pixels"}},
      {"log1p_params", {Scale::Log1p, "the model", "parameters"}},
      {"log_num_nodes", {Scale::Log, "the layer graph", "nodes"}},
      {"log_num_devices", {Scale::Log, "the data-parallel group", "devices"}},
      {"log1p_t_sum_ms", {Scale::Log1p, "the summed layer time", "ms"}},
      {"log1p_t_comm_ms", {Scale::Log1p, "the all-reduce time", "ms"}},
      {"log1p_comm_bw_gbs", {Scale::Log1p, "the all-reduce bandwidth", "GB/s"}},
      {"log1p_comm_gamma_us", {Scale::Log1p, "the all-reduce latency", "us"}},
      {"log1p_dev_gflops", {Scale::Log1p, "the device's compute peak", "GFLOP/s"}},
      {"log1p_dev_bw_gbs", {Scale::Log1p, "the device's memory bandwidth", "GB/s"}},
      {"log1p_dev_cores", {Scale::Log1p, "the device's core count (SMs)", ""}},
      {"log1p_dev_clock_mhz", {Scale::Log1p, "the device's clock", "MHz"}},
      {"log1p_dev_mem_gb", {Scale::Log1p, "the device's memory", "GB"}},
      {"log1p_dev_l2_mb", {Scale::Log1p, "the device's L2 cache", "MB"}},
      {"share_forward", {Scale::Share, "the forward's share of the layer time", ""}},
      {"share_backward", {Scale::Share, "the backward's share of the layer time", ""}},
      {"share_update", {Scale::Share, "the optimizer step's share of the layer time", ""}},
      {"share_gemm", {Scale::Share, "the GEMMs' share of the layer time", ""}},
      {"share_attention", {Scale::Share, "attention's share of the layer time", ""}},
      {"share_norm", {Scale::Share, "the norms' share of the layer time", ""}},
      {"share_elementwise", {Scale::Share, "the elementwise kernels' share of the layer time", ""}},
      {"share_other", {Scale::Share, "the other kernels' share of the layer time", ""}},
      {"comm_share", {Scale::Share, "communication's share of the iteration", ""}},
      {"log_t_sum_over_roofline", {Scale::Log, "the layer time over the roofline's", "x"}},
      {"log_flop_per_byte", {Scale::Log, "the arithmetic intensity", "FLOP per byte"}},
      {"optimizer_step", {Scale::Flag, "an optimizer step", ""}},
      {"dtype_fp32", {Scale::Flag, "FP32", ""}},
      {"dtype_tf32", {Scale::Flag, "TF32", ""}},
      {"dtype_bf16", {Scale::Flag, "BF16", ""}},
      {"dtype_fp16", {Scale::Flag, "FP16", ""}},
      {"opt_sgd", {Scale::Flag, "SGD", ""}},
      {"opt_adam", {Scale::Flag, "Adam", ""}},
      {"opt_adamw", {Scale::Flag, "AdamW", ""}},
  };
  auto it = d.find(f);
  return it == d.end() ? Described{Scale::Plain, nullptr, ""} : it->second;
}

double quantity(Scale s, double v) {
  switch (s) {
    case Scale::Log:
      return std::exp(v);
    case Scale::Log1p:
      return std::expm1(v);
    case Scale::Share:
    case Scale::Flag:
    case Scale::Plain:
      return v;
  }
  return v;
}

/// A count or size for people: 7.24 B, 774 M, 12.3 k, 512, 0.25.
std::string amount(double x) {
  const double a = std::abs(x);
  if (a >= 1e9) return fmt::format("{:.3g} B", x / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g} M", x / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g} k", x / 1e3);
  if (a >= 100) return fmt::format("{:.0f}", x);
  return fmt::format("{:.3g}", x);
}

std::string with_unit(double x, const char* unit) {
  return *unit ? amount(x) + " " + unit : amount(x);
}

}  // namespace

std::string feature_in_words(const std::string& feature) {
  const Described d = describe(feature);
  if (!d.what) return feature;
  if (d.scale == Scale::Flag) return fmt::format("whether the run uses {}", d.what);
  return d.what;
}

std::string OutOfRange::raw() const {
  return fmt::format("{}={:.4g} outside [{:.4g}, {:.4g}]", feature, value, lo, hi);
}

std::string OutOfRange::words() const {
  const Described d = describe(feature);
  if (!d.what) return raw();
  if (d.scale == Scale::Flag)
    return value > hi ? fmt::format("no training run used {}", d.what)
                      : fmt::format("every training run used {}", d.what);
  if (d.scale == Scale::Share)
    return fmt::format("{} is {:.0f} %, {} than in any training run ({:.0f}-{:.0f} %)", d.what, 100 * value,
                       value > hi ? "more" : "less", 100 * lo, 100 * hi);
  const double x = quantity(d.scale, value), qlo = quantity(d.scale, lo), qhi = quantity(d.scale, hi);
  const bool above = value > hi;
  const double bound = above ? qhi : qlo;
  const double ratio = above ? (bound > 0 ? x / bound : INFINITY) : (x > 0 ? bound / x : INFINITY);
  const std::string factor = !std::isfinite(ratio) || ratio >= 1e6 ? ""
                             : ratio < 1.1                         ? "slightly "
                                                                   : fmt::format("{:.2g}x ", ratio);
  return fmt::format("{} is {}, {}{} than any training run's ({} {})", d.what, with_unit(x, d.unit), factor,
                     above ? "more" : "less", above ? "at most" : "at least", with_unit(bound, d.unit));
}

std::vector<OutOfRange> features_out_of_range(
    const std::vector<std::string>& names, const std::vector<double>& values,
    const std::map<std::string, std::pair<double, double>>& ranges) {
  std::vector<OutOfRange> out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    auto it = ranges.find(names[i]);
    if (it == ranges.end()) continue;
    const double v = values[i], lo = it->second.first, hi = it->second.second;
    const double tol = 1e-6 * std::max(1.0, std::abs(hi - lo));
    if (v < lo - tol || v > hi + tol) out.push_back({names[i], v, lo, hi});
  }
  return out;
}

}  // namespace scaledl
