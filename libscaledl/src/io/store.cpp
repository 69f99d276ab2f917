#include "scaledl/io/store.hpp"
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include "core/stats.hpp"
#include "io/sqlite_stmt.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

namespace {

using detail::Stmt;

/// `file:` URI of a path for sqlite3_open_v2 with SQLITE_OPEN_URI: '%', '?',
/// '#' and control or non-ASCII bytes percent-encoded.
std::string sqlite_uri(const std::string& path, const char* query) {
  std::string u = path.size() > 0 && path[0] == '/' ? "file://" : "file:";
  for (unsigned char ch : path) {
    if (ch == '%' || ch == '?' || ch == '#' || ch < 0x21 || ch > 0x7e)
      u += fmt::format("%{:02X}", ch);
    else
      u += static_cast<char>(ch);
  }
  return u + "?" + query;
}

/// Issue #39 case 20: a store left in WAL mode cannot be read where its
/// -wal/-shm files cannot be created (a read-only mount): SQLite says "unable to
/// open database file" at the first read. Such a store is opened again with
/// immutable=1 (no locks, no -shm), which is exact when there is no -wal file
/// holding changes: then the main file is the whole store. Returns the new
/// handle, or nullptr when the fallback does not apply.
sqlite3* reopen_immutable_if_unreadable(sqlite3* db, const std::string& path) {
  const int rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  const int ext = sqlite3_extended_errcode(db);
  if (rc == SQLITE_OK || !((rc & 0xff) == SQLITE_CANTOPEN || ext == SQLITE_READONLY_CANTINIT)) return nullptr;
  std::error_code ec;
  const auto wal = std::filesystem::file_size(path + "-wal", ec);
  if (!ec && wal > 0) return nullptr;  // committed changes in the -wal: immutable would not see them
  sqlite3* im = nullptr;
  if (sqlite3_open_v2(sqlite_uri(path, "immutable=1").c_str(), &im, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                      nullptr) != SQLITE_OK ||
      sqlite3_exec(im, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) != SQLITE_OK) {
    sqlite3_close(im);
    return nullptr;
  }
  return im;
}

// Schema versions: 1 (devices, environments, layers, models), 2 (+ collectives,
// issue #14). This build reads both: a version-1 store opened for writing gets
// the new table from kSchema (CREATE ... IF NOT EXISTS) and is stamped 2; one
// opened read-only stays 1 and simply has no collective rows. 3 (+ memory:
// allocator-exact peak bytes of model and layer rows, issue #15), migrated the
// same way; rows of older stores simply have no memory. 4 (+ layer_passes: the
// per-pass rows of `bench layers --passes N`), migrated the same way.
constexpr int kSchemaVersion = 4;
constexpr int kOldestSchemaVersion = 1;

const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS devices (
  key TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS environments (
  id INTEGER PRIMARY KEY, env TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS layers (
  id INTEGER PRIMARY KEY,
  campaign TEXT NOT NULL, config_key TEXT NOT NULL, device TEXT NOT NULL,
  layer_type TEXT NOT NULL, dims TEXT NOT NULL, dtype TEXT NOT NULL,
  status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  fwd_median_ms REAL, fwd_p10_ms REAL, fwd_p90_ms REAL, fwd_cv REAL, fwd_n INTEGER,
  bwd_median_ms REAL, bwd_p10_ms REAL, bwd_p90_ms REAL, bwd_cv REAL, bwd_n INTEGER,
  source TEXT NOT NULL, env_id INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (campaign, config_key, device));
CREATE INDEX IF NOT EXISTS layers_type ON layers (layer_type, device);
CREATE TABLE IF NOT EXISTS models (
  id INTEGER PRIMARY KEY,
  campaign TEXT NOT NULL, config_key TEXT NOT NULL, device TEXT NOT NULL,
  model_name TEXT NOT NULL, family TEXT NOT NULL, model TEXT NOT NULL, settings TEXT NOT NULL,
  status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  iter_median_ms REAL, iter_p10_ms REAL, iter_p90_ms REAL, iter_cv REAL, iter_n INTEGER,
  noopt_median_ms REAL, noopt_p10_ms REAL, noopt_p90_ms REAL, noopt_cv REAL, noopt_n INTEGER,
  node_times TEXT NOT NULL DEFAULT '[]',
  source TEXT NOT NULL, env_id INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (campaign, config_key, device));
CREATE TABLE IF NOT EXISTS collectives (
  id INTEGER PRIMARY KEY,
  campaign TEXT NOT NULL, collective TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL,
  level TEXT NOT NULL, dtype TEXT NOT NULL, world INTEGER NOT NULL, nodes INTEGER NOT NULL,
  bytes REAL NOT NULL, in_place INTEGER NOT NULL, time_s REAL NOT NULL, busbw_gbs REAL, cv REAL,
  repeats INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, source TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (campaign, collective, backend, device, level, dtype, world, nodes, bytes, in_place));
CREATE TABLE IF NOT EXISTS memory (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL, campaign TEXT NOT NULL, config_key TEXT NOT NULL, device TEXT NOT NULL,
  peak_bytes REAL NOT NULL, base_bytes REAL NOT NULL, saved_bytes REAL NOT NULL, method TEXT NOT NULL,
  UNIQUE (kind, campaign, config_key, device));
CREATE TABLE IF NOT EXISTS layer_passes (
  id INTEGER PRIMARY KEY,
  campaign TEXT NOT NULL, config_key TEXT NOT NULL, device TEXT NOT NULL, pass INTEGER NOT NULL,
  layer_type TEXT NOT NULL, dims TEXT NOT NULL, dtype TEXT NOT NULL,
  status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  fwd_median_ms REAL, fwd_p10_ms REAL, fwd_p90_ms REAL, fwd_cv REAL, fwd_n INTEGER,
  bwd_median_ms REAL, bwd_p10_ms REAL, bwd_p90_ms REAL, bwd_cv REAL, bwd_n INTEGER,
  env_id INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (campaign, config_key, device, pass));
)SQL";

// Schema 3, second table (issue #15, host input pipeline; kept apart from kSchema
// so the peak-memory and pipeline halves of the issue do not edit one string):
// `scaledl bench pipeline --db` rows, read and written by src/pipeline/pipeline_store.cpp.
// kind: text | image (samples/s of W worker threads) | storage (read_Bps of `data`).
const char* kPipelineSchema = R"SQL(
CREATE TABLE IF NOT EXISTS pipeline (
  id INTEGER PRIMARY KEY,
  campaign TEXT NOT NULL, host TEXT NOT NULL, vcpus INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL,
  sample_size INTEGER NOT NULL, workers INTEGER NOT NULL,
  samples_per_s REAL, cv REAL, repeats INTEGER NOT NULL, samples INTEGER NOT NULL, status TEXT NOT NULL,
  bytes_per_sample REAL, read_ms REAL, decode_ms REAL, transform_ms REAL, items INTEGER, skipped INTEGER,
  read_Bps REAL, bytes REAL, cache_dropped INTEGER, resident_before REAL,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (campaign, host, kind, data, sample_size, workers));
)SQL";

void bind_stats(Stmt& s, int first, const TimingStats& t) {
  s.bind(first, t.median_ms).bind(first + 1, t.p10_ms).bind(first + 2, t.p90_ms).bind(first + 3, t.cv);
  s.bind(first + 4, t.n);
}

/// Columns first..first+4 (median, p10, p90, cv, n); `where` names the row
/// ("R.sqlite: layers row 12"). SQLite keeps a text it cannot convert (e.g. 'abc')
/// as TEXT in a REAL column, which sqlite3_column_double would read as 0.
TimingStats read_stats(const Stmt& s, int first, const std::string& where) {
  for (int c = first; c <= first + 4; ++c) {
    SCALEDL_CHECK(s.type(c) != SQLITE_TEXT && s.type(c) != SQLITE_BLOB, "{}: {}='{}' is not a number", where,
                  s.name(c), s.text(c));
    if (c < first + 4)
      SCALEDL_CHECK(!std::isinf(s.real(c)), "{}: {}={} is not finite", where, s.name(c), s.real(c));
  }
  TimingStats t;
  t.median_ms = s.real(first);
  t.p10_ms = s.real(first + 1);
  t.p90_ms = s.real(first + 2);
  t.cv = s.real(first + 3);
  const int64_t n = s.i64(first + 4);
  SCALEDL_CHECK(n >= 0 && n <= INT32_MAX, "{}: {}={} is out of range", where, s.name(first + 4), n);
  t.n = static_cast<int>(n);
  return t;
}

/// layers.dims: a JSON array of integers.
std::vector<int64_t> dims_of(const std::string& text, const std::string& where) {
  const nlohmann::json j = parse_json_text(text, where);
  SCALEDL_CHECK(j.is_array(), "{}={} is not an array of integers", where, show(j));
  std::vector<int64_t> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& v = j[i];
    SCALEDL_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX),
                  "{}[{}]={} is not an integer", where, i, show(v));
    out.push_back(v.get<int64_t>());
  }
  return out;
}

