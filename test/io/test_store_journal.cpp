// Issue #39 case 20: a store is read on a read-only filesystem. A writer leaves
// WAL mode when it closes (the file is then the whole store), and a store left
// in WAL mode (by an older build, or a writer killed before closing) is opened
// with immutable=1 where its -wal/-shm files cannot be created.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sched.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl;
namespace fs = std::filesystem;

namespace {

CollectiveMeasurement row(double bytes) {
  CollectiveMeasurement m;
  m.campaign = "c";
  m.collective = "allreduce";
  m.backend = "nccl-tests";
  m.world = 4;
  m.bytes = bytes;
  m.time_s = 1e-5 + bytes / 1e11;
  m.busbw_gbs = 1.5 * bytes / m.time_s / 1e9;
  m.source = "test";
  return m;
}

/// Bytes 18 and 19 of the SQLite header: 1 = rollback journal, 2 = WAL.
std::array<int, 2> header_versions(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(18);
  std::array<int, 2> v{f.get(), f.get()};
  return v;
}

std::string pragma(const std::string& path, const char* q) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string out;
  sqlite3_exec(
      db, q,
      [](void* o, int n, char** v, char**) {
        *static_cast<std::string*>(o) = n > 0 && v[0] ? v[0] : "";
        return 0;
      },
      &out, nullptr);
  sqlite3_close(db);
  return out;
}

std::string fresh_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "/" + name + "_" + std::to_string(getpid());
  scaledl::remove_tree(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(StoreJournal, AWriterLeavesWalModeWhenItCloses) {
  const std::string dir = fresh_dir("store_journal");
  const std::string db = dir + "/s.sqlite";
  {
    Store s(db);
    s.put_collectives({row(1e6), row(2e6)});
    EXPECT_EQ(header_versions(db), (std::array<int, 2>{2, 2}));  // WAL while open
  }
  EXPECT_EQ(header_versions(db), (std::array<int, 2>{1, 1}));
  EXPECT_EQ(pragma(db, "PRAGMA journal_mode"), "delete");
  EXPECT_FALSE(fs::exists(db + "-wal"));
  EXPECT_FALSE(fs::exists(db + "-shm"));
  // Reopened for writing: WAL again while open, rollback journal again when closed.
  {
    Store w(db);
    w.put_collectives({row(4e6)});
  }
  EXPECT_EQ(header_versions(db), (std::array<int, 2>{1, 1}));
  EXPECT_EQ(Store(db, true).collectives().size(), 3u);
  scaledl::remove_tree(dir);
}

// A real read-only mount: a private mount namespace (root, or a user namespace)
// in a child process, the store's directory bind-mounted read-only there. Where
// namespaces are not allowed (a container without CAP_SYS_ADMIN) it is skipped.
TEST(StoreJournal, AStoreInWalModeIsReadOnAReadOnlyMount) {
  const std::string dir = fresh_dir("store_ro");
  const std::string db = dir + "/wal.sqlite";
  { Store(db).put_collectives({row(1e6), row(2e6), row(4e6)}); }
  // Leave it in WAL mode, as stores were before this fix (and as a killed writer leaves them).
  EXPECT_EQ(pragma(db, "PRAGMA journal_mode=WAL"), "wal");
  ASSERT_EQ(header_versions(db), (std::array<int, 2>{2, 2}));
  ASSERT_FALSE(fs::exists(db + "-wal"));
  ASSERT_FALSE(fs::exists(db + "-shm"));

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    auto say = [&](const std::string& m, int code) {
      (void)!write(fds[1], m.data(), m.size());
      _exit(code);
    };
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      say("no private read-only bind mount here", 77);
    if (std::ofstream(dir + "/probe")) say("the mount is not read-only", 3);
    try {
      Store s(db, /*read_only=*/true);
      const size_t n = s.collectives().size();
      say("rows " + std::to_string(n), n == 3 ? 0 : 2);
    } catch (const std::exception& e) {
      say(e.what(), 1);
    }
  }
  close(fds[1]);
  std::string msg;
  std::array<char, 512> buf{};
  for (ssize_t n; (n = read(fds[0], buf.data(), buf.size())) > 0;) msg.append(buf.data(), n);
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st)) << msg;
  if (WEXITSTATUS(st) == 77) {
    scaledl::remove_tree(dir);
    GTEST_SKIP() << msg;
  }
  EXPECT_EQ(WEXITSTATUS(st), 0) << msg;
  scaledl::remove_tree(dir);
}
