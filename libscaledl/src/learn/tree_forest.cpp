// XGBoost regression trees evaluated without XGBoost (see tree_forest.hpp).
#include "learn/tree_forest.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

namespace {

/// XGBoost writes numbers of its parameters as strings ("5E-1"; 2.x: "[5E-1]").
bool parse_param_float(const nlohmann::json& v, float* out) {
  if (v.is_number()) {
    *out = v.get<float>();
    return true;
  }
  if (!v.is_string()) return false;
  std::string s = v.get<std::string>();
  if (!s.empty() && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  if (s.find(',') != std::string::npos) return false;  // several values: several targets
  char* end = nullptr;
  *out = std::strtof(s.c_str(), &end);
  return end != s.c_str() && *end == '\0';
}

int64_t param_int(const nlohmann::json& obj, const char* key, int64_t dflt) {
  if (!obj.is_object() || !obj.contains(key)) return dflt;
  const auto& v = obj.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) return std::strtoll(v.get<std::string>().c_str(), nullptr, 10);
  return dflt;
}

struct Refused {
  std::string why;
};

/// One XGBoost tree in its own arrays (indices into them).
struct SrcTree {
  std::vector<int64_t> left, right, feature;
  std::vector<float> cond;
  std::vector<int64_t> dleft;
};

SrcTree read_tree(const nlohmann::json& t, size_t num_features) {
  SrcTree s;
  auto arr = [&](const char* k) -> const nlohmann::json& {
    if (!t.contains(k) || !t.at(k).is_array()) throw Refused{std::string("tree has no array '") + k + "'"};
    return t.at(k);
  };
  s.left = arr("left_children").get<std::vector<int64_t>>();
  s.right = arr("right_children").get<std::vector<int64_t>>();
  s.feature = arr("split_indices").get<std::vector<int64_t>>();
  s.dleft = arr("default_left").get<std::vector<int64_t>>();
  for (const auto& v : arr("split_conditions")) {
    // nlohmann reads a double; XGBoost wrote the shortest text that reads back as
    // its float, and the nearest float of that double is that float.
    if (!v.is_number()) throw Refused{"split_conditions holds a non-number"};
    s.cond.push_back(static_cast<float>(v.get<double>()));
  }
  const size_t n = s.left.size();
  if (n == 0 || s.right.size() != n || s.feature.size() != n || s.cond.size() != n || s.dleft.size() != n)
    throw Refused{"tree arrays differ in length"};
  if (t.contains("split_type"))
    for (const auto& v : t.at("split_type"))
      if (v.is_number() && v.get<int64_t>() != 0) throw Refused{"categorical splits are not compiled"};
  if (t.contains("categories") && t.at("categories").is_array() && !t.at("categories").empty())
    throw Refused{"categorical splits are not compiled"};
  for (size_t i = 0; i < n; ++i) {
    const bool leaf = s.left[i] == -1;
    if (leaf != (s.right[i] == -1)) throw Refused{"node with one child"};
    if (!leaf) {
      if (s.left[i] <= 0 || s.right[i] <= 0 || size_t(s.left[i]) >= n || size_t(s.right[i]) >= n)
        throw Refused{"child index out of range"};
      if (s.feature[i] < 0 || size_t(s.feature[i]) >= num_features)
        throw Refused{"split feature out of range"};
    }
  }
  return s;
}

/// Depth of the subtree at `node` (a lone leaf has depth 0); refuses cycles and
/// trees deeper than `limit`.
int depth_of(const SrcTree& s, int64_t node, int level, int limit) {
  if (level > limit) throw Refused{"tree deeper than " + std::to_string(limit) + " (or cyclic)"};
  if (s.left[node] == -1) return 0;
  return 1 +
         std::max(depth_of(s, s.left[node], level + 1, limit), depth_of(s, s.right[node], level + 1, limit));
}

}  // namespace