/// models.node_times: a JSON array of [node name, ms or null].
std::vector<NodeTime> node_times_of(const std::string& text, const std::string& where) {
  const nlohmann::json j = parse_json_text(text, where);
  SCALEDL_CHECK(j.is_array(), "{}={} is not an array of [node, ms] pairs", where, show(j));
  std::vector<NodeTime> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    SCALEDL_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && (e[1].is_null() || e[1].is_number()),
                  "{}[{}]={} is not a [node, ms] pair", where, i, show(e));
    out.push_back({e[0].get<std::string>(), e[1].is_null() ? NAN : e[1].get<double>()});
  }
  return out;
}

}  // namespace

TimingStats TimingStats::from_samples(std::vector<double> v) {
  TimingStats t;
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  t.n = static_cast<int>(v.size());
  t.median_ms = sorted_quantile(v, 0.5);
  t.p10_ms = sorted_quantile(v, 0.1);
  t.p90_ms = sorted_quantile(v, 0.9);
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= std::max<size_t>(1, v.size() - 1);
  t.cv = mean > 0 ? std::sqrt(var) / mean : 0.0;
  return t;
}

std::string layer_key(LayerType t, const std::vector<int64_t>& dims, DType dtype) {
  return fmt::format("{}:{}:{}", to_string(t), fmt::join(dims, "x"), to_string(dtype));
}

bool usable_model_label(const ModelMeasurement& m, double max_cv) {
  if (m.status == "ok") return true;
  return max_cv > 0 && m.status == "unstable" && std::isfinite(m.iter.cv) && m.iter.cv <= max_cv &&
         std::isfinite(m.iter.median_ms) && m.iter.median_ms > 0;
}

std::string model_key(const ModelMeasurement& m) {
  return m.model_name + ":" + m.settings.dump();
}

