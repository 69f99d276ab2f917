// The store's RAII SQLite statement, shared by src/io/store.cpp and the
// pipeline table's reader/writer (src/pipeline/pipeline_store.cpp). Internal:
// not a public header.
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "scaledl/core/error.hpp"

namespace scaledl::detail {

/// RAII prepared statement with 1-based binds and 0-based column reads.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &s_, nullptr);
    SCALEDL_CHECK(rc == SQLITE_OK, "{}: SQLite error: {}", path, sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v) {
    if (std::isnan(v))
      sqlite3_bind_null(s_, i);
    else
      sqlite3_bind_double(s_, i, v);
    return *this;
  }
  /// Steps once; true while a row is available.
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    SCALEDL_CHECK(rc == SQLITE_DONE, "{}: SQLite error: {}", path_, sqlite3_errmsg(db_));
    return false;
  }
  void reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string text(int c) const {
    auto p = sqlite3_column_text(s_, c);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
  double real(int c) const {
    return sqlite3_column_type(s_, c) == SQLITE_NULL ? NAN : sqlite3_column_double(s_, c);
  }
  /// NULL (not measured) as 0.
  double real0(int c) const {
    return sqlite3_column_type(s_, c) == SQLITE_NULL ? 0.0 : sqlite3_column_double(s_, c);
  }
  int cols() const { return sqlite3_column_count(s_); }
  std::string name(int c) const { return sqlite3_column_name(s_, c); }
  bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  int type(int c) const { return sqlite3_column_type(s_, c); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  std::string path_;
};

}  // namespace scaledl::detail
