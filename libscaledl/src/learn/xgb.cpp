#include "scaledl/xgb.hpp"

#include <xgboost/c_api.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <iostream>
#include <sstream>
#include <thread>

#include "scaledl/error.hpp"
#include "scaledl/json_util.hpp"

namespace scaledl::xgb {

namespace {
/// XGBoost's last error without its stack trace (first line only).
std::string last_error() {
  std::string s = XGBGetLastError();
  auto p = s.find('\n');
  return p == std::string::npos ? s : s.substr(0, p);
}
/// Turns a non-zero XGBoost return code into one Error line.
void check(int rc, const char* what) {
  if (rc != 0) fail("XGBoost {} failed: {}", what, last_error());
}
}  // namespace

std::string version() {
  int a = 0, b = 0, c = 0;
  XGBoostVersion(&a, &b, &c);
  return fmt::format("{}.{}.{}", a, b, c);
}

DMatrix::DMatrix(const float* data, size_t rows, size_t cols, const std::vector<float>& labels)
    : rows_(rows), cols_(cols) {
  SCALEDL_CHECK(rows > 0 && cols > 0, "XGBoost DMatrix needs rows > 0 and cols > 0 (got {} x {})", rows,
                cols);
  SCALEDL_CHECK(labels.empty() || labels.size() == rows, "XGBoost DMatrix: {} labels for {} rows",
                labels.size(), rows);
  DMatrixHandle h = nullptr;
  check(XGDMatrixCreateFromMat(data, rows, cols, std::numeric_limits<float>::quiet_NaN(), &h),
        "XGDMatrixCreateFromMat");
  h_ = h;
  if (!labels.empty()) {
    for (size_t i = 0; i < labels.size(); ++i)
      SCALEDL_CHECK(std::isfinite(labels[i]), "XGBoost DMatrix: label[{}]={} is not finite", i, labels[i]);
    check(XGDMatrixSetFloatInfo(h_, "label", labels.data(), labels.size()), "XGDMatrixSetFloatInfo(label)");
  }
}
DMatrix::~DMatrix() {
  if (h_) XGDMatrixFree(h_);
}
DMatrix::DMatrix(DMatrix&& o) noexcept : h_(o.h_), rows_(o.rows_), cols_(o.cols_) { o.h_ = nullptr; }
DMatrix& DMatrix::operator=(DMatrix&& o) noexcept {
  if (this != &o) {
    if (h_) XGDMatrixFree(h_);
    h_ = o.h_;
    rows_ = o.rows_;
    cols_ = o.cols_;
    o.h_ = nullptr;
  }
  return *this;
}

Booster::Booster() {
  unsigned n = std::thread::hardware_concurrency();
  params_["nthread"] = std::to_string(n > 0 ? n : 1);
  params_["verbosity"] = "0";
}

void Booster::create(void* const* dmats, size_t n) {
  if (h_) XGBoosterFree(h_);
  h_ = nullptr;
  BoosterHandle h = nullptr;
  check(XGBoosterCreate(reinterpret_cast<const DMatrixHandle*>(dmats), n, &h), "XGBoosterCreate");
  h_ = h;
  for (const auto& [k, v] : params_) {
    int rc = XGBoosterSetParam(h_, k.c_str(), v.c_str());
    if (rc != 0) fail("XGBoost parameter {}={} rejected: {}", k, v, last_error());
  }
}
Booster::~Booster() {
  if (h_) XGBoosterFree(h_);
}
Booster::Booster(Booster&& o) noexcept : h_(o.h_), params_(std::move(o.params_)) { o.h_ = nullptr; }
Booster& Booster::operator=(Booster&& o) noexcept {
  if (this != &o) {
    if (h_) XGBoosterFree(h_);
    h_ = o.h_;
    params_ = std::move(o.params_);
    o.h_ = nullptr;
  }
  return *this;
}

void Booster::set_param(const std::string& key, const std::string& value) {
  params_[key] = value;
  if (h_) {
    int rc = XGBoosterSetParam(h_, key.c_str(), value.c_str());
    if (rc != 0) fail("XGBoost parameter {}={} rejected: {}", key, value, last_error());
  }
}
void Booster::set_params(const std::map<std::string, std::string>& params) {
  for (const auto& [k, v] : params) set_param(k, v);
}

void Booster::train(const DMatrix& train, int rounds, const DMatrix* eval, bool verbose) {
  SCALEDL_CHECK(rounds >= 1, "XGBoost rounds={} must be >= 1", rounds);
  // XGBoost fixes the feature count from the matrices the booster is created with.
  void* mats[2] = {train.handle(), eval ? eval->handle() : nullptr};
  create(mats, eval ? 2 : 1);
  for (int i = 0; i < rounds; ++i) {
    check(XGBoosterUpdateOneIter(h_, i, train.handle()), "XGBoosterUpdateOneIter");
    if (eval && verbose && (i % 50 == 49 || i + 1 == rounds)) {
      DMatrixHandle mats[2] = {train.handle(), eval->handle()};
      const char* names[2] = {"train", "eval"};
      const char* out = nullptr;
      check(XGBoosterEvalOneIter(h_, i, mats, names, 2, &out), "XGBoosterEvalOneIter");
      std::cerr << out << "\n";
    }
  }
}

std::vector<float> Booster::predict(const DMatrix& m) const {
  SCALEDL_CHECK(h_, "XGBoost booster is not trained or loaded");
  const char* cfg = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* res = nullptr;
  check(XGBoosterPredictFromDMatrix(h_, m.handle(), cfg, &shape, &dim, &res), "XGBoosterPredictFromDMatrix");
  return std::vector<float>(res, res + m.rows());
}

void Booster::predict_dense(const float* data, size_t rows, size_t cols, float* out) const {
  if (rows == 0) return;
  SCALEDL_CHECK(h_, "XGBoost booster is not trained or loaded");
  std::string iface = fmt::format(
      R"({{"data": [{}, true], "shape": [{}, {}], "typestr": "<f4", "version": 3}})",
      reinterpret_cast<uintptr_t>(data), rows, cols);
  const char* cfg =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false, "cache_id": 0, "missing": NaN})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* res = nullptr;
  check(XGBoosterPredictFromDense(h_, iface.c_str(), cfg, nullptr, &shape, &dim, &res),
        "XGBoosterPredictFromDense");
  std::copy(res, res + rows, out);
}

