// Fedorov exchange for D-optimal designs (see design.hpp; ScaleDL eq. 4-5).
//
// One start:
//   1. M0 = E^T E + ridge I (existing points stay in the design).
//   2. Greedy start: from a random candidate subset, add the point of largest
//      d(x) = a_x^T M^-1 a_x k times (a pivoted, well-conditioned start: the
//      ridge keeps M^-1 finite until p points are in), rank-one updates only.
//   3. Rounds: compute d(x) for ALL m candidates (O(m p^2), blocked Eigen GEMM),
//      keep the `subset` candidates with largest d(x) (delta <= d(x_j) - d(x_i),
//      so large d(x_j) are the only useful partners), then modified Fedorov
//      passes over that subset: for every chosen point x_i take the candidate
//      x_j maximising delta(x_i, x_j); accept when delta > tol and update M^-1
//      and d(.) of the subset with two Sherman-Morrison steps (O(s p) each).
//      log det grows by log(1 + delta) per accepted exchange.
//   4. Stop when a round accepts nothing, or when the round examined all m.
// Starts run on std::thread workers; each has its own std::mt19937_64 derived
// from (seed, start index), so the result does not depend on the thread count.
#include "scaledl/design/design.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <unordered_set>

#include "scaledl/core/error.hpp"

namespace scaledl {
namespace {

using Mat = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Seed of stream `idx` of a run seeded with `seed` (splitmix64 mixing).
uint64_t stream_seed(uint64_t seed, uint64_t idx) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (idx + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Uniform integer in [0, n) from a 64-bit engine (no distribution object, so the
/// sequence is identical across standard libraries).
int64_t uniform_index(std::mt19937_64& rng, int64_t n) {
  // Rejection sampling removes modulo bias.
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % un;
  uint64_t r;
  do r = rng();
  while (r >= limit);
  return static_cast<int64_t>(r % un);
}

/// `n` distinct indices of [0, m) (Floyd's algorithm), in draw order.
std::vector<int64_t> sample_distinct(std::mt19937_64& rng, int64_t m, int64_t n) {
  std::vector<int64_t> out;
  out.reserve(n);
  if (n >= m) {
    out.resize(m);
    std::iota(out.begin(), out.end(), 0);
    for (int64_t i = m - 1; i > 0; --i) std::swap(out[i], out[uniform_index(rng, i + 1)]);
    return out;
  }
  std::unordered_set<int64_t> seen;
  for (int64_t j = m - n; j < m; ++j) {
    int64_t t = uniform_index(rng, j + 1);
    if (seen.insert(t).second)
      out.push_back(t);
    else {
      seen.insert(j);
      out.push_back(j);
    }
  }
  return out;
}

/// log det of a symmetric positive semi-definite matrix; -inf when singular
/// (a pivot below 1e-12 of the largest one).
double logdet_psd(const Mat& M) {
  Eigen::LDLT<Mat> ldlt(M);
  Vec D = ldlt.vectorD();
  double dmax = D.cwiseAbs().maxCoeff();
  if (!(dmax > 0) || !std::isfinite(dmax)) return kNegInf;
  double s = 0;
  for (Eigen::Index i = 0; i < D.size(); ++i) {
    if (!(D[i] > 1e-12 * dmax)) return kNegInf;
    s += std::log(D[i]);
  }
  return s;
}

/// d(x) = a_x^T Minv a_x for all rows of F, blocked so the temporary stays in cache.
void all_variances(const FeatureMatrix& F, const Mat& Minv, Vec& d) {
  const Eigen::Index m = F.rows();
  d.resize(m);
  constexpr Eigen::Index kBlock = 4096;
  FeatureMatrix T;
  for (Eigen::Index b = 0; b < m; b += kBlock) {
    Eigen::Index n = std::min(kBlock, m - b);
    T.noalias() = F.middleRows(b, n) * Minv;
    d.segment(b, n) = T.cwiseProduct(F.middleRows(b, n)).rowwise().sum();
  }
}

Mat gram(const FeatureMatrix& F, const std::vector<int64_t>& rows, const FeatureMatrix& E) {
  const int p = static_cast<int>(F.cols());
  Mat M = Mat::Zero(p, p);
  if (E.rows() > 0) M.selfadjointView<Eigen::Lower>().rankUpdate(E.transpose());
  for (int64_t r : rows) M.selfadjointView<Eigen::Lower>().rankUpdate(F.row(r).transpose());
  return M.selfadjointView<Eigen::Lower>();
}

struct StartResult {
  std::vector<int64_t> chosen;
  double log_det = kNegInf;  // with ridge, as tracked
  int exchanges = 0;
  int passes = 0;
  std::vector<double> trace;
};

// Step 2 of a start: a greedy design of k rows picked from a random subset of
// the candidates (start 0: the subset in index order and the best first point;
// other starts: a random first point). Updates Minv by rank-one steps and marks
// the chosen rows in in_design.
void greedy_start(const FeatureMatrix& F, const FedorovOptions& o, int start, std::mt19937_64& rng, Mat& Minv,
                  std::vector<char>& in_design, StartResult& res) {
  const int64_t m = F.rows();
  const int p = static_cast<int>(F.cols());
  const int k = o.k;
  const int64_t s0 = std::min<int64_t>(m, std::max<int64_t>(4096, 4 * int64_t(k)));
  std::vector<int64_t> S0 = sample_distinct(rng, m, s0);
  if (start == 0) std::sort(S0.begin(), S0.end());  // start 0: plain greedy, no shuffle effect
  FeatureMatrix C(S0.size(), p);
  for (size_t j = 0; j < S0.size(); ++j) C.row(j) = F.row(S0[j]);
  Vec dC = (C * Minv).cwiseProduct(C).rowwise().sum();
  std::vector<char> used(S0.size(), 0);
  for (int t = 0; t < k; ++t) {
    Eigen::Index best = -1;
    if (start > 0 && t == 0) {
      best = uniform_index(rng, static_cast<int64_t>(S0.size()));  // random first point
    } else {
      double bd = kNegInf;
      for (Eigen::Index j = 0; j < dC.size(); ++j)
        if (!used[j] && dC[j] > bd) {
          bd = dC[j];
          best = j;
        }
    }
    used[best] = 1;
    Vec f = C.row(best).transpose();
    Vec u = Minv * f;
    double dj = f.dot(u);
    Minv.noalias() -= (u * u.transpose()) / (1 + dj);
    Vec h = C * u;
    dC.array() -= h.array().square() / (1 + dj);
    res.chosen.push_back(S0[best]);
    in_design[S0[best]] = 1;
  }
}

// The candidates of one exchange round: those not in the design, the s with the
// largest variance d(x) (ties by index), their rows in C and variances in dC.
void round_candidates(const FeatureMatrix& F, const Vec& d_all, const std::vector<char>& in_design, int64_t s,
                      std::vector<int64_t>& idx, FeatureMatrix& C, Vec& dC) {
  const int64_t m = F.rows();
  idx.clear();
  for (int64_t j = 0; j < m; ++j)
    if (!in_design[j]) idx.push_back(j);
  auto by_d = [&](int64_t a, int64_t b) { return d_all[a] > d_all[b] || (d_all[a] == d_all[b] && a < b); };
  if (static_cast<int64_t>(idx.size()) > s) {
    std::nth_element(idx.begin(), idx.begin() + s, idx.end(), by_d);
    idx.resize(s);
  }
  C.resize(idx.size(), F.cols());
  dC.resize(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) {
    C.row(j) = F.row(idx[j]);
    dC[j] = d_all[idx[j]];
  }
}

// One pass of step 3: every design point, in random order, is exchanged for the
// available candidate that raises log det M the most (by more than o.tol), with
// rank-one updates of Minv and dC. Returns the number of exchanges.
int exchange_pass(const FeatureMatrix& F, const FeatureMatrix& C, const std::vector<int64_t>& idx,
                  const FedorovOptions& o, std::mt19937_64& rng, std::vector<int>& order, Vec& dC,
                  std::vector<char>& avail, Mat& Minv, std::vector<char>& in_design, StartResult& res) {
  const int k = o.k;
  int pass_exchanges = 0;
  std::iota(order.begin(), order.end(), 0);
  for (int i = k - 1; i > 0; --i) std::swap(order[i], order[uniform_index(rng, i + 1)]);
  for (int pos : order) {
    Vec fi = F.row(res.chosen[pos]).transpose();
    Vec v = Minv * fi;
    const double di = fi.dot(v);
    Vec g = C * v;  // d(x_i, x_j) for the subset
    Eigen::Index best = -1;
    double bdelta = o.tol;
    for (Eigen::Index j = 0; j < dC.size(); ++j) {
      if (!avail[j]) continue;
      double delta = dC[j] - di - di * dC[j] + g[j] * g[j];
      if (delta > bdelta) {
        bdelta = delta;
        best = j;
      }
    }
    if (best < 0) continue;
    // Add x_j: M1^-1 = M^-1 - u u^T / (1 + d_j).
    Vec fj = C.row(best).transpose();
    Vec u = Minv * fj;
    double dj = fj.dot(u);
    Minv.noalias() -= (u * u.transpose()) / (1 + dj);
    Vec h = C * u;
    dC.array() -= h.array().square() / (1 + dj);
    // Remove x_i: M2^-1 = M1^-1 + w w^T / (1 - d1(x_i)).
    Vec w = Minv * fi;
    double di1 = fi.dot(w);
    Minv.noalias() += (w * w.transpose()) / (1 - di1);
    h.noalias() = C * w;
    dC.array() += h.array().square() / (1 - di1);
    // Bookkeeping: x_j joins, x_i leaves (x_i is not in this round's subset).
    in_design[res.chosen[pos]] = 0;
    in_design[idx[best]] = 1;
    avail[best] = 0;
    res.chosen[pos] = idx[best];
    res.log_det += std::log1p(bdelta);
    if (o.keep_trace) res.trace.push_back(res.log_det);
    ++pass_exchanges;
  }
  return pass_exchanges;
}

StartResult run_start(const FeatureMatrix& F, const FeatureMatrix& E, const FedorovOptions& o, int start) {
  const int64_t m = F.rows();
  const int p = static_cast<int>(F.cols());
  const int k = o.k;
  std::mt19937_64 rng(stream_seed(o.seed, static_cast<uint64_t>(start)));
  StartResult res;

  Mat M0 = Mat::Identity(p, p) * o.ridge;
  if (E.rows() > 0) M0.noalias() += E.transpose() * E;
  auto inverse_of = [&](const std::vector<int64_t>& rows) -> Mat {
    Mat M = M0 + gram(F, rows, FeatureMatrix(0, p));
    return M.ldlt().solve(Mat::Identity(p, p));
  };
  Mat Minv = M0.ldlt().solve(Mat::Identity(p, p));
  std::vector<char> in_design(m, 0);

  // ---- 2. greedy start on a random subset -----------------------------------
  greedy_start(F, o, start, rng, Minv, in_design, res);
  Minv = inverse_of(res.chosen);
  res.log_det = logdet_psd(M0 + gram(F, res.chosen, FeatureMatrix(0, p)));
  if (o.keep_trace) res.trace.push_back(res.log_det);

  // ---- 3. exchange rounds ----------------------------------------------------
  const int64_t s = std::min<int64_t>(m, o.subset > 0 ? o.subset : std::max<int64_t>(2048, 40 * int64_t(p)));
  Vec d_all, dC;
  FeatureMatrix C;
  std::vector<int64_t> idx;
  std::vector<int> order(k);
  while (res.passes < o.max_passes) {
    all_variances(F, Minv, d_all);
    round_candidates(F, d_all, in_design, s, idx, C, dC);
    const bool saw_all = static_cast<int64_t>(idx.size()) + k >= m;
    std::vector<char> avail(idx.size(), 1);
    int round_exchanges = 0;
    while (res.passes < o.max_passes) {
      ++res.passes;
      const int pass_exchanges = exchange_pass(F, C, idx, o, rng, order, dC, avail, Minv, in_design, res);
      res.exchanges += pass_exchanges;
      round_exchanges += pass_exchanges;
      if (pass_exchanges == 0) break;
    }
    // Fresh inverse once per round: removes drift of the rank-one updates.
    Minv = inverse_of(res.chosen);
    if (round_exchanges == 0 || saw_all) break;
  }
  return res;
}

}  // namespace

double design_log_det(const FeatureMatrix& F, const std::vector<int64_t>& rows,
                      const FeatureMatrix& existing) {
  return logdet_psd(gram(F, rows, existing));
}

FedorovResult fedorov_design(const FeatureMatrix& F, const FeatureMatrix& E, const FedorovOptions& o) {
  const int64_t m = F.rows();
  const int p = static_cast<int>(F.cols());
  SCALEDL_CHECK(m > 0 && p > 0, "design: empty candidate matrix ({} candidates x {} terms)", m, p);
  SCALEDL_CHECK(E.rows() == 0 || E.cols() == p, "design: existing points have {} terms, candidates {}",
                E.cols(), p);
  SCALEDL_CHECK(o.k >= 1 && o.k <= m, "--budget={} must be in [1, {}] (the number of candidates)", o.k, m);
  SCALEDL_CHECK(E.rows() + o.k >= p,
                "--budget={} is too small: {} existing + {} new points < {} model terms (M would be "
                "singular); raise --budget or use fewer terms",
                o.k, E.rows(), o.k, p);
  SCALEDL_CHECK(o.starts >= 1, "--starts={} must be >= 1", o.starts);
  SCALEDL_CHECK(o.max_passes >= 1, "design: max_passes={} must be >= 1", o.max_passes);
  SCALEDL_CHECK(o.threads >= 1, "design: threads={} must be >= 1", o.threads);
  SCALEDL_CHECK(o.ridge >= 0 && o.tol > 0, "design: ridge={} must be >= 0 and tol={} > 0", o.ridge, o.tol);
  SCALEDL_CHECK(o.random_designs >= 1, "design: random_designs={} must be >= 1", o.random_designs);
  SCALEDL_CHECK(F.allFinite(), "design: candidate features contain NaN or infinity");
  SCALEDL_CHECK(E.rows() == 0 || E.allFinite(), "design: existing-point features contain NaN or infinity");

  // ---- starts, in parallel; results indexed by start so threads do not matter.
  std::vector<StartResult> results(o.starts);
  std::vector<std::exception_ptr> errors(o.starts);
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int s; (s = next.fetch_add(1)) < o.starts;) {
      try {
        results[s] = run_start(F, E, o, s);
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
  };
  const int nthreads = std::min(o.threads, o.starts);
  std::vector<std::thread> pool;
  for (int t = 1; t < nthreads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  int best = 0;
  for (int s = 1; s < o.starts; ++s)
    if (results[s].log_det > results[best].log_det) best = s;
  StartResult& r = results[best];

  FedorovResult out;
  out.p = p;
  out.best_start = best;
  out.exchanges = r.exchanges;
  out.passes = r.passes;
  out.trace = std::move(r.trace);
  out.chosen = r.chosen;
  std::sort(out.chosen.begin(), out.chosen.end());
  out.log_det = design_log_det(F, out.chosen, E);
  if (!std::isfinite(out.log_det)) {
    Eigen::FullPivLU<Mat> lu(gram(F, out.chosen, E));
    fail(
        "design: the best design is singular (rank {} < {} terms): the candidates do not vary "
        "enough to estimate every term; drop terms or widen the space",
        lu.rank(), p);
  }

  // ---- reference: mean det of random designs of the same size ---------------
  std::mt19937_64 rng(stream_seed(o.seed, 0xD0E5D0E5ULL));
  std::vector<double> lds;
  for (int r2 = 0; r2 < o.random_designs; ++r2) {
    std::vector<int64_t> rows = sample_distinct(rng, m, o.k);
    lds.push_back(design_log_det(F, rows, E));
    if (!std::isfinite(lds.back())) ++out.random_singular;
  }
  double mx = *std::max_element(lds.begin(), lds.end());
  if (std::isfinite(mx)) {
    double acc = 0;
    for (double v : lds) acc += std::exp(v - mx);  // exp(-inf) = 0: singular designs have det 0
    out.log_det_random_mean = mx + std::log(acc / lds.size());
    out.d_efficiency_vs_random = std::exp((out.log_det - out.log_det_random_mean) / p);
  } else {
    out.log_det_random_mean = kNegInf;
    out.d_efficiency_vs_random = std::numeric_limits<double>::infinity();
  }
  return out;
}

}  // namespace scaledl
