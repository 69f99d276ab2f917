// End-to-end: issue #16's cases against the CLI — integer overflow, checksummed
// model files, diverged training, all-or-nothing imports, --no-probe, foreign
// SQLite files, CLI11's option errors, implausible device rates, impossible or
// cyclic design spaces, options that do not apply, and the memory pre-check of
// `bench models`. Each bad input: one "scaledl: error:" line, exit 1, nothing
// written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using scaledl::test::expect_one_error;
using scaledl::test::run_cli;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void write(const std::string& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

/// Runs SQL on a file with SQLite's C API; returns the first column of the last row.
std::string sql(const std::string& path, const std::string& q) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string last;
  char* err = nullptr;
  sqlite3_exec(
      db, q.c_str(),
      [](void* out, int n, char** v, char**) {
        *static_cast<std::string*>(out) = n > 0 && v[0] ? v[0] : "";
        return 0;
      },
      &last, &err);
  EXPECT_EQ(err, nullptr) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return last;
}

/// `sqlite3`-free row count through `scaledl db info --json`.
nlohmann::json info(const std::string& db) {
  auto r = run_cli("db info --json --db " + db);
  EXPECT_EQ(r.rc, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

class CliIntegrity : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "/integrity_" + std::to_string(getpid());
    scaledl::remove_tree(dir_);
    fs::create_directories(dir_);
    auto r = run_cli("train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --out " + dir_ +
                     "/L --folds 0 --nthread 1");
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  static void TearDownTestSuite() { scaledl::remove_tree(dir_); }
  static std::string predict() {
    return "predict " + kSrc + "/models/gpt2.json --batch 2 --seq 64 --layers " + dir_ + "/L --db " + kSrc +
           "/datasets/cpu/layers.sqlite";
  }
  static std::string dir_;
};
std::string CliIntegrity::dir_;

}  // namespace

