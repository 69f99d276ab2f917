#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Reading JSON files with errors that name the file, the key and the value.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace scaledl {

using json = nlohmann::json;

/// Deepest nesting of arrays/objects accepted by parse_json_text / read_json_file.
/// Real inputs (configs, spaces, plans, models) nest at most ~8 levels; the limit
/// keeps the recursive parts of the JSON library (dump, copy, compare) off the
/// end of the stack on hostile input such as '[' x 100000.
constexpr int kMaxJsonDepth = 64;

/// Parses JSON text; `ctx` names the source in messages (a path, "store:table[row].column").
/// Throws Error("<ctx>: malformed JSON: ...") on a syntax error, a number out of
/// the double range (naming the key before it and the number), or nesting deeper
/// than kMaxJsonDepth. Every JSON parse of the code base goes through here.
json parse_json_text(const std::string& text, const std::string& ctx);

/// The whole file as bytes; throws Error("<path>: cannot open file").
std::string read_text_file(const std::string& path);

/// Parses a JSON file; throws Error("<path>: ...") when missing or malformed
/// (same checks as parse_json_text).
json read_json_file(const std::string& path);

/// Writes JSON atomically (temp file + rename) so a crash never leaves half a file.
void write_json_file(const std::string& path, const json& j, int indent = 2);

/// Writes any text atomically (temp file + rename).
void write_text_file_atomic(const std::string& path, const std::string& text);

/// Integer at key `key` of object `j`; `ctx` prefixes messages ("config").
/// Throws when missing (unless `def` given), not an integer, or outside [lo, hi].
int64_t get_int(const json& j, const std::string& key, const std::string& ctx, int64_t lo, int64_t hi);
int64_t get_int_or(const json& j, const std::string& key, const std::string& ctx, int64_t lo, int64_t hi,
                   int64_t def);
double get_num_or(const json& j, const std::string& key, const std::string& ctx, double lo, double hi,
                  double def);
std::string get_str_or(const json& j, const std::string& key, const std::string& ctx, const std::string& def);
bool get_bool_or(const json& j, const std::string& key, const std::string& ctx, bool def);

/// Short rendering of a JSON value for error messages (strings quoted, cut at 40 chars).
std::string show(const json& v);

/// A CSV field in double quotes, inner quotes doubled (RFC 4180).
std::string csv_quote(const std::string& s);
/// A CSV field as is, or quoted as csv_quote does when it holds a comma, a quote or a
/// line break (RFC 4180): what a CSV reader gives back unchanged.
std::string csv_field(const std::string& s);

}  // namespace scaledl
