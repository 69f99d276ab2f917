#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// The refinement's domain in words: a global feature of a prediction (gnn/graph_features.hpp,
// global_feature_names) outside the range of the runs the bundle trained on, said as a person
// would ("the model has 7.2 B parameters, 9.3x more than any training run (at most 774 M)")
// rather than as the feature's internal name and log value. `predict` prints these.
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace scaledl {

/// One global feature of a prediction outside its training range [lo, hi].
struct OutOfRange {
  std::string feature;  ///< its name (global_feature_names)
  double value = 0, lo = 0, hi = 0;
  /// The sentence ("the batch of 512 samples is 4x larger than any training run's (at most 128)").
  std::string words() const;
  /// The internal form ("log_batch=6.238 outside [0, 4.852]"), for the JSON and the curious.
  std::string raw() const;
};

/// What a global feature measures, in words ("the model's parameter count"); the name itself
/// for one without a description.
std::string feature_in_words(const std::string& feature);

/// The features of `values` (in the order of `names`) outside `ranges` (by name; a name without a
/// range is skipped), with the tolerance predict uses (1e-6 of the range's width, at least 1e-6).
std::vector<OutOfRange> features_out_of_range(const std::vector<std::string>& names,
                                              const std::vector<double>& values,
                                              const std::map<std::string, std::pair<double, double>>& ranges);

}  // namespace scaledl
