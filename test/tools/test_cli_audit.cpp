// End-to-end: the second hostile-input audit (issue #39) against the CLI — outputs that would
// have destroyed a user's files, crashes on flags, values silently clamped or ignored,
// contradictory flags, CSV written and read back, leftovers after a failure or a signal.
// Each bad input: one "scaledl: error:" line, exit 1, nothing written or lost.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/learn/neusight.hpp"

using scaledl::test::expect_one_error;
using scaledl::test::run_cli;
namespace fs = std::filesystem;
using scaledl::test::slurp;
using scaledl::test::write;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kBundle = kSrc + "/models/bundles/default";
const std::string kH100 = kSrc + "/models/devices/h100-sxm.json";
const std::string kGpt2 = kSrc + "/models/gpt2.json";

class CliAudit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("scaledl-audit-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    scaledl::remove_tree(dir_);
    fs::create_directories(dir_);
    comm_ = dir_ + "/comm.json";
    write(comm_, R"({"bandwidth_Bps":2.27e11,"gamma_s":5.6e-6})");
  }
  void TearDown() override { scaledl::remove_tree(dir_); }
  std::string predict() const {
    return "predict " + kGpt2 + " --bundle " + kBundle + " --device-spec " + kH100;
  }
  std::string dir_, comm_;
};

// ---- 1, 2: outputs never destroy a user's files ------------------------------------------------

TEST_F(CliAudit, AnOutputFolderIsReplacedOnlyWhenItIsRecognisablyOurs) {
  // A folder that merely holds a file named manifest.json (or report.json) is someone's project.
  const std::string p = dir_ + "/p";
  fs::create_directories(p + "/src");
  write(p + "/manifest.json", "{}");
  write(p + "/report.json", "{}");
  write(p + "/src/main.c", "int main() {}\n");
  expect_one_error("train --quiet --db " + kSrc + "/datasets/h100/h100.sqlite --epochs 3 --out " + p,
                   "is not a bundle");
  expect_one_error("train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --folds 0 --out " + p,
                   "is not a layer-model directory");
  expect_one_error(
      "train graph --db " + kSrc + "/datasets/h100/h100.sqlite --layers " + kBundle + "/layers --out " + p,
      "is not a graph-model directory");
  EXPECT_EQ(slurp(p + "/src/main.c"), "int main() {}\n");

  // A real layer-model directory with one file of the user's added: refused, naming the file.
  const std::string l = dir_ + "/layers";
  auto r =
      run_cli("train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --folds 0 --nthread 1 --out " + l);
  ASSERT_EQ(r.rc, 0) << r.out;
  write(l + "/notes.txt", "mine");
  expect_one_error(
      "train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --folds 0 --nthread 1 --out " + l,
      "notes.txt");
  EXPECT_EQ(slurp(l + "/notes.txt"), "mine");
  // Without it, the directory is ours and is replaced.
  fs::remove(l + "/notes.txt");
  r = run_cli("train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --folds 0 --nthread 1 --out " + l);
  EXPECT_EQ(r.rc, 0) << r.out;
}

TEST_F(CliAudit, NoCommandWritesOverOneOfItsInputs) {
  const std::string db = dir_ + "/x.sqlite";
  fs::copy_file(kSrc + "/datasets/h100/h100.sqlite", db);
  const std::string before = slurp(db);
  const std::string link = dir_ + "/link.sqlite", hard = dir_ + "/hard.sqlite";
  fs::create_symlink(db, link);
  fs::create_hard_link(db, hard);
  for (const std::string& out : {db, link, hard}) {
    expect_one_error("db export --db " + db + " --table models --out " + out, "is also an input");
    expect_one_error("comm fit --db " + db + " --out " + out, "is also an input");
    expect_one_error("bench pipeline --db " + db + " --out " + out + " --input text --workers 1",
                     "is also an input");
  }
  EXPECT_EQ(slurp(db), before);

  const std::string plan = dir_ + "/plan.json";
  fs::copy_file(kSrc + "/datasets/h100/models-plan.json", plan);
  const std::string plan_before = slurp(plan);
  expect_one_error("plan --space " + kSrc + "/datasets/h100/models-space.json --budget 4 --existing " + db +
                       " --out " + db,
                   "is also an input");
  expect_one_error("plan --space " + plan + " --budget 4 --out " + plan, "is also an input");
  EXPECT_EQ(slurp(plan), plan_before);
  EXPECT_EQ(slurp(db), before);

  const std::string model = dir_ + "/gpt2.json";
  fs::copy_file(kGpt2, model);
  const std::string model_before = slurp(model);
  expect_one_error("inspect " + model + " --dot " + model, "is also an input");
  EXPECT_EQ(slurp(model), model_before);
}

