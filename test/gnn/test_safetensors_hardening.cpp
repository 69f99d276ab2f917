// safetensors headers against hostile input (issue #16): shapes whose product
// overflows int64 and deeply nested headers are one scaledl::Error naming the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "gnn/safetensors.hpp"
#include "scaledl/core/error.hpp"

using namespace scaledl;

namespace {
std::string write_st(const std::string& name, std::string header) {
  while (header.size() % 8) header += ' ';
  const uint64_t n = header.size();
  const std::string p = ::testing::TempDir() + "/sth_" + name;
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  return p;
}
std::string error_of(const std::string& p) {
  try {
    load_safetensors(p);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("NOT A scaledl::Error: ") + e.what();
  }
  return "<no error>";
}
}  // namespace

TEST(SafeTensorsHardening, ShapeProductOverflowIsRefused) {
  // each entry < 2^40, their product 2^78 (signed overflow before the fix)
  const std::string p = write_st("big", R"({"w": {"dtype": "F32", "shape": [549755813887, 549755813887],
                                                  "data_offsets": [0, 0]}})");
  EXPECT_EQ(error_of(p), p + ": w.shape is too large");
  // An empty tensor is refused too when its other entries overflow: its strides would (LibTorch 2.x
  // throws its own error there, found on the H200 machine); a plain empty one is fine.
  const std::string z = write_st("zero", R"({"w": {"dtype": "F32", "shape": [0, 549755813887, 549755813887],
                                                   "data_offsets": [0, 0]}})");
  EXPECT_EQ(error_of(z), z + ": w.shape is too large");
  const std::string ok =
      write_st("empty", R"({"w": {"dtype": "F32", "shape": [0, 4, 5], "data_offsets": [0, 0]}})");
  EXPECT_EQ(error_of(ok), "<no error>");
}

TEST(SafeTensorsHardening, DeeplyNestedHeaderIsRefused) {
  const std::string p =
      write_st("deep", "{\"__metadata__\": " + std::string(50000, '[') + std::string(50000, ']') + "}");
  const std::string e = error_of(p);
  EXPECT_EQ(e.rfind(p + ": header is not valid JSON", 0), 0u) << e;
  EXPECT_NE(e.find("nested deeper than 64"), std::string::npos) << e;
}