TEST_F(CliIntegrity, HugeSampleCountsDoNotOverflow) {
  auto r = run_cli(predict() + " --samples 9223372036854775807 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["iterations_per_epoch"].get<int64_t>(), int64_t(1) << 61);  // ceil((2^63 - 1) / 2)
  EXPECT_GT(j["t_epoch_s"].get<double>(), 0);
}

TEST_F(CliIntegrity, AModelFileEditedAtTheSameSizeIsRefused) {
  const std::string L2 = dir_ + "/L-edit";
  fs::copy(dir_ + "/L", L2, fs::copy_options::recursive);
  const std::string f = L2 + "/linear.json";
  std::string text = slurp(f);
  const size_t at = text.find("\"base_score\":\"5E-1\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 19, "\"base_score\":\"5E+1\"");  // the issue's edit: same size, 100x the time
  write(f, text);
  expect_one_error("predict " + kSrc + "/models/gpt2.json --layers " + L2 + " --db " + kSrc +
                       "/datasets/cpu/layers.sqlite",
                   "linear.json: SHA-256 differs");
}

TEST_F(CliIntegrity, DivergedOrFailedTrainingNeverReplacesAGoodModel) {
  const std::string G = dir_ + "/G";
  const std::string train = "train graph --db " + kSrc + "/datasets/cpu/models.sqlite --layers " + dir_ +
                            "/L --threads 1 --out " + G;
  auto r = run_cli(train + " --epochs 3");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string good = slurp(G + "/graph_model.safetensors");
  // A learning rate that diverges: an error, and G untouched.
  expect_one_error(train + " --lr 1e30 --epochs 5", "graph training diverged");
  EXPECT_EQ(slurp(G + "/graph_model.safetensors"), good);
  EXPECT_EQ(run_cli(predict() + " --graph " + G).rc, 0);
  // A failure after training started (an impossible fold count): G untouched, no temporary left.
  expect_one_error(train + " --epochs 3 --folds 100000", "--folds=100000");
  EXPECT_EQ(slurp(G + "/graph_model.safetensors"), good);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // An --out that holds someone else's files is never replaced.
  fs::create_directories(dir_ + "/mine");
  write(dir_ + "/mine/notes.txt", "keep me");
  expect_one_error(
      "train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --folds 0 --out " + dir_ + "/mine",
      "is not a layer-model directory");
  EXPECT_EQ(slurp(dir_ + "/mine/notes.txt"), "keep me");
}

TEST_F(CliIntegrity, AFailedImportLeavesTheStoreAsItWas) {
  const std::string root = dir_ + "/ns";
  fs::copy(kSrc + "/datasets/neusight", root, fs::copy_options::recursive);
  // One negative latency in a file the importer reads after all of ops/.
  const std::string last = root + "/ops-transformer-shapes/linear.csv";
  std::string text = slurp(last);
  const size_t nl = text.find('\n');
  const size_t comma = text.find(',', nl);
  text.insert(comma + 1, "-");
  write(last, text);
  const std::string db = dir_ + "/import.sqlite";
  expect_one_error("import neusight --root " + root + " --db " + db, "Latency=-");
  auto j = info(db);
  EXPECT_EQ(j["counts"]["layers"], 0) << j.dump();
  EXPECT_EQ(j["counts"]["devices"], 0) << j.dump();
}

TEST_F(CliIntegrity, NoProbeWithoutARecordIsRefusedBeforeAnythingIsStored) {
  const std::string plan = dir_ + "/tiny-plan.json";
  write(plan, nlohmann::json({{"kind", "models"},
                              {"configs",
                               {{{"model", kSrc + "/models/bert-base.json"},
                                 {"overrides",
                                  {{"hidden_size", 64},
                                   {"num_attention_heads", 2},
                                   {"intermediate_size", 128},
                                   {"num_hidden_layers", 1}}},
                                 {"settings", {{"batch", 1}, {"seq_len", 8}}}}}}})
                  .dump());
  const std::string db = dir_ + "/noprobe.sqlite";
  expect_one_error("bench models --plan " + plan + " --db " + db + " --no-probe --threads 1 --quiet",
                   "--no-probe");
  auto r = run_cli("db info --json --db " + db);
  if (r.rc == 0) EXPECT_EQ(nlohmann::json::parse(r.out)["counts"]["devices"], 0) << r.out;
}

TEST_F(CliIntegrity, AModelBeyondTheDevicesMemoryIsRecordedAsOomWithoutAllocating) {
  const std::string db = dir_ + "/oom.sqlite";
  ASSERT_EQ(run_cli("probe --device cpu --no-measure --db " + db).rc, 1)
      << "a record without rates must not be stored";
  ASSERT_EQ(run_cli("probe --device cpu --db " + db).rc, 0);
  const std::string plan = dir_ + "/huge-plan.json";
  // hidden 65536 x 64 layers: 3.3e12 parameters (the issue's case)
  write(plan, nlohmann::json({{"kind", "models"},
                              {"configs",
                               {{{"model", kSrc + "/models/bert-base.json"},
                                 {"overrides",
                                  {{"hidden_size", 65536},
                                   {"num_attention_heads", 64},
                                   {"intermediate_size", 262144},
                                   {"num_hidden_layers", 64}}},
                                 {"settings", {{"batch", 1}, {"seq_len", 8}}}}}}})
                  .dump());
  auto r = run_cli("bench models --plan " + plan + " --db " + db + " --threads 1 --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("1 failed"), std::string::npos) << r.out;
  r = run_cli("db export --db " + db + " --format csv --table models");
  EXPECT_NE(r.out.find("not run: estimated training memory"), std::string::npos) << r.out;
}

TEST_F(CliIntegrity, ForeignOrDamagedSqliteFilesAreNotTakenOver) {
  const std::string probe = "probe --spec " + kSrc + "/datasets/h100/probe.json --db ";
  // Another program's database: refused, and its tables stay as they were.
  const std::string other = dir_ + "/other.sqlite";
  sql(other,
      "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES ('mine');");
  expect_one_error(probe + other, "not a ScaleDL store (no meta table; it holds table(s) notes)");
  EXPECT_EQ(sql(other, "SELECT group_concat(name) FROM sqlite_master WHERE type='table'"), "notes");
  expect_one_error("db info --db " + other, "not a ScaleDL store");
  // A store whose meta table was dropped is not re-stamped.
  const std::string damaged = dir_ + "/damaged.sqlite";
  ASSERT_EQ(run_cli(probe + damaged).rc, 0);
  ASSERT_EQ(run_cli(probe + damaged).rc, 0);  // ours: a second write works
  sql(damaged, "DROP TABLE meta;");
  expect_one_error(probe + damaged, "not a ScaleDL store (no meta table");
  EXPECT_EQ(sql(damaged, "SELECT count(*) FROM sqlite_master WHERE name='meta'"), "0");
  // Not a database at all: refused, never overwritten.
  const std::string text = dir_ + "/notes.sqlite";
  write(text, "this is not a database, but my notes\n");
  expect_one_error(probe + text, text);
  EXPECT_EQ(slurp(text), "this is not a database, but my notes\n");
  expect_one_error("db export --db " + dir_ + "/nowhere.sqlite --format csv --table layers", "no such store");
}

TEST_F(CliIntegrity, OptionErrorsAreOneLine) {
  expect_one_error(predict() + " --batch 0", "--batch");
  expect_one_error(predict() + " --samples abc", "--samples");
  expect_one_error("plan --space /nonexistent/space.json --budget 3 --out x.json", "/nonexistent/space.json");
  expect_one_error("", "subcommand");
  expect_one_error("predict --no-such-flag", "--no-such-flag");
  auto r = run_cli("--help");
  EXPECT_EQ(r.rc, 0);
}

TEST_F(CliIntegrity, ImplausibleDeviceRatesAreRefusedWhereTheyAreRead) {
  auto spec = nlohmann::json::parse(slurp(kSrc + "/datasets/h100/probe.json"));
  spec["measured_gflops"] = 1e-300;
  write(dir_ + "/tiny-rate.json", spec.dump());
  expect_one_error("predict " + kSrc + "/models/gpt2.json --layers " + dir_ + "/L --device-spec " + dir_ +
                       "/tiny-rate.json",
                   "measured_gflops=1e-300");
  expect_one_error("probe --spec " + dir_ + "/tiny-rate.json --db " + dir_ + "/rates.sqlite",
                   "measured_gflops");
  write(dir_ + "/comm.json", R"({"bandwidth_Bps": 1e-300, "gamma_s": 1e-5})");
  expect_one_error(predict() + " --devices 2 --comm " + dir_ + "/comm.json", "bandwidth_Bps");
}

TEST_F(CliIntegrity, ImpossibleLayerSizesAndCyclicDerivedValuesNeverReachAPlan) {
  auto space = nlohmann::json::parse(slurp(kSrc + "/models/spaces/layers.json"));
  // d_in up to 1e12 and no memory constraint: such layers are infeasible, not planned.
  space["parameters"][3]["values"] = {64, 1e12};
  nlohmann::json kept = nlohmann::json::array();
  for (auto& c : space["constraints"])
    if (c.contains("expr")) kept.push_back(c);
  space["constraints"] = kept;
  write(dir_ + "/huge.json", space.dump());
  auto r = run_cli("plan --space " + dir_ + "/huge.json --budget 100 --out " + dir_ + "/huge-plan.json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(slurp(dir_ + "/huge-plan.json").find("1000000000000"), std::string::npos);
  // aa = bb, bb = aa + 1
  space = nlohmann::json::parse(slurp(kSrc + "/models/spaces/layers.json"));
  space["derived"].push_back({{"name", "aa"}, {"expr", "bb"}});
  space["derived"].push_back({{"name", "bb"}, {"expr", "aa + 1"}});
  write(dir_ + "/cyclic.json", space.dump());
  expect_one_error("plan --space " + dir_ + "/cyclic.json --budget 3 --out " + dir_ + "/c.json",
                   "uses derived value \"bb\" defined after it");
  EXPECT_FALSE(fs::exists(dir_ + "/c.json"));
}

TEST_F(CliIntegrity, InputSizeOfTheWrongKindOfModelIsAnError) {
  expect_one_error("predict " + kSrc + "/models/gpt2.json --image 224 --layers " + dir_ + "/L --db " + kSrc +
                       "/datasets/cpu/layers.sqlite",
                   "--image=224 does not apply: gpt2 is a text model");
  expect_one_error("predict " + kSrc + "/models/vit-base.json --seq 64 --layers " + dir_ + "/L --db " + kSrc +
                       "/datasets/cpu/layers.sqlite",
                   "--seq=64 does not apply: vit-base is a vision model");
  expect_one_error(predict() + " --sweep image=224,384", "image=224 does not apply: gpt2 is a text model");
}
