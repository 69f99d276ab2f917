#include "scaledl/core/fs_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace fs = std::filesystem;

namespace scaledl {

// ---- removing a tree -----------------------------------------------------------------------------

namespace {
thread_local std::uintmax_t t_removed = 0;
thread_local int t_errno = 0;

extern "C" int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (::remove(path) != 0) {
    t_errno = errno;
    return 1;  // stop the walk: the directory above cannot go either
  }
  ++t_removed;
  return 0;
}
}  // namespace

std::uintmax_t remove_tree(const fs::path& p, std::error_code& ec) noexcept {
  ec.clear();
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno != ENOENT) ec.assign(errno, std::generic_category());
    return 0;
  }
  t_removed = 0;
  t_errno = 0;
  // FTW_DEPTH: a directory after its entries; FTW_PHYS: a symbolic link is an entry, not followed.
  const int rc = ::nftw(p.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc != 0) ec.assign(t_errno != 0 ? t_errno : errno, std::generic_category());
  return t_removed;
}

std::uintmax_t remove_tree(const fs::path& p) {
  std::error_code ec;
  const std::uintmax_t n = remove_tree(p, ec);
  SCALEDL_CHECK(!ec, "cannot remove {}: {}", p.string(), ec.message());
  return n;
}

// ---- temporary paths removed on SIGINT / SIGTERM -----------------------------------------------
//
// A handler may call only async-signal-safe functions: no malloc, no std::filesystem, no
// opendir (it allocates). The paths live in fixed buffers, and a tree is removed with the
// system calls open / getdents64 / unlinkat alone. Our temporary trees are shallow (a bundle:
// two levels), so the recursion is bounded by kMaxDepth.
namespace {

constexpr int kSlots = 16;
constexpr size_t kPathMax = 4096;
constexpr int kMaxDepth = 8;
std::array<std::array<char, kPathMax>, kSlots> g_paths{};  // "" = free slot
volatile sig_atomic_t g_installed = 0;

struct linux_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];  // NUL-terminated, d_reclen long
};