Store::Store(const std::string& path, bool read_only) : path_(path) {
  std::error_code ec;
  SCALEDL_CHECK(!read_only || std::filesystem::exists(path, ec),
                "{}: no such store (the file does not exist)", path);
  int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail("{}: cannot open store: {}", path, msg);
  }
  sqlite3_busy_timeout(db_, 10000);
  if (read_only) {
    if (sqlite3* im = reopen_immutable_if_unreadable(db_, path)) {
      sqlite3_close(db_);
      db_ = im;
    }
  }
  try {
    // Whose file is it? A store is a database with a meta table holding
    // schema_version; an empty database becomes one. Anything else (another
    // program's database, a store whose meta table was dropped) is left alone.
    auto check_version = [&](const std::string& ver) {
      bool known = false;
      for (int k = kOldestSchemaVersion; k <= kSchemaVersion; ++k) known = known || ver == std::to_string(k);
      SCALEDL_CHECK(known, "{}: store schema_version={} but this build reads {}..{}", path_, ver,
                    kOldestSchemaVersion, kSchemaVersion);
    };
    auto has_table = [&](const char* name) {
      Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", path_);
      t.bind(1, std::string(name));
      return t.step();
    };
    std::vector<std::string> tables;
    {
      Stmt t(db_, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name", path_);
      while (t.step()) tables.push_back(t.text(0));
    }
    const bool fresh = tables.empty();
    SCALEDL_CHECK(
        fresh || has_table("meta"),
        "{}: not a ScaleDL store (no meta table; it holds table(s) {}): refusing to {} it", path_,
        fmt::join(tables.size() > 5 ? std::vector<std::string>(tables.begin(), tables.begin() + 5) : tables,
                  ", "),
        read_only ? "read" : "write to");
    SCALEDL_CHECK(!(fresh && read_only), "{}: not a ScaleDL store (an empty database)", path_);
    if (!fresh) {
      Stmt v(db_, "SELECT value FROM meta WHERE key='schema_version'", path_);
      SCALEDL_CHECK(v.step(),
                    "{}: not a ScaleDL store (its meta table has no schema_version): refusing to {} it",
                    path_, read_only ? "read" : "write to");
      check_version(v.text(0));  // a newer store is refused before anything is written
    }
    if (!read_only) {
      exec("PRAGMA journal_mode=WAL;");
      exec("PRAGMA synchronous=NORMAL;");
      // Creates what is missing and stamps the version: a version-1 store is
      // migrated here (it gains the collectives table).
      exec(kSchema);
      exec(kPipelineSchema);  // issue #15: the host input pipeline's table
      Stmt s(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", path_);
      s.bind(1, std::to_string(kSchemaVersion));
      s.step();
    }
    Stmt v(db_, "SELECT value FROM meta WHERE key='schema_version'", path_);
    SCALEDL_CHECK(v.step(), "{}: not a ScaleDL store (no schema_version)", path_);
    check_version(v.text(0));
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    std::string w = e.what();
    // "file is not a database" from SQLite means a corrupt or foreign file.
    if (w.find(path_) == 0) throw;
    fail("{}: {}", path_, w);
  }
}

Store::~Store() {
  if (!db_) return;
  // Issue #39 case 20: WAL while open (readers beside a writer), rollback-journal
  // mode when the writer closes: the checkpointed file is then the whole store,
  // readable where no -wal/-shm can be created (a read-only mount, a copy of the
  // file alone). While another connection has the store open this fails
  // (SQLITE_BUSY, not waited for) and the last writer to close does it.
  if (sqlite3_db_readonly(db_, "main") == 0) {
    sqlite3_busy_timeout(db_, 0);
    sqlite3_exec(db_, "PRAGMA journal_mode=DELETE;", nullptr, nullptr, nullptr);
  }
  sqlite3_close(db_);
}

void Store::exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail("{}: SQLite error: {}", path_, msg);
  }
}

void Store::put_device(const DeviceRecord& d) {
  // Only a record its own reader accepts is stored (rates known and plausible):
  // a campaign must never leave a row that later makes the store unreadable.
  DeviceRecord::from_json(d.to_json(), path_ + ": device record " + d.key());
  Stmt s(db_, "INSERT OR REPLACE INTO devices(key, name, kind, record) VALUES (?,?,?,?)", path_);
  s.bind(1, d.key()).bind(2, d.name).bind(3, d.kind).bind(4, d.to_json().dump());
  s.step();
}

std::optional<DeviceRecord> Store::device(const std::string& key) const {
  Stmt s(db_, "SELECT record FROM devices WHERE key=?", path_);
  s.bind(1, key);
  if (!s.step()) return std::nullopt;
  const std::string ctx = path_ + ":devices[" + key + "]";
  return DeviceRecord::from_json(parse_json_text(s.text(0), ctx + ".record"), ctx);
}

std::vector<DeviceRecord> Store::devices() const {
  Stmt s(db_, "SELECT key, record FROM devices ORDER BY key", path_);
  std::vector<DeviceRecord> out;
  while (s.step()) {
    const std::string ctx = path_ + ":devices[" + s.text(0) + "]";
    out.push_back(DeviceRecord::from_json(parse_json_text(s.text(1), ctx + ".record"), ctx));
  }
  return out;
}

int64_t Store::put_environment(const nlohmann::json& env) {
  std::string text = env.dump();
  Stmt ins(db_, "INSERT OR IGNORE INTO environments(env) VALUES (?)", path_);
  ins.bind(1, text);
  ins.step();
  Stmt q(db_, "SELECT id FROM environments WHERE env=?", path_);
  q.bind(1, text);
  SCALEDL_CHECK(q.step(), "{}: environment row vanished", path_);
  return q.i64(0);
}

static const char* kInsertLayer =
    "INSERT INTO layers(campaign, config_key, device, layer_type, dims, dtype, status, reason,"
    " fwd_median_ms, fwd_p10_ms, fwd_p90_ms, fwd_cv, fwd_n,"
    " bwd_median_ms, bwd_p10_ms, bwd_p90_ms, bwd_cv, bwd_n, source, env_id)"
    " VALUES (?,?,?,?,?,?,?,?, ?,?,?,?,?, ?,?,?,?,?, ?,?)"
    " ON CONFLICT(campaign, config_key, device) DO NOTHING";

/// Parameters 1-18 of a layers or layer_passes INSERT: campaign, config_key, device,
/// layer_type, dims, dtype, status, reason, fwd_* (5), bwd_* (5).
static void bind_layer_columns(Stmt& s, const LayerMeasurement& m) {
  validate_dims(m.type, m.dims);
  s.bind(1, m.campaign).bind(2, layer_key(m.type, m.dims, m.dtype)).bind(3, m.device);
  s.bind(4, std::string(to_string(m.type))).bind(5, nlohmann::json(m.dims).dump());
  s.bind(6, std::string(to_string(m.dtype))).bind(7, m.status).bind(8, m.reason);
  bind_stats(s, 9, m.fwd);
  bind_stats(s, 14, m.bwd);
}

