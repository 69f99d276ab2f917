#include "learn/xgb.hpp"

#include <xgboost/c_api.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

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

/// XGBoost writes integer parameters as strings ("24"); -1 when absent or not a number.
int64_t param_int(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return -1;
  const nlohmann::json& v = obj.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return -1;
  const std::string s = v.get<std::string>();
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' ? x : -1;
}

/// XGBoost's loader trusts the trees of a model (child indices, split features,
/// node counts): a cycle makes its predictor loop forever, an index out of range
/// reads out of bounds. Checks what our models (numeric splits, gbtree) contain.
void check_trees(const nlohmann::json& learner, const std::string& ctx) {
  // What LayerPredictor trains: one regression output of gbtree (boosted trees or
  // one round of a random forest), numeric features without names or types.
  SCALEDL_CHECK(learner.is_object() && learner.contains("gradient_booster") &&
                    learner.at("gradient_booster").is_object(),
                "{}: learner.gradient_booster is missing", ctx);
  const nlohmann::json& gb = learner.at("gradient_booster");
  SCALEDL_CHECK(gb.value("name", nlohmann::json()) == "gbtree",
                "{}: gradient_booster.name={} is not \"gbtree\"", ctx,
                show(gb.value("name", nlohmann::json())));
  const nlohmann::json mp = learner.value("learner_model_param", nlohmann::json::object());
  SCALEDL_CHECK(param_int(mp, "num_class") <= 1 && param_int(mp, "num_target") <= 1,
                "{}: several classes or targets are not supported", ctx);
  for (const char* key : {"feature_names", "feature_types"})
    SCALEDL_CHECK(!learner.contains(key) || (learner.at(key).is_array() && learner.at(key).empty()),
                  "{}: learner.{} must be empty (this build does not name features)", ctx, key);
  SCALEDL_CHECK(gb.contains("model") && gb.at("model").is_object() && gb.at("model").contains("trees"),
                "{}: gradient_booster.model.trees is missing", ctx);
  const nlohmann::json* model = &gb.at("model");
  const nlohmann::json& trees = model->at("trees");
  SCALEDL_CHECK(trees.is_array(), "{}: gradient_booster trees is not an array", ctx);
  const int64_t nf = param_int(learner.value("learner_model_param", nlohmann::json::object()), "num_feature");
  SCALEDL_CHECK(nf >= 1 && nf <= (int64_t(1) << 24),
                "{}: learner_model_param.num_feature is missing or invalid", ctx);
  const nlohmann::json gp = model->value("gbtree_model_param", nlohmann::json::object());
  const int64_t nt = param_int(gp, "num_trees"), npt = param_int(gp, "num_parallel_tree");
  SCALEDL_CHECK(nt == static_cast<int64_t>(trees.size()), "{}: gbtree_model_param.num_trees={} but {} trees",
                ctx, nt, trees.size());
  SCALEDL_CHECK(npt >= 1 && nt % npt == 0,
                "{}: gbtree_model_param.num_parallel_tree={} does not divide {} trees", ctx, npt, nt);
  SCALEDL_CHECK(model->contains("tree_info") && model->at("tree_info").is_array() &&
                    model->at("tree_info").size() == trees.size(),
                "{}: tree_info does not list one group per tree", ctx);
  // One output (regression): every tree in group 0, scalar leaves.
  for (const auto& g : model->at("tree_info"))
    SCALEDL_CHECK(g.is_number_integer() && g.get<int64_t>() == 0,
                  "{}: tree_info holds {}: one output group only", ctx, show(g));
  SCALEDL_CHECK(param_int(gp, "size_leaf_vector") <= 0, "{}: vector leaves are not supported", ctx);
  for (size_t ti = 0; ti < trees.size(); ++ti) {
    const nlohmann::json& t = trees[ti];
    const std::string tc = fmt::format("{}: trees[{}]", ctx, ti);
    auto ints = [&](const char* key) {
      SCALEDL_CHECK(t.is_object() && t.contains(key) && t.at(key).is_array(), "{}.{} is missing", tc, key);
      std::vector<int64_t> v;
      for (const auto& x : t.at(key)) {
        SCALEDL_CHECK(x.is_number_integer(), "{}.{} holds {}, not an integer", tc, key, show(x));
        v.push_back(x.get<int64_t>());
      }
      return v;
    };
    // XGBoost places a tree by its "id": a repeated id leaves a slot empty.
    SCALEDL_CHECK(t.is_object() && t.contains("id") && t.at("id").is_number_integer() &&
                      t.at("id").get<int64_t>() == static_cast<int64_t>(ti),
                  "{}.id is not {}", tc, ti);
    const std::vector<int64_t> left = ints("left_children"), right = ints("right_children"),
                               feat = ints("split_indices"), parent = ints("parents");
    const int64_t n = static_cast<int64_t>(left.size());
    SCALEDL_CHECK(n >= 1 && static_cast<int64_t>(right.size()) == n &&
                      static_cast<int64_t>(feat.size()) == n && static_cast<int64_t>(parent.size()) == n,
                  "{}: node arrays differ in length", tc);
    SCALEDL_CHECK(param_int(t.value("tree_param", nlohmann::json::object()), "num_nodes") == n,
                  "{}.tree_param.num_nodes differs from the {} nodes", tc, n);
    // XGBoost 1.7 reads every one of these arrays without checking that it exists.
    for (const char* key : {"split_conditions", "base_weights", "loss_changes", "sum_hessian"}) {
      SCALEDL_CHECK(t.contains(key) && t.at(key).is_array() && static_cast<int64_t>(t.at(key).size()) == n,
                    "{}.{} does not have {} entries", tc, key, n);
      for (const auto& x : t.at(key))
        SCALEDL_CHECK(x.is_number(), "{}.{} holds {}, not a number", tc, key, show(x));
    }
    for (const char* key : {"default_left", "split_type"})
      SCALEDL_CHECK(static_cast<int64_t>(ints(key).size()) == n, "{}.{} does not have {} entries", tc, key,
                    n);
    for (int64_t x : ints("split_type"))
      SCALEDL_CHECK(x == 0, "{}: categorical splits are not supported", tc);
    for (const char* key : {"categories", "categories_nodes", "categories_segments", "categories_sizes"})
      SCALEDL_CHECK(ints(key).empty(), "{}.{}: categorical splits are not supported", tc, key);
    for (int64_t i = 0; i < n; ++i) {
      const bool leaf = left[i] == -1;
      SCALEDL_CHECK(leaf == (right[i] == -1), "{}: node {} has one child", tc, i);
      if (!leaf) {
        SCALEDL_CHECK(left[i] > 0 && left[i] < n && right[i] > 0 && right[i] < n,
                      "{}: node {} has a child index out of range", tc, i);
        SCALEDL_CHECK(parent[left[i]] == i && parent[right[i]] == i,
                      "{}: node {}'s children name another parent", tc, i);
      }
    }
    SCALEDL_CHECK(parent[0] == 2147483647, "{}: the root has a parent ({})", tc,
                  parent[0]);  // as XGBoost writes it
    // Every node reachable from the root exactly once: no cycle, no shared subtree.
    std::vector<char> seen(static_cast<size_t>(n), 0);
    std::vector<int64_t> stack = {0};
    while (!stack.empty()) {
      const int64_t i = stack.back();
      stack.pop_back();
      SCALEDL_CHECK(!seen[i], "{}: node {} is reached twice (cyclic tree)", tc, i);
      seen[i] = 1;
      if (left[i] == -1) continue;
      SCALEDL_CHECK(feat[i] >= 0 && feat[i] < nf, "{}: node {} splits on feature {} of {}", tc, i, feat[i],
                    nf);
      stack.push_back(left[i]);
      stack.push_back(right[i]);
    }
  }
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
  // Labels are checked before the handle exists: a constructor that throws runs
  // no destructor, so a handle created first would leak (LeakSanitizer found it).
  for (size_t i = 0; i < labels.size(); ++i)
    SCALEDL_CHECK(std::isfinite(labels[i]), "XGBoost DMatrix: label[{}]={} is not finite", i, labels[i]);
  DMatrixHandle h = nullptr;
  check(XGDMatrixCreateFromMat(data, rows, cols, std::numeric_limits<float>::quiet_NaN(), &h),
        "XGDMatrixCreateFromMat");
  h_ = h;
  if (!labels.empty()) {
    const int rc = XGDMatrixSetFloatInfo(h_, "label", labels.data(), labels.size());
    if (rc != 0) {
      const std::string why = last_error();
      XGDMatrixFree(h_);
      h_ = nullptr;
      fail("XGBoost XGDMatrixSetFloatInfo(label) failed: {}", why);
    }
  }
}
DMatrix::~DMatrix() {
  if (h_) XGDMatrixFree(h_);
}
DMatrix::DMatrix(DMatrix&& o) noexcept : h_(o.h_), rows_(o.rows_), cols_(o.cols_) {
  o.h_ = nullptr;
}
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
Booster::Booster(Booster&& o) noexcept : h_(o.h_), params_(std::move(o.params_)) {
  o.h_ = nullptr;
}
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
  const char* cfg =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* res = nullptr;
  check(XGBoosterPredictFromDMatrix(h_, m.handle(), cfg, &shape, &dim, &res), "XGBoosterPredictFromDMatrix");
  return std::vector<float>(res, res + m.rows());
}

