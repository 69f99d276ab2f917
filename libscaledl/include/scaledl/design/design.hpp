#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// D-optimal experimental design by Fedorov exchange (ScaleDL §III-A, eq. 4-5).
//
// Given m candidate feature vectors a_j (rows of F, [m, p]) and optionally e
// points that are already measured (rows of E, [e, p]), choose k distinct new
// candidates that maximise
//     log det M,   M = sum_{i in existing} a_i a_i^T + sum_{i in chosen} a_i a_i^T   (eq. 4-5)
// The exchange never recomputes a determinant per candidate: with the
// prediction variance d(x) = a_x^T M^-1 a_x and d(x, y) = a_x^T M^-1 a_y,
// swapping design point x_i for candidate x_j multiplies det M by
//     1 + delta(x_i, x_j),  delta = d(x_j) - d(x_i) - d(x_i) d(x_j) + d(x_i, x_j)^2
// and M^-1 follows by two Sherman-Morrison (rank-one) updates.
// No LibTorch here: Eigen only.
#include <cstdint>
#include <vector>

#include <Eigen/Dense>

namespace scaledl {

/// Row-major feature matrix: one candidate per row, contiguous features.
using FeatureMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Options of the exchange; every field is validated by fedorov_design().
struct FedorovOptions {
  int k = 0;            ///< new points to choose, 1 <= k <= m (distinct candidates)
  uint64_t seed = 0;    ///< std::mt19937_64 seed; same seed + inputs => same design
  int starts = 4;       ///< random starts (best log det wins), >= 1
  int max_passes = 50;  ///< exchange passes per start (a pass visits every chosen point), >= 1
  int threads = 2;      ///< std::thread workers running starts in parallel, >= 1
  /// Candidates examined per exchange pass: the `subset` with the largest d(x)
  /// (recomputed for ALL m each outer round, O(m p^2)). 0 = max(2048, 40 p).
  /// A round that changes nothing, or whose left-out candidates provably cannot
  /// improve (d(x_j) - d(x_i) <= tol bounds delta), ends the start.
  int subset = 0;
  double ridge = 1e-9;      ///< added to M's diagonal while optimising (numerical safety), >= 0
  double tol = 1e-9;        ///< minimal delta accepted as an improvement, > 0
  int random_designs = 32;  ///< random designs averaged for the D-efficiency reference, >= 1
  bool keep_trace = true;   ///< record log det after every accepted exchange of the best start
};

/// Result of fedorov_design().
struct FedorovResult {
  std::vector<int64_t> chosen;  ///< k row indices of F, distinct, sorted ascending
  double log_det = 0;           ///< log det M of existing + chosen (natural log, no ridge)
  /// log of the mean det over random designs (existing + k random distinct candidates);
  /// -inf when every random design was singular.
  double log_det_random_mean = 0;
  /// (det M / mean det M_random)^(1/p); +inf when all random designs were singular.
  double d_efficiency_vs_random = 0;
  int random_singular = 0;  ///< random reference designs that were singular (det 0)
  int p = 0;                ///< features (columns of F)
  int best_start = 0;       ///< index of the start that won
  int exchanges = 0;        ///< accepted exchanges of the winning start
  int passes = 0;           ///< exchange passes of the winning start
  /// log det (with ridge) after the greedy start and after each accepted exchange of
  /// the winning start; non-decreasing by construction.
  std::vector<double> trace;
};

/// Chooses opts.k rows of F (see header comment). `existing` ([e, p], may have
/// 0 rows) stays in every design. Throws Error when k is out of range, when
/// e + k < p (M would be singular), when F has non-finite entries, or when no
/// design with non-singular M exists among the candidates.
FedorovResult fedorov_design(const FeatureMatrix& F, const FeatureMatrix& existing,
                             const FedorovOptions& opts);

/// log det(A^T A) of the rows `rows` of F plus all rows of `existing`
/// (Cholesky/LDLT; -inf when singular). Used for checks and reports.
double design_log_det(const FeatureMatrix& F, const std::vector<int64_t>& rows,
                      const FeatureMatrix& existing);

}  // namespace scaledl
