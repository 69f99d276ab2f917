#pragma once
// Linear-interpolation quantiles (the "type 7" rule of R and NumPy's default),
// shared by timing statistics, error summaries and residual quantiles.
#include <vector>

namespace scaledl {

/// The q-quantile (0 <= q <= 1) of values already sorted ascending; NaN when
/// empty. Monotone in q: the result never leaves [sorted[lo], sorted[lo+1]], so
/// p10 <= median <= p90 holds exactly, even for repeated values.
double sorted_quantile(const std::vector<double>& sorted, double q);
/// The same for values in any order (sorts a copy).
double quantile(std::vector<double> values, double q);
/// The median, averaging the two middle values of an even count; NaN when empty.
double median(std::vector<double> values);

}  // namespace scaledl
