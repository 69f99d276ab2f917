// The collectives table (schema 2, issue #14): natural key, migration of a
// version-1 store, refusal of a newer one, db info / export.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <sstream>

#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl;
using scaledl::test::error_of;

namespace {

CollectiveMeasurement row(double bytes, bool in_place) {
  CollectiveMeasurement m;
  m.campaign = "c";
  m.collective = "allreduce";
  m.backend = "nccl-tests";
  m.world = 4;
  m.bytes = bytes;
  m.in_place = in_place;
  m.time_s = 1e-5 + bytes / 1e11;
  m.busbw_gbs = 1.5 * bytes / m.time_s / 1e9;
  m.source = "test";
  return m;
}

void sql(Store& s, const char* q) {
  ASSERT_EQ(sqlite3_exec(s.handle(), q, nullptr, nullptr, nullptr), SQLITE_OK) << q;
}

}  // namespace

TEST(StoreCollectives, NaturalKeyMakesAReimportInsertNothing) {
  Store s(scaledl::test::fresh_store_path("coll-key.sqlite"));
  std::vector<CollectiveMeasurement> rows = {row(1 << 20, false), row(1 << 20, true), row(1 << 22, false)};
  EXPECT_EQ(s.put_collectives(rows), 3u);
  EXPECT_EQ(s.put_collectives(rows), 0u);
  rows[0].device = "cuda:X";  // another device is another row
  EXPECT_EQ(s.put_collectives(rows), 1u);
  EXPECT_EQ(s.counts()["collectives"], 4);
  // A bad row anywhere: nothing of the batch is inserted.
  auto bad = rows;
  bad[0].device = "cuda:Y";
  bad[2].level = "rack";
  EXPECT_NE(error_of([&] { s.put_collectives(bad); }).find("level=rack"), std::string::npos);
  EXPECT_EQ(s.counts()["collectives"], 4);
  std::ostringstream csv;
  s.export_csv("collectives", csv);
  const std::string text = csv.str();
  EXPECT_EQ(
      text.rfind("id,campaign,collective,backend,device,level,dtype,world,nodes,bytes,in_place,time_s", 0),
      0u)
      << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);  // header + 4 rows
}

TEST(StoreCollectives, VersionOneStoreOpensAndGainsTheTableOnWrite) {
  const std::string p = scaledl::test::fresh_store_path("coll-v1.sqlite");
  {
    Store s(p);
    EXPECT_EQ(s.info()["schema_version"], "4");
    // What a store written before issue #14 looks like.
    sql(s, "DROP TABLE collectives");
    sql(s, "UPDATE meta SET value='1' WHERE key='schema_version'");
  }
  {
    Store r(p, /*read_only=*/true);
    EXPECT_EQ(r.info()["schema_version"], "1");
    EXPECT_FALSE(r.has_collectives_table());
    EXPECT_TRUE(r.collectives().empty());
    EXPECT_FALSE(r.counts().contains("collectives"));
  }
  {
    Store w(p);
    EXPECT_EQ(w.info()["schema_version"], "4");
    EXPECT_TRUE(w.has_collectives_table());
    EXPECT_EQ(w.put_collectives({row(1 << 20, false)}), 1u);
  }
  {
    Store s(p);
    sql(s, "UPDATE meta SET value='5' WHERE key='schema_version'");
  }
  for (bool ro : {true, false})
    EXPECT_NE(error_of([&] { Store x(p, ro); }).find("schema_version=5 but this build reads 1..4"),
              std::string::npos)
        << ro;
}