void remove_at(int parent, const char* name, int depth) {
  if (::unlinkat(parent, name, 0) == 0) return;  // a file, a link, a FIFO
  if (depth >= kMaxDepth) return;
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  // Removing entries while listing may skip some: list again until a pass finds none (bounded).
  for (int pass = 0; pass < 64; ++pass) {
    ::lseek(fd, 0, SEEK_SET);
    bool any = false;
    long n;
    while ((n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
      for (long off = 0; off < n;) {
        auto* d = reinterpret_cast<linux_dirent64*>(buf + off);
        off += d->d_reclen;
        if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
        remove_at(fd, d->d_name, depth + 1);
        any = true;
      }
    if (!any) break;
  }
  ::close(fd);
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

extern "C" void on_stop_signal(int sig) {
  for (auto& p : g_paths)
    if (p[0] != '\0') remove_at(AT_FDCWD, p.data(), 0);
  ::signal(sig, SIG_DFL);  // then die of the signal as the caller expects (exit status 128 + sig)
  ::raise(sig);
}

/// Runs `f` with SIGINT and SIGTERM blocked, so the handler never sees a half-written slot.
template <class F>
void with_stop_signals_blocked(F&& f) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &block, &old);
  f();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

void register_temp_path(const std::string& path) {
  const std::string abs = fs::absolute(path).lexically_normal().string();
  if (abs.size() + 1 > kPathMax) return;  // cannot be held: cleaned up on failure only
  with_stop_signals_blocked([&] {
    if (!g_installed) {
      struct sigaction sa {};
      sa.sa_handler = on_stop_signal;
      sigemptyset(&sa.sa_mask);
      for (int sig : {SIGINT, SIGTERM}) {
        struct sigaction prev {};
        ::sigaction(sig, nullptr, &prev);
        if (prev.sa_handler == SIG_IGN) continue;  // started with the signal ignored (nohup): keep it so
        ::sigaction(sig, &sa, nullptr);
      }
      g_installed = 1;
    }
    for (auto& p : g_paths)
      if (p[0] == '\0') {
        std::memcpy(p.data(), abs.c_str(), abs.size() + 1);
        return;
      }
  });
}

void unregister_temp_path(const std::string& path) {
  const std::string abs = fs::absolute(path).lexically_normal().string();
  with_stop_signals_blocked([&] {
    for (auto& p : g_paths)
      if (p[0] != '\0' && abs == p.data()) {
        p[0] = '\0';
        return;
      }
  });
}

// ---- paths read from a manifest ----------------------------------------------------------------

std::string file_kind(const std::string& p) {
  std::error_code ec;
  switch (fs::status(p, ec).type()) {
    case fs::file_type::not_found:
      return "missing";
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    default:
      return "not a file";
  }
}

std::string path_outside(const std::string& root, const std::string& rel, const std::string& what) {
  if (rel.empty()) return "is empty";
  for (const unsigned char c : rel)
    if (c < 0x20 || c == 0x7f) return "holds a control character";
  const fs::path p(rel);
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory()) return "is an absolute path";
  for (const fs::path& part : p)
    if (part == "..") return "has a '..' component";
  std::error_code ec, ec2;
  const fs::path base = fs::weakly_canonical(root, ec), full = fs::weakly_canonical(fs::path(root) / p, ec2);
  if (ec || ec2) return "cannot be resolved";
  // Component-wise prefix (a trailing empty component of base, from "dir/", is no component).
  auto b = base.begin(), f = full.begin();
  for (; b != base.end(); ++b, ++f) {
    if (b->empty()) continue;
    if (f == full.end() || *f != *b) return "resolves outside " + what + " (a symbolic link?)";
  }
  return "";
}

// ---- what an existing output holds --------------------------------------------------------------

std::vector<std::string> foreign_entries(const std::string& dir, const std::set<std::string>& owned) {
  std::set<std::string> dirs;  // the directories on the way to owned files
  for (const auto& f : owned)
    for (size_t p = f.find('/'); p != std::string::npos; p = f.find('/', p + 1)) dirs.insert(f.substr(0, p));
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string rel = fs::path(it->path()).lexically_relative(dir).generic_string();
    const fs::file_status st = it->symlink_status(ec);
    if (fs::is_directory(st) && dirs.count(rel)) continue;
    if (fs::is_regular_file(st) && owned.count(rel)) continue;
    out.push_back(rel);
    if (fs::is_directory(st)) it.disable_recursion_pending();
  }
  if (ec) out.push_back(fmt::format("(unreadable: {})", ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

OwnedFiles owned_by_manifest(const std::string& manifest, const std::string& format,
                             std::function<std::set<std::string>(const nlohmann::json&)> list) {
  return [manifest, format, list](const std::string& dir) {
    const fs::path p = fs::path(dir) / manifest;
    SCALEDL_CHECK(fs::is_regular_file(p), "it has no {}", manifest);
    json m;
    try {
      m = read_json_file(p.string());
    } catch (const Error&) {
      fail("its {} is not readable JSON", manifest);
    }
    SCALEDL_CHECK(m.is_object() && m.contains("format") && m["format"] == format,
                  "its {} is not of format \"{}\"", manifest, format);
    std::set<std::string> files;
    try {
      files = list(m);
    } catch (const std::exception&) {
      fail("its {} does not list its files", manifest);
    }
    for (const auto& f : files)
      SCALEDL_CHECK(!f.empty() && f[0] != '/' && fs::path(f).lexically_normal().generic_string() == f &&
                        f.rfind("..", 0) != 0,
                    "its {} lists \"{}\", which is not a file inside it", manifest, f);
    files.insert(manifest);
    return files;
  };
}

// ---- staging ----------------------------------------------------------------------------------

StagingDir::StagingDir(const std::string& out, const OwnedFiles& owned, const std::string& kind,
                       const std::string& flag) {
  SCALEDL_CHECK(!out.empty(), "{} is empty: name an output directory", flag);
  const fs::path dest = fs::absolute(out).lexically_normal();
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dest, ec);
  if (fs::exists(st)) {
    SCALEDL_CHECK(fs::is_directory(st), "{}={} exists and is not a directory", flag, out);
    if (!fs::is_empty(dest, ec)) {
      std::set<std::string> files;
      try {
        files = owned(dest.string());
      } catch (const Error& e) {
        fail("{}={} exists and is not {} ({}); it would be replaced: choose a new directory", flag, out, kind,
             e.what());
      }
      const std::vector<std::string> foreign = foreign_entries(dest.string(), files);
      SCALEDL_CHECK(
          foreign.empty(),
          "{}={} is {} but also holds {} (not written by scaledl); it would be replaced: move {} out or "
          "choose a new directory",
          flag, out, kind,
          fmt::join(foreign.begin(), foreign.begin() + std::min<size_t>(3, foreign.size()), ", "),
          foreign.size() == 1 ? "it" : "them");
    }
  }
  std::string base = dest.string();
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  out_ = base;
  tmp_ = base + ".tmp-" + std::to_string(::getpid());
  register_temp_path(tmp_);
  scaledl::remove_tree(tmp_, ec);
  fs::create_directories(tmp_, ec);
  SCALEDL_CHECK(!ec, "{}={}: cannot create the temporary directory {}: {}", flag, out, tmp_, ec.message());
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    scaledl::remove_tree(tmp_, ec);
  }
  unregister_temp_path(tmp_);
}

void StagingDir::commit() {
  std::error_code ec;
  const std::string old = out_ + ".old-" + std::to_string(::getpid());
  const bool had = fs::exists(out_, ec);
  if (had) {
    scaledl::remove_tree(old, ec);
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
  if (had) scaledl::remove_tree(old, ec);
}

// ---- an output is never an input ---------------------------------------------------------------

void check_output_is_not_input(const std::string& out, const std::string& out_flag,
                               const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (out.empty()) return;
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  for (const auto& [flag, in] : inputs) {
    if (in.empty() || !fs::exists(in, ec)) continue;
    SCALEDL_CHECK(
        !fs::equivalent(out, in, ec),
        "{}={} is also an input ({}={}, the same file); it would be overwritten: write to another file",
        out_flag, out, flag, in);
  }
}

}  // namespace scaledl
