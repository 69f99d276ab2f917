// Damaged campaign-store rows (issue #16, cases 10 and 11): garbage in the JSON
// columns, text in numeric columns and infinite timings are one scaledl::Error
// naming the store, the table, the row and the column, never a JSON-library
// message or a silently wrong value.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <functional>
#include <string>

#include "scaledl/core/error.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/ir/model_spec.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;

namespace {

/// A store with one device, one layer row and one model run, all valid.
std::string good_store(const std::string& name) {
  const std::string p = scaledl::test::fresh_store_path(name);
  Store s(p);
  DeviceRecord d;
  d.name = "dev";
  d.kind = "spec";
  d.peak_fp32_gflops = 1000;
  d.peak_mem_bw_gbs = 100;
  s.put_device(d);
  LayerMeasurement l;
  l.campaign = "c";
  l.dims = {8, 16, 16, 1};
  l.device = d.key();
  l.fwd = TimingStats::from_samples({1.0, 1.1});
  s.put_layer(l);
  ModelMeasurement m;
  m.campaign = "c";
  m.model_name = "bert";
  m.family = "bert";
  m.model = parse_model_config({{"model_type", "bert"},
                                {"hidden_size", 64},
                                {"num_hidden_layers", 1},
                                {"num_attention_heads", 2},
                                {"intermediate_size", 128},
                                {"vocab_size", 100}})
                .to_json();
  m.settings = TrainSettings{}.to_json();
  m.device = d.key();
  m.iter = TimingStats::from_samples({10.0, 11.0});
  m.node_times = {{"embed.word", 0.5}};
  s.put_model(m);
  return p;
}

/// Runs one UPDATE on the store's file with plain SQLite (a hand-edited or damaged store).
void sql(const std::string& path, const std::string& stmt) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, stmt.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

}  // namespace

TEST(StoreRows, GarbageInJsonColumnsNamesStoreTableRowAndColumn) {
  struct Case {
    std::string update;
    std::function<void(Store&)> read;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"UPDATE layers SET dims='[8,16,'", [](Store& s) { s.layers(); },
       ": layers row 1: dims: malformed JSON: "},
      {"UPDATE layers SET dims='{\"a\":1}'", [](Store& s) { s.layers(); },
       ": layers row 1: dims={\"a\":1} is not an array of integers"},
      {"UPDATE layers SET dims='[8,\"16\",16,1]'", [](Store& s) { s.layers(); },
       ": layers row 1: dims[1]=\"16\" is not an integer"},
      {"UPDATE layers SET dims='[8,9223372036854775808,16,1]'", [](Store& s) { s.layers(); },
       ": layers row 1: dims[1]=9223372036854775808 is not an integer"},
      {"UPDATE layers SET dims='" + std::string(1000, '[') + "'", [](Store& s) { s.layers(); },
       ": layers row 1: dims: malformed JSON: arrays/objects nested deeper than 64"},
      {"UPDATE devices SET record='not json'", [](Store& s) { s.devices(); },
       ":devices[spec:dev].record: malformed JSON: "},
      {"UPDATE devices SET record='[1]'", [](Store& s) { s.device("spec:dev"); },
       ":devices[spec:dev]: expected a JSON object"},
      {"UPDATE models SET settings='{\"batch\": '", [](Store& s) { s.models(); },
       ": models row 1: settings: malformed JSON: "},
      {"UPDATE models SET model='{\"hidden\": 1e400}'", [](Store& s) { s.models(); },
       ": models row 1: model: malformed JSON: hidden=1e400 is out of range"},
      {"UPDATE models SET node_times='{\"a\": 1}'", [](Store& s) { s.models(); },
       ": models row 1: node_times={\"a\":1} is not an array of [node, ms] pairs"},
      {"UPDATE models SET node_times='[[\"a\", \"fast\"]]'", [](Store& s) { s.models(); },
       ": models row 1: node_times[0]=[\"a\",\"fast\"] is not a [node, ms] pair"},
      {"UPDATE models SET node_times='[5]'", [](Store& s) { s.models(); },
       ": models row 1: node_times[0]=5 is not a [node, ms] pair"},
  };
  for (const auto& c : cases) {
    const std::string p = good_store("rows.sqlite");
    sql(p, c.update);
    Store s(p, /*read_only=*/true);
    const std::string e = error_of([&] { c.read(s); });
    EXPECT_EQ(e.rfind(p, 0), 0u) << c.update << "\n" << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.update << "\n" << e;
  }
}

TEST(StoreRows, TextInANumericColumnIsNamedNotReadAsZero) {
  const std::string p = good_store("text-num.sqlite");
  sql(p, "UPDATE layers SET fwd_median_ms='abc'");
  Store s(p, true);
  EXPECT_EQ(error_of([&] { s.layers(); }), p + ": layers row 1: fwd_median_ms='abc' is not a number");
  sql(p, "UPDATE layers SET fwd_median_ms='2.5'");  // numeric text: SQLite stores a REAL
  EXPECT_DOUBLE_EQ(Store(p, true).layers().at(0).fwd.median_ms, 2.5);
  sql(p, "UPDATE models SET iter_n='five'");
  EXPECT_EQ(error_of([&] { Store(p, true).models(); }), p + ": models row 1: iter_n='five' is not a number");
}

TEST(StoreRows, InfiniteTimingNamesItsRow) {
  const std::string p = good_store("inf.sqlite");
  sql(p, "UPDATE models SET iter_median_ms=9e999");  // SQLite's +Inf
  EXPECT_EQ(error_of([&] { Store(p, true).models(); }),
            p + ": models row 1: iter_median_ms=inf is not finite");
  sql(p, "UPDATE layers SET bwd_p90_ms=-9e999");
  EXPECT_EQ(error_of([&] { Store(p, true).layers(); }), p + ": layers row 1: bwd_p90_ms=-inf is not finite");
}

TEST(StoreRows, ValidRowsStillReadBack) {
  const std::string p = good_store("valid.sqlite");
  Store s(p, true);
  ASSERT_EQ(s.layers().size(), 1u);
  EXPECT_EQ(s.layers()[0].dims, (std::vector<int64_t>{8, 16, 16, 1}));
  ASSERT_EQ(s.models().size(), 1u);
  ASSERT_EQ(s.models()[0].node_times.size(), 1u);
  EXPECT_EQ(s.models()[0].node_times[0].node, "embed.word");
  EXPECT_TRUE(s.device("spec:dev").has_value());
}
