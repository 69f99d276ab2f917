#pragma once
// Runs the built `scaledl` binary for end-to-end CLI tests.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace scaledl::test {

struct CliResult {
  int rc = -1;      ///< exit status (-1 if it did not exit normally)
  std::string out;  ///< stdout and stderr together
};

/// The bytes of the file `p` ("" when it cannot be read).
inline std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
/// Writes `text` to the file `p`.
inline void write(const std::string& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

/// Runs `scaledl <args>` through the shell (args are shell words).
/// `wrapper` goes before the binary (e.g. "timeout 20 ").
inline CliResult run_cli(const std::string& args, const std::string& wrapper = "") {
  const std::string cmd = wrapper + std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl " + args + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// Expects `scaledl <args>` to fail with exactly one line, starting
/// "scaledl: error: " and containing `expect`, and exit status 1.
inline void expect_one_error(const std::string& args, const std::string& expect) {
  CliResult r = run_cli(args);
  EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("scaledl: error: ", 0), 0u) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(expect), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
}

}  // namespace scaledl::test
