// The light `scaledl` (tools/CMakeLists.txt): the commands that predict without LibTorch, every
// other command run by scaledl-full from the same directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cli_util.hpp"
#include "scaledl/core/fs_util.hpp"

using namespace scaledl::test;

namespace {
const std::string kSrc = SCALEDL_SOURCE_DIR;
const std::string kTools = std::string(SCALEDL_BINARY_DIR) + "/tools";

/// The shared libraries a binary names (readelf -d), one per line.
std::string needed(const std::string& binary) {
  FILE* p = popen(("readelf -d " + binary + " 2>&1 | grep NEEDED").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (p) pclose(p);
  return out;
}

/// `binary args` through the shell, stdout and stderr together.
CliResult run_binary(const std::string& binary, const std::string& args) {
  CliResult r;
  FILE* p = popen((binary + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = p ? pclose(p) : -1;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
}  // namespace

TEST(LightBinary, NamesNoLibTorchLibraryAndTheFullOneDoes) {
  const std::string light = needed(kTools + "/scaledl"), full = needed(kTools + "/scaledl-full");
  ASSERT_NE(light.find("libc.so"), std::string::npos) << light;  // readelf ran
  EXPECT_EQ(light.find("torch"), std::string::npos) << light;
  EXPECT_EQ(light.find("c10"), std::string::npos) << light;
  EXPECT_NE(full.find("torch"), std::string::npos) << full;
}

TEST(LightBinary, RunsTheOtherCommandsThroughScaledlFull) {
  const CliResult help = run_cli("--help");
  ASSERT_EQ(help.rc, 0) << help.out;
  for (const char* cmd : {"predict", "scale", "train", "eval", "bench", "import"})
    EXPECT_NE(help.out.find(cmd), std::string::npos) << cmd << "\n" << help.out;
  const CliResult train = run_cli("train graph --help");
  EXPECT_EQ(train.rc, 0) << train.out;
  EXPECT_NE(train.out.find("--epochs"), std::string::npos) << train.out;
  // An unknown command is scaledl-full's one error line.
  expect_one_error("no-such-command", "'no-such-command' is not a command (one of bench, comm,");
  // The light binary answers its own commands and --version.
  EXPECT_EQ(run_cli("--version").out, "scaledl 0.1.0\n");
  const CliResult predict_help = run_cli("predict --help");
  EXPECT_EQ(predict_help.rc, 0) << predict_help.out;
  EXPECT_NE(predict_help.out.find("--bundle"), std::string::npos) << predict_help.out;
}

TEST(LightBinary, WithoutScaledlFullBesideItIsOneErrorLine) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "scaledl-light-alone";
  scaledl::remove_tree(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kTools + "/scaledl", dir / "scaledl");
  const CliResult r = run_binary((dir / "scaledl").string(), "train --help");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(r.out.rfind("scaledl: error: cannot run " + (dir / "scaledl-full").string(), 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // Its own commands need nothing beside it.
  const CliResult inspect = run_binary((dir / "scaledl").string(), "inspect " + kSrc + "/models/gpt2.json");
  EXPECT_EQ(inspect.rc, 0) << inspect.out;
  scaledl::remove_tree(dir);
}

TEST(LightBinary, PredictsWhatScaledlFullPredictsByteForByte) {
  const std::string args = "predict " + kSrc + "/models/gpt2-large.json --bundle " + kSrc +
                           "/models/bundles/default --batch 4 --seq 1024 --device-spec " + kSrc +
                           "/models/devices/h100-sxm.json --mode fwd-bwd --json";
  const CliResult light = run_cli(args), full = run_binary(kTools + "/scaledl-full", args);
  ASSERT_EQ(light.rc, 0) << light.out;
  ASSERT_EQ(full.rc, 0) << full.out;
  EXPECT_EQ(light.out, full.out);
}