/// Columns 0-16 of a layers or layer_passes SELECT, in bind_layer_columns' order less
/// config_key: campaign, layer_type, dims, dtype, device, status, reason, fwd_* (5),
/// bwd_* (5). `row` names the row in errors.
static LayerMeasurement read_layer_columns(const Stmt& s, const std::string& path, const std::string& table,
                                           const std::string& row) {
  LayerMeasurement m;
  m.campaign = s.text(0);
  m.type = parse_layer_type(s.text(1), path + ":" + table + ".layer_type");
  m.dims = dims_of(s.text(2), row + ": dims");
  m.dtype = parse_dtype(s.text(3), path + ":" + table + ".dtype");
  m.device = s.text(4);
  m.status = s.text(5);
  m.reason = s.text(6);
  m.fwd = read_stats(s, 7, row);
  m.bwd = read_stats(s, 12, row);
  return m;
}

static bool insert_layer(Stmt& s, const LayerMeasurement& m, sqlite3* db) {
  s.reset();
  bind_layer_columns(s, m);
  s.bind(19, m.source).bind(20, m.env_id);
  s.step();
  return sqlite3_changes(db) > 0;
}

static const char* kInsertMemory =
    "INSERT INTO memory(kind, campaign, config_key, device, peak_bytes, base_bytes, saved_bytes, method)"
    " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(kind, campaign, config_key, device) DO NOTHING";

/// The memory row of a timing row, when it was measured (one per key, like the timing row).
static void insert_memory(sqlite3* db, const std::string& path, const char* kind, const std::string& campaign,
                          const std::string& key, const std::string& device, const PeakMemory& mem) {
  if (!mem.measured()) return;
  SCALEDL_CHECK(std::isfinite(mem.peak_bytes) && std::isfinite(mem.base_bytes) &&
                    std::isfinite(mem.saved_bytes) && mem.base_bytes >= 0 && mem.saved_bytes >= 0 &&
                    mem.peak_bytes >= mem.base_bytes,
                "{}: {} row {}: memory peak_bytes={} base_bytes={} saved_bytes={} are not 0 <= base <= peak",
                path, kind, key, mem.peak_bytes, mem.base_bytes, mem.saved_bytes);
  Stmt s(db, kInsertMemory, path);
  s.bind(1, std::string(kind)).bind(2, campaign).bind(3, key).bind(4, device);
  s.bind(5, mem.peak_bytes).bind(6, mem.base_bytes).bind(7, mem.saved_bytes).bind(8, mem.method);
  s.step();
}

bool Store::put_layer(const LayerMeasurement& m) {
  Transaction tx(*this);
  bool added = false;
  {
    Stmt s(db_, kInsertLayer, path_);
    added = insert_layer(s, m, db_);
    if (added)
      insert_memory(db_, path_, "layer", m.campaign, layer_key(m.type, m.dims, m.dtype), m.device, m.memory);
  }
  tx.commit();
  return added;
}

size_t Store::put_layers(const std::vector<LayerMeasurement>& ms) {
  Transaction tx(*this);
  size_t n = 0;
  {
    Stmt s(db_, kInsertLayer, path_);
    for (const auto& m : ms) {
      if (!insert_layer(s, m, db_)) continue;
      ++n;
      insert_memory(db_, path_, "layer", m.campaign, layer_key(m.type, m.dims, m.dtype), m.device, m.memory);
    }
  }
  tx.commit();
  return n;
}

Store::Transaction::Transaction(Store& s) : s_(s) {
  static int counter = 0;
  if (sqlite3_get_autocommit(s_.db_)) {
    s_.exec("BEGIN IMMEDIATE");
  } else {
    savepoint_ = "scaledl_sp" + std::to_string(++counter);
    s_.exec("SAVEPOINT " + savepoint_);
  }
}

void Store::Transaction::commit() {
  s_.exec(savepoint_.empty() ? std::string("COMMIT") : "RELEASE " + savepoint_);
  done_ = true;
}

Store::Transaction::~Transaction() {
  if (done_) return;
  const std::string sql =
      savepoint_.empty() ? std::string("ROLLBACK") : "ROLLBACK TO " + savepoint_ + "; RELEASE " + savepoint_;
  sqlite3_exec(s_.db_, sql.c_str(), nullptr, nullptr, nullptr);
}

std::set<std::string> Store::layer_keys(const std::string& campaign, const std::string& device) const {
  Stmt s(db_, "SELECT config_key FROM layers WHERE campaign=? AND device=?", path_);
  s.bind(1, campaign).bind(2, device);
  std::set<std::string> out;
  while (s.step()) out.insert(s.text(0));
  return out;
}

bool Store::put_layer_pass(const LayerMeasurement& m, int pass) {
  SCALEDL_CHECK(pass >= 1, "{}: layer pass={} must be >= 1", path_, pass);
  Stmt s(db_,
         "INSERT INTO layer_passes(campaign, config_key, device, layer_type, dims, dtype, status, reason,"
         " fwd_median_ms, fwd_p10_ms, fwd_p90_ms, fwd_cv, fwd_n,"
         " bwd_median_ms, bwd_p10_ms, bwd_p90_ms, bwd_cv, bwd_n, env_id, pass)"
         " VALUES (?,?,?,?,?,?,?,?, ?,?,?,?,?, ?,?,?,?,?, ?,?)"
         " ON CONFLICT(campaign, config_key, device, pass) DO NOTHING",
         path_);
  bind_layer_columns(s, m);
  s.bind(19, m.env_id).bind(20, int64_t{pass});
  s.step();
  return sqlite3_changes(db_) > 0;
}

