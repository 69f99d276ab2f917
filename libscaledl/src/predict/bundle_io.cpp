// A bundle's files (bundle.hpp): the manifest's checked reader, load_bundle, and the files a
// bundle owns (for StagingDir). train_bundle writes them (bundle_train.cpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/predict/bundle.hpp"

namespace fs = std::filesystem;

namespace scaledl {

OwnedFiles bundle_output_files() {
  return owned_by_manifest("manifest.json", kBundleFormat, [](const nlohmann::json& m) {
    std::set<std::string> files;
    for (const auto& [rel, sha] : m.at("files").items()) files.insert(rel);
    return files;
  });
}

namespace {

/// A name as a one-line message can show it: as is when it is plain printable ASCII,
/// else as a JSON string (control characters escaped, invalid UTF-8 replaced).
std::string printable(const std::string& s) {
  bool plain = !s.empty();
  for (const unsigned char c : s) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  return plain ? s : nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// The one checked reader of a bundle manifest (issue #39): every field load_bundle reads
/// goes through it, and every message names the file and the key path, e.g.
/// `B/manifest.json: comm.file is missing` or
/// `B/manifest.json: host."cuda:NVIDIA H100 80GB HBM3".node_ms=1e+300 is out of range (0, 1000] ...`.
/// A manifest is not covered by the bundle's checksums (it holds them), so nothing in it is trusted.
class Field {
 public:
  Field(const nlohmann::json& v, const std::string& file, std::string key, std::string name = "")
      : v_(&v), file_(&file), key_(std::move(key)), name_(std::move(name)) {}
  const nlohmann::json& json() const { return *v_; }
  /// The key path ("host.\"cuda:X\".node_ms"); "" for the whole manifest.
  const std::string& key() const { return key_; }
  /// The last key as the manifest spells it (a member of an object).
  const std::string& name() const { return name_; }

  /// "FILE: KEY=VALUE what" (one line), as an Error.
  [[noreturn]] void bad(const std::string& what) const {
    if (key_.empty()) fail("{}: {} {}", *file_, show(*v_), what);
    fail("{}: {}={} {}", *file_, key_, show(*v_), what);
  }
  const nlohmann::json& object() const {
    if (!v_->is_object()) bad("is not an object");
    return *v_;
  }
  std::optional<Field> find(const std::string& k) const {
    const nlohmann::json& o = object();
    const auto it = o.find(k);
    if (it == o.end()) return std::nullopt;
    return Field(*it, *file_, child(k), k);
  }
  Field at(const std::string& k) const {
    std::optional<Field> f = find(k);
    if (!f) fail("{}: {} is missing", *file_, child(k));
    return *f;
  }
  /// The members of an object, in the manifest's order.
  std::vector<Field> members() const {
    std::vector<Field> out;
    for (auto it = object().begin(); it != object().end(); ++it)
      out.emplace_back(*it, *file_, child(it.key()), it.key());
    return out;
  }
  /// The elements of an array, at most `most`.
  std::vector<Field> elements(size_t most) const {
    if (!v_->is_array()) bad("is not an array");
    if (v_->size() > most) bad(fmt::format("has more than {} elements", most));
    std::vector<Field> out;
    for (size_t i = 0; i < v_->size(); ++i)
      out.emplace_back((*v_)[i], *file_, fmt::format("{}[{}]", key_, i));
    return out;
  }
  /// Element i of an array of exactly n elements.
  Field item(size_t i, size_t n, const std::string& what) const {
    if (!v_->is_array() || v_->size() != n) bad("is not " + what);
    return Field((*v_)[i], *file_, fmt::format("{}[{}]", key_, i));
  }
  std::string str() const {
    if (!v_->is_string()) bad("is not a string");
    return v_->get<std::string>();
  }
  /// A finite number in [lo, hi]; `unit` follows the range in messages (" ms ...").
  double num(double lo, double hi, const std::string& unit = "") const {
    if (!v_->is_number()) bad("is not a number");
    const double d = v_->get<double>();
    if (!(std::isfinite(d) && d >= lo && d <= hi))
      bad(fmt::format("is out of range [{}, {}]{}", lo, hi, unit));
    return d;
  }
  int64_t integer(int64_t lo, int64_t hi) const {
    const std::string range = fmt::format("is out of range [{}, {}]", lo, hi);
    int64_t x = 0;
    if (v_->is_number_unsigned()) {
      if (hi < 0 || v_->get<uint64_t>() > static_cast<uint64_t>(hi)) bad(range);
      x = static_cast<int64_t>(v_->get<uint64_t>());
    } else if (v_->is_number_integer()) {
      x = v_->get<int64_t>();
    } else if (v_->is_number_float()) {
      const double d = v_->get<double>();
      if (!(std::isfinite(d) && d == std::floor(d))) bad("is not an integer");
      if (std::fabs(d) >= 9.0e18) bad(range);
      x = static_cast<int64_t>(d);
    } else {
      bad("is not an integer");
    }
    if (x < lo || x > hi) bad(range);
    return x;
  }

 private:
  std::string child(const std::string& k) const {
    bool ident = !k.empty();
    for (const unsigned char c : k) ident = ident && (std::isalnum(c) || c == '_' || c == '-');
    return (key_.empty() ? "" : key_ + ".") +
           (ident ? k : nlohmann::json(k).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  const nlohmann::json* v_;
  const std::string* file_;
  std::string key_, name_;
};

/// A bundle path the manifest gives at `f`: inside the bundle (outside() is ""), and one of
/// the files the manifest checksums (for a folder, `FOLDER/manifest.json`: the layer-model
/// manifest, which checksums the folder's model files). Returns root / path.
fs::path bundle_path(const Field& f, const fs::path& root, const std::set<std::string>& listed, bool folder) {
  const std::string rel = f.str();
  if (const std::string why = path_outside(root, rel, "the bundle"); !why.empty())
    f.bad(why + ": a bundle's files stay inside it");
  const fs::path norm = fs::path(rel).lexically_normal();
  const std::string want = (folder ? (norm / "manifest.json").lexically_normal() : norm).generic_string();
  if (!listed.count(want))
    f.bad(fmt::format("names {}, which is not among the files the manifest checksums", printable(want)));
  return root / rel;
}

}  // namespace

namespace {

/// The manifest at `mp` as JSON, after checking that it is a regular file.
nlohmann::json read_manifest(const fs::path& mp, const std::string& dir) {
  const std::string kind = file_kind(mp);
  SCALEDL_CHECK(kind != "missing", "--bundle={}: manifest.json is missing", dir);
  SCALEDL_CHECK(kind == "a regular file", "--bundle={}: manifest.json is {}, not a regular file", dir, kind);
  return read_json_file(mp.string());
}

/// Refuses a manifest of another format or format version.
void check_format(const Field& m, const std::string& mpath) {
  SCALEDL_CHECK(m.json().is_object(), "{}: {} is not a bundle manifest (a JSON object)", mpath,
                show(m.json()));
  const std::optional<Field> f = m.find("format");
  SCALEDL_CHECK(f && f->json() == kBundleFormat, "{}: format={} is not \"{}\"", mpath,
                f ? show(f->json()) : "(none)", kBundleFormat);
  const std::optional<Field> v = m.find("format_version");
  SCALEDL_CHECK(v && v->json().is_number_integer() && v->json() == kBundleFormatVersion,
                "{}: format_version={} but this scaledl reads version {}", mpath,
                v ? show(v->json()) : "(none)", kBundleFormatVersion);
}

/// The manifest's `files`: bundle path -> SHA-256, in the manifest's order; `listed` gets each
/// path lexically normal, '/'-separated.
std::vector<std::pair<std::string, std::string>> checksummed_files(const Field& m, const fs::path& root,
                                                                   const std::string& mpath,
                                                                   std::set<std::string>& listed) {
  std::vector<std::pair<std::string, std::string>> sums;
  const std::optional<Field> files = m.find("files");
  SCALEDL_CHECK(files.has_value(), "{}: files is missing", mpath);
  if (files->object().empty()) files->bad("lists no file");
  for (const Field& f : files->members()) {
    const std::string& rel = f.name();
    if (const std::string why = path_outside(root, rel, "the bundle"); !why.empty())
      fail("{}: files key {} {}: a bundle's files stay inside it", mpath, printable(rel), why);
    const std::string sha = f.str();
    bool hex = sha.size() == 64;
    for (const char c : sha) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!hex) f.bad("is not a SHA-256 (64 lowercase hex digits)");
    sums.emplace_back(rel, sha);
    listed.insert(fs::path(rel).lexically_normal().generic_string());
  }
  return sums;
}

/// The paths of a bundle's model files, as the manifest names them (checked by bundle_path).
struct BundlePaths {
  fs::path layers_dir;
  std::optional<fs::path> graph_file, graph_device_out_file, comm_file, memory_file;
  std::vector<fs::path> graph_members;  ///< graph.members[].file: the refinement's other members
};

/// The model paths, and the interval models the manifest holds (into `b`).
BundlePaths model_paths(const Field& m, const fs::path& root, const std::string& mpath,
                        const std::set<std::string>& listed, Bundle& b) {
  BundlePaths p;
  p.layers_dir = bundle_path(m.at("layers").at("dir"), root, listed, /*folder=*/true);
  if (const std::optional<Field> g = m.find("graph")) {
    p.graph_file = bundle_path(g->at("file"), root, listed, false);
    if (const std::optional<Field> ms = g->find("members"))
      for (const Field& mf : ms->elements(15))
        p.graph_members.push_back(bundle_path(mf.at("file"), root, listed, false));
    if (const std::optional<Field> iv = g->find("intervals"))
      b.intervals = IntervalModel::from_json(iv->json(), mpath + ": graph.intervals");
  }
  if (const std::optional<Field> g = m.find("graph_device_out")) {
    p.graph_device_out_file = bundle_path(g->at("file"), root, listed, false);
    SCALEDL_CHECK(p.graph_file.has_value(), "{}: graph_device_out without graph", mpath);
    if (const std::optional<Field> iv = g->find("intervals"))
      b.intervals_device_out = IntervalModel::from_json(iv->json(), mpath + ": graph_device_out.intervals");
  }
  if (const std::optional<Field> c = m.find("comm"))
    p.comm_file = bundle_path(c->at("file"), root, listed, false);
  if (const std::optional<Field> mem = m.find("memory"))
    if (const std::optional<Field> f = mem->find("file"))
      p.memory_file = bundle_path(*f, root, listed, false);
  return p;
}

/// The manifest's host term of each device (into b.host_node_ms).
void read_host(const Field& m, const std::string& mpath, Bundle& b) {
  const std::optional<Field> host = m.find("host");
  if (!host) return;
  // The range `predict --host-node-us` accepts (at most 1e6 us), > 0: a fitted term.
  for (const Field& d : host->members()) {
    const nlohmann::json& v = d.at("node_ms").json();
    const double ms = v.is_number() ? v.get<double>() : NAN;
    SCALEDL_CHECK(
        std::isfinite(ms) && ms > 0 && ms <= 1e3,
        "{}: host.{}.node_ms={} must be a number > 0 and at most 1000 ms (the host's cost per graph node; "
        "--host-node-us allows 1e6 us)",
        mpath, d.name(), show(v));
    b.host_node_ms[d.name()] = ms;
  }
}

/// The manifest's training summary: the global feature ranges (into b.global_ranges), and a check
/// of the layer rows per device (read later by layer_rows_of).
void read_training(const Field& m, Bundle& b) {
  const std::optional<Field> t = m.find("training");
  if (!t) return;
  t->object();
  if (const std::optional<Field> r = t->find("global_feature_ranges")) {
    const std::vector<std::string>& names = global_feature_names();
    for (const Field& f : r->members()) {
      if (std::find(names.begin(), names.end(), f.name()) == names.end())
        f.bad("is the range of no global feature of this build (retrain the bundle)");
      // The features are logarithms, shares and flags: |x| <= 1e3 holds every real one.
      const double lo = f.item(0, 2, "[lo, hi]").num(-1e3, 1e3), hi = f.item(1, 2, "[lo, hi]").num(-1e3, 1e3);
      if (lo > hi) f.bad("is not [lo, hi] with lo <= hi");
      b.global_ranges[f.name()] = {lo, hi};
    }
  }
  if (const std::optional<Field> l = t->find("layer_row_devices"))  // read by layer_rows_of
    for (const Field& f : l->members()) f.integer(0, int64_t{1} << 40);
}

/// Every listed file exists, is a regular file and has the manifest's SHA-256.
void verify_checksums(const std::vector<std::pair<std::string, std::string>>& sums, const fs::path& root,
                      const std::string& dir) {
  for (const auto& [rel, sha] : sums) {
    const fs::path p = root / rel;
    const std::string kind = file_kind(p);
    SCALEDL_CHECK(kind != "missing", "--bundle={}: file {} is missing", dir, printable(rel));
    SCALEDL_CHECK(kind == "a regular file", "--bundle={}: file {} is {}, not a regular file", dir,
                  printable(rel), kind);
    const std::string got = sha256_file(p.string());
    SCALEDL_CHECK(got == sha,
                  "--bundle={}: file {} has SHA-256 {} but the manifest says {} (altered or truncated)", dir,
                  printable(rel), got.substr(0, 16), sha.substr(0, 16));
  }
}

}  // namespace

Bundle load_bundle(const std::string& dir) {
  const fs::path root(dir);
  SCALEDL_CHECK(fs::is_directory(root), "--bundle={}: not a directory (write one with `scaledl train`)", dir);
  const fs::path mp = root / "manifest.json";
  const std::string mpath = mp.string();
  Bundle b;
  b.manifest = read_manifest(mp, dir);
  const Field m(b.manifest, mpath, "");
  check_format(m, mpath);

  // Every field first (cheap), then the checksums, then the models.
  std::set<std::string> listed;
  const std::vector<std::pair<std::string, std::string>> sums = checksummed_files(m, root, mpath, listed);
  const BundlePaths p = model_paths(m, root, mpath, listed, b);
  read_host(m, mpath, b);
  read_training(m, b);
  verify_checksums(sums, root, dir);  // before any model is parsed

  b.layers = LayerPredictor::load(p.layers_dir.string());
  if (p.graph_file) b.graph = GraphInference::load(p.graph_file->string());
  for (const fs::path& f : p.graph_members) b.graph->add_member(GraphInference::load(f.string()), f.string());
  if (p.graph_device_out_file) b.graph_device_out = GraphInference::load(p.graph_device_out_file->string());
  if (p.comm_file) b.comm = load_comm_model(p.comm_file->string());
  if (p.memory_file)
    b.memory = MemoryCorrection::from_json(read_json_file(p.memory_file->string()), p.memory_file->string());
  return b;
}

std::optional<int64_t> Bundle::layer_rows_of(const std::string& device_key) const {
  if (!manifest.contains("training") || !manifest["training"].contains("layer_row_devices"))
    return std::nullopt;
  const auto& m = manifest["training"]["layer_row_devices"];
  if (!m.is_object()) return std::nullopt;
  auto it = m.find(device_key);
  return it != m.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace scaledl
