// The graph model's weights file read without LibTorch (see gnn_file.hpp).
#include "gnn/gnn_file.hpp"

#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <cmath>
#include <cstring>
#include <filesystem>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl::gnn_detail {
namespace {

std::vector<float> tensor_vec(const RawSafeTensors& st, const std::string& name, size_t n,
                              const std::string& path) {
  auto it = st.tensors.find(name);
  SCALEDL_CHECK(it != st.tensors.end(), "{}: tensor '{}' is missing", path, name);
  const RawTensor& t = it->second;
  SCALEDL_CHECK(t.shape.size() == 1 && static_cast<size_t>(t.numel()) == n,
                "{}: tensor '{}' has {} values, expected {}", path, name, t.numel(), n);
  std::vector<float> v = t.to_float();
  for (size_t i = 0; i < n; ++i)
    SCALEDL_CHECK(std::isfinite(v[i]) && (name.find("scale") == std::string::npos || v[i] > 0),
                  "{}: tensor '{}'[{}]={} is invalid", path, name, i, v[i]);
  return v;
}

const std::string& meta_field(const RawSafeTensors& st, const std::string& key, const std::string& path) {
  auto it = st.metadata.find(key);
  SCALEDL_CHECK(it != st.metadata.end(), "{}: __metadata__.{} is missing (not a ScaleDL graph model?)", path,
                key);
  return it->second;
}

nlohmann::json meta_json(const RawSafeTensors& st, const std::string& key, const std::string& path) {
  const std::string& text = meta_field(st, key, path);
  try {
    return parse_json_text(text, "__metadata__." + key);  // depth-limited
  } catch (const Error& e) {
    fail("{}: __metadata__.{} is not valid JSON ({})", path, key, e.what());
  }
}

}  // namespace

GnnFile read_gnn_file(const std::string& path) {
  {
    // A regular file only: a FIFO would block the reader forever (issue #39).
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_type t = fs::status(path, ec).type();
    SCALEDL_CHECK(t == fs::file_type::regular || t == fs::file_type::not_found || t == fs::file_type::none,
                  "{}: not a regular file ({}): a graph model is a safetensors file", path,
                  t == fs::file_type::directory ? "a directory"
                  : t == fs::file_type::fifo    ? "a FIFO"
                                                : "a device or socket");
  }
  GnnFile f;
  f.st = load_safetensors_raw(path);
  const RawSafeTensors& st = f.st;
  const std::string& fmt_name = meta_field(st, "format", path);
  SCALEDL_CHECK(fmt_name == "scaledl-gnn", "{}: __metadata__.format={} is not scaledl-gnn", path, fmt_name);
  const std::string& ver = meta_field(st, "format_version", path);
  SCALEDL_CHECK(ver == std::to_string(kGnnFileFormatVersion),
                "{}: __metadata__.format_version={} is not supported (this build reads version {})", path,
                ver, kGnnFileFormatVersion);
  SCALEDL_CHECK(
      st.metadata.count("content_sha256") &&
          st.metadata.at("content_sha256") == safetensors_content_sha256(st),
      "{}: __metadata__.content_sha256 does not match the weights and metadata: the file was altered or "
      "damaged (retrain it with this build)",
      path);
  const std::pair<const char*, const std::vector<std::string>*> feats[] = {
      {"node_features", &node_feature_names()},
      {"edge_features", &edge_feature_names()},
      {"global_features", &global_feature_names()}};
  for (const auto& [key, names] : feats) {
    nlohmann::json j = meta_json(st, key, path);
    SCALEDL_CHECK(j == nlohmann::json(*names),
                  "{}: __metadata__.{} differs from this build's features (retrain the graph model)", path,
                  key);
  }
  f.cfg = GnnConfig::from_json(meta_json(st, "config", path), path + ": __metadata__.config");
  Normalizer& norm = f.norm;
  norm.kind = meta_field(st, "normalization", path);
  for (const auto& [name, v, n] : norm_tensors(norm)) *v = tensor_vec(st, "norm." + name, n, path);
  for (auto [lo, hi, what] :
       {std::make_tuple(&norm.x_lo, &norm.x_hi, "x"), std::make_tuple(&norm.e_lo, &norm.e_hi, "e"),
        std::make_tuple(&norm.z_lo, &norm.z_hi, "z")})
    for (size_t i = 0; i < lo->size(); ++i)
      SCALEDL_CHECK((*lo)[i] <= (*hi)[i], "{}: tensor 'norm.{}_lo'[{}]={} exceeds 'norm.{}_hi'[{}]={}", path,
                    what, i, (*lo)[i], what, i, (*hi)[i]);
  return f;
}

std::vector<float> gnn_file_weight(const GnnFile& f, const std::string& name,
                                   const std::vector<int64_t>& shape, const std::string& path) {
  auto it = f.st.tensors.find("model." + name);
  SCALEDL_CHECK(it != f.st.tensors.end(), "{}: tensor 'model.{}' is missing", path, name);
  SCALEDL_CHECK(it->second.shape == shape, "{}: tensor 'model.{}' has shape {}, expected {}", path, name,
                fmt::join(it->second.shape, "x"), fmt::join(shape, "x"));
  std::vector<float> v = it->second.to_float();
  bool finite = true;
  if (it->second.dtype == "F64") {  // the values as stored (a double beyond float's range is finite)
    for (size_t i = 0; i < v.size(); ++i) {
      double d;
      std::memcpy(&d, it->second.bytes.data() + i * 8, 8);
      finite = finite && std::isfinite(d);
    }
  } else {
    for (float x : v) finite = finite && std::isfinite(x);
  }
  SCALEDL_CHECK(finite, "{}: tensor 'model.{}' has NaN/Inf values", path, name);
  return v;
}

void check_gnn_file_tensor_count(const GnnFile& f, size_t model_tensors, const std::string& path) {
  const size_t used = norm_tensors(f.norm).size() + model_tensors;
  SCALEDL_CHECK(used == f.st.tensors.size(),
                "{}: {} tensors in the file but the model uses {} (config mismatch)", path,
                f.st.tensors.size(), used);
}

nlohmann::json gnn_file_metadata(const GnnFile& f) {
  nlohmann::json meta;
  for (const auto& [k, v] : f.st.metadata) {
    try {
      meta[k] = parse_json_text(v, k);
    } catch (const Error&) {
      meta[k] = v;
    }
  }
  return meta;
}

}  // namespace scaledl::gnn_detail
