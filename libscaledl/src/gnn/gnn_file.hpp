#pragma once
// The graph model's weights file (GraphPredictor::save) read without LibTorch: the checks
// GraphPredictor::load and GraphInference::load share, in the same order and with the
// same messages. Not a public header.
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "gnn/safetensors_raw.hpp"
#include "scaledl/gnn/graph_inference.hpp"

namespace scaledl::gnn_detail {

/// A checked file: format, version, content_sha256, feature names, config, normalisation.
struct GnnFile {
  GnnConfig cfg;
  Normalizer norm;  ///< as saved (the model's constructor ignores the device memory column)
  RawSafeTensors st;
};

/// Reads `path` (a regular file only) and checks all but the model tensors.
GnnFile read_gnn_file(const std::string& path);

/// Tensor "model.<name>" of `f` as float: present, of `shape`, finite; else an Error
/// naming `path` and the tensor.
std::vector<float> gnn_file_weight(const GnnFile& f, const std::string& name,
                                   const std::vector<int64_t>& shape, const std::string& path);

/// Checks that the file holds no tensor beyond the normalisation and `model_tensors` weights.
void check_gnn_file_tensor_count(const GnnFile& f, size_t model_tensors, const std::string& path);

/// The metadata as GraphPredictor::metadata holds it (each value parsed as JSON when it is).
nlohmann::json gnn_file_metadata(const GnnFile& f);

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

}  // namespace scaledl::gnn_detail