std::map<std::string, std::map<int, LayerMeasurement>> Store::layer_passes(const std::string& campaign,
                                                                           const std::string& device) const {
  std::map<std::string, std::map<int, LayerMeasurement>> out;
  if (!has_table("layer_passes")) return out;  // a store of schema <= 3 opened read-only
  Stmt s(db_,
         "SELECT campaign, layer_type, dims, dtype, device, status, reason,"
         " fwd_median_ms, fwd_p10_ms, fwd_p90_ms, fwd_cv, fwd_n,"
         " bwd_median_ms, bwd_p10_ms, bwd_p90_ms, bwd_cv, bwd_n, pass, env_id, id, config_key"
         " FROM layer_passes WHERE campaign=? AND device=? ORDER BY id",
         path_);
  s.bind(1, campaign).bind(2, device);
  while (s.step()) {
    const std::string row = fmt::format("{}: layer_passes row {}", path_, s.i64(19));
    LayerMeasurement m = read_layer_columns(s, path_, "layer_passes", row);
    m.env_id = s.i64(18);
    const int64_t pass = s.i64(17);
    SCALEDL_CHECK(pass >= 1 && pass <= 1000000, "{}: pass={} must be >= 1", row, pass);
    out[s.text(20)][static_cast<int>(pass)] = std::move(m);
  }
  return out;
}

std::vector<LayerMeasurement> Store::layers(std::optional<LayerType> type, const std::string& device,
                                            bool ok_only) const {
  std::string sql =
      "SELECT campaign, layer_type, dims, dtype, device, status, reason,"
      " fwd_median_ms, fwd_p10_ms, fwd_p90_ms, fwd_cv, fwd_n,"
      " bwd_median_ms, bwd_p10_ms, bwd_p90_ms, bwd_cv, bwd_n, source, env_id, id FROM layers WHERE 1=1";
  if (type) sql += " AND layer_type=?1";
  if (!device.empty()) sql += " AND device=?2";
  if (ok_only) sql += " AND status='ok'";
  sql += " ORDER BY id";
  Stmt s(db_, sql, path_);
  if (type) s.bind(1, std::string(to_string(*type)));
  if (!device.empty()) s.bind(2, device);
  std::vector<LayerMeasurement> out;
  while (s.step()) {
    const std::string row = fmt::format("{}: layers row {}", path_, s.i64(19));
    LayerMeasurement m = read_layer_columns(s, path_, "layers", row);
    m.source = s.text(17);
    m.env_id = s.i64(18);
    out.push_back(std::move(m));
  }
  const auto mem = memory_rows("layer");
  if (!mem.empty())
    for (auto& m : out) {
      auto it = mem.find({m.campaign, layer_key(m.type, m.dims, m.dtype), m.device});
      if (it != mem.end()) m.memory = it->second;
    }
  return out;
}

bool Store::put_model(const ModelMeasurement& m) {
  Transaction tx(*this);
  Stmt s(
      db_,
      "INSERT INTO models(campaign, config_key, device, model_name, family, model, settings, status, reason,"
      " iter_median_ms, iter_p10_ms, iter_p90_ms, iter_cv, iter_n,"
      " noopt_median_ms, noopt_p10_ms, noopt_p90_ms, noopt_cv, noopt_n, node_times, source, env_id)"
      " VALUES (?,?,?,?,?,?,?,?,?, ?,?,?,?,?, ?,?,?,?,?, ?,?,?)"
      " ON CONFLICT(campaign, config_key, device) DO NOTHING",
      path_);
  nlohmann::json nt = nlohmann::json::array();
  for (const auto& t : m.node_times)
    nt.push_back({t.node, std::isnan(t.ms) ? nlohmann::json() : nlohmann::json(t.ms)});
  s.bind(1, m.campaign).bind(2, model_key(m)).bind(3, m.device).bind(4, m.model_name).bind(5, m.family);
  s.bind(6, m.model.dump()).bind(7, m.settings.dump()).bind(8, m.status).bind(9, m.reason);
  bind_stats(s, 10, m.iter);
  bind_stats(s, 15, m.iter_noopt);
  s.bind(20, nt.dump()).bind(21, m.source).bind(22, m.env_id);
  s.step();
  const bool added = sqlite3_changes(db_) > 0;
  if (added) insert_memory(db_, path_, "model", m.campaign, model_key(m), m.device, m.memory);
  tx.commit();
  return added;
}

std::set<std::string> Store::model_keys(const std::string& campaign, const std::string& device) const {
  Stmt s(db_, "SELECT config_key FROM models WHERE campaign=? AND device=?", path_);
  s.bind(1, campaign).bind(2, device);
  std::set<std::string> out;
  while (s.step()) out.insert(s.text(0));
  return out;
}

std::vector<ModelMeasurement> Store::models(const std::string& device, bool ok_only) const {
  std::string sql =
      "SELECT campaign, model_name, family, model, settings, device, status, reason,"
      " iter_median_ms, iter_p10_ms, iter_p90_ms, iter_cv, iter_n,"
      " noopt_median_ms, noopt_p10_ms, noopt_p90_ms, noopt_cv, noopt_n, node_times, source, env_id, id"
      " FROM models WHERE 1=1";
  if (!device.empty()) sql += " AND device=?1";
  if (ok_only) sql += " AND status='ok'";
  sql += " ORDER BY id";
  Stmt s(db_, sql, path_);
  if (!device.empty()) s.bind(1, device);
  std::vector<ModelMeasurement> out;
  while (s.step()) {
    ModelMeasurement m;
    m.campaign = s.text(0);
    m.model_name = s.text(1);
    m.family = s.text(2);
    const std::string row = fmt::format("{}: models row {}", path_, s.i64(21));
    m.model = parse_json_text(s.text(3), row + ": model");
    m.settings = parse_json_text(s.text(4), row + ": settings");
    m.device = s.text(5);
    m.status = s.text(6);
    m.reason = s.text(7);
    m.iter = read_stats(s, 8, row);
    m.iter_noopt = read_stats(s, 13, row);
    m.node_times = node_times_of(s.text(18), row + ": node_times");
    m.source = s.text(19);
    m.env_id = s.i64(20);
    out.push_back(std::move(m));
  }
  const auto mem = memory_rows("model");
  if (!mem.empty())
    for (auto& m : out) {
      auto it = mem.find({m.campaign, model_key(m), m.device});
      if (it != mem.end()) m.memory = it->second;
    }
  return out;
}

