// Running a tool built beside this binary (sibling.hpp).
#include "sibling.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "scaledl/core/error.hpp"

namespace scaledl::cli {

std::vector<std::string> this_process_args() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  SCALEDL_CHECK(!args.empty(), "cannot read this program's arguments (/proc/self/cmdline)");
  return args;
}

namespace {

/// `tool` in this binary's directory.
std::string sibling_path(const std::string& tool) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  SCALEDL_CHECK(!ec, "cannot find this program's path (/proc/self/exe): {}", ec.message());
  return (self.parent_path() / tool).string();
}

/// execv's argument vector over `args` (which must outlive it).
std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

void exec_sibling(const std::string& tool, std::vector<std::string> args) {
  const std::string path = sibling_path(tool);
  std::vector<char*> argv = argv_of(args);
  ::execv(path.c_str(), argv.data());
  fail("cannot run {}: {} (it is built with scaledl: cmake --build BUILD --target {})", path,
       std::strerror(errno), tool);
}

std::string run_sibling(const std::string& tool, std::vector<std::string> args) {
  const std::string path = sibling_path(tool);
  int out[2];
  SCALEDL_CHECK(::pipe(out) == 0, "cannot run {}: pipe: {}", path, std::strerror(errno));
  std::vector<char*> argv = argv_of(args);
  const pid_t pid = ::fork();
  SCALEDL_CHECK(pid >= 0, "cannot run {}: fork: {}", path, std::strerror(errno));
  if (pid == 0) {  // the child: stdout into the pipe
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execv(path.c_str(), argv.data());
    // exec_sibling's words, without an allocation in the forked child
    std::fprintf(
        stderr,
        "scaledl: error: cannot run %s: %s (it is built with scaledl: cmake --build BUILD --target %s)\n",
        path.c_str(), std::strerror(errno), tool.c_str());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  SCALEDL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "{} {} failed (exit {}; its error is above)",
                tool, args.size() > 1 ? args[1] : std::string(),
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return text;
}

}  // namespace scaledl::cli
