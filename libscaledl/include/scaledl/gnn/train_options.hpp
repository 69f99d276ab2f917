#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// What training the graph refinement takes and reports (GraphPredictor::train in gnn.hpp),
// apart from the LibTorch model so that the interval calibration's and the bundle's
// declarations (intervals.hpp, bundle.hpp) need no LibTorch header.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace scaledl {

/// Training options (the CLI flags of `scaledl train graph`).
struct GnnTrainOptions {
  int64_t epochs = 250;          ///< passes over the training graphs, >= 1
  double lr = 3e-3;              ///< Adam learning rate, > 0
  double weight_decay = 0;       ///< Adam L2 penalty, >= 0
  int64_t batch_size = 32;       ///< graphs per optimiser step, >= 1
  double val_fraction = 0.2;     ///< share of graphs held out for early stopping, [0, 0.9]
  int64_t patience = 60;         ///< epochs without validation improvement before stopping, >= 1
  uint64_t seed = 0;             ///< seeds weights (torch::manual_seed), split and shuffling
  std::string loss = "mse-log";  ///< "mse-log": mean (log T_pred - log T)^2; "mre": mean |T_pred - T|/T
  std::string normalization = "minmax";  ///< "minmax" | "standard"
  /// Called after each epoch with (epoch, mean train loss, validation MRE or, without a
  /// validation set, the mean train loss: the early-stopping criterion); may be empty.
  std::function<void(int64_t, double, double)> on_epoch;
  /// The options above except on_epoch (what reports and bundles record).
  nlohmann::json to_json() const;
};

/// What training reports; MREs are fractions (0.05 = 5%).
struct GnnTrainReport {
  int64_t train_graphs = 0, val_graphs = 0;
  int64_t epochs_run = 0, best_epoch = 0;
  double train_mre_before = NAN, val_mre_before = NAN;  ///< of T_sum + T_comm (alpha = beta = 1)
  double train_mre = NAN, val_mre = NAN;                ///< after refinement
  double mean_alpha = NAN, mean_beta = NAN;             ///< over all graphs
  double seconds = 0;                                   ///< wall time of training
  /// log(measured / predicted) and ood_distance of each validation graph, with the
  /// returned model (what split-conformal intervals calibrate on: intervals.hpp).
  std::vector<double> val_log_residuals, val_ood_distance, val_t_sum_ms;
  nlohmann::json to_json() const;
};

}  // namespace scaledl
