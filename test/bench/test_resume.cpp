// A REAL crash test: the built `scaledl bench layers` is killed with SIGKILL
// mid-campaign, rerun, and must end with exactly the rows of an uninterrupted
// run (same config keys, no duplicates).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_util.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>

#include "scaledl/design/plan.hpp"
#include "scaledl/io/store.hpp"

using namespace scaledl;

namespace {

const std::string kBinary = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl";

std::string temp(const std::string& name) {
  return scaledl::test::fresh_store_path(name);
}

/// 30 tiny configs of several types (distinct keys).
std::string write_plan() {
  std::vector<LayerConfig> cs;
  for (int64_t i = 1; i <= 10; ++i) cs.push_back({LayerType::Linear, {8 * i, 32, 32, 1}, DType::FP32});
  for (int64_t i = 1; i <= 10; ++i) cs.push_back({LayerType::GELU, {1024 * i}, DType::FP32});
  for (int64_t i = 1; i <= 10; ++i) cs.push_back({LayerType::LayerNorm, {8 * i, 64}, DType::FP32});
  std::string p = temp("resume_plan.json");
  std::ofstream(p) << layers_plan_json(cs).dump(1);
  return p;
}

/// Starts `scaledl bench layers` on plan -> db; returns the child's pid.
pid_t spawn(const std::string& plan, const std::string& db) {
  pid_t pid = fork();
  if (pid == 0) {
    // Each sample lasts >= 5 ms, so a config takes ~0.1 s and the kill lands mid-campaign.
    execl(kBinary.c_str(), kBinary.c_str(), "bench", "layers", "--plan", plan.c_str(), "--db", db.c_str(),
          "--campaign", "resume", "--threads", "1", "--quick-probe", "--quiet", "--warmup", "1", "--repeats",
          "5", "--min-sample-ms", "5", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// (config_key) rows of the store, with duplicates kept.
std::multiset<std::string> keys_of(const std::string& db) {
  Store s(db, /*read_only=*/true);
  std::multiset<std::string> out;
  for (const auto& m : s.layers(std::nullopt, "", /*ok_only=*/false))
    out.insert(layer_key(m.type, m.dims, m.dtype));
  return out;
}

int64_t row_count(const std::string& db) {
  std::ifstream f(db);
  if (!f.good()) return 0;
  try {
    Store s(db, /*read_only=*/true);
    return s.counts()["layers"].get<int64_t>();
  } catch (...) {
    return 0;  // the writer is creating the schema
  }
}

}  // namespace

TEST(Resume, SigkillMidCampaignThenRerunEqualsUninterruptedRun) {
  ASSERT_EQ(access(kBinary.c_str(), X_OK), 0)
      << kBinary << " is not built (cmake --build ... --target scaledl)";
  std::string plan = write_plan();

  std::string full = temp("resume_full.sqlite");
  ASSERT_EQ(wait_exit(spawn(plan, full)), 0);
  auto want = keys_of(full);
  ASSERT_EQ(want.size(), 30u);

  std::string db = temp("resume_killed.sqlite");
  pid_t pid = spawn(plan, db);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t before_kill = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    before_kill = row_count(db);
    if (before_kill >= 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(wait_exit(pid), 128 + SIGKILL) << "the campaign finished before it could be killed";
  int64_t after_kill = row_count(db);
  ASSERT_GE(after_kill, 5);
  ASSERT_LT(after_kill, 30) << "the kill did not land mid-campaign";

  ASSERT_EQ(wait_exit(spawn(plan, db)), 0);  // resume
  auto got = keys_of(db);
  EXPECT_EQ(got.size(), 30u);  // no duplicates, nothing lost
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), got.size());
}
