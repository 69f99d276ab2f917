#pragma once
// Small helpers shared by the unit tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "scaledl/error.hpp"

namespace scaledl::test {

/// Path of a fresh SQLite store in the test temp dir: the file and its WAL/SHM
/// companions from an earlier run are removed.
inline std::string fresh_store_path(const std::string& name) {
  std::string p = testing::TempDir() + "/" + name;
  for (const char* s : {"", "-wal", "-shm"}) std::remove((p + s).c_str());
  return p;
}

/// The message of the scaledl::Error that `f` throws: "<no error>" when it
/// throws nothing, "NOT A scaledl::Error: ..." for any other exception.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("NOT A scaledl::Error: ") + e.what();
  }
  return "<no error>";
}

}  // namespace scaledl::test
