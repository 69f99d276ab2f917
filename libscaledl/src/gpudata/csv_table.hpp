#pragma once
// A CSV table of a GPU-data importer (gpudata.hpp): its records, the line each starts on,
// and the checked reads every importer needs (a column by name, a number, a count), each
// an Error naming file:line, the column and the value. Internal to src/gpudata/.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/neusight.hpp"  // parse_csv, csv_column

namespace scaledl::gpudata {

/// One CSV file, its records and the line each starts on.
struct Table {
  std::string path;
  std::vector<std::vector<std::string>> recs;  ///< [0] = header
  std::vector<size_t> lines;

  explicit Table(std::string p) : path(std::move(p)) {
    recs = parse_csv(read_text_file(path), path, &lines);
    SCALEDL_CHECK(!recs.empty(), "{}: empty file (expected a header line)", path);
    for (size_t r = 1; r < recs.size(); ++r)
      SCALEDL_CHECK(recs[r].size() == recs[0].size(), "{}: {} fields, the header has {}", where(r),
                    recs[r].size(), recs[0].size());
  }
  std::string where(size_t r) const { return fmt::format("{}:{}", path, lines[r]); }
  size_t rows() const { return recs.size() - 1; }
  /// Index of a column, -1 when the header lacks it (an optional one).
  int col(const std::string& name) const { return csv_column(recs[0], name); }
  /// Index of a column the importer needs; Error naming the file when the header lacks it.
  int need(const std::string& name) const {
    const int c = csv_column(recs[0], name);
    SCALEDL_CHECK(c >= 0, "{}:{}: the header lacks the column {}", path, lines[0], name);
    return c;
  }
  /// Field (r, c) as a number; Error naming file:line, column and value otherwise.
  double number(size_t r, int c) const {
    const std::string& s = recs[r][c];
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    SCALEDL_CHECK(!s.empty() && end && *end == '\0', "{}: {}=\"{}\" is not a number", where(r), recs[0][c],
                  s);
    return v;
  }
  /// Field (r, c) as an integer in [1, 1e9) ("1760" or "1760.0").
  int64_t count(size_t r, int c) const {
    const double v = number(r, c);
    SCALEDL_CHECK(v >= 1 && v < 1e9 && v == std::floor(v), "{}: {}={} must be a positive integer", where(r),
                  recs[0][c], recs[r][c]);
    return static_cast<int64_t>(v);
  }
};

}  // namespace scaledl::gpudata
