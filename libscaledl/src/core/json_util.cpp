#include "scaledl/json_util.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "scaledl/error.hpp"

namespace scaledl {

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  SCALEDL_CHECK(in.good(), "{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string w = e.what();
    auto p = w.find("] ");
    fail("{}: malformed JSON: {}", path, p == std::string::npos ? w : w.substr(p + 2));
  }
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    SCALEDL_CHECK(out.good(), "{}: cannot write file", tmp);
    out << text;
    out.flush();
    SCALEDL_CHECK(out.good(), "{}: write failed (disk full?)", tmp);
  }
  SCALEDL_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "{}: cannot rename {} into place", path, tmp);
}

void write_json_file(const std::string& path, const json& j, int indent) {
  write_text_file_atomic(path, j.dump(indent) + "\n");
}

std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

static const json& must(const json& j, const std::string& key, const std::string& ctx) {
  SCALEDL_CHECK(j.is_object(), "{}: expected a JSON object, got {}", ctx, show(j));
  auto it = j.find(key);
  SCALEDL_CHECK(it != j.end() && !it->is_null(), "{}.{} is missing", ctx, key);
  return *it;
}

int64_t get_int(const json& j, const std::string& key, const std::string& ctx, int64_t lo,
                int64_t hi) {
  const json& v = must(j, key, ctx);
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    SCALEDL_CHECK(std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18,
                  "{}.{}={} is not an integer", ctx, key, show(v));
    x = static_cast<int64_t>(d);
  } else {
    fail("{}.{}={} is not an integer", ctx, key, show(v));
  }
  SCALEDL_CHECK(x >= lo && x <= hi, "{}.{}={} is out of range [{}, {}]", ctx, key, x, lo, hi);
  return x;
}

int64_t get_int_or(const json& j, const std::string& key, const std::string& ctx, int64_t lo,
                   int64_t hi, int64_t def) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return def;
  return get_int(j, key, ctx, lo, hi);
}

double get_num_or(const json& j, const std::string& key, const std::string& ctx, double lo,
                  double hi, double def) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return def;
  const json& v = j.at(key);
  SCALEDL_CHECK(v.is_number(), "{}.{}={} is not a number", ctx, key, show(v));
  double d = v.get<double>();
  SCALEDL_CHECK(std::isfinite(d) && d >= lo && d <= hi, "{}.{}={} is out of range [{}, {}]", ctx,
                key, show(v), lo, hi);
  return d;
}

std::string get_str_or(const json& j, const std::string& key, const std::string& ctx,
                       const std::string& def) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return def;
  const json& v = j.at(key);
  SCALEDL_CHECK(v.is_string(), "{}.{}={} is not a string", ctx, key, show(v));
  return v.get<std::string>();
}

bool get_bool_or(const json& j, const std::string& key, const std::string& ctx, bool def) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return def;
  const json& v = j.at(key);
  SCALEDL_CHECK(v.is_boolean(), "{}.{}={} is not true/false", ctx, key, show(v));
  return v.get<bool>();
}

}  // namespace scaledl
