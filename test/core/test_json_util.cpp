// JSON reading hardened against hostile input (issue #16: deep nesting, numbers
// beyond the double range, integers beyond int64): every case is one
// scaledl::Error naming the source, the key and the value.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;

namespace {

std::string deep(size_t n) {
  return std::string(n, '[') + std::string(n, ']');
}

}  // namespace

TEST(JsonDepth, DeeplyNestedTextIsOneErrorNotAStackOverflow) {
  for (const std::string& text : {deep(100000), std::string(100000, '[') /* unterminated */, [] {
                                    std::string s;
                                    for (int i = 0; i < 50000; ++i) s += "{\"a\":";
                                    return s + "1" + std::string(50000, '}');
                                  }()}) {
    const std::string e = error_of([&] { (void)parse_json_text(text, "deep.json"); });
    EXPECT_EQ(e.rfind("deep.json: malformed JSON: ", 0), 0u) << e;
    EXPECT_NE(e.find("nested deeper than 64"), std::string::npos) << e;
  }
}

TEST(JsonDepth, NestingUpToTheLimitIsAccepted) {
  const json j = parse_json_text(deep(kMaxJsonDepth), "ok");
  EXPECT_TRUE(j.is_array());
  EXPECT_EQ(show(j).size(), 40u);  // dump() of the deepest accepted value is fine
  EXPECT_NE(error_of([] { (void)parse_json_text(deep(kMaxJsonDepth + 1), "x"); }).find("deeper than"),
            std::string::npos);
}

TEST(JsonDepth, ReadJsonFileNamesTheFile) {
  const std::string path = testing::TempDir() + "/deep-file.json";
  std::ofstream(path) << deep(100000);
  const std::string e = error_of([&] { (void)read_json_file(path); });
  EXPECT_EQ(e.rfind(path + ": malformed JSON: arrays/objects nested deeper than 64", 0), 0u) << e;
}

TEST(JsonNumbers, OverflowingNumberNamesTheKeyAndTheValue) {
  std::string e =
      error_of([] { (void)parse_json_text(R"({"model_type": "bert", "hidden_size": 1e400})", "c.json"); });
  EXPECT_EQ(e, "c.json: malformed JSON: hidden_size=1e400 is out of range (beyond +-1.8e308)");
  e = error_of([] { (void)parse_json_text("[1, -2e999]", "a.json"); });
  EXPECT_EQ(e, "a.json: malformed JSON: number -2e999 is out of range (beyond +-1.8e308)");
  EXPECT_EQ(parse_json_text("1e-400", "x").get<double>(), 0.0);  // underflow is zero, not an error
}

TEST(JsonNumbers, IntegersBeyondInt64AreShownAsWritten) {
  const json j =
      parse_json_text(R"({"a": 9223372036854775808, "b": 18446744073709551616, "c": 9223372036854775807,
                                     "d": -9223372036854775809, "e": 1.5})",
                      "x");
  std::string e = error_of([&] { (void)get_int(j, "a", "config", 1, 1 << 20); });
  EXPECT_EQ(e, "config.a=9223372036854775808 is out of range [1, 1048576]");
  e = error_of([&] { (void)get_int(j, "b", "config", 1, 1 << 20); });
  EXPECT_NE(e.find("is out of range"), std::string::npos) << e;
  EXPECT_EQ(e.find("-"), std::string::npos) << e;  // never shown negative
  EXPECT_EQ(get_int(j, "c", "config", 0, INT64_MAX), INT64_MAX);
  e = error_of([&] { (void)get_int(j, "d", "config", INT64_MIN, INT64_MAX); });
  EXPECT_NE(e.find("config.d=-9.223372036854776e+18 is out of range"), std::string::npos) << e;
  e = error_of([&] { (void)get_int(j, "e", "config", 0, 10); });
  EXPECT_EQ(e, "config.e=1.5 is not an integer");
}

TEST(Csv, FieldsAreQuotedOnlyWhereACsvReaderNeedsIt) {
  EXPECT_EQ(csv_field("NVIDIA H100 80GB HBM3"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("[[8, 512]]"), "\"[[8, 512]]\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("a\nb"), "\"a\nb\"");
  EXPECT_EQ(csv_field("a\rb"), "\"a\rb\"");
  EXPECT_EQ(csv_quote("plain"), "\"plain\"");  // csv_quote always quotes
}

// Issue #39, case 22: only regular files are read (a FIFO blocked a reader forever; the CLI
// tests in test/tools/test_cli_audit_bundle.cpp run that case under a timeout). A directory
// and a device read as empty text before: "malformed JSON" instead of naming what they are.
TEST(JsonFiles, OnlyRegularFilesAreRead) {
  const std::string dir = testing::TempDir() + "/json_files_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  EXPECT_EQ(error_of([&] { read_json_file(dir); }), dir + ": not a regular file (a directory)");
  EXPECT_EQ(error_of([&] { read_text_file(dir); }), dir + ": not a regular file (a directory)");
  EXPECT_EQ(error_of([&] { read_json_file("/dev/null"); }), "/dev/null: not a regular file (a device)");
  EXPECT_EQ(error_of([&] { read_json_file(dir + "/none.json"); }), dir + "/none.json: cannot open file");
  std::ofstream(dir + "/a.json") << "{\"a\": 1}";
  EXPECT_EQ(read_json_file(dir + "/a.json")["a"], 1);
  std::filesystem::create_symlink(dir + "/a.json", dir + "/link.json");  // links are followed
  EXPECT_EQ(read_json_file(dir + "/link.json")["a"], 1);
  scaledl::remove_tree(dir);
}