// ---- 3, 4, 13, 15: crashes and silently clamped or dropped values ------------------------------

TEST_F(CliAudit, ParallelDegreesAreRangeCheckedBeforeAnyArithmetic) {
  expect_one_error(predict() + " --comm " + comm_ + " --gpus 8 --tp 4294967296 --pp 4294967296",
                   "--tp=4294967296");
  expect_one_error(predict() + " --comm " + comm_ + " --gpus 8 --ep 4294967296", "--ep=4294967296");
  expect_one_error(
      predict() + " --comm " + comm_ + " --gpus 9223372036854775807 --tp 4294967296 --pp 4294967296",
      "--gpus=9223372036854775807");
  expect_one_error(predict() + " --comm " + comm_ + " --gpus 8 --microbatches 9223372036854775807",
                   "--microbatches=9223372036854775807");
}

TEST_F(CliAudit, AFlagWhoseValueCannotBeReadIsOneErrorLine) {
  expect_one_error(predict() + " --comm " + comm_ + " --gpus 2 --recompute=maybe", "--recompute");
  // CLI11 reads a number as a flag's count (non-zero: on); a huge one is that, not a crash.
  auto r = run_cli(predict() + " --comm " + comm_ + " --gpus 2 --recompute=99999999999999999999999");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  expect_one_error("bench models --db " + dir_ + "/s.sqlite --plan x.json --no-probe=maybe", "--no-probe");
  expect_one_error("bench layers --db " + dir_ + "/s.sqlite --plan x.json --quick-probe=maybe",
                   "--quick-probe");
}

TEST_F(CliAudit, OutOfRangeStagesBatchesAndWorkersAreErrors) {
  const std::string scale =
      "scale " + kGpt2 + " --bundle " + kBundle + " --device-spec " + kH100 + " --comm " + comm_;
  expect_one_error(scale + " --gpus 1..8 --zero 5", "--zero=5");
  expect_one_error(scale + " --gpus 1..8 --zero -1", "--zero=-1");
  expect_one_error(scale + " --gpus 1..8 --global-batch -5", "--global-batch=-5");
  expect_one_error(predict() + " --comm " + comm_ + " --gpus 2 --zero 5", "--zero=5");
  expect_one_error(predict() + " --pipeline " + kSrc + "/datasets/pipeline --workers -1", "--workers=-1");
  expect_one_error(scale + " --gpus 1..8 --pipeline " + kSrc + "/datasets/pipeline --workers -1",
                   "--workers=-1");
  expect_one_error("bench pipeline --input text --workers -1", "--workers=-1");
}

TEST_F(CliAudit, IntegersBeyondTheRangeAreNamedNotClamped) {
  for (const std::string v : {"99999999999999999999999", "9223372036854775808"}) {
    expect_one_error(predict() + " --samples " + v, v);
    expect_one_error(predict() + " --iterations " + v, v);
  }
  // 2^63 - 1 itself is a valid count (issue #16: no overflow of the epoch's iterations).
  EXPECT_EQ(run_cli(predict() + " --samples 9223372036854775807").rc, 0);
}

// ---- 6, 16, 18: contradictions and messages ----------------------------------------------------

TEST_F(CliAudit, AnOptimizerForARunWithoutAnOptimizerStepIsAnError) {
  expect_one_error(predict() + " --mode inference --optimizer sgd", "--optimizer=sgd does not apply");
  expect_one_error(predict() + " --mode fwd-bwd --optimizer adam", "--optimizer=adam does not apply");
  expect_one_error(predict() + " --no-optimizer --optimizer adam", "--optimizer=adam does not apply");
  expect_one_error(predict() + " --mode inference --sweep optimizer=sgd,adam",
                   "optimizer=sgd does not apply");
  EXPECT_EQ(run_cli(predict() + " --mode train --optimizer sgd").rc, 0);
}

