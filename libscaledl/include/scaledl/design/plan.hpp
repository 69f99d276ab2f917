#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// A benchmark plan: the list of configurations `scaledl bench layers|models`
// measures, written by `scaledl plan` or by hand. No LibTorch.
//
//   {"kind":"layers","configs":[{"type":"linear",
//       "dims":{"tokens":128,"d_in":768,"d_out":3072,"bias":1},"dtype":"fp32"}, ...]}
//   {"kind":"models","configs":[{"model":"models/bert-base.json" | {HF config object},
//       "overrides":{"num_hidden_layers":2}, "settings":{"batch":8,"seq_len":128,...}}, ...]}
//
// A relative "model" path is resolved against the plan file's directory
// first, then the current directory. Every error names configs[i].<key>.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/ir/layer_types.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

/// One layer configuration (a row key of the store).
struct LayerConfig {
  LayerType type = LayerType::Linear;
  std::vector<int64_t> dims;  ///< in layer_info(type).dims order; validate_dims passed
  DType dtype = DType::FP32;
  /// layer_key(type, dims, dtype), e.g. "linear:128x768x3072x1:fp32".
  std::string key() const;
  /// {"type":..,"dims":{name: value},"dtype":..} (the plan format).
  nlohmann::json to_json() const;
};

/// One whole-model configuration.
struct ModelConfig {
  ModelSpec model;         ///< parsed (overrides applied); name carries the overrides
  TrainSettings settings;  ///< parsed and validated against the model
  nlohmann::json config;   ///< the HF config object after overrides
  std::string source;      ///< resolved path of the model file, or "inline"
};

struct Plan {
  std::string kind;  ///< "layers" or "models"
  std::vector<LayerConfig> layers;
  std::vector<ModelConfig> models;
};

/// Parses one layer config object; `ctx` prefixes messages ("configs[3]").
/// dims may be an object keyed by dim name (all names required, no extras) or
/// an array in layer_info(type).dims order. dtype defaults to "fp32".
LayerConfig parse_layer_config(const nlohmann::json& j, const std::string& ctx);
/// Parses a plan object; `base_dir` resolves relative model paths ("" = cwd only).
Plan parse_plan(const nlohmann::json& j, const std::string& ctx, const std::string& base_dir = "");
/// Reads and parses a plan file (messages start with the path).
Plan load_plan(const std::string& path);
/// A layers plan as JSON (inverse of parse_plan for kind "layers").
nlohmann::json layers_plan_json(const std::vector<LayerConfig>& configs);

/// One of `count` processes that split a plan between them (`--shard i/n`,
/// docs/bench.md "Campaigns across nodes"). Process `index` runs configs k with
/// k % count == index, so the shards are disjoint and together cover the plan;
/// every row keeps the resume key it has in an unsharded run.
struct Shard {
  int64_t index = 0;  ///< 0-based, 0 <= index < count (a SLURM array must be --array=0-(n-1))
  int64_t count = 1;  ///< number of shards, >= 1
};

/// Parses "i/n" (decimal, 0 <= i < n); `what` names the option in messages
/// ("--shard=3/2: ...").
Shard parse_shard(const std::string& text, const std::string& what = "--shard");
/// The plan positions of shard `s` of a plan of `size` configs: k in [0, size)
/// with k % s.count == s.index, ascending (empty when s.index >= size).
std::vector<size_t> shard_indices(size_t size, const Shard& s);
/// Keeps only shard `s` of the plan's configs (layers or models), in plan order.
void apply_shard(Plan& p, const Shard& s);

}  // namespace scaledl
