#pragma once
// Prediction of a trained XGBoost regression model without XGBoost
// (docs/learn.md, "Speed"): the trees of the model's JSON are re-laid as perfect
// binary trees in heap order (a leaf above the deepest level is repeated below
// it), so a row walks exactly `depth` comparisons per tree with no branch on the
// tree shape, and eight rows walk each tree together.
//
// Semantics are XGBoost's: at a split, go left iff x[f] < threshold (floats);
// a missing value (NaN) goes to the split's default side; the result is
// base_score + sum of the leaves, summed in float in tree order, i.e. the margin,
// which is the prediction for reg:squarederror. Models this does not cover
// (another booster or objective, categorical splits, vector leaves, several
// targets or classes, trees deeper than kMaxDepth) are refused by compile(),
// and the caller keeps using XGBoost.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace scaledl {

class TreeForest {
 public:
  /// Deepest tree compiled: a depth-d tree takes 12 * 2^d bytes.
  static constexpr int kMaxDepth = 12;

  /// Compiles XGBoost JSON model text (XGBoosterSaveModelToBuffer "json").
  /// Returns nullopt and sets `why` when the model is outside what is covered
  /// (see above); malformed JSON of a model XGBoost accepted is also nullopt.
  static std::optional<TreeForest> compile(const std::string& xgboost_json, std::string* why = nullptr);
  /// The same from the parsed document (a bundle's model file, parsed once at load).
  static std::optional<TreeForest> compile_document(const nlohmann::json& xgboost_model,
                                                    std::string* why = nullptr);

  /// `rows` x num_features() row-major floats -> `rows` predictions in `out`.
  void predict(const float* x, size_t rows, float* out) const;

  /// The compiled trees as compact bytes (tree_cache.hpp stores them): per tree, its
  /// nodes in pre-order, a split as (feature, default side, threshold), a leaf as its
  /// value, the padding of the heap layout left out; 6 bytes a node, little-endian.
  /// from_bytes() rebuilds the identical object (every array bit for bit). Empty
  /// when not representable (more than 32,767 features, or a big-endian host).
  std::string to_bytes() const;
  /// The inverse; nullopt and `why` for bytes that are not to_bytes() output (every
  /// count, index and depth is checked: damaged bytes are refused, never trusted).
  static std::optional<TreeForest> from_bytes(const char* data, size_t size, std::string* why = nullptr);
  /// Bit-for-bit equality of every array (tests).
  bool identical(const TreeForest& o) const;

  size_t num_features() const { return features_; }
  size_t num_trees() const { return trees_; }
  int depth() const { return depth_; }

 private:
  struct Node {
    int32_t feature;  ///< split feature
    float threshold;  ///< go left iff x[feature] < threshold
  };
  void predict_row_missing(const float* x, float* out) const;
  bool padding(size_t tree, size_t pos, int level) const;
  template <int Depth>
  void predict_fast(const float* const* xr, size_t n, float* acc) const;
  size_t features_ = 0;
  size_t trees_ = 0;
  int depth_ = 0;
  size_t inner_ = 0;                   ///< 2^depth - 1 split nodes per tree
  float base_ = 0;                     ///< base_score
  std::vector<Node> node_;             ///< [trees * inner_] splits in heap order
  std::vector<uint8_t> default_left_;  ///< [trees * inner_] side of a missing value
  std::vector<float> leaf_;            ///< [trees * 2^depth] leaf values
};

}  // namespace scaledl
