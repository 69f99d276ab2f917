// The cache of compiled layer models (see tree_cache.hpp).
#include "learn/tree_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/checksum.hpp"

namespace scaledl::tree_cache {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'S', 'D', 'L', 'T', 'R', 'E', 'E', 'S'};
constexpr size_t kShaHex = 64;
/// magic, version (u32), the model file's SHA-256, the payload's SHA-256 (hex), payload bytes (u64)
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 2 * kShaHex + 8;
/// An entry larger than this is no entry (the default bundle's largest is ~190 KB).
constexpr uint64_t kMaxEntryBytes = uint64_t(1) << 30;

/// Entries kept: past this many files in the folder, a write removes the oldest written
/// down to kKeptAfterPruning (a bundle has ~20 models; tests and fuzzers load thousands).
constexpr size_t kMaxEntries = 256, kKeptAfterPruning = 192;

/// Removes the oldest files of `dir` when it holds more than kMaxEntries. Best effort.
void prune(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2) || e2) continue;
    const fs::file_time_type t = it->last_write_time(e2);
    if (!e2) files.emplace_back(t, it->path());
  }
  if (files.size() <= kMaxEntries) return;
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + kKeptAfterPruning < files.size(); ++i) fs::remove(files[i].second, ec);
}

bool is_sha_hex(const std::string& s) {
  if (s.size() != kShaHex) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string directory() {
  if (const char* d = std::getenv("SCALEDL_CACHE_DIR")) return *d ? (fs::path(d) / "trees").string() : "";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/')  // relative: ignored (XDG spec)
    return (fs::path(x) / "scaledl" / "trees").string();
  if (const char* h = std::getenv("HOME"); h && *h)
    return (fs::path(h) / ".cache" / "scaledl" / "trees").string();
  return "";
}

std::string entry_path(const std::string& model_sha256) {
  const std::string dir = directory();
  if (dir.empty() || !is_sha_hex(model_sha256)) return "";
  return (fs::path(dir) / (model_sha256 + ".v" + std::to_string(kFormatVersion) + ".trees")).string();
}

std::string encode(const TreeForest& forest, const std::string& model_sha256) {
  if (!is_sha_hex(model_sha256)) return "";
  const std::string payload = forest.to_bytes();
  if (payload.empty()) return "";
  std::string out(kMagic, sizeof(kMagic));
  const uint32_t version = kFormatVersion;
  out.append(reinterpret_cast<const char*>(&version), 4);
  out += model_sha256;
  out += sha256_hex(payload);
  const uint64_t n = payload.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += payload;
  return out;
}

std::optional<TreeForest> decode(const std::string& bytes, const std::string& model_sha256,
                                 std::string* why) {
  auto refuse = [&](const std::string& w) -> std::optional<TreeForest> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return refuse("not a tree cache entry (truncated or another file)");
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != static_cast<uint32_t>(kFormatVersion))
    return refuse("entry of format version " + std::to_string(version));
  if (bytes.compare(12, kShaHex, model_sha256) != 0)
    return refuse("stale: the entry is of another model file");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data() + 12 + 2 * kShaHex, 8);
  if (n != bytes.size() - kHeaderBytes) return refuse("truncated or padded: the payload's size differs");
  const std::string payload = bytes.substr(kHeaderBytes);
  if (bytes.compare(12 + kShaHex, kShaHex, sha256_hex(payload)) != 0)
    return refuse("damaged: the payload's SHA-256 differs");
  std::string w;
  std::optional<TreeForest> f = TreeForest::from_bytes(payload.data(), payload.size(), &w);
  if (!f) return refuse("refused: " + w);
  return f;
}

std::optional<TreeForest> read(const std::string& model_sha256, std::string* why) {
  const std::string path = entry_path(model_sha256);
  if (path.empty()) {
    if (why) *why = "cache off";
    return std::nullopt;
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::is_regular_file(st)) {
    if (why) *why = "no entry";
    return std::nullopt;
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxEntryBytes) {
    if (why) *why = "unreadable or too large";
    return std::nullopt;
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())) || in.peek() != EOF) {
    if (why) *why = "unreadable, or its size changed while read";
    return std::nullopt;
  }
  return decode(bytes, model_sha256, why);
}

bool write(const TreeForest& forest, const std::string& model_sha256) noexcept {
  std::string tmp;
  try {
    const std::string path = entry_path(model_sha256);
    if (path.empty()) return false;
    const std::string bytes = encode(forest, model_sha256);
    if (bytes.empty()) return false;
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) return false;
    // A name no other writer (process or thread) uses; rename() makes the entry whole at once.
    static std::atomic<uint64_t> counter{0};
    tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
          std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + "-" +
          std::to_string(counter++);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) throw std::runtime_error("write failed");
    }
    fs::rename(tmp, path, ec);
    if (ec) throw std::runtime_error("rename failed");
    prune(fs::path(path).parent_path());
    return true;
  } catch (...) {
    if (!tmp.empty()) {
      std::error_code ec;
      fs::remove(tmp, ec);
    }
    return false;
  }
}

}  // namespace scaledl::tree_cache