std::map<std::tuple<std::string, std::string, std::string>, PeakMemory> Store::memory_rows(
    const std::string& kind) const {
  std::map<std::tuple<std::string, std::string, std::string>, PeakMemory> out;
  if (!has_table("memory")) return out;  // a store of schema <= 2 opened read-only
  Stmt s(db_,
         "SELECT campaign, config_key, device, peak_bytes, base_bytes, saved_bytes, method, id FROM memory"
         " WHERE kind=?",
         path_);
  s.bind(1, kind);
  while (s.step()) {
    PeakMemory p;
    p.peak_bytes = s.real(3);
    p.base_bytes = s.real(4);
    p.saved_bytes = s.real(5);
    p.method = s.text(6);
    SCALEDL_CHECK(
        std::isfinite(p.peak_bytes) && p.peak_bytes > 0 && p.base_bytes >= 0 && p.saved_bytes >= 0 &&
            p.base_bytes <= p.peak_bytes,
        "{}: memory row {}: peak_bytes={} base_bytes={} saved_bytes={} are not 0 <= base <= peak, peak > 0",
        path_, s.i64(7), p.peak_bytes, p.base_bytes, p.saved_bytes);
    out[{s.text(0), s.text(1), s.text(2)}] = p;
  }
  return out;
}

nlohmann::json Store::counts() const {
  nlohmann::json j;
  for (const char* t : {"devices", "environments", "layers", "models"}) {
    Stmt s(db_, std::string("SELECT COUNT(*) FROM ") + t, path_);
    s.step();
    j[t] = s.i64(0);
  }
  // Collectives (schema 2): absent from a version-1 store opened read-only;
  // counted only when it holds rows, so the outputs of stores without any stay.
  if (has_collectives_table()) {
    Stmt s(db_, "SELECT COUNT(*) FROM collectives", path_);
    s.step();
    if (s.i64(0) > 0) j["collectives"] = s.i64(0);
  }
  if (has_table("pipeline")) {  // issue #15 (schema 3), likewise only when it holds rows
    Stmt s(db_, "SELECT COUNT(*) FROM pipeline", path_);
    s.step();
    if (s.i64(0) > 0) j["pipeline"] = s.i64(0);
  }
  if (has_table("layer_passes")) {  // schema 4 (bench layers --passes), likewise
    Stmt s(db_, "SELECT COUNT(*) FROM layer_passes", path_);
    s.step();
    if (s.i64(0) > 0) j["layer_passes"] = s.i64(0);
  }
  return j;
}

bool Store::has_collectives_table() const {
  return has_table("collectives");
}

bool Store::has_table(const std::string& name) const {
  Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", path_);
  t.bind(1, name);
  return t.step();
}

size_t Store::put_collectives(const std::vector<CollectiveMeasurement>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& m = rows[i];
    const std::string where = fmt::format("collective row {}", i);
    SCALEDL_CHECK(!m.campaign.empty() && !m.collective.empty() && !m.backend.empty(),
                  "{}: campaign, collective and backend must be set", where);
    SCALEDL_CHECK(m.level == "intra-node" || m.level == "inter-node",
                  "{}: level={} is not intra-node or inter-node", where, m.level);
    SCALEDL_CHECK(m.world >= 1 && m.nodes >= 1 && m.nodes <= m.world, "{}: world={} nodes={} are impossible",
                  where, m.world, m.nodes);
    SCALEDL_CHECK(std::isfinite(m.bytes) && m.bytes > 0, "{}: bytes={} must be > 0", where, m.bytes);
    SCALEDL_CHECK(m.status != "ok" || (std::isfinite(m.time_s) && m.time_s > 0), "{}: time_s={} must be > 0",
                  where, m.time_s);
  }
  Transaction tx(*this);
  size_t n = 0;
  {
    Stmt s(db_,
           "INSERT OR IGNORE INTO collectives (campaign, collective, backend, device, level, dtype, world, "
           "nodes, "
           "bytes, in_place, time_s, busbw_gbs, cv, repeats, status, source) "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
           path_);
    for (const auto& m : rows) {
      s.reset();
      s.bind(1, m.campaign).bind(2, m.collective).bind(3, m.backend).bind(4, m.device).bind(5, m.level);
      s.bind(6, m.dtype).bind(7, m.world).bind(8, m.nodes).bind(9, m.bytes).bind(10, m.in_place ? 1 : 0);
      s.bind(11, std::isfinite(m.time_s) ? m.time_s : 0.0).bind(12, m.busbw_gbs).bind(13, m.cv);
      s.bind(14, m.repeats).bind(15, m.status).bind(16, m.source);
      s.step();
      n += sqlite3_changes(db_) > 0 ? 1 : 0;
    }
  }
  tx.commit();
  return n;
}

std::vector<CollectiveMeasurement> Store::collectives(const std::string& campaign,
                                                      const std::string& collective, bool ok_only) const {
  std::vector<CollectiveMeasurement> out;
  if (!has_collectives_table()) return out;
  Stmt s(db_,
         "SELECT campaign, collective, backend, device, level, dtype, world, nodes, bytes, in_place, time_s, "
         "busbw_gbs, cv, repeats, status, source FROM collectives "
         "WHERE (?1 = '' OR campaign = ?1) AND (?2 = '' OR collective = ?2) AND (?3 = 0 OR status = 'ok') "
         "ORDER BY campaign, collective, backend, level, world, nodes, in_place, bytes",
         path_);
  s.bind(1, campaign).bind(2, collective).bind(3, ok_only ? 1 : 0);
  while (s.step()) {
    CollectiveMeasurement m;
    m.campaign = s.text(0);
    m.collective = s.text(1);
    m.backend = s.text(2);
    m.device = s.text(3);
    m.level = s.text(4);
    m.dtype = s.text(5);
    m.world = s.i64(6);
    m.nodes = s.i64(7);
    m.bytes = s.real(8);
    m.in_place = s.i64(9) != 0;
    m.time_s = s.real(10);
    m.busbw_gbs = s.real(11);
    m.cv = s.real(12);
    m.repeats = static_cast<int>(s.i64(13));
    m.status = s.text(14);
    m.source = s.text(15);
    const std::string where = fmt::format("{}: collectives row ({}, {} B)", path_, m.collective, m.bytes);
    SCALEDL_CHECK(std::isfinite(m.bytes) && m.bytes > 0, "{}: bytes must be > 0", where);
    SCALEDL_CHECK(m.status != "ok" || (std::isfinite(m.time_s) && m.time_s > 0), "{}: time_s={} must be > 0",
                  where, m.time_s);
    SCALEDL_CHECK(m.world >= 1 && m.nodes >= 1, "{}: world={} nodes={} are impossible", where, m.world,
                  m.nodes);
    out.push_back(std::move(m));
  }
  return out;
}

