// Training of the graph refinement (see gnn.hpp): GraphPredictor::train, step by step, its
// report, and the k-fold cross-validation of graphs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "gnn/gnn_detail.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/gnn/gnn.hpp"

namespace scaledl {

nlohmann::json GnnTrainOptions::to_json() const {
  return {{"epochs", epochs},
          {"lr", lr},
          {"batch_size", batch_size},
          {"val_fraction", val_fraction},
          {"patience", patience},
          {"loss", loss},
          {"normalization", normalization},
          {"seed", seed}};
}

nlohmann::json GnnTrainReport::to_json() const {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"train_graphs", train_graphs},
          {"val_graphs", val_graphs},
          {"epochs_run", epochs_run},
          {"best_epoch", best_epoch},
          {"train_mre_before", num(train_mre_before)},
          {"val_mre_before", num(val_mre_before)},
          {"train_mre", num(train_mre)},
          {"val_mre", num(val_mre)},
          {"mean_alpha", num(mean_alpha)},
          {"mean_beta", num(mean_beta)},
          {"seconds", seconds}};
}

double mean_relative_error(const std::vector<double>& pred, const std::vector<double>& y) {
  SCALEDL_CHECK(pred.size() == y.size(), "mean_relative_error: {} predictions for {} labels", pred.size(),
                y.size());
  if (y.empty()) return NAN;
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += std::fabs(pred[i] - y[i]) / y[i];
  return s / static_cast<double>(y.size());
}

// ---- GraphPredictor::train, step by step ------------------------------------------