void Booster::predict_dense(const float* data, size_t rows, size_t cols, float* out) const {
  if (rows == 0) return;
  SCALEDL_CHECK(h_, "XGBoost booster is not trained or loaded");
  std::string iface =
      fmt::format(R"({{"data": [{}, true], "shape": [{}, {}], "typestr": "<f4", "version": 3}})",
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

nlohmann::json parse_model(const std::string& bytes, const std::string& ctx) {
  SCALEDL_CHECK(!bytes.empty(), "{}: empty XGBoost model", ctx);
  // XGBoost's JSON reader may accept a truncated document silently in some
  // versions: validate the JSON first so truncation is reported, not guessed.
  // Only JSON (what save() writes): its trees are checked before XGBoost sees them.
  SCALEDL_CHECK(bytes[0] == '{', "{}: not an XGBoost JSON model (does not start with '{{')", ctx);
  nlohmann::json j;
  try {
    j = parse_json_text(bytes, "model");  // depth-limited: XGBoost's own JSON reader recurses
  } catch (const Error& e) {
    fail("{}: not a valid XGBoost JSON model (truncated or corrupt: {})", ctx, e.what());
  }
  SCALEDL_CHECK(j.contains("learner"), "{}: JSON has no 'learner' key: not an XGBoost model", ctx);
  check_trees(j.at("learner"), ctx);
  return j;
}

Booster Booster::from_buffer(const std::string& bytes, const std::string& ctx) {
  (void)parse_model(bytes, ctx);
  return from_checked_buffer(bytes, ctx);
}

Booster Booster::from_checked_buffer(const std::string& bytes, const std::string& ctx) {
  Booster b;
  b.create(nullptr, 0);
  int rc = XGBoosterLoadModelFromBuffer(b.h_, bytes.data(), bytes.size());
  if (rc != 0) fail("{}: cannot load XGBoost model: {}", ctx, last_error());
  return b;
}

void Booster::save(const std::string& path) const {
  write_text_file_atomic(path, to_json_string());
}

Booster Booster::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SCALEDL_CHECK(f.good(), "{}: cannot open XGBoost model file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return from_buffer(ss.str(), path);
}

}  // namespace scaledl::xgb
