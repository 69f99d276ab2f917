#pragma once
// Helpers of the learn-stage tests (test_learn.cpp, test_neusight_traces.cpp, test_tree_cache.cpp).
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "scaledl/core/fs_util.hpp"

namespace scaledl::test {

/// A fresh, empty directory <tmp>/scaledl_learn_<name>_<pid>.
inline std::filesystem::path temp_dir(const std::string& name) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("scaledl_learn_" + name + "_" + std::to_string(::getpid()));
  scaledl::remove_tree(p);
  std::filesystem::create_directories(p);
  return p;
}

/// Writes `text` to `p`, creating its parent directories.
inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

/// `n` rows of three features in [-2, 2) (row-major in `x`) and y = 3a - b^2 + sign(c), seeded;
/// 10 % of a and of c are NaN, so that trees learn default directions on both sides.
inline void three_feature_rows(uint64_t seed, int n, std::vector<float>& x, std::vector<float>& y) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  for (int i = 0; i < n; ++i) {
    float a = u(rng), b = u(rng), c = u(rng);
    y.push_back(3 * a - b * b + (c > 0 ? 1.f : -1.f));
    if (i % 10 == 3) a = NAN;
    if (i % 10 == 7) c = NAN;
    x.insert(x.end(), {a, b, c});
  }
}

}  // namespace scaledl::test
