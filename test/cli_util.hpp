#pragma once
// Runs the built `scaledl` binary for end-to-end CLI tests.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace scaledl::test {

struct CliResult {
  int rc = -1;      ///< exit status (-1 if it did not exit normally)
  std::string out;  ///< stdout and stderr together
};

/// Runs `scaledl <args>` through the shell (args are shell words).
inline CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl " + args + " 2>&1";
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

}  // namespace scaledl::test
