// Split-conformal prediction intervals (intervals.hpp).
#include "scaledl/predict/intervals.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

double IntervalModel::sigma(double t_sum_ms) const {
  if (scale_c0 == 0 && scale_c1 == 0) return 1.0;
  if (!(std::isfinite(t_sum_ms) && t_sum_ms > 0))
    return std::exp(scale_c0 + std::max(scale_c1 * u_lo, scale_c1 * u_hi));
  return std::exp(scale_c0 + scale_c1 * std::clamp(std::log(t_sum_ms), u_lo, u_hi));
}

double IntervalModel::width_scale(double t_sum_ms) const {
  const double s = sigma(t_sum_ms);
  if (!std::isfinite(u_floor)) return s;
  return std::max(s, std::exp(scale_c0 + scale_c1 * std::clamp(u_floor, u_lo, u_hi)));
}

Interval IntervalModel::at(double pred_ms, double d, double level, double t_sum_ms,
                           bool unseen_device) const {
  SCALEDL_CHECK(level == 0.80 || level == 0.95, "interval level {} is not 0.80 or 0.95", level);
  const double widen = 1.0 + (level == 0.80 ? kappa80 : kappa) * std::clamp(d, 0.0, d_max);
  double q = (level == 0.80 ? q80 : q95) * width_scale(t_sum_ms) * widen;
  if (unseen_device && has_unseen()) q = std::max(q, level == 0.80 ? unseen_q80 : unseen_q95);
  return {pred_ms * std::exp(-q), pred_ms * std::exp(q)};
}

nlohmann::json IntervalModel::to_json() const {
  nlohmann::json j = {
      {"method", "split-conformal, |log(measured/predicted)|"},
      {"n_cal", n_cal},
      {"q80", q80},
      {"q95", q95},
      {"scale_c0", scale_c0},
      {"scale_c1", scale_c1},
      {"log_t_sum_range", {u_lo, u_hi}},
      {"log_t_sum_floor", std::isfinite(u_floor) ? nlohmann::json(u_floor) : nlohmann::json()},
      {"kappa80", kappa80},
      {"kappa", kappa},
      {"kappa_min", kappa_min},
      {"n_extrapolation", n_extrapolation},
      {"d_max", d_max},
      {"source", source}};
  if (has_unseen()) {
    j["unseen_device"] = unseen_info.is_object() ? unseen_info : nlohmann::json::object();
    j["unseen_device"]["q80"] = unseen_q80;
    j["unseen_device"]["q95"] = unseen_q95;
  }
  return j;
}

IntervalModel IntervalModel::from_json(const nlohmann::json& j, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected an object, got {}", ctx, show(j));
  IntervalModel m;
  m.n_cal = get_int(j, "n_cal", ctx, 1, int64_t{1} << 40);
  m.q80 = get_num_or(j, "q80", ctx, 0, 50, NAN);
  m.q95 = get_num_or(j, "q95", ctx, 0, 50, NAN);
  SCALEDL_CHECK(std::isfinite(m.q80) && std::isfinite(m.q95) && m.q80 <= m.q95,
                "{}: q80={} and q95={} must be given, finite and q80 <= q95", ctx, m.q80, m.q95);
  m.kappa = get_num_or(j, "kappa", ctx, 0, 1e6, NAN);
  SCALEDL_CHECK(std::isfinite(m.kappa), "{}.kappa is missing", ctx);
  m.kappa80 = get_num_or(j, "kappa80", ctx, 0, 1e6, m.kappa);
  m.kappa_min = get_num_or(j, "kappa_min", ctx, 0, 1e6, 0.5);
  m.scale_c0 = get_num_or(j, "scale_c0", ctx, -1e3, 1e3, 0);
  m.scale_c1 = get_num_or(j, "scale_c1", ctx, -1e3, 1e3, 0);
  if (j.contains("log_t_sum_range")) {
    const auto& r = j["log_t_sum_range"];
    // ln(T_sum / ms): |x| <= 1e3, as log_t_sum_floor.
    SCALEDL_CHECK(r.is_array() && r.size() == 2 && r[0].is_number() && r[1].is_number() && r[0] <= r[1] &&
                      std::fabs(r[0].get<double>()) <= 1e3 && std::fabs(r[1].get<double>()) <= 1e3,
                  "{}.log_t_sum_range={} is not [lo, hi] with -1e3 <= lo <= hi <= 1e3", ctx, show(r));
    m.u_lo = r[0].get<double>();
    m.u_hi = r[1].get<double>();
  }
  if (j.contains("log_t_sum_floor") && !j["log_t_sum_floor"].is_null())
    m.u_floor = get_num_or(j, "log_t_sum_floor", ctx, -1e3, 1e3, NAN);
  m.n_extrapolation = get_int_or(j, "n_extrapolation", ctx, 0, int64_t{1} << 40, 0);
  m.d_max = get_num_or(j, "d_max", ctx, 1.0, 1e6, 1.0);
  m.source = get_str_or(j, "source", ctx, "");
  if (j.contains("unseen_device")) {
    const auto& u = j["unseen_device"];
    const std::string uctx = ctx + ".unseen_device";
    SCALEDL_CHECK(u.is_object(), "{}: expected an object, got {}", uctx, show(u));
    m.unseen_q80 = get_num_or(u, "q80", uctx, 0, 50, NAN);
    m.unseen_q95 = get_num_or(u, "q95", uctx, 0, 50, NAN);
    SCALEDL_CHECK(std::isfinite(m.unseen_q80) && std::isfinite(m.unseen_q95) && m.unseen_q80 <= m.unseen_q95,
                  "{}: q80={} and q95={} must be given, finite and q80 <= q95", uctx, m.unseen_q80,
                  m.unseen_q95);
    m.unseen_info = u;
  }
  // The widest interval the model gives (the largest size scale over its T_sum range, the
  // largest distance): each field in range may still combine into a width that overflows
  // (issue #39). A log half-width beyond 100 (a factor 2.7e43) is no interval.
  {
    const double log_scale = m.scale_c0 == 0 && m.scale_c1 == 0
                                 ? 0.0
                                 : m.scale_c0 + std::max(m.scale_c1 * m.u_lo, m.scale_c1 * m.u_hi);
    const double widest = std::max(m.q80 * (1 + m.kappa80 * m.d_max), m.q95 * (1 + m.kappa * m.d_max)) *
                          std::exp(std::min(log_scale, 700.0));
    SCALEDL_CHECK(
        widest <= 100,
        "{}: q95={}, kappa={}, d_max={}, scale_c0={}, scale_c1={} give a 95 % interval of a factor e^{:.4g} "
        "either way; more than e^100 is no interval",
        ctx, m.q95, m.kappa, m.d_max, m.scale_c0, m.scale_c1, widest);
  }
  return m;
}

