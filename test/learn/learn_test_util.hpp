#pragma once
// Helpers of the learn-stage tests (test_learn.cpp, test_neusight_traces.cpp).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace scaledl::test {

/// A fresh, empty directory <tmp>/scaledl_learn_<name>_<pid>.
inline std::filesystem::path temp_dir(const std::string& name) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("scaledl_learn_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

/// Writes `text` to `p`, creating its parent directories.
inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace scaledl::test
