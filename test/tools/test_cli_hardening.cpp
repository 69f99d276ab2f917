// End-to-end: hostile JSON given to every command that reads JSON (issue #16,
// case 1: deeply nested JSON used to crash with a segmentation fault; a
// 100k-parenthesis constraint overflowed the stack). Each is now one
// "scaledl: error:" line naming the file, exit 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_util.hpp"

using scaledl::test::expect_one_error;
using scaledl::test::run_cli;

namespace {

const std::string kSrc = SCALEDL_SOURCE_DIR;

class CliHardening : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::TempDir() + "/cli_hardening_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/deep.json") << std::string(100000, '[') << std::string(100000, ']');
    std::ofstream(dir_ + "/deep-obj.json") << [] {
      std::string s;
      for (int i = 0; i < 50000; ++i) s += "{\"a\": ";
      return s + "1" + std::string(50000, '}');
    }();
    std::ofstream(dir_ + "/parens-space.json")
        << R"({"kind": "layers", "fixed": {"type": "linear", "bias": 1},
               "parameters": [{"name": "tokens", "kind": "grid", "values": [128, 256]},
                              {"name": "d_in", "kind": "grid", "values": [64, 128]},
                              {"name": "d_out", "kind": "grid", "values": [64]}],
               "constraints": [")"
        << std::string(100000, '(') << "1" << std::string(100000, ')') << R"("]})";
    std::ofstream(dir_ + "/huge.json")
        << R"({"model_type": "gpt2", "n_embd": 1e400, "n_layer": 2, "n_head": 2,
                                             "vocab_size": 100})";
    auto r = run_cli("train layers --db " + kSrc + "/datasets/cpu/layers.sqlite --out " + dir_ +
                     "/layers --folds 0 --nthread 1 --rounds 3 --max-depth 3");
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  static std::string dir_;
};
std::string CliHardening::dir_;

}  // namespace

TEST_F(CliHardening, DeeplyNestedJsonIsOneErrorLineForEveryCommand) {
  const std::string probe = kSrc + "/datasets/h100/probe.json";
  for (const std::string deep : {dir_ + "/deep.json", dir_ + "/deep-obj.json"}) {
    const std::string expect = deep + ": malformed JSON: arrays/objects nested deeper than 64 levels";
    expect_one_error("inspect " + deep, expect);
    expect_one_error("plan --space " + deep + " --budget 2 --out " + dir_ + "/plan.json", expect);
    expect_one_error("bench layers --plan " + deep + " --db " + dir_ + "/r.sqlite --device cpu", expect);
    expect_one_error("probe --spec " + deep, expect);
    expect_one_error(
        "predict " + kSrc + "/models/gpt2.json --layers " + dir_ + "/layers --device-spec " + deep, expect);
    expect_one_error("predict " + deep + " --layers " + dir_ + "/layers --device-spec " + probe, expect);
  }
}

TEST_F(CliHardening, HundredThousandParenthesesInAConstraintIsOneErrorLine) {
  expect_one_error("plan --space " + dir_ + "/parens-space.json --budget 2 --out " + dir_ + "/plan.json",
                   "constraints[0].expr=\"((((");
  expect_one_error("plan --space " + dir_ + "/parens-space.json --budget 2 --out " + dir_ + "/plan.json",
                   "nested deeper than 64");
}

TEST_F(CliHardening, NumberBeyondTheDoubleRangeNamesFileKeyAndValue) {
  expect_one_error("inspect " + dir_ + "/huge.json",
                   dir_ + "/huge.json: malformed JSON: n_embd=1e400 is out of range");
}