std::optional<TreeForest> TreeForest::compile(const std::string& text, std::string* why) {
  nlohmann::json j;
  try {
    j = parse_json_text(text, "model");  // depth-limited
  } catch (const Error&) {
    if (why) *why = "not XGBoost JSON";
    return std::nullopt;
  }
  return compile_document(j, why);
}

std::optional<TreeForest> TreeForest::compile_document(const nlohmann::json& j, std::string* why) {
  try {
    if (!j.is_object() || !j.contains("learner")) throw Refused{"not XGBoost JSON"};
    const auto& learner = j.at("learner");
    const std::string objective =
        learner.value(nlohmann::json::json_pointer("/objective/name"), std::string());
    if (objective != "reg:squarederror")
      throw Refused{"objective '" + objective + "' is not reg:squarederror"};
    const auto& mp = learner.value("learner_model_param", nlohmann::json::object());
    if (param_int(mp, "num_class", 0) > 1 || param_int(mp, "num_target", 1) > 1)
      throw Refused{"several classes or targets"};
    TreeForest f;
    const int64_t nf = param_int(mp, "num_feature", 0);
    if (nf <= 0) throw Refused{"num_feature is missing"};
    f.features_ = static_cast<size_t>(nf);
    if (!mp.contains("base_score") || !parse_param_float(mp.at("base_score"), &f.base_))
      throw Refused{"base_score is missing or not one number"};
    const auto& gb = learner.value("gradient_booster", nlohmann::json::object());
    if (gb.value("name", std::string()) != "gbtree") throw Refused{"booster is not gbtree"};
    const auto& model = gb.value("model", nlohmann::json::object());
    if (!model.contains("trees") || !model.at("trees").is_array() || model.at("trees").empty())
      throw Refused{"model has no trees"};
    if (model.contains("tree_info"))
      for (const auto& g : model.at("tree_info"))
        if (!g.is_number() || g.get<int64_t>() != 0) throw Refused{"several output groups"};
    if (param_int(model.value("gbtree_model_param", nlohmann::json::object()), "size_leaf_vector", 0) > 1)
      throw Refused{"vector leaves"};

    std::vector<SrcTree> src;
    int depth = 0;
    for (const auto& t : model.at("trees")) {
      src.push_back(read_tree(t, f.features_));
      depth = std::max(depth, depth_of(src.back(), 0, 0, kMaxDepth));
    }
    f.trees_ = src.size();
    f.depth_ = depth;
    f.inner_ = (size_t(1) << depth) - 1;
    const size_t leaves = size_t(1) << depth;
    f.node_.assign(f.trees_ * f.inner_, Node{0, std::numeric_limits<float>::infinity()});
    f.default_left_.assign(f.trees_ * f.inner_, 1);
    f.leaf_.assign(f.trees_ * leaves, 0.0f);
    for (size_t ti = 0; ti < f.trees_; ++ti) {
      const SrcTree& s = src[ti];
      // (source node, heap position, level); a leaf above the last level fills
      // every leaf slot below its position; the padding splits in between are
      // never decisive (both sides end in the same value).
      struct Item {
        int64_t node;
        size_t pos;
        int level;
      };
      std::vector<Item> stack = {{0, 0, 0}};
      while (!stack.empty()) {
        Item it = stack.back();
        stack.pop_back();
        if (s.left[it.node] == -1) {
          // leaf slots under heap position `pos` at level `level`
          const size_t span = size_t(1) << (depth - it.level);
          const size_t first = (it.pos + 1) * span - 1 - f.inner_;
          std::fill_n(f.leaf_.begin() + ti * leaves + first, span, s.cond[it.node]);
          continue;
        }
        const size_t k = ti * f.inner_ + it.pos;
        f.node_[k] = Node{static_cast<int32_t>(s.feature[it.node]), s.cond[it.node]};
        f.default_left_[k] = s.dleft[it.node] != 0;
        stack.push_back({s.left[it.node], 2 * it.pos + 1, it.level + 1});
        stack.push_back({s.right[it.node], 2 * it.pos + 2, it.level + 1});
      }
    }
    return f;
  } catch (const Refused& r) {
    if (why) *why = r.why;
  } catch (const nlohmann::json::exception& e) {
    if (why) *why = std::string("unexpected XGBoost JSON: ") + e.what();
  }
  return std::nullopt;
}