TEST_F(CliAudit, ARepeatedCsvColumnIsAnError) {
  write(dir_ + "/a.csv", "model,batch,batch\n" + kGpt2 + ",1,2\n");
  write(dir_ + "/b.csv", "model,model\n" + kGpt2 + "," + kGpt2 + "\n");
  expect_one_error("predict --bundle " + kBundle + " --device-spec " + kH100 + " --csv " + dir_ + "/a.csv",
                   "column \"batch\" is given twice");
  expect_one_error("predict --bundle " + kBundle + " --device-spec " + kH100 + " --csv " + dir_ + "/b.csv",
                   "column \"model\" is given twice");
}

TEST_F(CliAudit, EveryErrorIsOneLineEvenWithControlCharactersInTheInput) {
  const std::string odd = dir_ + "/a\nb.json";
  expect_one_error("predict '" + odd + "' --bundle " + kBundle + " --device-spec " + kH100, "a\\nb.json");
  write(dir_ + "/c.csv", "model,batch\n\"" + kGpt2 + "\",\"1\n2\"\n");
  expect_one_error("predict --bundle " + kBundle + " --device-spec " + kH100 + " --csv " + dir_ + "/c.csv",
                   "\\n");
}

// ---- 8: the sweep's CSV reads back --------------------------------------------------------------

TEST_F(CliAudit, SweepCsvReadsBackWithTheHeadersColumnCount) {
  auto r = run_cli("predict " + kSrc + "/models/gpt2-large.json --bundle " + kBundle +
                   " --sweep device_spec=" + kSrc +
                   "/models/devices --sweep batch=1,2,4,8 --sweep seq=128,1024 --sweep dtype=fp32,fp16");
  ASSERT_EQ(r.rc, 0) << r.out.substr(0, 2000);
  std::string
      csv;  // stdout without the stderr lines run_cli merges in (warnings; 704 configurations > one chunk)
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("scaledl: ", 0) != 0) csv += line + "\n";
  const auto rows = scaledl::parse_csv(csv, "sweep output");
  ASSERT_GE(rows.size(), 9u);
  size_t adjusted_with_comma = 0;
  const auto& head = rows[0];
  const size_t adj = std::find(head.begin(), head.end(), "adjusted") - head.begin();
  ASSERT_LT(adj, head.size());
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].size() == 1 && rows[i][0].empty()) continue;
    ASSERT_EQ(rows[i].size(), head.size()) << "row " << i;
    adjusted_with_comma += rows[i][adj].find(',') != std::string::npos;
  }
  EXPECT_GT(adjusted_with_comma, 0u) << "no row was raised by a bound: the quoting was not exercised";
}

// ---- 21: nothing left behind --------------------------------------------------------------------

