#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// A model config and the training settings given on top of it: MODEL.json, then the config's
// optional "scaledl" settings object, then the values given (the `--batch`, `--seq`, ... flags of
// `inspect`, `predict` and `scale`; tools/model_args.hpp binds them to the command line).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

/// A text model's input is the sequence length, a vision model's the image side: the other one
/// would be silently ignored, so it is an error (`seq`/`image` are the values given, 0 = none;
/// `seq_flag`/`image_flag` name them in the message).
void check_input_size(const ModelSpec& m, int64_t seq, int64_t image, const std::string& seq_flag,
                      const std::string& image_flag);

struct ModelRequest {
  std::string model;          ///< path of a Hugging Face config.json
  int64_t batch = 0;          ///< samples per iteration per device, >= 1 (0 = config/default 8)
  int64_t seq = 0;            ///< tokens per sample for text models (0 = config/default 128)
  int64_t image = 0;          ///< image side in pixels for vision models (0 = the config's)
  std::string dtype;          ///< fp32|tf32|bf16|fp16|fp8 (the FP8 recipe) ("" = config/default fp32)
  std::string framework;      ///< hf-eager|hf-sdpa|megatron: the kernel recipe ("" = the config's, hf-eager)
  std::string attention;      ///< eager|fused: the attention core, over the framework's ("" = its)
  int64_t lora_rank = 0;      ///< LoRA adapters of this rank, the model frozen (0 = the config's, none)
  std::string lora_targets;   ///< "q,v", "all" ("" = all, with lora_rank)
  std::string optimizer;      ///< sgd|adam|adamw ("" = config/default adamw)
  bool no_optimizer = false;  ///< leave out the optimizer step (= --mode fwd-bwd)
  std::string mode;           ///< train|fwd-bwd|inference ("" = config/default train)

  /// Parses and validates the config, then applies the values given on top of its settings.
  /// `assumed` (may be null) receives what neither a value nor the config set (assumed_settings).
  std::pair<ModelSpec, TrainSettings> load(std::vector<std::string>* assumed = nullptr) const;

  /// The settings of `s` that came from a default rather than a value given, a sweep key
  /// (`given`) or the config's own "scaledl" settings, each as a phrase for the output: "seq 128
  /// (the default; give --seq)", and the dtype when the config's torch_dtype says otherwise.
  std::vector<std::string> assumed_settings(const json& config, const ModelSpec& m, const TrainSettings& s,
                                            const std::vector<std::string>& given) const;

  /// The values given on top of `s` (a config's own settings).
  void apply(TrainSettings& s) const;

  /// An optimizer named (flag, sweep or CSV value) for a run without an optimizer step is a
  /// contradiction, not something to ignore.
  static void check_optimizer_applies(const TrainSettings& s, const std::string& key,
                                      const std::string& value);
};

}  // namespace scaledl
