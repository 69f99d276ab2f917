// Running a tool built beside this binary (sibling.hpp).
#include "sibling.hpp"

#include <unistd.h>

#include <cerrno>
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

void exec_sibling(const std::string& tool, std::vector<std::string> args) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  SCALEDL_CHECK(!ec, "cannot find this program's path (/proc/self/exe): {}", ec.message());
  const std::string path = (self.parent_path() / tool).string();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  fail("cannot run {}: {} (it is built with scaledl: cmake --build BUILD --target {})", path,
       std::strerror(errno), tool);
}

}  // namespace scaledl::cli
