#pragma once
// Small helpers shared by the unit tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace scaledl::test {

/// Path of a fresh SQLite store in the test temp dir: the file and its WAL/SHM
/// companions from an earlier run are removed.
inline std::string fresh_store_path(const std::string& name) {
  std::string p = testing::TempDir() + "/" + name;
  for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  return p;
}

}  // namespace scaledl::test