size_t Booster::num_features() const {
  if (!h_) return 0;
  bst_ulong n = 0;
  check(XGBoosterGetNumFeature(h_, &n), "XGBoosterGetNumFeature");
  return static_cast<size_t>(n);
}

std::string Booster::to_json_string() const {
  SCALEDL_CHECK(h_, "XGBoost booster is not trained or loaded");
  bst_ulong len = 0;
  const char* buf = nullptr;
  check(XGBoosterSaveModelToBuffer(h_, R"({"format": "json"})", &len, &buf), "XGBoosterSaveModelToBuffer");
  return std::string(buf, len);
}

Booster Booster::from_buffer(const std::string& bytes, const std::string& ctx) {
  SCALEDL_CHECK(!bytes.empty(), "{}: empty XGBoost model", ctx);
  // XGBoost's JSON reader may accept a truncated document silently in some
  // versions: validate the JSON first so truncation is reported, not guessed.
  if (bytes[0] == '{') {
    auto j = nlohmann::json::parse(bytes, nullptr, false);
    SCALEDL_CHECK(!j.is_discarded(), "{}: not a valid XGBoost JSON model (truncated or corrupt)", ctx);
    SCALEDL_CHECK(j.contains("learner"), "{}: JSON has no 'learner' key: not an XGBoost model", ctx);
  }
  Booster b;
  b.create(nullptr, 0);
  int rc = XGBoosterLoadModelFromBuffer(b.h_, bytes.data(), bytes.size());
  if (rc != 0) fail("{}: cannot load XGBoost model: {}", ctx, last_error());
  return b;
}

void Booster::save(const std::string& path) const { write_text_file_atomic(path, to_json_string()); }

Booster Booster::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SCALEDL_CHECK(f.good(), "{}: cannot open XGBoost model file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return from_buffer(ss.str(), path);
}

}  // namespace scaledl::xgb
