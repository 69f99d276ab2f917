#include "scaledl/fs_util.hpp"

#include <unistd.h>

#include <filesystem>

#include <fmt/ranges.h>

#include "scaledl/error.hpp"

namespace fs = std::filesystem;

namespace scaledl {

StagingDir::StagingDir(const std::string& out, const std::vector<std::string>& marker_files, const std::string& kind,
                       const std::string& flag) {
  SCALEDL_CHECK(!out.empty(), "{} is empty: name an output directory", flag);
  const fs::path dest = fs::absolute(out).lexically_normal();
  std::error_code ec;
  if (fs::exists(dest, ec)) {
    SCALEDL_CHECK(fs::is_directory(dest, ec), "{}={} exists and is not a directory", flag, out);
    bool ours = fs::is_empty(dest, ec);
    for (const auto& m : marker_files) ours = ours || fs::exists(dest / m, ec);
    SCALEDL_CHECK(ours,
                  "{}={} exists and is not {} (it holds none of {}); it would be replaced: choose a new directory",
                  flag, out, kind, fmt::join(marker_files, ", "));
  }
  std::string base = dest.string();
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  out_ = base;
  tmp_ = base + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp_, ec);
  fs::create_directories(tmp_, ec);
  SCALEDL_CHECK(!ec, "{}={}: cannot create the temporary directory {}: {}", flag, out, tmp_, ec.message());
}

StagingDir::~StagingDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void StagingDir::commit() {
  std::error_code ec;
  const std::string old = out_ + ".old-" + std::to_string(::getpid());
  const bool had = fs::exists(out_, ec);
  if (had) {
    fs::remove_all(old, ec);
    fs::rename(out_, old, ec);
    SCALEDL_CHECK(!ec, "{}: cannot move the previous output aside to {}: {}", out_, old, ec.message());
  }
  fs::rename(tmp_, out_, ec);
  if (ec) {
    std::error_code ec2;
    if (had) fs::rename(old, out_, ec2);  // put the previous output back
    fail("{}: cannot move {} into place: {}", out_, tmp_, ec.message());
  }
  committed_ = true;
  if (had) fs::remove_all(old, ec);
}

}  // namespace scaledl
