#include "core/stats.hpp"

#include <algorithm>
#include <cmath>

namespace scaledl {

double sorted_quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return NAN;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = std::min(lo + 1, sorted.size() - 1);
  const double a = sorted[lo], b = sorted[hi];
  // a + (b - a) f is exact when a == b; the clamp removes a rounding step past b.
  return std::clamp(a + (b - a) * (pos - static_cast<double>(lo)), a, b);
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return sorted_quantile(values, q);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? NAN : (n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]));
}

}  // namespace scaledl
