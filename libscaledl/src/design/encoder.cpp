// Feature encoding a_i of ScaleDL eq. 4 (see space.hpp, class Encoder).
//
// Columns, in this order (earlier columns win when dependencies are removed):
//   1                      intercept
//   x_q in [-1, 1]         numeric parameter q (log(x) first when q is a size)
//   [level == l], l >= 1   categorical q, first level dropped: with the
//                          intercept the full one-hot would sum to 1 and
//                          make M = sum a a^T singular (not identifiable)
//   products of two main-effect columns of different parameters   ("interactions")
//   x_q^2 for numeric q with >= 3 levels                          ("quadratic")
#include <algorithm>
#include <cmath>

#include "design/space_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

std::vector<double> Encoder::raw(const std::vector<double>& num, const std::vector<int>& level) const {
  std::vector<double> out(main_param_.size(), 0.0);
  for (size_t c = 0; c < main_param_.size(); ++c) {
    int q = main_param_[c];
    if (level[q] < 0) continue;  // inactive parameter: 0
    out[c] = main_level_[c] < 0 ? sp_->params[q].encode(num[q]) : (level[q] == main_level_[c] ? 1.0 : 0.0);
  }
  return out;
}

Encoder::Encoder(const DesignSpace& sp, const std::vector<Candidate>& cands) : sp_(&sp) {
  for (size_t q = 0; q < sp.params.size(); ++q) {
    const SpaceParameter& p = sp.params[q];
    if (p.numeric()) {
      if (p.values.size() < 2) continue;  // a constant is absorbed by the intercept
      main_param_.push_back(static_cast<int>(q));
      main_level_.push_back(-1);
      main_names_.push_back(p.log ? "log(" + p.name + ")" : p.name);
    } else {
      for (size_t l = 1; l < p.values.size(); ++l) {
        main_param_.push_back(static_cast<int>(q));
        main_level_.push_back(static_cast<int>(l));
        main_names_.push_back(p.name + "=" + p.labels[l]);
      }
    }
  }
  // Candidate terms before the dependency check.
  std::vector<std::vector<int>> terms;
  std::vector<std::string> names;
  terms.push_back({});
  names.push_back("1");
  const int nm = static_cast<int>(main_param_.size());
  for (int c = 0; c < nm; ++c) {
    terms.push_back({c});
    names.push_back(main_names_[c]);
  }
  if (sp.terms != Terms::Linear)
    for (int a = 0; a < nm; ++a)
      for (int b = a + 1; b < nm; ++b)
        if (main_param_[a] != main_param_[b]) {
          terms.push_back({a, b});
          names.push_back(main_names_[a] + "*" + main_names_[b]);
        }
  if (sp.terms == Terms::Quadratic)
    for (int c = 0; c < nm; ++c)
      if (main_level_[c] < 0 && sp.params[main_param_[c]].values.size() >= 3) {
        terms.push_back({c, c});
        names.push_back(main_names_[c] + "^2");
      }
  SCALEDL_CHECK(terms.size() <= 2000,
                "{}: {} model terms are too many (terms={}); use fewer parameters or levels", sp.path,
                terms.size(), to_string(sp.terms));

  // Gram matrix of all terms over the candidates, in blocks (O(m P^2)).
  const Eigen::Index P = static_cast<Eigen::Index>(terms.size());
  terms_ = terms;
  Eigen::MatrixXd G = Eigen::MatrixXd::Zero(P, P);
  const size_t kBlock = 2048;
  for (size_t b = 0; b < cands.size(); b += kBlock) {
    size_t n = std::min(kBlock, cands.size() - b);
    std::vector<Candidate> blk(cands.begin() + b, cands.begin() + b + n);
    FeatureMatrix X = encode(blk);
    G.selfadjointView<Eigen::Lower>().rankUpdate(X.transpose());
  }
  G = G.selfadjointView<Eigen::Lower>();
  // Gram-Schmidt on the Gram matrix: keep term j when its residual after
  // projection on the kept terms is > 1e-9 of its own norm.
  std::vector<int> kept;
  Eigen::MatrixXd L;  // Cholesky factor of G[kept, kept]
  for (Eigen::Index j = 0; j < P; ++j) {
    double gjj = G(j, j);
    if (!(gjj > 1e-12 * static_cast<double>(std::max<size_t>(1, cands.size())))) {
      ++zero_terms_;
      continue;
    }
    const Eigen::Index r = static_cast<Eigen::Index>(kept.size());
    Eigen::VectorXd g(r);
    for (Eigen::Index i = 0; i < r; ++i) g[i] = G(kept[i], j);
    Eigen::VectorXd y = r ? Eigen::VectorXd(L.topLeftCorner(r, r).triangularView<Eigen::Lower>().solve(g))
                          : Eigen::VectorXd();
    double res = gjj - (r ? y.squaredNorm() : 0.0);
    if (!(res > 1e-9 * gjj)) {
      dropped_.push_back(names[j]);
      continue;
    }
    Eigen::MatrixXd L2 = Eigen::MatrixXd::Zero(r + 1, r + 1);
    if (r) {
      L2.topLeftCorner(r, r) = L;
      L2.block(r, 0, 1, r) = y.transpose();
    }
    L2(r, r) = std::sqrt(res);
    L = L2;
    kept.push_back(static_cast<int>(j));
  }
  terms_.clear();
  for (int j : kept) {
    terms_.push_back(terms[j]);
    names_.push_back(names[j]);
  }
}