void TreeForest::predict_row_missing(const float* x, float* out) const {
  const size_t leaves = inner_ + 1;
  float acc = base_;
  for (size_t t = 0; t < trees_; ++t) {
    const size_t o = t * inner_;
    size_t i = 0;
    for (int d = 0; d < depth_; ++d) {
      const float v = x[node_[o + i].feature];
      const bool left = std::isnan(v) ? default_left_[o + i] != 0 : v < node_[o + i].threshold;
      i = 2 * i + (left ? 1 : 2);
    }
    acc += leaf_[t * leaves + (i - inner_)];
  }
  *out = acc;
}

namespace {
constexpr size_t kLanes = 8;   // rows walking one tree together (independent load chains)
constexpr size_t kBlock = 64;  // rows per block: a tree stays in L1 for the block
}  // namespace

template <int Depth>
void TreeForest::predict_fast(const float* const* xr, size_t n, float* acc) const {
  // n is a multiple of kLanes. Depth is a constant: the walk unrolls completely.
  constexpr size_t inner = (size_t(1) << Depth) - 1, leaves = size_t(1) << Depth;
  for (size_t t = 0; t < trees_; ++t) {
    const Node* nd = node_.data() + t * inner;
    const float* lv = leaf_.data() + t * leaves - inner;
    for (size_t g = 0; g < n; g += kLanes) {
      uint32_t idx[kLanes] = {};
      for (int d = 0; d < Depth; ++d)
        for (size_t k = 0; k < kLanes; ++k) {
          const Node& e = nd[idx[k]];
          idx[k] = 2 * idx[k] + 2 - static_cast<uint32_t>(xr[g + k][e.feature] < e.threshold);
        }
      for (size_t k = 0; k < kLanes; ++k) acc[g + k] += lv[idx[k]];
    }
  }
}

void TreeForest::predict(const float* x, size_t rows, float* out) const {
  // Rows with a NaN take the exact slow path (default directions); the others go
  // left iff x < threshold, which is XGBoost's rule for present values.
  const size_t nf = features_;
  size_t fast[kBlock];
  const float* xr[kBlock];
  float acc[kBlock];
  size_t r = 0;
  while (r < rows) {
    size_t n = 0;
    for (; r < rows && n < kBlock; ++r) {
      const float* row = x + r * nf;
      bool nan = false;
      for (size_t c = 0; c < nf; ++c) nan |= std::isnan(row[c]);
      if (nan) {
        predict_row_missing(row, out + r);
      } else {
        fast[n] = r;
        xr[n++] = row;
      }
    }
    if (n == 0) continue;
    const size_t padded = (n + kLanes - 1) / kLanes * kLanes;  // extra lanes repeat the last row
    for (size_t k = n; k < padded; ++k) xr[k] = xr[n - 1];
    std::fill_n(acc, padded, base_);
    switch (depth_) {
      case 0:
        predict_fast<0>(xr, padded, acc);
        break;
      case 1:
        predict_fast<1>(xr, padded, acc);
        break;
      case 2:
        predict_fast<2>(xr, padded, acc);
        break;
      case 3:
        predict_fast<3>(xr, padded, acc);
        break;
      case 4:
        predict_fast<4>(xr, padded, acc);
        break;
      case 5:
        predict_fast<5>(xr, padded, acc);
        break;
      case 6:
        predict_fast<6>(xr, padded, acc);
        break;
      case 7:
        predict_fast<7>(xr, padded, acc);
        break;
      case 8:
        predict_fast<8>(xr, padded, acc);
        break;
      case 9:
        predict_fast<9>(xr, padded, acc);
        break;
      case 10:
        predict_fast<10>(xr, padded, acc);
        break;
      case 11:
        predict_fast<11>(xr, padded, acc);
        break;
      default:
        predict_fast<12>(xr, padded, acc);
        break;
    }
    for (size_t k = 0; k < n; ++k) out[fast[k]] = acc[k];
  }
}
static_assert(TreeForest::kMaxDepth == 12, "predict() dispatches depths 0..12");

