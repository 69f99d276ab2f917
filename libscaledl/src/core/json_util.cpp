#include "scaledl/core/json_util.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"

namespace scaledl {

namespace {
struct TooDeep {};  // thrown by the parser callback, turned into an Error below

/// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_message(const json::exception& e) {
  std::string w = e.what();
  auto p = w.find("] ");
  return p == std::string::npos ? w : w.substr(p + 2);
}
}  // namespace

json parse_json_text(const std::string& text, const std::string& ctx) {
  // The callback sees every container start with its depth (0 = top level) and
  // every key, so the depth is limited while parsing (nlohmann's parser itself
  // is iterative) and a number overflow can name the key it belongs to.
  std::string last_key;
  json::parser_callback_t cb = [&last_key](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key)
      last_key = parsed.is_string() ? parsed.get<std::string>() : std::string();
    else if ((ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start) &&
             depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const TooDeep&) {
    fail("{}: malformed JSON: arrays/objects nested deeper than {} levels", ctx, kMaxJsonDepth);
  } catch (const json::parse_error& e) {
    // "parse error at line 3, column 5: syntax error while parsing value - ..."
    fail("{}: malformed JSON: {}", ctx, json_message(e));
  } catch (const json::out_of_range& e) {
    // 406: "number overflow parsing '1e400'" (a number beyond the double range)
    std::string w = json_message(e);
    auto a = w.find('\''), b = w.rfind('\'');
    if (e.id == 406 && a != std::string::npos && b > a) {
      std::string num = w.substr(a + 1, b - a - 1);
      if (last_key.empty())
        fail("{}: malformed JSON: number {} is out of range (beyond +-1.8e308)", ctx, num);
      fail("{}: malformed JSON: {}={} is out of range (beyond +-1.8e308)", ctx, last_key, num);
    }
    fail("{}: malformed JSON: {}", ctx, w);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON: {}", ctx, json_message(e));
  }
}

std::string read_text_file(const std::string& path) {
  // A regular file only (symbolic links followed): a FIFO would block the reader forever,
  // a directory reads as nothing, a device may never end. Nothing reads standard input
  // through here; a missing file is "cannot open file" below.
  {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_type t = fs::status(path, ec).type();
    const char* kind = t == fs::file_type::directory                                ? "a directory"
                       : t == fs::file_type::fifo                                   ? "a FIFO"
                       : t == fs::file_type::socket                                 ? "a socket"
                       : t == fs::file_type::block || t == fs::file_type::character ? "a device"
                       : t == fs::file_type::unknown                                ? "of an unknown kind"
                                                                                    : nullptr;
    if (kind) fail("{}: not a regular file ({})", path, kind);
  }
  std::ifstream in(path, std::ios::binary);
  SCALEDL_CHECK(in.good(), "{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json_file(const std::string& path) {
  return parse_json_text(read_text_file(path), path);
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
  // The temporary file is removed when anything fails (a full disk) and on SIGINT/SIGTERM,
  // so no `PATH.tmp` is ever left behind; `path` itself is only ever replaced whole.
  const std::string tmp = path + ".tmp";
  register_temp_path(tmp);
  struct Cleanup {
    const std::string& tmp;
    bool done = false;
    ~Cleanup() {
      if (!done) std::remove(tmp.c_str());
      unregister_temp_path(tmp);
    }
  } cleanup{tmp};
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    SCALEDL_CHECK(out.good(), "{}: cannot write file", tmp);
    out << text;
    out.flush();
    SCALEDL_CHECK(out.good(), "{}: write failed (disk full?)", path);
  }
  SCALEDL_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "{}: cannot rename {} into place", path, tmp);
  cleanup.done = true;
}

void write_json_file(const std::string& path, const json& j, int indent) {
  write_text_file_atomic(path, j.dump(indent) + "\n");
}

std::string csv_quote(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) o += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return o + "\"";
}

std::string csv_field(const std::string& s) {
  return s.find_first_of(",\"\r\n") == std::string::npos ? s : csv_quote(s);
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

int64_t get_int(const json& j, const std::string& key, const std::string& ctx, int64_t lo, int64_t hi) {
  const json& v = must(j, key, ctx);
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    // nlohmann keeps integers above INT64_MAX as uint64: do not let them wrap negative.
    SCALEDL_CHECK(hi >= 0 && v.get<uint64_t>() <= static_cast<uint64_t>(hi),
                  "{}.{}={} is out of range [{}, {}]", ctx, key, show(v), lo, hi);
    x = static_cast<int64_t>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    SCALEDL_CHECK(std::isfinite(d) && d == std::floor(d), "{}.{}={} is not an integer", ctx, key, show(v));
    SCALEDL_CHECK(std::fabs(d) < 9.0e18, "{}.{}={} is out of range [{}, {}]", ctx, key, show(v), lo, hi);
    x = static_cast<int64_t>(d);
  } else {
    fail("{}.{}={} is not an integer", ctx, key, show(v));
  }
  SCALEDL_CHECK(x >= lo && x <= hi, "{}.{}={} is out of range [{}, {}]", ctx, key, x, lo, hi);
  return x;
}

int64_t get_int_or(const json& j, const std::string& key, const std::string& ctx, int64_t lo, int64_t hi,
                   int64_t def) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return def;
  return get_int(j, key, ctx, lo, hi);
}

double get_num_or(const json& j, const std::string& key, const std::string& ctx, double lo, double hi,
                  double def) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return def;
  const json& v = j.at(key);
  SCALEDL_CHECK(v.is_number(), "{}.{}={} is not a number", ctx, key, show(v));
  double d = v.get<double>();
  SCALEDL_CHECK(std::isfinite(d) && d >= lo && d <= hi, "{}.{}={} is out of range [{}, {}]", ctx, key,
                show(v), lo, hi);
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