TEST_F(CliAudit, AStoppedTrainingLeavesNoTemporaryAndThePreviousOutputIntact) {
  const std::string out = dir_ + "/bundle";
  const std::string train = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl train --db " + kSrc +
                            "/datasets/h100/h100.sqlite --epochs 200 --out " + out;
  for (int sig : {SIGTERM, SIGINT}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      execl("/bin/sh", "sh", "-c", ("exec " + train).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait until the staging directory exists, then stop the run.
    bool staged = false;
    for (int i = 0; i < 600 && !staged; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (const auto& e : fs::directory_iterator(dir_))
        staged = staged || e.path().filename().string().find("bundle.tmp-") == 0;
    }
    ASSERT_TRUE(staged) << "train never staged its output";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(pid, sig);
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == sig) << "status " << st;
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST_F(CliAudit, AFailedMergeIntoANewStoreLeavesNothing) {
  const std::string out = dir_ + "/new.sqlite";
  write(dir_ + "/text.sqlite", "not a store");
  expect_one_error("db merge " + out + " " + kSrc + "/datasets/h100/h100.sqlite " + dir_ + "/text.sqlite",
                   "text.sqlite");
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    EXPECT_FALSE(fs::exists(out + suffix)) << suffix;
}

}  // namespace

namespace {

double json_number(const std::string& out, const std::string& key) {
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  return j.at(key).get<double>();
}

// ---- 14, 25, 7: one job, one answer -------------------------------------------------------------

TEST_F(CliAudit, OneGpuGivesOneTimeWhicheverCommandAsks) {
  for (const std::string model : {"gpt2", "qwen2-0.5b"}) {
    const std::string base = "predict " + kSrc + "/models/" + model + ".json --bundle " + kBundle +
                             " --device-spec " + kSrc +
                             "/models/devices/a100-sxm4-80gb.json --batch 8 --seq 512";
    auto alone = run_cli(base + " --json");
    auto gpus1 = run_cli(base + " --gpus 1 --json");
    ASSERT_EQ(alone.rc, 0) << alone.out;
    ASSERT_EQ(gpus1.rc, 0) << gpus1.out;
    const double t1 = json_number(alone.out, "t_iter_ms");
    EXPECT_DOUBLE_EQ(json_number(gpus1.out, "t_iter_ms"), t1) << model;
    // Eight data-parallel GPUs with the same batch each: never faster per iteration than one.
    auto gpus8 = run_cli(base + " --gpus 8 --comm " + comm_ + " --json");
    ASSERT_EQ(gpus8.rc, 0) << gpus8.out;
    EXPECT_GE(json_number(gpus8.out, "t_iter_ms"), t1) << model;
    auto devices8 = run_cli(base + " --devices 8 --comm " + comm_ + " --json");
    ASSERT_EQ(devices8.rc, 0) << devices8.out;
    EXPECT_GE(json_number(devices8.out, "t_iter_ms"), t1) << model;
    // scale at one GPU prints the same time.
    auto sc = run_cli("scale " + kSrc + "/models/" + model + ".json --bundle " + kBundle + " --device-spec " +
                      kSrc + "/models/devices/a100-sxm4-80gb.json --batch 8 --seq 512 --gpus 1 --json");
    ASSERT_EQ(sc.rc, 0) << sc.out;
    const auto j = nlohmann::json::parse(sc.out.substr(sc.out.find('{')));
    EXPECT_DOUBLE_EQ(j["points"][0]["t_iter_ms"].get<double>(), t1) << model;
  }
}

TEST_F(CliAudit, SpeedupIsAgainstOneGpuWhateverCountsAreAsked) {
  const std::string scale = "scale " + kGpt2 + " --bundle " + kBundle + " --device-spec " + kH100 +
                            " --comm " + comm_ + " --batch 64 --json --gpus ";
  auto a = run_cli(scale + "8,1");
  auto b = run_cli(scale + "2..8");
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(b.rc, 0) << b.out;
  const auto ja = nlohmann::json::parse(a.out.substr(a.out.find('{')));
  const auto jb = nlohmann::json::parse(b.out.substr(b.out.find('{')));
  for (const auto& p : ja["points"]) {
    if (p["gpus"] == 1) EXPECT_DOUBLE_EQ(p["speedup"].get<double>(), 1.0);
    EXPECT_LE(p["speedup"].get<double>(), p["gpus"].get<double>() * (1 + 1e-9)) << p.dump();
  }
  for (const auto& p : jb["points"])
    if (p["gpus"] == 8)
      EXPECT_DOUBLE_EQ(p["speedup"].get<double>(), ja["points"][0]["speedup"].get<double>());
}

TEST_F(CliAudit, TheParallelPathIsMonotoneInTokens) {
  const std::string base = predict() + " --comm " + comm_ + " --json --gpus 2";
  double last = 0;
  for (const std::string bs : {"1", "2", "4", "8"}) {
    auto r = run_cli(base + " --batch " + bs + " --seq 16");
    ASSERT_EQ(r.rc, 0) << r.out;
    const double t = json_number(r.out, "t_iter_ms");
    EXPECT_GE(t, last * (1 - 1e-12)) << "batch " << bs;  // equal up to rounding where a bound holds it
    last = t;
  }
  last = 0;
  for (const std::string q : {"2", "16", "128", "1024"}) {
    auto r = run_cli(base + " --batch 4 --seq " + q);
    ASSERT_EQ(r.rc, 0) << r.out;
    const double t = json_number(r.out, "t_iter_ms");
    EXPECT_GE(t, last * (1 - 1e-12)) << "seq " << q;
    last = t;
  }
}

// ---- 26, 28: what was assumed, and rows that cannot run -----------------------------------------

TEST_F(CliAudit, EveryOutputNamesWhatItPredictedAndWhatItAssumed) {
  auto r =
      run_cli("predict " + kSrc + "/models/qwen2-0.5b.json --bundle " + kBundle + " --device-spec " + kH100);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("seq 128"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("eager attention"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("torch_dtype is bfloat16"), std::string::npos) << r.out;
  auto j = run_cli("predict " + kSrc + "/models/qwen2-0.5b.json --bundle " + kBundle + " --device-spec " +
                   kH100 + " --dtype bf16 --seq 512 --batch 2 --mode train --json");
  ASSERT_EQ(j.rc, 0) << j.out;
  const auto v = nlohmann::json::parse(j.out.substr(j.out.find('{')));
  EXPECT_TRUE(v["assumed"].empty()) << v["assumed"].dump();
  EXPECT_EQ(v["attention"], "eager");
  EXPECT_EQ(v["settings"]["seq_len"], 512);
}

TEST_F(CliAudit, InASweepAConfigurationTheGpuCannotRunIsARowThatSaysWhy) {
  auto r = run_cli("predict " + kGpt2 + " --bundle " + kBundle + " --dtype bf16 --sweep device_spec=" + kSrc +
                   "/models/devices");
  ASSERT_EQ(r.rc, 0) << r.out.substr(0, 2000);
  const auto rows = scaledl::parse_csv(r.out, "sweep output");
  const int inf = scaledl::csv_column(rows[0], "infeasible"), dev = scaledl::csv_column(rows[0], "device");
  const int t = scaledl::csv_column(rows[0], "t_iter_ms");
  ASSERT_GE(inf, 0);
  int refused = 0, predicted = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), rows[0].size()) << "row " << i;
    if (!rows[i][inf].empty()) {
      ++refused;
      EXPECT_NE(rows[i][inf].find("compute capability"), std::string::npos) << rows[i][inf];
      EXPECT_TRUE(rows[i][t].empty());
    } else {
      ++predicted;
      EXPECT_FALSE(rows[i][t].empty()) << rows[i][dev];
    }
  }
  EXPECT_GE(refused, 1);  // the T4 and the V100: no BF16 tensor cores
  EXPECT_GE(predicted, 5);
}