// ---- compact bytes (to_bytes / from_bytes) -------------------------------------

namespace {

constexpr uint16_t kLeafCode = 0xFFFF;     ///< a node's code: a leaf
constexpr uint16_t kDefaultLeft = 0x8000;  ///< a split's code: feature | kDefaultLeft when missing goes left
constexpr size_t kMaxCodedFeatures = 0x7FFF;  ///< features a code can name
constexpr size_t kHeaderBytes = 5 * 4;        ///< features, trees, depth, base_score, nodes

bool little_endian() {
  const uint16_t one = 1;
  uint8_t b = 0;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

uint32_t float_bits(float v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, 4);
  return u;
}

void put32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}

uint32_t get32(const char* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

bool TreeForest::padding(size_t tree, size_t pos, int level) const {
  // What compile() leaves under a leaf above the last level: splits {0, +inf} going left
  // on a missing value, and one value in every leaf slot below `pos`.
  const size_t leaves = inner_ + 1;
  const uint32_t inf = float_bits(std::numeric_limits<float>::infinity());
  const size_t span = size_t(1) << (depth_ - level);
  // The split positions under `pos`, level by level (a subtree of a heap is a heap).
  size_t first = pos, count = 1;
  for (int l = level; l < depth_; ++l, first = 2 * first + 1, count *= 2)
    for (size_t k = first; k < first + count; ++k) {
      const Node& n = node_[tree * inner_ + k];
      if (n.feature != 0 || float_bits(n.threshold) != inf || default_left_[tree * inner_ + k] != 1)
        return false;
    }
  const float* lv = leaf_.data() + tree * leaves + ((pos + 1) * span - 1 - inner_);
  const uint32_t v = float_bits(lv[0]);
  for (size_t k = 1; k < span; ++k)
    if (float_bits(lv[k]) != v) return false;
  return true;
}

std::string TreeForest::to_bytes() const {
  if (!little_endian() || features_ > kMaxCodedFeatures || trees_ == 0) return {};
  std::vector<uint16_t> codes;
  std::vector<uint32_t> values;
  const size_t leaves = inner_ + 1;
  struct Item {
    size_t pos;
    int level;
  };
  std::vector<Item> stack;
  for (size_t t = 0; t < trees_; ++t) {
    stack.assign(1, Item{0, 0});
    while (!stack.empty()) {  // pre-order: node, left subtree, right subtree
      const Item it = stack.back();
      stack.pop_back();
      if (it.level == depth_ || padding(t, it.pos, it.level)) {
        const size_t span = size_t(1) << (depth_ - it.level);
        codes.push_back(kLeafCode);
        values.push_back(float_bits(leaf_[t * leaves + (it.pos + 1) * span - 1 - inner_]));
        continue;
      }
      const size_t k = t * inner_ + it.pos;
      codes.push_back(static_cast<uint16_t>(node_[k].feature) | (default_left_[k] ? kDefaultLeft : 0));
      values.push_back(float_bits(node_[k].threshold));
      stack.push_back({2 * it.pos + 2, it.level + 1});
      stack.push_back({2 * it.pos + 1, it.level + 1});
    }
  }
  std::string out;
  out.reserve(kHeaderBytes + codes.size() * 6);
  put32(out, static_cast<uint32_t>(features_));
  put32(out, static_cast<uint32_t>(trees_));
  put32(out, static_cast<uint32_t>(depth_));
  put32(out, float_bits(base_));
  put32(out, static_cast<uint32_t>(codes.size()));
  out.append(reinterpret_cast<const char*>(codes.data()), codes.size() * 2);
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return out;
}

std::optional<TreeForest> TreeForest::from_bytes(const char* data, size_t size, std::string* why) {
  auto refuse = [&](const std::string& w) -> std::optional<TreeForest> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (!little_endian()) return refuse("big-endian host");
  if (size < kHeaderBytes) return refuse("shorter than its header");
  const uint32_t features = get32(data), trees = get32(data + 4), depth = get32(data + 8),
                 nodes = get32(data + 16);
  if (features == 0 || features > kMaxCodedFeatures) return refuse("feature count out of range");
  if (depth > static_cast<uint32_t>(kMaxDepth)) return refuse("deeper than kMaxDepth");
  // Every tree has at least one node: this bounds the arrays allocated below by the size.
  if (trees == 0 || trees > nodes) return refuse("tree count out of range");
  if (size != kHeaderBytes + size_t(nodes) * 6) return refuse("size does not match the node count");
  TreeForest f;
  f.features_ = features;
  f.trees_ = trees;
  f.depth_ = static_cast<int>(depth);
  f.inner_ = (size_t(1) << depth) - 1;
  uint32_t base = get32(data + 12);
  std::memcpy(&f.base_, &base, 4);
  const size_t leaves = size_t(1) << depth;
  // The arrays are what compile() allocates for the same trees (trees x 2^depth slots);
  // the tree_cache reads only bytes whose SHA-256 it wrote itself.
  f.node_.assign(f.trees_ * f.inner_, Node{0, std::numeric_limits<float>::infinity()});
  f.default_left_.assign(f.trees_ * f.inner_, 1);
  f.leaf_.assign(f.trees_ * leaves, 0.0f);
  const char* codes = data + kHeaderBytes;
  const char* values = codes + size_t(nodes) * 2;
  size_t next = 0;  // the next node of the stream
  struct Item {
    size_t pos;
    int level;
  };
  std::vector<Item> stack;
  for (size_t t = 0; t < f.trees_; ++t) {
    stack.assign(1, Item{0, 0});
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      if (next == nodes) return refuse("fewer nodes than the trees need");
      uint16_t code = 0;
      std::memcpy(&code, codes + next * 2, 2);
      float v = 0;
      std::memcpy(&v, values + next * 4, 4);
      ++next;
      if (code == kLeafCode) {
        const size_t span = size_t(1) << (depth - it.level);
        std::fill_n(f.leaf_.begin() + t * leaves + ((it.pos + 1) * span - 1 - f.inner_), span, v);
        continue;
      }
      if (it.level == f.depth_) return refuse("a split below the last level");
      const size_t feature = code & ~kDefaultLeft;
      if (feature >= features) return refuse("split feature out of range");
      const size_t k = t * f.inner_ + it.pos;
      f.node_[k] = Node{static_cast<int32_t>(feature), v};
      f.default_left_[k] = (code & kDefaultLeft) != 0;
      stack.push_back({2 * it.pos + 2, it.level + 1});
      stack.push_back({2 * it.pos + 1, it.level + 1});
    }
  }
  if (next != nodes) return refuse("more nodes than the trees hold");
  return f;
}

bool TreeForest::identical(const TreeForest& o) const {
  if (features_ != o.features_ || trees_ != o.trees_ || depth_ != o.depth_ || inner_ != o.inner_ ||
      float_bits(base_) != float_bits(o.base_) || node_.size() != o.node_.size() ||
      default_left_ != o.default_left_ || leaf_.size() != o.leaf_.size())
    return false;
  for (size_t i = 0; i < node_.size(); ++i)
    if (node_[i].feature != o.node_[i].feature ||
        float_bits(node_[i].threshold) != float_bits(o.node_[i].threshold))
      return false;
  for (size_t i = 0; i < leaf_.size(); ++i)
    if (float_bits(leaf_[i]) != float_bits(o.leaf_[i])) return false;
  return true;
}

}  // namespace scaledl
