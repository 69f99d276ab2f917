// Many configurations of one `predict` call (sweep.hpp).
#include "scaledl/predict/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/io/device_library.hpp"
#include "scaledl/learn/neusight.hpp"
#include "scaledl/predict/bundle.hpp"

namespace scaledl {

namespace fs = std::filesystem;

const std::vector<std::string>& sweep_setting_keys() {
  static const std::vector<std::string> k = {"batch", "seq",     "image",   "dtype",       "optimizer",
                                             "mode",  "devices", "samples", "device_spec", "framework"};
  return k;
}

void check_sweep_key(const std::string& key, const std::string& ctx) {
  const auto& k = sweep_setting_keys();
  SCALEDL_CHECK(
      std::find(k.begin(), k.end(), key) != k.end() || (key.rfind("config.", 0) == 0 && key.size() > 7),
      "{}: unknown key \"{}\" (known: {}, config.<key of config.json>)", ctx, key, fmt::join(k, ", "));
}

int64_t parse_setting_int(const std::string& v, const std::string& key, int64_t lo, int64_t hi) {
  size_t pos = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  SCALEDL_CHECK(pos == v.size() && !v.empty(), "{}={} is not an integer", key, v);
  SCALEDL_CHECK(x >= lo && x <= hi, "{}={} must be in [{}, {}]", key, v, lo, hi);
  return x;
}

nlohmann::json config_value(const std::string& v, const std::string& key) {
  SCALEDL_CHECK(!v.empty(), "{}: empty value", key);
  size_t pos = 0;
  try {
    const long long i = std::stoll(v, &pos);
    if (pos == v.size()) return i;
  } catch (const std::exception&) {
  }
  pos = 0;
  double d = 0;
  try {
    d = std::stod(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == v.size()) {
    SCALEDL_CHECK(std::isfinite(d), "{}={} is not a finite number", key, v);
    return d;
  }
  if (v == "true" || v == "false") return v == "true";
  return v;
}

std::vector<std::string> expand_device_specs(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    std::error_code ec;
    if (!fs::is_directory(v, ec)) {
      out.push_back(find_device_spec(v, "device_spec"));  // a file, or a shipped sheet's name
      continue;
    }
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(v, ec))
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
    SCALEDL_CHECK(!files.empty(), "device_spec={}: the folder holds no .json spec sheet", v);
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

// ---- --sweep ---------------------------------------------------------------------------------

size_t SweepSpace::size() const {
  size_t n = 1;
  for (const auto& a : axes) n *= a.second.size();
  return n;
}

Variant SweepSpace::at(size_t i) const {
  Variant v{model, {}};
  v.kv.resize(axes.size());
  for (size_t k = axes.size(); k-- > 0;) {
    const auto& vals = axes[k].second;
    v.kv[k] = {axes[k].first, vals[i % vals.size()]};
    i /= vals.size();
  }
  return v;
}

namespace {
/// The values of one --sweep list: "8,16,32", and for the integer keys also ranges "1..64".
std::vector<std::string> sweep_values(const std::string& sw, const std::string& key, size_t eq) {
  static const std::set<std::string> integer_keys = {"batch", "seq", "image", "devices"};
  std::vector<std::string> values;
  size_t a = eq + 1;
  while (a <= sw.size()) {
    size_t b = sw.find(',', a);
    if (b == std::string::npos) b = sw.size();
    SCALEDL_CHECK(b > a, "--sweep={}: empty value in the list", sw);
    const std::string v = sw.substr(a, b - a);
    const size_t dots = v.find("..");
    if (dots != std::string::npos && integer_keys.count(key)) {
      const int64_t lo = parse_setting_int(v.substr(0, dots), key, 1, int64_t{1} << 24);
      const int64_t hi = parse_setting_int(v.substr(dots + 2), key, 1, int64_t{1} << 24);
      SCALEDL_CHECK(lo <= hi, "--sweep {}={}: the range is empty", key, v);
      SCALEDL_CHECK(hi - lo < 10'000'000, "--sweep {}={}: more than 10,000,000 values", key, v);
      for (int64_t x = lo; x <= hi; ++x) values.push_back(std::to_string(x));
    } else {
      values.push_back(v);
    }
    a = b + 1;
  }
  return values;
}
}  // namespace

SweepSpace sweep_space(const std::string& model, const std::vector<std::string>& sweeps) {
  SweepSpace sp{model, {}};
  std::set<std::string> seen;
  size_t n = 1;
  for (const auto& sw : sweeps) {
    const size_t eq = sw.find('=');
    SCALEDL_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < sw.size(),
                  "--sweep={} is not KEY=V1,V2,... (e.g. --sweep batch=8,16,32 or batch=1..64)", sw);
    const std::string key = sw.substr(0, eq);
    check_sweep_key(key, "--sweep");
    SCALEDL_CHECK(key != "samples", "--sweep samples=...: give --samples once");
    SCALEDL_CHECK(seen.insert(key).second, "--sweep {} is given twice", key);
    std::vector<std::string> values = sweep_values(sw, key, eq);
    if (key == "device_spec") values = expand_device_specs(values);
    n *= values.size();
    SCALEDL_CHECK(n <= 10'000'000, "--sweep: {} configurations or more (at most 10,000,000)", n);
    sp.axes.emplace_back(key, std::move(values));
  }
  return sp;
}

// ---- --csv, --anchor -------------------------------------------------------------------------

std::vector<Variant> csv_variants_text(const std::string& text, const std::string& path,
                                       const std::string& opt, const std::string& default_model,
                                       std::vector<double>* measured) {
  std::vector<size_t> line;
  const auto rows = parse_csv(text, opt + "=" + path, &line);
  SCALEDL_CHECK(rows.size() >= 2, "{}={}: needs a header and at least one configuration row", opt, path);
  const auto& head = rows[0];
  bool has_model = false, has_ms = false;
  std::set<std::string> columns;
  for (const auto& h : head) {
    SCALEDL_CHECK(columns.insert(h).second, "{}={}:1: column \"{}\" is given twice", opt, path, h);
    if (h == "model") {
      has_model = true;
      continue;
    }
    if (measured && h == "measured_ms") {
      has_ms = true;
      continue;
    }
    check_sweep_key(h, fmt::format("{}={}:1", opt, path));
  }
  SCALEDL_CHECK(has_model || !default_model.empty(), "{}={}: no model column and no MODEL.json argument", opt,
                path);
  SCALEDL_CHECK(!measured || has_ms, "{}={}: no measured_ms column (the measured iteration time, ms)", opt,
                path);
  std::vector<Variant> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() == 1 && rows[r][0].empty()) continue;  // blank line
    SCALEDL_CHECK(rows[r].size() == head.size(), "{}={}:{}: {} fields, the header has {}", opt, path, line[r],
                  rows[r].size(), head.size());
    Variant v{default_model, {}};
    for (size_t c = 0; c < head.size(); ++c) {
      const std::string& cell = rows[r][c];
      if (measured && head[c] == "measured_ms") {
        char* end = nullptr;
        const double ms = std::strtod(cell.c_str(), &end);
        SCALEDL_CHECK(!cell.empty() && end && *end == '\0' && std::isfinite(ms) && ms > 0 && ms < 1e9,
                      "{}={}:{}: measured_ms=\"{}\" must be a time in ms, > 0", opt, path, line[r], cell);
        measured->push_back(ms);
        continue;
      }
      if (cell.empty()) continue;
      if (head[c] == "model" || head[c] == "device_spec") {
        fs::path p(cell);
        if (p.is_relative()) p = fs::path(path).parent_path() / p;  // relative to the CSV
        if (head[c] == "model")
          v.model = p.string();
        else
          v.kv.emplace_back(head[c], p.string());
      } else {
        v.kv.emplace_back(head[c], cell);
      }
    }
    SCALEDL_CHECK(!v.model.empty(), "{}={}:{}: no model", opt, path, line[r]);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<Variant> csv_variants(const std::string& path, const std::string& opt,
                                  const std::string& default_model, std::vector<double>* measured) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const Error&) {
    fail("{}={}: cannot open", opt, path);
  }
  return csv_variants_text(text, path, opt, default_model, measured);
}

// ---- the running maximum across chunks -------------------------------------------------------

void SweepMonotone::apply(IterationPrediction& p, const std::string& label, const std::string& device,
                          const TrainSettings& s) {
  for (const bool batch_axis : {true, false}) {
    TrainSettings t = s;
    (batch_axis ? t.batch : t.seq_len) = 0;
    const int64_t axis = batch_axis ? s.batch : s.seq_len;
    auto [it, fresh] =
        best_[batch_axis].try_emplace(label + "\n" + device + "\n" + t.to_json().dump(), axis, p);
    if (fresh) continue;
    auto& [best_axis, best] = it->second;
    if (best_axis < axis)
      raise_prediction_to(p, best, fmt::format("monotone: {} {}", batch_axis ? "batch" : "seq", best_axis));
    if (p.t_iter_ms >= best.t_iter_ms) it->second = {axis, p};
  }
}

}  // namespace scaledl