// ---- 23: said to the user -----------------------------------------------------------------------

TEST_F(CliAudit, ACsvWithAByteOrderMarkIsReadAndTf32NeedsAmpere) {
  write(dir_ + "/bom.csv", "\xEF\xBB\xBFmodel,batch\n" + kGpt2 + ",2\n");
  auto r = run_cli("predict --bundle " + kBundle + " --device-spec " + kH100 + " --csv " + dir_ + "/bom.csv");
  EXPECT_EQ(r.rc, 0) << r.out;
  expect_one_error("predict " + kGpt2 + " --bundle " + kBundle + " --device-spec " + kSrc +
                       "/models/devices/v100-sxm2-32gb.json --dtype tf32",
                   "dtype=tf32 needs a GPU of compute capability 8.0");
}

}  // namespace

namespace {

TEST_F(CliAudit, AConfigKeyTheModelDoesNotReadIsAnError) {
  const std::string base = "predict --bundle " + kBundle + " --device-spec " + kH100 + " " + kGpt2;
  expect_one_error(base + " --sweep config.num_hidden_layers=1,48", "give config.n_layer instead");
  expect_one_error(base + " --sweep config.bogus=5", "config.bogus is not a key that model_type gpt2 reads");
  write(dir_ + "/k.csv", "config.bogus\n5\n");
  expect_one_error(
      "predict --bundle " + kBundle + " --device-spec " + kH100 + " " + kGpt2 + " --csv " + dir_ + "/k.csv",
      "config.bogus");
  // A key it reads, even at the value the file already has, is fine.
  auto r = run_cli(base + " --sweep config.n_layer=1,12");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto rows = scaledl::parse_csv(r.out, "sweep");
  const int t = scaledl::csv_column(rows[0], "t_iter_ms");
  EXPECT_LT(std::stod(rows[1][t]), std::stod(rows[2][t]));
}

}  // namespace

