#pragma once
// Run-level baselines of `scaledl eval` (eval.hpp): a random forest on
// hyperparameters only, and a bidirectional LSTM over the node sequence.
#include <cstdint>
#include <map>
#include <vector>

#include "scaledl/eval/eval.hpp"
#include "scaledl/io/device.hpp"

namespace scaledl::eval_detail {

/// Hyperparameter vector of a run (log sizes, one-hot family/dtype, device rates).
std::vector<float> hp_features(const EvalRun& r, const DeviceRecord& dev);
size_t hp_feature_count();

/// XGBoost random forest (100 trees, 1 round) on hp_features -> log T_iter.
std::vector<double> rf_hp_fit_predict(const std::vector<const EvalRun*>& train,
                                      const std::vector<const EvalRun*>& test,
                                      const std::map<std::string, DeviceRecord>& devices, uint64_t seed);

/// Bidirectional LSTM (1 layer, 32 units per direction) over the node features
/// in topological order; the final states of both directions -> MLP -> log T_iter.
std::vector<double> birnn_fit_predict(const std::vector<const EvalRun*>& train,
                                      const std::vector<const EvalRun*>& test, int epochs, uint64_t seed);

}  // namespace scaledl::eval_detail
