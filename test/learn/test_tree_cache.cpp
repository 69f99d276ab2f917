// Tests of the cache of compiled layer models (learn/tree_cache.hpp): the compact bytes
// of TreeForest round-trip bit for bit, a loaded predictor gives the same predictions
// from the cache as from the JSON, and a damaged or stale entry is never used.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checksum.hpp"
#include "learn/tree_cache.hpp"
#include "learn/tree_forest.hpp"
#include "learn/xgb.hpp"
#include "learn_test_util.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/layer_predictor.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace scaledl;

namespace {

using scaledl::test::spec_gpu;
using scaledl::test::temp_dir;
using scaledl::test::write_file;

/// Every test of this binary (test_learn) caches into a folder of its own, removed at the
/// end, never into the user's ~/.cache; the tests below point SCALEDL_CACHE_DIR elsewhere
/// while they run (CacheDir).
class IsolatedCache : public ::testing::Environment {
 public:
  void SetUp() override {
    dir_ = temp_dir("tree_cache_env");
    ::setenv("SCALEDL_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    std::error_code ec;
    scaledl::remove_tree(dir_, ec);
  }

 private:
  fs::path dir_;
};
[[maybe_unused]] ::testing::Environment* const kIsolatedCache =
    ::testing::AddGlobalTestEnvironment(new IsolatedCache);

/// SCALEDL_CACHE_DIR = `dir` ("" = cache off) while in scope.
class CacheDir {
 public:
  explicit CacheDir(const std::string& dir) {
    if (const char* v = std::getenv("SCALEDL_CACHE_DIR")) old_ = v;
    ::setenv("SCALEDL_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDir() {
    if (old_)
      ::setenv("SCALEDL_CACHE_DIR", old_->c_str(), 1);
    else
      ::unsetenv("SCALEDL_CACHE_DIR");
  }

 private:
  std::optional<std::string> old_;
};

std::string slurp(const fs::path& p) {
  return read_text_file(p.string());
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Float bits, so that -0 != 0 and NaN == NaN of the same payload.
uint32_t bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

/// Boosters of several depths (with missing values, so default sides go both ways) and
/// one random forest, on three features.
std::vector<std::string> model_jsons(std::vector<float>* rows) {
  std::vector<float> x, y;
  scaledl::test::three_feature_rows(11, 1500, x, y);
  xgb::DMatrix dm(x.data(), 1500, 3, y);
  std::vector<std::string> out;
  for (const char* depth : {"1", "3", "8"}) {
    xgb::Booster b;
    b.set_params({{"max_depth", depth}, {"eta", "0.3"}, {"objective", "reg:squarederror"}, {"nthread", "1"}});
    b.train(dm, 25);
    out.push_back(b.to_json_string());
  }
  xgb::Booster rf;
  rf.set_params({{"num_parallel_tree", "8"},
                 {"subsample", "0.632"},
                 {"colsample_bynode", "0.6"},
                 {"eta", "1"},
                 {"max_depth", "6"},
                 {"objective", "reg:squarederror"},
                 {"nthread", "1"}});
  rf.train(dm, 1);
  out.push_back(rf.to_json_string());
  std::mt19937_64 rng(12);  // rows the models never saw, some with a missing feature
  std::uniform_real_distribution<float> u(-2, 2);
  for (int i = 0; i < 777; ++i) rows->insert(rows->end(), {u(rng), i % 7 == 0 ? NAN : u(rng), u(rng)});
  rows->insert(rows->end(), x.begin(), x.end());
  return out;
}

/// Layer rows of one GPU (linear and layernorm, forward and backward), physically shaped.
std::vector<LayerMeasurement> rows_of(const DeviceRecord& d, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> tok(1, 64), dd(1, 32);
  std::normal_distribution<double> noise(0, 0.03);
  std::vector<LayerMeasurement> rows;
  for (int i = 0; i < n; ++i) {
    LayerMeasurement m;
    m.campaign = "t";
    m.device = d.key();
    m.source = "test";
    if (i % 2 == 0) {
      m.type = LayerType::Linear;
      m.dims = {tok(rng) * 32, dd(rng) * 64, dd(rng) * 64, 1};
    } else {
      m.type = LayerType::LayerNorm;
      m.dims = {tok(rng) * 64, dd(rng) * 64};
    }
    m.fwd.median_ms =
        (0.01 + roofline_ms(m.type, m.dims, m.dtype, Direction::Forward, d)) * std::exp(noise(rng));
    m.bwd.median_ms =
        (0.012 + roofline_ms(m.type, m.dims, m.dtype, Direction::Backward, d)) * std::exp(noise(rng));
    rows.push_back(m);
  }
  return rows;
}

/// A small trained layer-model folder in `dir` (seed: a different model per seed).
void train_into(const fs::path& dir, const DeviceRecord& dev, uint64_t seed) {
  TrainOptions o;
  o.rounds = 30;
  o.max_depth = 6;
  o.min_rows = 4;
  o.nthread = 1;
  o.seed = seed;
  LayerPredictor::train(rows_of(dev, 120, seed), {{dev.key(), dev}}, o).save(dir.string());
}

/// predict_batch of linear and layernorm rows in both directions, concatenated.
std::vector<double> predictions(const LayerPredictor& p, const DeviceRecord& dev) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> d(1, 64);
  const size_t n = 700;
  std::vector<int64_t> lin, ln;
  for (size_t i = 0; i < n; ++i) {
    lin.insert(lin.end(), {d(rng) * 16, d(rng) * 32, d(rng) * 32, int64_t(i % 2)});
    ln.insert(ln.end(), {d(rng) * 64, d(rng) * 64});
  }
  std::vector<double> out;
  for (Direction dir : {Direction::Forward, Direction::Backward}) {
    std::vector<double> a(n), b(n);
    p.predict_batch(LayerType::Linear, lin.data(), n, DType::FP32, dir, dev, a.data());
    p.predict_batch(LayerType::LayerNorm, ln.data(), n, DType::FP32, dir, dev, b.data());
    out.insert(out.end(), a.begin(), a.end());
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

/// The SHA-256 the manifest of `dir` records for `model`'s file.
std::string model_sha(const fs::path& dir, const std::string& model) {
  return nlohmann::json::parse(slurp(dir / "manifest.json"))["models"][model]["sha256"].get<std::string>();
}

/// Expects equal doubles, bit for bit.
void expect_same(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0) << "row " << i;
}

template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace

// ---- the bytes ---------------------------------------------------------------------

TEST(TreeCache, ForestBytesRoundTripBitForBit) {
  std::vector<float> rows;
  for (const std::string& json : model_jsons(&rows)) {
    const std::optional<TreeForest> f = TreeForest::compile(json);
    ASSERT_TRUE(f.has_value());
    const std::string bytes = f->to_bytes();
    ASSERT_FALSE(bytes.empty());
    std::string why;
    const std::optional<TreeForest> g = TreeForest::from_bytes(bytes.data(), bytes.size(), &why);
    ASSERT_TRUE(g.has_value()) << why;
    EXPECT_TRUE(f->identical(*g)) << "depth " << f->depth();
    EXPECT_EQ(g->to_bytes(), bytes);
    // Pre-order without the heap layout's padding: at most the source's nodes, 6 bytes each.
    const auto j = nlohmann::json::parse(json);
    size_t nodes = 0;
    for (const auto& t : j["learner"]["gradient_booster"]["model"]["trees"])
      nodes += t["left_children"].size();
    EXPECT_LE(bytes.size(), 20 + 6 * nodes);
    const size_t n = rows.size() / 3;
    std::vector<float> a(n), b(n);
    f->predict(rows.data(), n, a.data());
    g->predict(rows.data(), n, b.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(bits(a[i]), bits(b[i])) << "row " << i;
    // The entry of a cache file: header + the same bytes, keyed to the JSON's SHA-256.
    const std::string sha = sha256_hex(json);
    const std::string entry = tree_cache::encode(*f, sha);
    ASSERT_EQ(entry.size(), bytes.size() + 148);
    const std::optional<TreeForest> h = tree_cache::decode(entry, sha, &why);
    ASSERT_TRUE(h.has_value()) << why;
    EXPECT_TRUE(f->identical(*h));
  }
}

TEST(TreeCache, DamagedOrForeignEntriesAreRefused) {
  std::vector<float> rows;
  const std::string json = model_jsons(&rows)[2];
  const TreeForest f = *TreeForest::compile(json);
  const std::string sha = sha256_hex(json), entry = tree_cache::encode(f, sha);
  std::string why;
  // Every truncation, and one flipped bit at many places (header and payload).
  for (size_t len = 0; len < entry.size(); len += 1 + len / 7) {
    EXPECT_FALSE(tree_cache::decode(entry.substr(0, len), sha, &why)) << "length " << len;
  }
  for (size_t at = 0; at < entry.size(); at += 1 + at / 11) {
    std::string bad = entry;
    bad[at] = static_cast<char>(bad[at] ^ (1 << (at % 8)));
    EXPECT_FALSE(tree_cache::decode(bad, sha, &why)) << "byte " << at;
  }
  EXPECT_FALSE(tree_cache::decode(entry + "x", sha, &why));
  EXPECT_NE(why.find("size"), std::string::npos) << why;
  // Another model's entry (a stale one): the key differs.
  EXPECT_FALSE(tree_cache::decode(entry, sha256_hex(json + " "), &why));
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
  // The bytes alone (no checksum): damaged nodes are refused or give a forest of the same
  // shape, never a read out of bounds; damaged counts are refused.
  const std::string bytes = f.to_bytes();
  std::mt19937_64 rng(1);
  for (int k = 0; k < 2000; ++k) {
    std::string bad = bytes;
    const size_t at = 20 + rng() % (bad.size() - 20);
    bad[at] = static_cast<char>(rng());
    const std::optional<TreeForest> g = TreeForest::from_bytes(bad.data(), bad.size(), &why);
    if (g) EXPECT_EQ(g->num_trees(), f.num_trees());
  }
  auto with_u32 = [&](size_t at, uint32_t v) {
    std::string b = bytes;
    std::memcpy(b.data() + at, &v, 4);
    return b;
  };
  for (const auto& [at, v] : std::vector<std::pair<size_t, uint32_t>>{
           {0, 0}, {0, 0x8000}, {4, 0}, {4, 1u << 30}, {8, 13}, {16, 0}, {16, 1u << 31}}) {
    const std::string b = with_u32(at, v);
    EXPECT_FALSE(TreeForest::from_bytes(b.data(), b.size(), &why)) << "field at " << at << " = " << v;
  }
  EXPECT_FALSE(TreeForest::from_bytes(bytes.data(), 19, &why));
  // A split at the last level (a leaf turned into a split) is refused.
  std::string deep = bytes;
  const uint32_t nodes = static_cast<uint32_t>((bytes.size() - 20) / 6);
  bool changed = false;
  for (uint32_t i = nodes; i-- > 0 && !changed;) {
    uint16_t code;
    std::memcpy(&code, deep.data() + 20 + 2 * i, 2);
    if (code == 0xFFFF) {
      code = 0;
      std::memcpy(deep.data() + 20 + 2 * i, &code, 2);
      changed = true;
    }
  }
  ASSERT_TRUE(changed);
  EXPECT_FALSE(TreeForest::from_bytes(deep.data(), deep.size(), &why));
}

// ---- LayerPredictor::load ----------------------------------------------------------

TEST(TreeCache, LoadWritesTheCacheAndPredictsIdenticallyFromIt) {
  const DeviceRecord dev = spec_gpu("A", 9000, 400);
  const fs::path dir = temp_dir("tc_models"), cache = temp_dir("tc_cache"), again = temp_dir("tc_again");
  train_into(dir, dev, 1);
  const std::string sha = model_sha(dir, "linear");
  std::vector<double> json_path, cold, warm;
  {
    CacheDir off("");
    EXPECT_EQ(tree_cache::directory(), "");
    json_path = predictions(LayerPredictor::load(dir.string()), dev);
  }
  CacheDir on(cache.string());
  ASSERT_FALSE(fs::exists(tree_cache::entry_path(sha)));
  cold = predictions(LayerPredictor::load(dir.string()), dev);  // parses the JSON, writes the entries
  ASSERT_TRUE(fs::is_regular_file(tree_cache::entry_path(sha)));
  ASSERT_TRUE(tree_cache::read(sha).has_value());
  EXPECT_LT(fs::file_size(tree_cache::entry_path(sha)), fs::file_size(dir / "linear.json") / 4);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(cache / "trees"))
    EXPECT_EQ(e.path().extension(), ".trees") << e.path();
  // A load that reads no JSON: the entry's trees.
  const fs::file_time_type written = fs::last_write_time(tree_cache::entry_path(sha));
  LayerPredictor q = LayerPredictor::load(dir.string());
  EXPECT_EQ(fs::last_write_time(tree_cache::entry_path(sha)), written);  // read, not rewritten
  EXPECT_EQ(q.summary()["models"]["linear"]["predictor"], "compiled trees");
  warm = predictions(q, dev);
  expect_same(cold, json_path);
  expect_same(warm, json_path);
  // XGBoost's own predictor and save() still work: the JSON is read when they need it.
  q.set_compiled_trees(false);
  const std::vector<double> xgboost = predictions(q, dev);
  for (size_t i = 0; i < xgboost.size(); ++i) ASSERT_NEAR(xgboost[i], warm[i], 1e-4 * warm[i]) << "row " << i;
  q.save(again.string());
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(slurp(e.path()), slurp(again / e.path().filename())) << e.path().filename();
}

TEST(TreeCache, DamagedEntryIsIgnoredAndRewritten) {
  const DeviceRecord dev = spec_gpu("A", 9000, 400);
  const fs::path dir = temp_dir("tc_dmg_models"), cache = temp_dir("tc_dmg_cache");
  train_into(dir, dev, 2);
  std::vector<double> want;
  {
    CacheDir off("");
    want = predictions(LayerPredictor::load(dir.string()), dev);
  }
  CacheDir on(cache.string());
  LayerPredictor::load(dir.string());
  const std::string entry = tree_cache::entry_path(model_sha(dir, "linear"));
  const std::string good = slurp(entry);
  const std::vector<std::string> damaged = {
      good.substr(0, good.size() - 3),  // truncated
      good.substr(0, 100),              // a header only
      "",                               // empty
      std::string(good.size(), '\0'),   // zeros
      [&] {
        std::string b = good;
        b[good.size() / 2] ^= 0x10;
        return b;
      }(),  // one bit of a threshold
      [&] {
        std::string b = good;
        b[9] ^= 0x01;
        return b;
      }(),  // the version
  };
  for (size_t k = 0; k < damaged.size(); ++k) {
    spit(entry, damaged[k]);
    ASSERT_FALSE(tree_cache::read(model_sha(dir, "linear")).has_value()) << "case " << k;
    const LayerPredictor p = LayerPredictor::load(dir.string());  // no error: the JSON serves
    expect_same(predictions(p, dev), want);
    EXPECT_EQ(slurp(entry), good) << "case " << k << ": the entry was not rewritten";
  }
  // A folder where the entry should be: ignored, and nothing can be written there.
  fs::remove(entry);
  fs::create_directories(entry);
  expect_same(predictions(LayerPredictor::load(dir.string()), dev), want);
  EXPECT_TRUE(fs::is_directory(entry));
}

TEST(TreeCache, StaleEntryIsNeverUsed) {
  // The JSON changes after its entry was written: a retrained model in the same folder has
  // another SHA-256, so another entry; an entry copied onto the new key is stale (its header
  // names the old file) and is ignored.
  const DeviceRecord dev = spec_gpu("A", 9000, 400);
  const fs::path dir = temp_dir("tc_stale_models"), cache = temp_dir("tc_stale_cache");
  CacheDir on(cache.string());
  train_into(dir, dev, 3);
  LayerPredictor::load(dir.string());  // writes the entries of the first model
  const std::string old_sha = model_sha(dir, "linear");
  const std::string old_entry = slurp(tree_cache::entry_path(old_sha));
  train_into(dir, dev, 4);  // another model, same file names
  const std::string new_sha = model_sha(dir, "linear");
  ASSERT_NE(new_sha, old_sha);
  std::vector<double> want;
  {
    CacheDir off("");
    want = predictions(LayerPredictor::load(dir.string()), dev);
  }
  expect_same(predictions(LayerPredictor::load(dir.string()), dev), want);  // its own entry, now written
  spit(tree_cache::entry_path(new_sha), old_entry);                         // the old trees under the new key
  std::string why;
  EXPECT_FALSE(tree_cache::read(new_sha, &why).has_value());
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
  expect_same(predictions(LayerPredictor::load(dir.string()), dev), want);
  EXPECT_TRUE(tree_cache::read(new_sha).has_value());  // rewritten from the JSON
}

TEST(TreeCache, ModelFileChecksStayWithAValidEntry) {
  // The entry is keyed to the SHA-256 that the manifest records and that the file must have:
  // a truncated or altered file is refused, naming it, even though its entry is intact.
  const DeviceRecord dev = spec_gpu("A", 9000, 400);
  const fs::path dir = temp_dir("tc_checks_models"), cache = temp_dir("tc_checks_cache");
  CacheDir on(cache.string());
  train_into(dir, dev, 5);
  LayerPredictor::load(dir.string());
  ASSERT_TRUE(tree_cache::read(model_sha(dir, "linear")).has_value());
  const fs::path lin = dir / "linear.json";
  const std::string text = slurp(lin);
  spit(lin, text.substr(0, text.size() - 10));
  expect_error([&] { LayerPredictor::load(dir.string()); }, "linear.json: ");
  std::string edited = text;
  const size_t at = edited.find("\"base_score\":\"");
  ASSERT_NE(at, std::string::npos);
  edited[at + 14] = edited[at + 14] == '9' ? '8' : static_cast<char>(edited[at + 14] + 1);
  spit(lin, edited);
  expect_error([&] { LayerPredictor::load(dir.string()); }, "linear.json: SHA-256 differs");
  // Altered after a load from the cache: XGBoost, when it needs the file, refuses it.
  spit(lin, text);
  LayerPredictor q = LayerPredictor::load(dir.string());
  spit(lin, edited);
  q.set_compiled_trees(false);
  expect_error([&] { predictions(q, dev); }, "altered since");
}

TEST(TreeCache, UnwritableCacheStillLoads) {
  // A read-only install or home: loading never needs to write.
  const DeviceRecord dev = spec_gpu("A", 9000, 400);
  const fs::path dir = temp_dir("tc_ro_models"), base = temp_dir("tc_ro");
  train_into(dir, dev, 6);
  write_file(base / "file", "not a folder");
  std::vector<double> want;
  {
    CacheDir off("");
    want = predictions(LayerPredictor::load(dir.string()), dev);
  }
  CacheDir blocked((base / "file").string());  // its "trees" folder cannot be created
  EXPECT_FALSE(tree_cache::write(*TreeForest::compile(slurp(dir / "linear.json")), model_sha(dir, "linear")));
  expect_same(predictions(LayerPredictor::load(dir.string()), dev), want);
  expect_same(predictions(LayerPredictor::load(dir.string()), dev), want);
}

TEST(TreeCache, FolderIsPrunedToTheNewestEntries) {
  // Tests and fuzzers load thousands of models: the folder keeps the newest ~200 entries.
  const fs::path cache = temp_dir("tc_prune");
  CacheDir on(cache.string());
  std::vector<float> rows;
  const TreeForest f = *TreeForest::compile(model_jsons(&rows)[0]);
  std::string last;
  for (int i = 0; i < 300; ++i) {
    last = sha256_hex(std::to_string(i));
    ASSERT_TRUE(tree_cache::write(f, last)) << i;
  }
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(cache / "trees")) n += e.is_regular_file();
  EXPECT_LE(n, 256u);
  EXPECT_GE(n, 192u);
  EXPECT_TRUE(tree_cache::read(last).has_value());
}
