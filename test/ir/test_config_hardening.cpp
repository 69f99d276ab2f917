// Hugging Face configs with values the JSON library cannot hold as written
// (issue #16, cases 10 and 11): the message names the file, the key and the
// value as written.
#include <gtest/gtest.h>

#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"

using namespace scaledl;

namespace {
std::string load_error(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  write_text_file_atomic(path, text);
  try {
    load_model_config(path);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("NOT A scaledl::Error: ") + e.what();
  }
  return "<no error>";
}
const char* kBert = R"({"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2,
                        "intermediate_size": 128, "vocab_size": 100, "hidden_size": )";
}  // namespace

TEST(ConfigHardening, HiddenSizeBeyondTheDoubleRange) {
  const std::string e = load_error("huge.json", std::string(kBert) + "1e400}");
  EXPECT_EQ(e, testing::TempDir() +
                   "/huge.json: malformed JSON: hidden_size=1e400 is out of range (beyond +-1.8e308)");
}

TEST(ConfigHardening, HiddenSizeBeyondInt64IsNotShownNegative) {
  const std::string e = load_error("u64.json", std::string(kBert) + "9223372036854775808}");
  EXPECT_EQ(e, testing::TempDir() + "/u64.json.hidden_size=9223372036854775808 is out of range [1, 1048576]");
  EXPECT_NE(load_error("u64b.json", std::string(kBert) + "18446744073709551616}").find("is out of range"),
            std::string::npos);
}

TEST(ConfigHardening, DeeplyNestedConfigIsOneError) {
  const std::string e = load_error("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(e,
            testing::TempDir() + "/deep.json: malformed JSON: arrays/objects nested deeper than 64 levels");
}