nlohmann::json Store::info() const {
  nlohmann::json j;
  {
    Stmt v(db_, "SELECT value FROM meta WHERE key='schema_version'", path_);
    j["schema_version"] = v.step() ? v.text(0) : std::string("?");
  }
  j["counts"] = counts();
  j["devices"] = nlohmann::json::array();
  {
    Stmt s(db_, "SELECT key FROM devices ORDER BY key", path_);
    while (s.step()) j["devices"].push_back(s.text(0));
  }
  // CV quantiles are computed here (SQLite has no median).
  auto med_max = [](std::vector<double> v) -> std::pair<nlohmann::json, nlohmann::json> {
    if (v.empty()) return {nullptr, nullptr};
    std::sort(v.begin(), v.end());
    return {quantile(v, 0.5), v.back()};
  };
  j["layer_groups"] = nlohmann::json::array();
  {
    Stmt s(db_,
           "SELECT campaign, device, status, fwd_cv, bwd_cv FROM layers ORDER BY campaign, device, status",
           path_);
    std::string cur;
    nlohmann::json g;
    std::vector<double> f, b;
    auto flush = [&] {
      if (cur.empty()) return;
      auto [fm, fx] = med_max(f);
      auto [bm, bx] = med_max(b);
      g["fwd_cv_median"] = fm;
      g["fwd_cv_max"] = fx;
      g["bwd_cv_median"] = bm;
      g["bwd_cv_max"] = bx;
      j["layer_groups"].push_back(g);
    };
    while (s.step()) {
      std::string k = s.text(0) + "\x1f" + s.text(1) + "\x1f" + s.text(2);
      if (k != cur) {
        flush();
        cur = k;
        g = {{"campaign", s.text(0)}, {"device", s.text(1)}, {"status", s.text(2)}, {"rows", 0}};
        f.clear();
        b.clear();
      }
      g["rows"] = g["rows"].get<int64_t>() + 1;
      if (!s.is_null(3)) f.push_back(s.real(3));
      if (!s.is_null(4)) b.push_back(s.real(4));
    }
    flush();
  }
  j["model_groups"] = nlohmann::json::array();
  {
    Stmt s(db_,
           "SELECT campaign, device, status, COUNT(*) FROM models GROUP BY campaign, device, status"
           " ORDER BY campaign, device, status",
           path_);
    while (s.step())
      j["model_groups"].push_back(
          {{"campaign", s.text(0)}, {"device", s.text(1)}, {"status", s.text(2)}, {"rows", s.i64(3)}});
  }
  return j;
}

