// Shards of a plan (`bench layers|models --shard i/n`): disjoint, covering,
// in plan order, keys unchanged; bad "i/n" values name the option and value.
#include <gtest/gtest.h>

#include <set>

#include "scaledl/design/plan.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;

TEST(PlanShard, IndicesAreEveryNthFromI) {
  struct Case {
    size_t size;
    Shard s;
    std::vector<size_t> want;
  };
  for (const Case& c : std::vector<Case>{{10, {0, 3}, {0, 3, 6, 9}},
                                         {10, {2, 3}, {2, 5, 8}},
                                         {5, {0, 1}, {0, 1, 2, 3, 4}},
                                         {2, {3, 4}, {}},  // more shards than configs: this one runs nothing
                                         {0, {0, 2}, {}},
                                         {7, {6, 7}, {6}}})
    EXPECT_EQ(shard_indices(c.size, c.s), c.want)
        << "size " << c.size << " shard " << c.s.index << "/" << c.s.count;
}

TEST(PlanShard, ShardsAreDisjointAndCoverThePlan) {
  for (size_t size : {1u, 7u, 64u, 100u})
    for (int64_t n : {1, 2, 3, 8, 13}) {
      std::multiset<size_t> seen;
      for (int64_t i = 0; i < n; ++i)
        for (size_t k : shard_indices(size, {i, n})) {
          EXPECT_EQ(static_cast<int64_t>(k % n), i);
          seen.insert(k);
        }
      ASSERT_EQ(seen.size(), size) << "size " << size << " n " << n;  // no index twice
      size_t k = 0;
      for (size_t v : seen) EXPECT_EQ(v, k++);
    }
}

TEST(PlanShard, ApplyKeepsPlanOrderAndKeys) {
  nlohmann::json cs = nlohmann::json::array();
  for (int t = 1; t <= 5; ++t)
    cs.push_back(
        {{"type", "linear"}, {"dims", {{"tokens", 8 * t}, {"d_in", 16}, {"d_out", 16}, {"bias", 1}}}});
  const Plan full = parse_plan({{"kind", "layers"}, {"configs", cs}}, "plan");
  std::vector<std::string> keys;
  for (int64_t i = 0; i < 2; ++i) {
    Plan p = full;
    apply_shard(p, {i, 2});
    ASSERT_EQ(p.layers.size(), i == 0 ? 3u : 2u);
    for (size_t j = 0; j < p.layers.size(); ++j) EXPECT_EQ(p.layers[j].key(), full.layers[2 * j + i].key());
    for (const auto& c : p.layers) keys.push_back(c.key());
  }
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), full.layers.size());
}

TEST(PlanShard, ParsesGoodValues) {
  for (auto [text, i, n] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
           {"0/1", 0, 1}, {"0/2", 0, 2}, {"1/2", 1, 2}, {"7/8", 7, 8}, {"123/1000", 123, 1000}}) {
    const Shard s = parse_shard(text);
    EXPECT_EQ(s.index, i) << text;
    EXPECT_EQ(s.count, n) << text;
  }
}

TEST(PlanShard, BadValuesNameTheOptionAndValue) {
  struct Case {
    std::string text, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"3/2", "i=3 must be in 0..1"},
           {"2/2", "0-based"},  // SLURM's 1-based habit
           {"0/0", "n=0 must be >= 1"},
           {"1/-4", "n=-4 must be >= 1"},
           {"-1/4", "i=-1 must be in 0..3"},
           {"x", "is not i/n"},
           {"", "is not i/n"},
           {"1", "is not i/n"},
           {"1/", "is not i/n"},
           {"/4", "is not i/n"},
           {"1/2/3", "is not i/n"},
           {" 1/2", "is not i/n"},
           {"1/2 ", "is not i/n"},
           {"+1/2", "is not i/n"},
           {"1.0/2", "is not i/n"},
           {"99999999999999999999/2", "is not i/n"},
       }) {
    const std::string e = error_of([&] { parse_shard(c.text); });
    EXPECT_EQ(e.rfind("--shard=" + c.text, 0), 0u) << "'" << c.text << "': " << e;
    EXPECT_NE(e.find(c.needle), std::string::npos) << "'" << c.text << "': " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_NE(error_of([] { shard_indices(4, {2, 2}); }), "<no error>");
}
