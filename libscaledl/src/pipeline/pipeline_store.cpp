// The store's `pipeline` table (schema 3, issue #15; created with the other
// tables by Store's constructor, see kPipelineSchema in io/store.cpp): one row per
// (campaign, host, kind, data, sample size, W), and kind "storage" rows for read rates.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "io/sqlite_stmt.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/io/store.hpp"
#include "scaledl/pipeline/pipeline.hpp"

namespace scaledl {

namespace {

using detail::Stmt;

const char* kInsert =
    "INSERT INTO pipeline (campaign, host, vcpus, kind, data, sample_size, workers, samples_per_s, cv, "
    "repeats, "
    "samples, status, bytes_per_sample, read_ms, decode_ms, transform_ms, items, skipped, read_Bps, bytes, "
    "cache_dropped, resident_before) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO "
    "NOTHING";

}  // namespace

size_t put_pipeline_rows(Store& store, const std::string& campaign, const PipelineReport& r) {
  SCALEDL_CHECK(!campaign.empty(), "--campaign must not be empty");
  SCALEDL_CHECK(store.has_table("pipeline"), "{}: the store has no pipeline table", store.path());
  sqlite3* db = store.handle();
  Store::Transaction tx(store);
  Stmt ins(db, kInsert, store.path());
  size_t added = 0;
  const std::string host = r.host.key();
  for (const auto& m : r.pipelines)
    for (const auto& p : m.points) {
      SCALEDL_CHECK(p.samples_per_s > 0 && std::isfinite(p.samples_per_s),
                    "{} pipeline W={}: samples/s={} is not a rate", to_string(m.kind), p.workers,
                    p.samples_per_s);
      ins.reset();
      ins.bind(1, campaign)
          .bind(2, host)
          .bind(3, int64_t{r.host.vcpus})
          .bind(4, std::string(to_string(m.kind)));
      ins.bind(5, m.data)
          .bind(6, m.sample_size)
          .bind(7, int64_t{p.workers})
          .bind(8, p.samples_per_s)
          .bind(9, p.cv);
      ins.bind(10, int64_t{p.repeats}).bind(11, p.samples).bind(12, p.status).bind(13, m.bytes_per_sample);
      ins.bind(14, m.read_ms)
          .bind(15, m.decode_ms)
          .bind(16, m.transform_ms)
          .bind(17, m.items)
          .bind(18, m.skipped);
      ins.bind(19, NAN).bind(20, NAN).bind(21, NAN).bind(22, NAN);
      ins.step();
      added += sqlite3_changes(db) > 0 ? 1 : 0;
    }
  if (r.storage) {
    const auto& s = *r.storage;
    ins.reset();
    ins.bind(1, campaign).bind(2, host).bind(3, int64_t{r.host.vcpus}).bind(4, std::string("storage"));
    ins.bind(5, s.path).bind(6, int64_t{0}).bind(7, int64_t{1}).bind(8, NAN).bind(9, s.cv);
    ins.bind(10, int64_t{s.repeats})
        .bind(11, int64_t{0})
        .bind(12, std::string(s.cache_dropped ? "ok" : "cached"));
    for (int c = 13; c <= 18; ++c) ins.bind(c, NAN);
    ins.bind(19, s.read_Bps)
        .bind(20, s.bytes)
        .bind(21, int64_t{s.cache_dropped ? 1 : 0})
        .bind(22, s.resident_before);
    ins.step();
    added += sqlite3_changes(db) > 0 ? 1 : 0;
  }
  tx.commit();
  return added;
}

PipelineReport pipeline_rows(Store& store, const std::string& campaign, const std::string& host) {
  SCALEDL_CHECK(store.has_table("pipeline"),
                "{}: no pipeline table (a store written before issue #15): run "
                "`scaledl bench pipeline --db` first",
                store.path());
  sqlite3* db = store.handle();
  Stmt q(
      db,
      "SELECT campaign, host, vcpus, kind, data, sample_size, workers, samples_per_s, cv, repeats, samples, "
      "status, "
      "bytes_per_sample, read_ms, decode_ms, transform_ms, items, skipped, read_Bps, bytes, cache_dropped, "
      "resident_before FROM pipeline WHERE (?1 = '' OR campaign = ?1) AND (?2 = '' OR host = ?2) ORDER BY id",
      store.path());
  q.bind(1, campaign).bind(2, host);
  std::set<std::pair<std::string, std::string>> groups;
  PipelineReport r;
  std::map<std::tuple<std::string, std::string, int64_t>, size_t>
      index;  // (kind, data, size) -> pipelines[i]
  while (q.step()) {
    groups.insert({q.text(0), q.text(1)});
    const std::string where = fmt::format("{}: pipeline row ({}, {}, {}, W={})", store.path(), q.text(0),
                                          q.text(3), q.text(4), q.i64(6));
    r.host.vcpus = static_cast<int>(q.i64(2));
    const std::string h = q.text(1);
    const auto paren = h.rfind(" (");
    r.host.cpu = paren == std::string::npos ? h : h.substr(0, paren);
    if (q.text(3) == "storage") {
      StorageMeasurement s;
      s.path = q.text(4);
      s.read_Bps = q.real(18);
      SCALEDL_CHECK(s.read_Bps > 0, "{}: read_Bps={} is not a rate", where, s.read_Bps);
      s.cv = q.real0(8);
      s.repeats = static_cast<int>(q.i64(9));
      s.bytes = q.real0(19);
      s.cache_dropped = q.i64(20) != 0;
      s.resident_before = q.real0(21);
      r.storage = s;  // the latest storage row wins
      continue;
    }
    const InputKind kind = parse_input_kind(q.text(3), where + ".kind");
    const auto key = std::make_tuple(q.text(3), q.text(4), q.i64(5));
    auto it = index.find(key);
    if (it == index.end()) {
      PipelineMeasurement m;
      m.kind = kind;
      m.data = q.text(4);
      m.sample_size = q.i64(5);
      SCALEDL_CHECK(m.sample_size >= 1, "{}: sample_size={} must be >= 1", where, m.sample_size);
      it = index.emplace(key, r.pipelines.size()).first;
      r.pipelines.push_back(m);
    }
    PipelineMeasurement& m = r.pipelines[it->second];
    WorkerPoint p;
    p.workers = static_cast<int>(q.i64(6));
    p.samples_per_s = q.real(7);
    SCALEDL_CHECK(p.workers >= 1 && p.samples_per_s > 0, "{}: samples_per_s={} is not a rate", where,
                  p.samples_per_s);
    p.cv = q.real0(8);
    p.repeats = static_cast<int>(q.i64(9));
    p.samples = q.i64(10);
    p.status = q.text(11);
    if (p.workers == 1) {
      m.bytes_per_sample = q.real0(12);
      m.read_ms = q.real0(13);
      m.decode_ms = q.real0(14);
      m.transform_ms = q.real0(15);
      m.items = q.i64(16);
      m.skipped = q.i64(17);
    }
    m.points.push_back(p);
  }
  SCALEDL_CHECK(!groups.empty(), "{}: no pipeline rows{}{}", store.path(),
                campaign.empty() ? "" : " of campaign " + campaign, host.empty() ? "" : " of host " + host);
  if (groups.size() > 1) {
    std::string list;
    for (const auto& [c, h] : groups) list += (list.empty() ? "" : "; ") + c + " on " + h;
    fail(
        "{}: pipeline rows of {} campaigns / hosts ({}): keep one per store (`scaledl db merge` of one "
        "campaign)",
        store.path(), groups.size(), list);
  }
  for (auto& m : r.pipelines)
    std::sort(m.points.begin(), m.points.end(),
              [](const WorkerPoint& a, const WorkerPoint& b) { return a.workers < b.workers; });
  return r;
}

}  // namespace scaledl