FeatureMatrix Encoder::encode(const std::vector<Candidate>& cands) const {
  const size_t np = sp_->params.size();
  FeatureMatrix F(static_cast<Eigen::Index>(cands.size()), static_cast<Eigen::Index>(terms_.size()));
  std::vector<double> num(np, 0.0);
  std::vector<int> level(np, -1);
  for (size_t i = 0; i < cands.size(); ++i) {
    for (size_t q = 0; q < np; ++q) {
      level[q] = cands[i][q];
      num[q] =
          level[q] >= 0 && sp_->params[q].numeric() ? sp_->params[q].values[level[q]].get<double>() : 0.0;
    }
    std::vector<double> r = raw(num, level);
    for (size_t t = 0; t < terms_.size(); ++t) {
      double v = 1;
      for (int c : terms_[t]) v *= r[c];
      F(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(t)) = v;
    }
  }
  return F;
}

Eigen::RowVectorXd Encoder::encode_values(const std::vector<nlohmann::json>& values) const {
  const size_t np = sp_->params.size();
  SCALEDL_CHECK(values.size() == np, "design: {} values for {} parameters", values.size(), np);
  std::vector<double> num(np, 0.0);
  std::vector<int> level(np, -1);
  for (size_t q = 0; q < np; ++q) {
    const SpaceParameter& p = sp_->params[q];
    if (values[q].is_null()) continue;
    if (p.numeric()) {
      SCALEDL_CHECK(values[q].is_number(), "{}: value {} is not a number", p.name, show(values[q]));
      num[q] = values[q].get<double>();
      SCALEDL_CHECK(!p.log || num[q] > 0, "{}={} must be > 0 (log scale)", p.name, num[q]);
      level[q] = 0;
    } else {
      std::string lab = values[q].is_string() ? values[q].get<std::string>() : values[q].dump();
      auto it = std::find(p.labels.begin(), p.labels.end(), lab);
      SCALEDL_CHECK(it != p.labels.end(), "{}=\"{}\" is not a level of the space", p.name, lab);
      level[q] = static_cast<int>(it - p.labels.begin());
    }
  }
  std::vector<double> r = raw(num, level);
  Eigen::RowVectorXd out(static_cast<Eigen::Index>(terms_.size()));
  for (size_t t = 0; t < terms_.size(); ++t) {
    double v = 1;
    for (int c : terms_[t]) v *= r[c];
    out[static_cast<Eigen::Index>(t)] = v;
  }
  return out;
}

}  // namespace scaledl