namespace {

TEST_F(CliAudit, AnAnchorMeasuredElsewhereOrFasterThanPhysicsIsRefused) {
  write(dir_ + "/a.csv", "model,batch,device_spec,measured_ms\n" + kGpt2 + ",8," + kSrc +
                             "/models/devices/a100-sxm4-80gb.json,40\n");
  expect_one_error(predict() + " --anchor " + dir_ + "/a.csv", "not on the device predicted");
  write(dir_ + "/b.csv", "model,batch,measured_ms\n" + kGpt2 + ",8,1e-300\n");
  expect_one_error(predict() + " --anchor " + dir_ + "/b.csv", "faster than the roofline");
  write(dir_ + "/c.csv", "model,batch,device_spec,measured_ms\n" + kGpt2 + ",8," + kH100 + ",40\n");
  auto r = run_cli(predict() + " --anchor " + dir_ + "/c.csv");
  EXPECT_EQ(r.rc, 0) << r.out;
}

}  // namespace

namespace {

TEST_F(CliAudit, OneMeasuredRunNeverWidensTheInterval) {
  auto plain = run_cli(predict() + " --batch 8 --json");
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const auto p = nlohmann::json::parse(plain.out.substr(plain.out.find('{')));
  const double t = p["t_iter_ms"].get<double>();
  write(dir_ + "/a.csv", "model,batch,measured_ms\n" + kGpt2 + ",4," + std::to_string(0.6 * t) + "\n");
  auto anchored = run_cli(predict() + " --batch 8 --json --anchor " + dir_ + "/a.csv");
  ASSERT_EQ(anchored.rc, 0) << anchored.out;
  const auto a = nlohmann::json::parse(anchored.out.substr(anchored.out.find('{')));
  for (const char* lvl : {"80", "95"}) {
    const auto& i0 = p["interval_ms"][lvl];
    const auto& i1 = a["interval_ms"][lvl];
    const double w0 = std::log(i0[1].get<double>() / i0[0].get<double>());
    const double w1 = std::log(i1[1].get<double>() / i1[0].get<double>());
    EXPECT_LE(w1, w0 + 1e-12) << lvl << " " << i0.dump() << " -> " << i1.dump();
  }
}

}  // namespace

namespace {

TEST_F(CliAudit, ASpaceThatPlansNoLayerOfATypeSaysSo) {
  write(dir_ + "/space.json", R"({"kind": "layers", "terms": "linear", "fixed": {"bias": 1}, "parameters": [
    {"name": "type", "kind": "categorical", "values": ["linear", "add"]},
    {"name": "dtype", "kind": "categorical", "values": ["fp32"]},
    {"name": "tokens", "kind": "grid", "values": [128, 256]},
    {"name": "d_in", "kind": "grid", "values": [-64, 0]},
    {"name": "d_out", "kind": "grid", "values": [256, 512]},
    {"name": "elements", "kind": "grid", "values": [65536, 131072, 262144]}]})");
  auto r = run_cli("plan --space " + dir_ + "/space.json --budget 2 --out " + dir_ + "/plan.json");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("scaledl: warning: " + dir_ + "/space.json: no linear layer is planned"),
            std::string::npos)
      << r.out;
}

}  // namespace

namespace {

// Case 24: on a CPU whose layer timings trained nothing in the bundle, no interval is claimed.
TEST_F(CliAudit, NoIntervalIsClaimedForACpuTheBundleNeverTimed) {
  const std::string base =
      "predict " + kGpt2 + " --bundle " + kBundle + " --db " + kSrc + "/datasets/cpu/models.sqlite";
  auto r = run_cli(base);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("intervals    none: no calibrated interval for a CPU"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("80 % ["), std::string::npos) << r.out;
  auto j = run_cli(base + " --json");
  ASSERT_EQ(j.rc, 0) << j.out;
  const auto v = nlohmann::json::parse(j.out.substr(j.out.find('{')));
  EXPECT_TRUE(v.contains("no_interval"));
  EXPECT_FALSE(v.contains("interval_ms"));
  // A GPU known by its spec sheet keeps its (leave-one-GPU-out) interval.
  auto g = run_cli(predict() + " --json");
  ASSERT_EQ(g.rc, 0) << g.out;
  EXPECT_TRUE(nlohmann::json::parse(g.out.substr(g.out.find('{'))).contains("interval_ms"));
}

}  // namespace
