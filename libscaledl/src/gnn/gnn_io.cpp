// The graph model's weights file (see gnn.hpp): GraphPredictor::save and ::load, a safetensors
// file (gnn/safetensors.hpp) of the weights, the normalisation and the configuration.
#include <map>
#include <mutex>
#include <utility>

#include "gnn/gnn_file.hpp"
#include "gnn/safetensors.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/gnn/gnn.hpp"

namespace scaledl {

using gnn_detail::norm_tensors;

namespace {

torch::Tensor vec_tensor(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kFloat32)
      .clone();
}

}  // namespace

void GraphPredictor::save(const std::string& path, const nlohmann::json& extra) const {
  SCALEDL_CHECK(model_, "save: the graph model is not trained or loaded");
  SafeTensors st;
  for (const auto& kv : model_->named_parameters()) st.tensors["model." + kv.key()] = kv.value();
  for (const auto& kv : model_->named_buffers()) st.tensors["model." + kv.key()] = kv.value();
  for (const auto& [name, v, n] : norm_tensors(norm_)) st.tensors["norm." + name] = vec_tensor(*v);
  st.metadata["format"] = "scaledl-gnn";
  st.metadata["format_version"] = std::to_string(kGnnFileFormatVersion);
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

namespace {

/// The weights of `m` (parameters and buffers, "model." not in the names) as float on the CPU.
std::map<std::string, GraphInference::Weight> model_weights(const GnnModel& m) {
  std::map<std::string, GraphInference::Weight> w;
  torch::NoGradGuard ng;
  auto add = [&](const std::string& name, const torch::Tensor& t0) {
    const torch::Tensor t = t0.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    GraphInference::Weight& d = w[name];
    d.shape = t.sizes().vec();
    d.values.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  };
  for (const auto& kv : m->named_parameters()) add(kv.key(), kv.value());
  for (const auto& kv : m->named_buffers()) add(kv.key(), kv.value());
  return w;
}

/// What identifies the current weights of `m`: each tensor's storage and version counter
/// (bumped by every in-place change: an optimiser step, copy_, fill_).
std::vector<std::pair<const void*, int64_t>> weights_key(const GnnModel& m) {
  std::vector<std::pair<const void*, int64_t>> key;
  auto add = [&](const torch::Tensor& t) {
    // An inference tensor has no version counter: its storage is all that can tell.
    key.emplace_back(t.data_ptr(), t.is_inference() ? 0 : static_cast<int64_t>(t._version()));
  };
  for (const auto& kv : m->named_parameters()) add(kv.value());
  for (const auto& kv : m->named_buffers()) add(kv.value());
  return key;
}

}  // namespace

struct GraphPredictor::InferenceCache {
  std::mutex mu;
  std::vector<std::pair<const void*, int64_t>> key;  ///< weights_key of the model `model` was built from
  std::shared_ptr<const GraphInference> model;
};

GraphPredictor::GraphPredictor(const GnnConfig& cfg, Normalizer norm)
    : cfg_(cfg),
      norm_(std::move(norm)),
      model_(GnnModel(cfg)),
      inference_(std::make_shared<InferenceCache>()) {
  if (!cfg_.device_memory_feature) norm_.ignore_global("log1p_dev_mem_gb");
}

std::shared_ptr<const GraphInference> GraphPredictor::inference() const {
  SCALEDL_CHECK(model_ && inference_, "predict: the graph model is not trained or loaded");
  std::lock_guard<std::mutex> lock(inference_->mu);
  auto key = weights_key(model_);
  if (!inference_->model || key != inference_->key) {
    auto m = std::make_shared<GraphInference>(cfg_, norm_, model_weights(model_));
    m->meta_ = meta_;
    inference_->model = std::move(m);
    inference_->key = std::move(key);
  }
  return inference_->model;
}

GraphPredictor GraphPredictor::load(const std::string& path) {
  gnn_detail::GnnFile f = gnn_detail::read_gnn_file(path);
  GraphPredictor p(f.cfg, f.norm);
  torch::NoGradGuard ng;
  std::map<std::string, GraphInference::Weight> weights;
  auto assign = [&](const std::string& name, torch::Tensor& dst) {
    GraphInference::Weight& w = weights[name];
    w.shape = dst.sizes().vec();
    w.values = gnn_detail::gnn_file_weight(f, name, w.shape, path);
    dst.copy_(torch::from_blob(w.values.data(), dst.sizes(), torch::kFloat32));
  };
  for (auto& kv : p.model_->named_parameters()) assign(kv.key(), kv.value());
  for (auto& kv : p.model_->named_buffers()) assign(kv.key(), kv.value());
  gnn_detail::check_gnn_file_tensor_count(f, weights.size(), path);
  p.model_->eval();
  p.meta_ = gnn_detail::gnn_file_metadata(f);
  // The model without LibTorch, from the same values (what prediction runs).
  auto inf = std::make_shared<GraphInference>(f.cfg, f.norm, weights, path);
  inf->meta_ = p.meta_;
  p.inference_->model = std::move(inf);
  p.inference_->key = weights_key(p.model_);
  return p;
}

}  // namespace scaledl
