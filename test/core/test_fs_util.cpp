// Removing a tree with the C library (core/fs_util.hpp, remove_tree), not std::filesystem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"

using namespace scaledl;
namespace fs = std::filesystem;

namespace {
fs::path fresh(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("scaledl_fs_" + name + "_" + std::to_string(::getpid()));
  std::error_code ec;
  remove_tree(p, ec);
  return p;
}
void touch(const fs::path& p) {
  std::ofstream(p) << "x";
}
}  // namespace

TEST(RemoveTree, RemovesANestedTreeAndCountsItsEntries) {
  const fs::path root = fresh("nested");
  fs::create_directories(root / "a" / "b" / "c");
  touch(root / "f");
  touch(root / "a" / "g");
  touch(root / "a" / "b" / "c" / "h");
  std::error_code ec;
  // 4 directories (root, a, b, c) and 3 files
  EXPECT_EQ(remove_tree(root, ec), 7u);
  EXPECT_FALSE(ec);
  EXPECT_FALSE(fs::exists(root));
}

TEST(RemoveTree, AFileAndAMissingPath) {
  const fs::path f = fresh("file");
  touch(f);
  EXPECT_EQ(remove_tree(f), 1u);
  EXPECT_FALSE(fs::exists(f));
  std::error_code ec;
  EXPECT_EQ(remove_tree(f, ec), 0u);  // gone already: nothing to do, no error
  EXPECT_FALSE(ec);
}

TEST(RemoveTree, RemovesSymbolicLinksNotWhatTheyPointTo) {
  const fs::path keep = fresh("keep");
  const fs::path root = fresh("links");
  fs::create_directories(keep);
  touch(keep / "precious");
  fs::create_directories(root);
  fs::create_directory_symlink(keep, root / "to_dir");
  fs::create_symlink(keep / "precious", root / "to_file");
  fs::create_symlink(root / "nowhere", root / "dangling");
  EXPECT_EQ(remove_tree(root), 4u);
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(keep / "precious"));
  remove_tree(keep);
}

TEST(RemoveTree, AnEntryThatCannotGoIsAnErrorNamingThePath) {
  // A file of /proc: no one, root included, can unlink it.
  const fs::path p = "/proc/self/comm";
  if (!fs::exists(p)) GTEST_SKIP() << "no /proc";
  std::error_code ec;
  EXPECT_EQ(remove_tree(p, ec), 0u);
  EXPECT_TRUE(ec);
  try {
    remove_tree(p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot remove /proc/self/comm"), std::string::npos) << e.what();
  }
}
