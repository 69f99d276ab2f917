// Design spaces and expressions against hostile input (issue #16): deep
// expressions are an Error, not a stack overflow; JSON-library errors never
// reach the user; derived values may use fixed values.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/design/space.hpp"

using scaledl::json;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const scaledl::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("NOT A scaledl::Error: ") + e.what();
  }
  return "<no error>";
}

json space_with(const std::string& constraint) {
  json j = json::parse(R"({"kind": "layers", "fixed": {"type": "linear", "bias": 1},
    "parameters": [{"name": "tokens", "kind": "grid", "values": [128, 256]},
                   {"name": "d_in", "kind": "grid", "values": [64, 128]},
                   {"name": "d_out", "kind": "grid", "values": [64]}]})");
  j["constraints"] = json::array({constraint});
  return j;
}

}  // namespace

TEST(ExprHardening, HundredThousandParenthesesIsAnError) {
  const std::string e = error_of(
      [] { scaledl::parse_space(space_with(std::string(100000, '(') + "1" + std::string(100000, ')'))); });
  EXPECT_NE(e.find("space.constraints[0].expr=\"((((("), std::string::npos) << e.substr(0, 300);
  EXPECT_NE(e.find("nested deeper than 64"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 400u);  // the expression is cut in the message
}

TEST(ExprHardening, LongUnaryAndBinaryChainsAreErrors) {
  std::string chain = "1";
  for (int i = 0; i < 100000; ++i) chain += "+1";
  for (const std::string& text :
       {std::string(100000, '-') + "1", std::string(100000, '!') + "1", chain,
        "min(" + std::string(50000, '(') + "1" + std::string(50000, ')') + ", 2)"}) {
    const std::string e = error_of([&] { scaledl::parse_space(space_with(text)); });
    EXPECT_NE(e.find("nested deeper than"), std::string::npos) << e.substr(0, 300);
  }
  // Ordinary expressions are unaffected.
  EXPECT_NO_THROW(
      scaledl::parse_space(space_with("((tokens + d_in) * 2 - -(-1)) % 3 != 7 && !(d_in > 1e9)")));
}

TEST(SpaceHardening, FixedValueOfTheWrongTypeNamesKeyAndValue) {
  json j = space_with("tokens > 0");
  j["fixed"]["bias"] = "yes";
  EXPECT_EQ(error_of([&] { scaledl::parse_space(j); }), "space.fixed.bias=\"yes\" is not an integer");
  j["fixed"]["bias"] = 1;
  j["fixed"]["dtype"] = 16;
  EXPECT_EQ(error_of([&] { scaledl::parse_space(j); }), "space.fixed.dtype=16 is not a string");
}

TEST(SpaceHardening, DerivedValueOfTheWrongTypeIsAnErrorNotATypeError) {
  json j = space_with("tokens > 0");
  j["parameters"].erase(2);  // d_out comes from a derived string
  j["derived"] = json::array({{{"name", "d_out"}, {"expr", "'wide'"}}});
  const scaledl::DesignSpace sp = scaledl::parse_space(j);
  const std::string e = error_of([&] { (void)scaledl::enumerate_candidates(sp, 1); });
  EXPECT_NE(e.find("no candidate is a valid layer config"), std::string::npos) << e;
  EXPECT_NE(e.find("dims.d_out=\"wide\" is not an integer"), std::string::npos) << e;
}

TEST(SpaceHardening, DerivedValuesMayUseFixedValues) {
  json j = space_with("d_out == 2 * scale * d_in");
  j["parameters"].erase(2);
  j["fixed"]["scale"] = 2;
  j["derived"] = json::array({{{"name", "d_out"}, {"expr", "2 * scale * d_in"}}});
  const scaledl::DesignSpace sp = scaledl::parse_space(j);
  const scaledl::CandidateSet cs = scaledl::enumerate_candidates(sp, 1);
  ASSERT_EQ(cs.cands.size(), 4u);
  const json c = scaledl::candidate_config(sp, cs.cands[0]);
  EXPECT_EQ(c["dims"]["d_out"], 4 * c["dims"]["d_in"].get<int64_t>()) << c.dump();
}