static nlohmann::json table_json(sqlite3* db, const std::string& table, const std::string& path) {
  Stmt s(db, "SELECT * FROM " + table + " ORDER BY rowid", path);
  nlohmann::json rows = nlohmann::json::array();
  while (s.step()) {
    nlohmann::json r;
    for (int c = 0; c < s.cols(); ++c) {
      switch (s.type(c)) {
        case SQLITE_INTEGER:
          r[s.name(c)] = s.i64(c);
          break;
        case SQLITE_FLOAT:
          r[s.name(c)] = s.real(c);
          break;
        case SQLITE_NULL:
          r[s.name(c)] = nullptr;
          break;
        default:
          r[s.name(c)] = s.text(c);
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

nlohmann::json Store::export_json() const {
  nlohmann::json j;
  for (const char* t : {"devices", "environments", "layers", "models"}) j[t] = table_json(db_, t, path_);
  if (has_collectives_table()) j["collectives"] = table_json(db_, "collectives", path_);
  if (has_table("memory")) j["memory"] = table_json(db_, "memory", path_);
  if (has_table("pipeline")) j["pipeline"] = table_json(db_, "pipeline", path_);
  return j;
}

void Store::export_csv(const std::string& table, std::ostream& out) const {
  SCALEDL_CHECK(
      table == "layers" || table == "models" || table == "devices" || table == "environments" ||
          (table == "collectives" && has_collectives_table()) || (table == "memory" && has_table("memory")) ||
          (table == "pipeline" && has_table("pipeline")) ||
          (table == "layer_passes" && has_table("layer_passes")),
      "--table={} is not a table (layers, models, devices, environments, collectives, memory, pipeline, "
      "layer_passes)",
      table);
  Stmt s(db_, "SELECT * FROM " + table + " ORDER BY rowid", path_);
  bool header = false;
  while (s.step()) {
    if (!header) {
      for (int c = 0; c < s.cols(); ++c) out << (c ? "," : "") << s.name(c);
      out << "\n";
      header = true;
    }
    for (int c = 0; c < s.cols(); ++c) {
      out << (c ? "," : "");
      if (s.type(c) == SQLITE_FLOAT)
        out << fmt::format("{:.6g}", s.real(c));
      else if (!s.is_null(c))
        out << csv_field(s.text(c));
    }
    out << "\n";
  }
}

// ---- merging stores (`scaledl db merge`, campaigns across nodes) -------------

namespace {

/// Column names of `table` in declaration order (PRAGMA table_info).
std::vector<std::string> table_columns(sqlite3* db, const std::string& table, const std::string& path) {
  Stmt s(db, "PRAGMA table_info(" + table + ")", path);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(1));
  return out;
}

/// Binds column `c` of the current row of `from` to parameter `i` of `to`,
/// keeping its SQLite type (NULL stays NULL).
void bind_column(Stmt& to, int i, const Stmt& from, int c) {
  switch (from.type(c)) {
    case SQLITE_INTEGER:
      to.bind(i, from.i64(c));
      break;
    case SQLITE_FLOAT:
      to.bind(i, from.real(c));
      break;
    case SQLITE_NULL:
      to.bind(i, static_cast<double>(NAN));
      break;  // NaN binds NULL
    default:
      to.bind(i, from.text(c));
  }
}

}  // namespace

MergeSummary Store::merge_from(const Store& other) {
  std::error_code ec;
  SCALEDL_CHECK(!std::filesystem::equivalent(path_, other.path_, ec),
                "{}: cannot merge a store into itself ({} is the same file)", other.path_, path_);
  // Read every row of the input through the checked readers first, so a
  // garbage row is named and refused before anything is written here.
  (void)other.devices();
  (void)other.layers(std::nullopt, "", /*ok_only=*/false);
  (void)other.models("", /*ok_only=*/false);
  (void)other.collectives("", "", /*ok_only=*/false);

  MergeSummary sum;
  Transaction tx(*this);
  {
    Stmt in(other.db_, "SELECT key, name, kind, record FROM devices ORDER BY key", other.path_);
    Stmt mine(db_, "SELECT record FROM devices WHERE key=?", path_);
    Stmt ins(db_, "INSERT INTO devices(key, name, kind, record) VALUES (?,?,?,?)", path_);
    while (in.step()) {
      const std::string key = in.text(0);
      mine.reset();
      mine.bind(1, key);
      if (mine.step()) {
        // Same key, e.g. every shard probed its own node of one kind: keep ours.
        const nlohmann::json a = parse_json_text(mine.text(0), path_ + ":devices[" + key + "].record");
        const nlohmann::json b = parse_json_text(in.text(3), other.path_ + ":devices[" + key + "].record");
        if (a != b) {
          std::vector<std::string> diff;
          for (auto it = a.begin(); it != a.end(); ++it)
            if (!b.contains(it.key()) || b[it.key()] != it.value()) diff.push_back(it.key());
          for (auto it = b.begin(); it != b.end(); ++it)
            if (!a.contains(it.key())) diff.push_back(it.key());
          sum.device_conflicts.push_back(
              fmt::format("{} (fields that differ: {})", key, fmt::join(diff, ", ")));
        }
        continue;
      }
      ins.reset();
      ins.bind(1, key).bind(2, in.text(1)).bind(3, in.text(2)).bind(4, in.text(3));
      ins.step();
      ++sum.devices_added;
    }
  }
  // Environment ids are per store: map the input's ids to ours (0 = unknown).
  std::map<int64_t, int64_t> env_ids{{0, 0}};
  {
    Stmt in(other.db_, "SELECT id, env FROM environments ORDER BY id", other.path_);
    Stmt ins(db_, "INSERT INTO environments(env) VALUES (?) ON CONFLICT(env) DO NOTHING", path_);
    Stmt q(db_, "SELECT id FROM environments WHERE env=?", path_);
    while (in.step()) {
      ins.reset();
      ins.bind(1, in.text(1));
      ins.step();
      sum.environments_added += sqlite3_changes(db_) > 0 ? 1 : 0;
      q.reset();
      q.bind(1, in.text(1));
      SCALEDL_CHECK(q.step(), "{}: environment row vanished", path_);
      env_ids[in.i64(0)] = q.i64(0);
    }
  }
  // Rows, column for column (all but the id); the UNIQUE key of each table
  // decides what is already here.
  auto copy_table = [&](const std::string& table, size_t& added, size_t& skipped) {
    std::vector<std::string> cols;
    for (auto& c : table_columns(db_, table, path_))
      if (c != "id") cols.push_back(c);
    const std::vector<std::string> theirs = table_columns(other.db_, table, other.path_);
    for (const auto& c : cols)
      SCALEDL_CHECK(std::find(theirs.begin(), theirs.end(), c) != theirs.end(),
                    "{}: table {} has no column {}: not a store this build can merge", other.path_, table, c);
    const auto env_col = std::find(cols.begin(), cols.end(), "env_id");
    const int env = env_col == cols.end() ? -1 : static_cast<int>(env_col - cols.begin()) + 1;
    Stmt in(other.db_, fmt::format("SELECT rowid, {} FROM {} ORDER BY rowid", fmt::join(cols, ", "), table),
            other.path_);
    std::vector<std::string> marks(cols.size(), "?");
    Stmt ins(db_,
             fmt::format("INSERT INTO {}({}) VALUES ({}) ON CONFLICT DO NOTHING", table,
                         fmt::join(cols, ", "), fmt::join(marks, ",")),
             path_);
    while (in.step()) {
      ins.reset();
      for (int c = 1; c <= static_cast<int>(cols.size()); ++c) {
        if (c != env) {
          bind_column(ins, c, in, c);
          continue;
        }
        auto it = env_ids.find(in.i64(c));
        SCALEDL_CHECK(it != env_ids.end(), "{}: {} row {}: env_id={} names no environments row", other.path_,
                      table, in.i64(0), in.i64(c));
        ins.bind(c, it->second);
      }
      ins.step();
      if (sqlite3_changes(db_) > 0)
        ++added;
      else
        ++skipped;
    }
  };
  copy_table("layers", sum.layers_added, sum.layers_skipped);
  copy_table("models", sum.models_added, sum.models_skipped);
  if (other.has_collectives_table())
    copy_table("collectives", sum.collectives_added, sum.collectives_skipped);
  if (other.has_table("memory")) copy_table("memory", sum.memory_added, sum.memory_skipped);
  tx.commit();
  return sum;
}

}  // namespace scaledl
