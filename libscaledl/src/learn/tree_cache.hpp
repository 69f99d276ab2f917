#pragma once
// A cache of compiled layer models (docs/predict.md, "Speed"): the trees that
// TreeForest::compile_document() makes of an XGBoost JSON model file, stored as
// TreeForest::to_bytes() under the SHA-256 of that file, so that LayerPredictor::load
// reads ~60 KB instead of parsing ~700 KB of JSON per model.
//
// Where: $SCALEDL_CACHE_DIR/trees/, else $XDG_CACHE_HOME/scaledl/trees/, else
// $HOME/.cache/scaledl/trees/; SCALEDL_CACHE_DIR set but empty turns the cache off.
// One file per model, <sha256 of the JSON>.v<kFormatVersion>.trees. It is derived data,
// never required: LayerPredictor::load writes an entry (best effort, atomically) when
// it had to parse the JSON, and a read-only or missing cache only costs the parse. A
// write that leaves more than 256 files in the folder removes the oldest written down to
// 192 (~80 KB an entry: the folder stays under ~20 MB, whatever tests or fuzzers load).
//
// An entry holds a header (magic, format version, the model file's SHA-256, its
// payload's SHA-256 and size) and the payload. read() returns nothing for an entry
// that is missing, of another version, keyed to another model file (stale: renamed or
// copied), truncated or altered (the payload's checksum), or whose bytes from_bytes()
// refuses; the caller then parses the JSON as before.
#include <optional>
#include <string>

#include "learn/tree_forest.hpp"

namespace scaledl::tree_cache {

/// Part of every entry's name and header. Bump it with any change to what compile_document()
/// makes of a model (TreeForest's layout, padding, refusals) or to to_bytes(): an entry of
/// another version is never read, so the cache cannot outlive the code that wrote it.
inline constexpr int kFormatVersion = 1;

/// The cache's folder (…/trees), "" when the cache is off.
std::string directory();
/// The entry of the model file whose SHA-256 (lower-case hex) is `model_sha256`; "" when off.
std::string entry_path(const std::string& model_sha256);

/// An entry's bytes: header + forest.to_bytes(); "" when the forest has no byte form.
std::string encode(const TreeForest& forest, const std::string& model_sha256);
/// The forest of an entry's bytes, when they are a whole entry for `model_sha256`;
/// else nullopt and `why`.
std::optional<TreeForest> decode(const std::string& bytes, const std::string& model_sha256,
                                 std::string* why = nullptr);

/// The cached forest of the model file whose SHA-256 is `model_sha256` (see decode), or
/// nullopt (`why` says why: "no entry", "cache off", or what was wrong with the entry).
std::optional<TreeForest> read(const std::string& model_sha256, std::string* why = nullptr);
/// Stores `forest` as the entry of `model_sha256` (temporary file + rename). Best effort:
/// false, and no exception, when the cache is off or cannot be written.
bool write(const TreeForest& forest, const std::string& model_sha256) noexcept;

}  // namespace scaledl::tree_cache
