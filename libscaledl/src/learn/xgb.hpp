#pragma once
// RAII wrapper over the XGBoost C API (xgboost/c_api.h, v1.6+).
//
// Every failing XGBoost call becomes a scaledl::Error carrying XGBGetLastError()
// and what was being done. Models are saved as XGBoost JSON (portable across
// XGBoost versions, inspectable), never the deprecated binary format.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace scaledl::xgb {

/// A dense row-major float matrix with NaN as "missing"; owns an XGBoost DMatrix.
class DMatrix {
 public:
  /// `data` has rows*cols floats, row-major; `labels` is empty or has `rows` entries.
  DMatrix(const float* data, size_t rows, size_t cols, const std::vector<float>& labels = {});
  ~DMatrix();
  DMatrix(DMatrix&& o) noexcept;
  DMatrix& operator=(DMatrix&& o) noexcept;
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  void* handle() const { return h_; }

 private:
  void* h_ = nullptr;
  size_t rows_ = 0, cols_ = 0;
};

/// A gradient-boosted model (or, with num_parallel_tree > 1 and 1 round, a random forest).
class Booster {
 public:
  /// Empty booster holding parameters; train() creates the XGBoost handle (XGBoost
  /// fixes the feature count from the training matrix), load() creates it from a model.
  Booster();
  ~Booster();
  Booster(Booster&& o) noexcept;
  Booster& operator=(Booster&& o) noexcept;
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;

  /// XGBoost parameter by its XGBoost name ("max_depth", "eta", ...). nthread
  /// defaults to std::thread::hardware_concurrency().
  void set_param(const std::string& key, const std::string& value);
  void set_params(const std::map<std::string, std::string>& params);

  /// Boosts `rounds` rounds on `train`. With `eval` non-null and verbose, prints
  /// the eval metric every 50 rounds to stderr.
  void train(const DMatrix& train, int rounds, const DMatrix* eval = nullptr, bool verbose = false);

  /// Predictions (one per row) for a DMatrix.
  std::vector<float> predict(const DMatrix& m) const;
  /// In-place prediction from dense row-major floats (NaN = missing), no DMatrix
  /// copy (XGBoosterPredictFromDense). Writes rows floats into `out`.
  void predict_dense(const float* data, size_t rows, size_t cols, float* out) const;

  /// Number of features the model was trained on (0 when untrained).
  size_t num_features() const;

  /// XGBoost JSON model text (XGBoosterSaveModelToBuffer "json").
  std::string to_json_string() const;
  /// Loads a model from XGBoost JSON bytes; `ctx` names the source in errors. The
  /// trees are checked first (indices in range, no cycle, numeric splits), since
  /// XGBoost trusts them (a cyclic tree makes its predictor loop forever).
  static Booster from_buffer(const std::string& bytes, const std::string& ctx);
  /// from_buffer() of bytes that parse_model() has already accepted (no second check).
  static Booster from_checked_buffer(const std::string& bytes, const std::string& ctx);
  /// Saves to `path` as XGBoost JSON (atomic: temp file + rename).
  void save(const std::string& path) const;
  /// Loads from an XGBoost JSON file; missing or corrupt => Error naming the file.
  static Booster load(const std::string& path);

  void* handle() const { return h_; }

 private:
  /// (Re)creates the handle with `n` cached matrices and applies params_.
  void create(void* const* dmats, size_t n);
  void* h_ = nullptr;
  std::map<std::string, std::string> params_;  ///< applied at create()
};

/// "major.minor.patch" of the linked XGBoost.
std::string version();

/// An XGBoost JSON model's document, after the checks from_buffer() makes (valid JSON,
/// a learner, trees whose indices are in range and acyclic); Error naming `ctx` otherwise.
nlohmann::json parse_model(const std::string& bytes, const std::string& ctx);

}  // namespace scaledl::xgb
