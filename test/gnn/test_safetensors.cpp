// safetensors writer/reader: round trip and refusal of damaged files.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gnn/safetensors.hpp"
#include "scaledl/core/error.hpp"

using namespace scaledl;

namespace {
std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "/st_" + name;
}
std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void spit(const std::string& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}
std::string error_of(const std::string& p) {
  try {
    load_safetensors(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(SafeTensors, RoundTripKeepsValuesShapesAndMetadata) {
  SafeTensors st;
  st.tensors["a"] = torch::randn({3, 4});
  st.tensors["b"] = torch::randn({5}, torch::kFloat64);
  st.tensors["c"] = torch::arange(6, torch::kInt64).view({2, 3});
  st.tensors["empty"] = torch::zeros({0, 4});
  st.metadata["format_version"] = "1";
  const std::string p = tmp("rt.safetensors");
  save_safetensors(p, st);
  // Header layout: 8-byte little-endian length, JSON, data.
  const std::string raw = slurp(p);
  uint64_t hl = 0;
  std::memcpy(&hl, raw.data(), 8);
  EXPECT_EQ(raw[8], '{');
  EXPECT_EQ(hl % 8, 0u);
  SafeTensors r = load_safetensors(p);
  ASSERT_EQ(r.tensors.size(), 4u);
  for (const auto& [k, v] : st.tensors) {
    EXPECT_EQ(r.tensors[k].sizes(), v.sizes()) << k;
    EXPECT_EQ(r.tensors[k].scalar_type(), v.scalar_type()) << k;
    EXPECT_TRUE(torch::equal(r.tensors[k], v)) << k;
  }
  EXPECT_EQ(r.metadata.at("format_version"), "1");
}

TEST(SafeTensors, RefusesDamagedFiles) {
  SafeTensors st;
  st.tensors["w"] = torch::ones({16});
  const std::string p = tmp("ok.safetensors");
  save_safetensors(p, st);
  const std::string raw = slurp(p);

  EXPECT_NE(error_of(tmp("missing.safetensors")).find("cannot open"), std::string::npos);
  spit(tmp("t1"), raw.substr(0, 5));
  EXPECT_NE(error_of(tmp("t1")).find("truncated"), std::string::npos);
  spit(tmp("t2"), raw.substr(0, raw.size() - 4));  // data cut short
  EXPECT_NE(error_of(tmp("t2")).find("w.data_offsets"), std::string::npos) << error_of(tmp("t2"));
  std::string bad_len = raw;
  bad_len[7] = '\x7f';  // absurd header length
  spit(tmp("t3"), bad_len);
  EXPECT_NE(error_of(tmp("t3")).find("header_length"), std::string::npos);
  std::string bad_json = raw;
  bad_json[8] = '[';
  bad_json[9] = '!';
  spit(tmp("t4"), bad_json);
  EXPECT_NE(error_of(tmp("t4")).find("not valid JSON"), std::string::npos) << error_of(tmp("t4"));
  std::string bad_dtype = raw;
  bad_dtype.replace(bad_dtype.find("F32"), 3, "F16");
  spit(tmp("t5"), bad_dtype);
  EXPECT_NE(error_of(tmp("t5")).find("w.dtype"), std::string::npos) << error_of(tmp("t5"));
  // Every message names the file.
  EXPECT_NE(error_of(tmp("t5")).find(tmp("t5")), std::string::npos);
}

TEST(SafeTensors, RefusesUnsupportedDtypeOnSave) {
  SafeTensors st;
  st.tensors["h"] = torch::ones({2}, torch::kInt32);
  EXPECT_THROW(save_safetensors(tmp("i32"), st), Error);
}
