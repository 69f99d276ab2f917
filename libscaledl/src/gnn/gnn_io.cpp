// The graph model's weights file (see gnn.hpp): GraphPredictor::save and ::load, a safetensors
// file (gnn/safetensors.hpp) of the weights, the normalisation and the configuration.
#include <fmt/ranges.h>  // fmt::join (in fmt/ranges.h since fmt 11, bundled by LibTorch 2.x)

#include <cmath>
#include <filesystem>
#include <tuple>
#include <type_traits>

#include "gnn/safetensors.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gnn/gnn.hpp"

namespace scaledl {

namespace {

torch::Tensor vec_tensor(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kFloat32)
      .clone();
}

std::vector<float> tensor_vec(const SafeTensors& st, const std::string& name, size_t n,
                              const std::string& path) {
  auto it = st.tensors.find(name);
  SCALEDL_CHECK(it != st.tensors.end(), "{}: tensor '{}' is missing", path, name);
  torch::Tensor t = it->second.to(torch::kFloat32).contiguous();
  SCALEDL_CHECK(t.dim() == 1 && static_cast<size_t>(t.numel()) == n,
                "{}: tensor '{}' has {} values, expected {}", path, name, t.numel(), n);
  std::vector<float> v(t.data_ptr<float>(), t.data_ptr<float>() + n);
  for (size_t i = 0; i < n; ++i)
    SCALEDL_CHECK(std::isfinite(v[i]) && (name.find("scale") == std::string::npos || v[i] > 0),
                  "{}: tensor '{}'[{}]={} is invalid", path, name, i, v[i]);
  return v;
}

/// The normalisation vectors saved as tensors "norm.<name>": (name, vector, columns).
template <typename N>  // Normalizer or const Normalizer
auto norm_tensors(N& n) {
  using V = std::conditional_t<std::is_const_v<N>, const std::vector<float>, std::vector<float>>;
  const size_t F = node_feature_names().size(), Fe = edge_feature_names().size(),
               Fz = global_feature_names().size();
  return std::vector<std::tuple<std::string, V*, size_t>>{
      {"x_offset", &n.x_offset, F}, {"x_scale", &n.x_scale, F},    {"e_offset", &n.e_offset, Fe},
      {"e_scale", &n.e_scale, Fe},  {"z_offset", &n.z_offset, Fz}, {"z_scale", &n.z_scale, Fz},
      {"x_lo", &n.x_lo, F},         {"x_hi", &n.x_hi, F},          {"e_lo", &n.e_lo, Fe},
      {"e_hi", &n.e_hi, Fe},        {"z_lo", &n.z_lo, Fz},         {"z_hi", &n.z_hi, Fz}};
}

const std::string& meta_field(const SafeTensors& st, const std::string& key, const std::string& path) {
  auto it = st.metadata.find(key);
  SCALEDL_CHECK(it != st.metadata.end(), "{}: __metadata__.{} is missing (not a ScaleDL graph model?)", path,
                key);
  return it->second;
}

nlohmann::json meta_json(const SafeTensors& st, const std::string& key, const std::string& path) {
  const std::string& text = meta_field(st, key, path);
  try {
    return parse_json_text(text, "__metadata__." + key);  // depth-limited
  } catch (const Error& e) {
    fail("{}: __metadata__.{} is not valid JSON ({})", path, key, e.what());
  }
}

}  // namespace

void GraphPredictor::save(const std::string& path, const nlohmann::json& extra) const {
  SCALEDL_CHECK(model_, "save: the graph model is not trained or loaded");
  SafeTensors st;
  for (const auto& kv : model_->named_parameters()) st.tensors["model." + kv.key()] = kv.value();
  for (const auto& kv : model_->named_buffers()) st.tensors["model." + kv.key()] = kv.value();
  for (const auto& [name, v, n] : norm_tensors(norm_)) st.tensors["norm." + name] = vec_tensor(*v);
  st.metadata["format"] = "scaledl-gnn";
  st.metadata["format_version"] = std::to_string(kFormatVersion);
  st.metadata["encoder"] = cfg_.encoder;
  st.metadata["config"] = cfg_.to_json().dump();
  st.metadata["normalization"] = norm_.kind;
  st.metadata["node_features"] = nlohmann::json(node_feature_names()).dump();
  st.metadata["edge_features"] = nlohmann::json(edge_feature_names()).dump();
  st.metadata["global_features"] = nlohmann::json(global_feature_names()).dump();
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it)
      st.metadata[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  st.metadata["content_sha256"] = safetensors_content_sha256(st);
  save_safetensors(path, st);
}

GraphPredictor GraphPredictor::load(const std::string& path) {
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
  SafeTensors st = load_safetensors(path);
  const std::string& fmt_name = meta_field(st, "format", path);
  SCALEDL_CHECK(fmt_name == "scaledl-gnn", "{}: __metadata__.format={} is not scaledl-gnn", path, fmt_name);
  const std::string& ver = meta_field(st, "format_version", path);
  SCALEDL_CHECK(ver == std::to_string(kFormatVersion),
                "{}: __metadata__.format_version={} is not supported (this build reads version {})", path,
                ver, kFormatVersion);
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
  GnnConfig cfg = GnnConfig::from_json(meta_json(st, "config", path), path + ": __metadata__.config");
  Normalizer norm;
  norm.kind = meta_field(st, "normalization", path);
  size_t used = 0;
  for (const auto& [name, v, n] : norm_tensors(norm)) {
    *v = tensor_vec(st, "norm." + name, n, path);
    ++used;
  }
  for (auto [lo, hi, what] :
       {std::make_tuple(&norm.x_lo, &norm.x_hi, "x"), std::make_tuple(&norm.e_lo, &norm.e_hi, "e"),
        std::make_tuple(&norm.z_lo, &norm.z_hi, "z")})
    for (size_t i = 0; i < lo->size(); ++i)
      SCALEDL_CHECK((*lo)[i] <= (*hi)[i], "{}: tensor 'norm.{}_lo'[{}]={} exceeds 'norm.{}_hi'[{}]={}", path,
                    what, i, (*lo)[i], what, i, (*hi)[i]);
  GraphPredictor p(cfg, norm);
  torch::NoGradGuard ng;
  auto assign = [&](const std::string& name, torch::Tensor& dst) {
    auto it = st.tensors.find("model." + name);
    SCALEDL_CHECK(it != st.tensors.end(), "{}: tensor 'model.{}' is missing", path, name);
    SCALEDL_CHECK(it->second.sizes() == dst.sizes(), "{}: tensor 'model.{}' has shape {}, expected {}", path,
                  name, fmt::join(it->second.sizes().vec(), "x"), fmt::join(dst.sizes().vec(), "x"));
    SCALEDL_CHECK(torch::isfinite(it->second).all().item<bool>(), "{}: tensor 'model.{}' has NaN/Inf values",
                  path, name);
    dst.copy_(it->second);
    ++used;
  };
  for (auto& kv : p.model_->named_parameters()) assign(kv.key(), kv.value());
  for (auto& kv : p.model_->named_buffers()) assign(kv.key(), kv.value());
  SCALEDL_CHECK(used == st.tensors.size(),
                "{}: {} tensors in the file but the model uses {} (config mismatch)", path, st.tensors.size(),
                used);
  p.model_->eval();
  for (const auto& [k, v] : st.metadata) {
    try {
      p.meta_[k] = parse_json_text(v, k);
    } catch (const Error&) {
      p.meta_[k] = v;
    }
  }
  return p;
}

}  // namespace scaledl