double conformal_quantile(std::vector<double> scores, double level) {
  SCALEDL_CHECK(level > 0 && level < 1, "conformal level {} must be in (0, 1)", level);
  const size_t n = scores.size();
  const double rank = std::ceil((static_cast<double>(n) + 1.0) * level);
  if (n == 0 || rank > static_cast<double>(n)) return INFINITY;
  const size_t k = static_cast<size_t>(rank) - 1;
  std::nth_element(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(k), scores.end());
  return scores[k];
}

double fit_kappa(const std::vector<double>& r, const std::vector<double>& d, double q, double level,
                 double kappa_min) {
  SCALEDL_CHECK(r.size() == d.size(), "fit_kappa: {} residuals, {} distances", r.size(), d.size());
  if (r.empty() || !std::isfinite(q) || q <= 0) return kappa_min;
  // Covered at kappa iff |r_i| <= q (1 + kappa d_i): never when d_i = 0 and |r_i| > q.
  size_t always = 0;
  std::vector<double> need;  // kappa each out-of-domain miss needs
  for (size_t i = 0; i < r.size(); ++i) {
    const double a = std::abs(r[i]);
    if (a <= q)
      ++always;
    else if (d[i] > 0)
      need.push_back((a / q - 1.0) / d[i]);
  }
  const size_t target = static_cast<size_t>(std::ceil(level * static_cast<double>(r.size())));
  if (always >= target || need.empty()) return kappa_min;
  std::sort(need.begin(), need.end());
  const size_t k = std::min(need.size(), target - always);  // the k-th smallest need covers enough
  return std::max(kappa_min, need[k - 1]);
}

IntervalModel calibrate_from_residuals(const std::vector<double>& res, const std::vector<double>& tsum,
                                       double kappa_min) {
  IntervalModel m;
  m.kappa_min = m.kappa = m.kappa80 = kappa_min;
  SCALEDL_CHECK(res.size() == tsum.size(), "calibrate_from_residuals: {} residuals, {} run sizes", res.size(),
                tsum.size());
  // Scale by size: least squares of log |r| on log T_sum (at least 10 runs and some spread).
  if (res.size() >= 10) {
    double su = 0, sy = 0, suu = 0, suy = 0, lo = INFINITY, hi = -INFINITY;
    const double n = static_cast<double>(res.size());
    for (size_t i = 0; i < res.size(); ++i) {
      const double u = std::log(tsum[i]), y = std::log(std::abs(res[i]) + 1e-4);
      su += u;
      sy += y;
      suu += u * u;
      suy += u * y;
      lo = std::min(lo, u);
      hi = std::max(hi, u);
    }
    const double var = suu / n - (su / n) * (su / n);
    if (var > 1e-6) {
      m.scale_c1 = (suy / n - (su / n) * (sy / n)) / var;
      m.scale_c0 = sy / n - m.scale_c1 * su / n;
      m.u_lo = lo;
      m.u_hi = hi;
    }
  }
  std::vector<double> s;
  for (size_t i = 0; i < res.size(); ++i) s.push_back(std::abs(res[i]) / m.sigma(tsum[i]));
  m.n_cal = static_cast<int64_t>(s.size());
  m.q80 = conformal_quantile(s, 0.80);
  m.q95 = conformal_quantile(s, 0.95);
  if (m.scale_c1 < 0 && !tsum.empty()) {  // intervals stop narrowing at the median run (u_floor)
    std::vector<double> u;
    for (double t : tsum) u.push_back(std::log(t));
    std::nth_element(u.begin(), u.begin() + static_cast<std::ptrdiff_t>(u.size() / 2), u.end());
    m.u_floor = u[u.size() / 2];
  }
  return m;
}

}  // namespace scaledl
