// The layer rows of results stores (layer_predictor.hpp, load_training_data), and the folds and
// device identities cross-validation and the in-model samples share: apart from
// cross_validate.cpp, whose MLP baseline needs LibTorch (scaledl_learn_torch), so that what
// predicts (a bundle's calibration reads stores too) links none (the light `scaledl`).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "scaledl/core/error.hpp"
#include "scaledl/io/device.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

std::map<std::string, int> model_run_folds(const std::vector<LayerSample>& samples, int folds,
                                           uint64_t seed) {
  SCALEDL_CHECK(folds >= 2, "folds={} must be >= 2", folds);
  std::set<std::string> g;
  for (const auto& s : samples)
    if (!s.group.empty()) g.insert(s.group);
  std::vector<std::string> groups(g.begin(), g.end());
  SCALEDL_CHECK(groups.size() >= static_cast<size_t>(folds),
                "holdout=model-runs: folds={} exceeds the {} model runs with in-model samples", folds,
                groups.size());
  std::mt19937_64 rng(seed);
  std::shuffle(groups.begin(), groups.end(), rng);
  std::map<std::string, int> out;
  for (size_t i = 0; i < groups.size(); ++i) out[groups[i]] = static_cast<int>(i % folds);
  return out;
}

std::string device_identity(const std::string& key) {
  for (const std::string kind : {"cuda:", "spec:"})
    if (key.rfind(kind, 0) == 0) return key.substr(kind.size());
  return key;
}

TrainingData load_training_data(const std::vector<std::string>& dbs,
                                const std::vector<std::string>& device_specs, double layer_max_cv) {
  SCALEDL_CHECK(!dbs.empty(), "--db: at least one results store is needed");
  SCALEDL_CHECK(std::isfinite(layer_max_cv) && layer_max_cv >= 0 && layer_max_cv <= 10,
                "--layer-max-cv={} must be in [0, 10] (0 = ok layer rows only)", layer_max_cv);
  TrainingData d;
  for (const auto& path : dbs) {
    SCALEDL_CHECK(std::filesystem::exists(path), "--db={}: no such file", path);
    Store s(path, true);
    for (auto& dev : s.devices()) d.devices[dev.key()] = dev;
    auto rows = s.layers(std::nullopt, "", /*ok_only=*/layer_max_cv <= 0);
    if (layer_max_cv > 0) {
      // A timing not taken (n = 0) does not count against a row; one taken must be within.
      auto within = [&](const TimingStats& t) {
        return t.n == 0 || (std::isfinite(t.cv) && t.cv <= layer_max_cv);
      };
      auto usable = [&](const LayerMeasurement& m) {
        return m.status == "ok" || (m.status == "unstable" && m.fwd.n > 0 && within(m.fwd) && within(m.bwd));
      };
      rows.erase(
          std::remove_if(rows.begin(), rows.end(), [&](const LayerMeasurement& m) { return !usable(m); }),
          rows.end());
    }
    d.rows.insert(d.rows.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  for (const auto& f : device_specs) {
    DeviceRecord dev = load_device_spec(f);
    d.devices[dev.key()] = dev;
  }
  return d;
}

}  // namespace scaledl