namespace {

double mre_before(const std::vector<const GraphFeatures*>& gs) {
  std::vector<double> p, y;
  for (const auto* g : gs) {
    p.push_back(g->t_sum_ms + g->t_comm_ms);
    y.push_back(g->target_ms);
  }
  return mean_relative_error(p, y);
}

std::vector<double> targets(const std::vector<const GraphFeatures*>& gs) {
  std::vector<double> y;
  for (const auto* g : gs) y.push_back(g->target_ms);
  return y;
}

void check_train_inputs(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                        const GnnTrainOptions& opt) {
  cfg.validate();
  SCALEDL_CHECK(opt.epochs >= 1, "epochs={} must be >= 1", opt.epochs);
  SCALEDL_CHECK(opt.lr > 0 && std::isfinite(opt.lr), "lr={} must be > 0", opt.lr);
  SCALEDL_CHECK(opt.weight_decay >= 0, "weight_decay={} must be >= 0", opt.weight_decay);
  SCALEDL_CHECK(opt.batch_size >= 1, "batch_size={} must be >= 1", opt.batch_size);
  SCALEDL_CHECK(opt.val_fraction >= 0 && opt.val_fraction <= 0.9, "val_fraction={} must be in [0, 0.9]",
                opt.val_fraction);
  SCALEDL_CHECK(opt.patience >= 1, "patience={} must be >= 1", opt.patience);
  gnn_detail::check_choice(opt.loss, {"mse-log", "mre"}, "loss");
  SCALEDL_CHECK(!graphs.empty(), "no training graphs (the store has no ok model runs?)");
  for (size_t i = 0; i < graphs.size(); ++i)
    SCALEDL_CHECK(std::isfinite(graphs[i].target_ms) && graphs[i].target_ms > 0,
                  "training graph[{}] ('{}'): target_ms={} must be finite and > 0", i, graphs[i].label,
                  graphs[i].target_ms);
}

/// Split: a seeded permutation (of `rng`, which the epochs' shuffles continue); validation only
/// when at least 5 graphs.
void split_train_val(const std::vector<GraphFeatures>& graphs, double val_fraction, std::mt19937_64& rng,
                     std::vector<const GraphFeatures*>& tr, std::vector<const GraphFeatures*>& va) {
  std::vector<size_t> perm(graphs.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t nval = graphs.size() >= 5 ? static_cast<size_t>(std::lround(val_fraction * graphs.size())) : 0;
  nval = std::min(nval, graphs.size() - 1);
  for (size_t i = 0; i < perm.size(); ++i) (i < nval ? va : tr).push_back(&graphs[perm[i]]);
}

/// Points each graph of `sets` at its exact compression (compress_graph), kept in `compressed`:
/// same predictions, fewer nodes.
void compress_sets(std::initializer_list<std::vector<const GraphFeatures*>*> sets, int64_t layers,
                   std::vector<GraphFeatures>& compressed) {
  size_t n = 0;
  for (auto* set : sets) n += set->size();
  compressed.reserve(n);  // the pointers into it stay valid
  for (auto* set : sets)
    for (const GraphFeatures*& g : *set) {
      compressed.push_back(compress_graph(*g, layers));
      g = &compressed.back();
    }
}

/// The epochs of GraphPredictor::train: Adam on the training graphs (mini-batches, or the one
/// full batch), early stopping on the validation MRE (without a validation set, on the epoch's
/// mean training loss), and the best epoch's parameters restored.
class EpochLoop {
 public:
  EpochLoop(GnnModel& m, const Normalizer& norm, const GnnTrainOptions& opt, std::mt19937_64& rng,
            const std::vector<const GraphFeatures*>& tr, const std::vector<const GraphFeatures*>& va)
      : m_(m),
        norm_(norm),
        opt_(opt),
        rng_(rng),
        tr_(tr),
        va_(va),
        adam_(m->parameters(), torch::optim::AdamOptions(opt.lr).weight_decay(opt.weight_decay)),
        // Full-batch evaluation sets, collated once.
        trb_(collate(tr, norm)),
        vab_(va.empty() ? trb_ : collate(va, norm)),
        try_(targets(tr)),
        vay_(va.empty() ? try_ : targets(va)) {}

  /// Trains until patience runs out or opt.epochs; leaves the model with its best parameters,
  /// in eval mode. Error when training diverged.
  void run() {
    // One batch that never changes when batch_size covers the training set.
    const bool single = static_cast<size_t>(opt_.batch_size) >= tr_.size();
    std::vector<size_t> order(tr_.size());
    std::iota(order.begin(), order.end(), 0);
    for (epoch_ = 1; epoch_ <= opt_.epochs; ++epoch_) {
      if (!single) std::shuffle(order.begin(), order.end(), rng_);
      const double mean_loss = train_epoch(order, single);
      // Without a validation set the epoch's mean training loss decides early
      // stopping (saves one full forward pass per epoch).
      const double vmre = va_.empty() ? mean_loss : eval_mre(vab_, vay_);
      if (opt_.on_epoch) opt_.on_epoch(epoch_, mean_loss, vmre);
      if (vmre < best_mre_) {
        best_mre_ = vmre;
        best_epoch_ = epoch_;
        best_.clear();
        for (const auto& t : m_->parameters()) best_.push_back(t.detach().clone());
      } else if (epoch_ - best_epoch_ >= opt_.patience) {
        break;
      }
    }
    restore_best();
    m_->eval();
  }

  /// The training's figures in `r` (all but mean_alpha/beta, residuals and seconds).
  void report(GnnTrainReport& r) {
    r.train_graphs = static_cast<int64_t>(tr_.size());
    r.val_graphs = static_cast<int64_t>(va_.size());
    r.epochs_run = std::min(epoch_, opt_.epochs);
    r.best_epoch = best_epoch_;
    r.train_mre_before = mre_before(tr_);
    r.val_mre_before = va_.empty() ? NAN : mre_before(va_);
    r.train_mre = eval_mre(trb_, try_);
    r.val_mre = va_.empty() ? NAN : eval_mre(vab_, vay_);
  }

 private:
  /// One pass over the training graphs in `order`; returns the mean loss of its steps.
  double train_epoch(const std::vector<size_t>& order, bool single) {
    double loss_sum = 0;
    int64_t steps = 0;
    for (size_t s = 0; s < order.size(); s += opt_.batch_size) {
      GraphBatch b;
      if (single) {
        b = trb_;
      } else {
        std::vector<const GraphFeatures*> chunk;
        for (size_t i = s; i < std::min(order.size(), s + opt_.batch_size); ++i)
          chunk.push_back(tr_[order[i]]);
        b = collate(chunk, norm_);
      }
      GnnOutput o = m_->forward(b);
      torch::Tensor loss = opt_.loss == "mre" ? ((o.t_pred - b.y).abs() / b.y).mean()
                                              : (o.log_t_pred - torch::log(b.y)).pow(2).mean();
      adam_.zero_grad();
      loss.backward();
      adam_.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    return loss_sum / std::max<int64_t>(1, steps);
  }

  double eval_mre(const GraphBatch& b, const std::vector<double>& y) {
    torch::NoGradGuard ng;
    m_->eval();
    torch::Tensor t = m_->forward(b).t_pred.to(torch::kFloat64).contiguous();
    m_->train();
    std::vector<double> pr(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    return mean_relative_error(pr, y);
  }

  /// The best epoch's parameters; a diverged run is an error, never a model: callers write
  /// nothing then.
  void restore_best() {
    if (!best_.empty()) {
      torch::NoGradGuard ng;
      auto params = m_->parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(best_[i]);
    }
    SCALEDL_CHECK(std::isfinite(best_mre_),
                  "graph training diverged: the {} loss was never finite in {} epochs (lr={}); lower --lr",
                  opt_.loss, std::min(epoch_, opt_.epochs), opt_.lr);
    for (const auto& kv : m_->named_parameters())
      SCALEDL_CHECK(torch::isfinite(kv.value()).all().item<bool>(),
                    "graph training diverged: parameter '{}' is NaN/Inf (lr={}); lower --lr", kv.key(),
                    opt_.lr);
  }

  GnnModel& m_;
  const Normalizer& norm_;
  const GnnTrainOptions& opt_;
  std::mt19937_64& rng_;
  const std::vector<const GraphFeatures*>& tr_;
  const std::vector<const GraphFeatures*>& va_;
  torch::optim::Adam adam_;
  const GraphBatch trb_, vab_;
  const std::vector<double> try_, vay_;
  std::vector<torch::Tensor> best_;
  double best_mre_ = INFINITY;
  int64_t best_epoch_ = 0, epoch_ = 0;
};

/// The report's mean alpha and beta over `graphs`, and the validation graphs' (uncompressed,
/// `va_orig`) residuals for the intervals.
void report_predictions(const GraphPredictor& p, const std::vector<GraphFeatures>& graphs,
                        const std::vector<const GraphFeatures*>& va_orig, GnnTrainReport& r) {
  std::vector<const GraphFeatures*> all;
  for (const auto& g : graphs) all.push_back(&g);
  GnnPrediction pr = p.predict(all);
  r.mean_alpha = std::accumulate(pr.alpha.begin(), pr.alpha.end(), 0.0) / pr.alpha.size();
  r.mean_beta = std::accumulate(pr.beta.begin(), pr.beta.end(), 0.0) / pr.beta.size();
  if (!va_orig.empty()) {
    GnnPrediction pv = p.predict(va_orig);
    for (size_t i = 0; i < va_orig.size(); ++i) {
      r.val_log_residuals.push_back(std::log(va_orig[i]->target_ms / pv.t_pred_ms[i]));
      r.val_ood_distance.push_back(pv.ood_distance[i]);
      r.val_t_sum_ms.push_back(va_orig[i]->t_sum_ms);
    }
  }
}

}  // namespace

std::vector<GraphPredictor> train_further_members(const std::vector<GraphFeatures>& graphs,
                                                  const GnnConfig& cfg, const GnnTrainOptions& opt,
                                                  int64_t count, std::vector<GnnTrainReport>* reports) {
  std::vector<GraphPredictor> out;
  for (int64_t k = 1; k < count; ++k) {
    GnnTrainOptions mo = opt;
    mo.seed = opt.seed + static_cast<uint64_t>(k);
    GnnTrainReport rep;
    out.push_back(GraphPredictor::train(graphs, cfg, mo, &rep));
    if (reports) reports->push_back(std::move(rep));
  }
  return out;
}

GraphPredictor GraphPredictor::train(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                     const GnnTrainOptions& opt, GnnTrainReport* report) {
  check_train_inputs(graphs, cfg, opt);
  const auto t0 = std::chrono::steady_clock::now();
  std::mt19937_64 rng(opt.seed);
  std::vector<const GraphFeatures*> tr, va;
  split_train_val(graphs, opt.val_fraction, rng, tr, va);

  torch::manual_seed(opt.seed);
  GraphPredictor p(cfg, Normalizer::fit(tr, opt.normalization));
  // From here on the graphs are their exact compressions (compress_graph): same
  // predictions, fewer nodes. Normalisation statistics above are of the originals.
  const std::vector<const GraphFeatures*> va_orig = va;
  std::vector<GraphFeatures> compressed;
  compress_sets({&tr, &va}, cfg.layers, compressed);
  GnnModel& m = p.model_;
  if (cfg.target == "direct") {
    double s = 0;
    for (const auto* g : tr) s += std::log(g->target_ms);
    torch::NoGradGuard ng;
    m->log_t_offset.fill_(s / static_cast<double>(tr.size()));
  }
  EpochLoop loop(m, p.norm_, opt, rng, tr, va);
  loop.run();
  if (report) {
    loop.report(*report);
    report_predictions(p, graphs, va_orig, *report);
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return p;
}

// ---- cross-validation -----------------------------------------------------------

nlohmann::json GnnCvReport::to_json() const {
  nlohmann::json per = nlohmann::json::array();
  for (size_t i = 0; i < labels.size(); ++i)
    per.push_back({{"label", labels[i]},
                   {"fold", fold[i]},
                   {"target_ms", target_ms[i]},
                   {"before_ms", before_ms[i]},
                   {"pred_ms", pred_ms[i]},
                   {"alpha", alpha[i]}});
  return {{"folds", folds},       {"graphs", graphs},   {"mre_before", mre_before}, {"mre", mre},
          {"fold_mre", fold_mre}, {"seconds", seconds}, {"per_graph", per}};
}

std::vector<int64_t> graph_cv_folds(size_t n, int64_t folds, uint64_t seed) {
  SCALEDL_CHECK(folds >= 2, "folds={} must be >= 2", folds);
  SCALEDL_CHECK(static_cast<size_t>(folds) <= n, "folds={} but only {} graphs", folds, n);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> fold(n, -1);
  for (size_t i = 0; i < n; ++i) fold[perm[i]] = static_cast<int64_t>(i % folds);
  return fold;
}

GnnCvReport cross_validate_graphs(const std::vector<int64_t>& fold, int64_t folds, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt,
                                  const std::function<std::vector<GraphFeatures>(int64_t)>& graphs_of_fold) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = fold.size();
  GnnCvReport r;
  r.folds = folds;
  r.graphs = static_cast<int64_t>(n);
  r.fold = fold;
  r.labels.resize(n);
  r.target_ms.assign(n, NAN);
  r.before_ms.assign(n, NAN);
  r.pred_ms.assign(n, NAN);
  r.alpha.assign(n, NAN);
  for (int64_t k = 0; k < folds; ++k) {
    std::vector<GraphFeatures> all = graphs_of_fold(k);
    SCALEDL_CHECK(all.size() == n, "cross-validation fold {}: {} graphs for {} fold entries", k, all.size(),
                  n);
    std::vector<GraphFeatures> train, test;
    std::vector<size_t> test_ids;
    for (size_t i = 0; i < n; ++i) {
      if (fold[i] != k) {
        train.push_back(std::move(all[i]));
        continue;
      }
      r.labels[i] = all[i].label;
      r.target_ms[i] = all[i].target_ms;
      r.before_ms[i] = all[i].t_sum_ms + all[i].t_comm_ms;
      test_ids.push_back(i);
      test.push_back(std::move(all[i]));
    }
    const GnnPrediction pr = GraphPredictor::train(train, cfg, opt).predict(test);
    std::vector<double> y;
    for (size_t j = 0; j < test_ids.size(); ++j) {
      r.pred_ms[test_ids[j]] = pr.t_pred_ms[j];
      r.alpha[test_ids[j]] = pr.alpha[j];
      y.push_back(r.target_ms[test_ids[j]]);
    }
    r.fold_mre.push_back(mean_relative_error(pr.t_pred_ms, y));
  }
  r.mre_before = mean_relative_error(r.before_ms, r.target_ms);
  r.mre = mean_relative_error(r.pred_ms, r.target_ms);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

GnnCvReport cross_validate_graphs(const std::vector<GraphFeatures>& graphs, const GnnConfig& cfg,
                                  const GnnTrainOptions& opt, int64_t folds) {
  return cross_validate_graphs(graph_cv_folds(graphs.size(), folds, opt.seed), folds, cfg, opt,
                               [&](int64_t) { return graphs; });
}

}  // namespace scaledl
