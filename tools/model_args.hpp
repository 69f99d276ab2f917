#pragma once
// The model + training-settings flags shared by `inspect` and `predict`:
// MODEL.json, then the config's optional "scaledl" settings object, then flags.
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl::cli {

/// A text model's input is --seq, a vision model's --image: the other one would be
/// silently ignored, so it is an error (`seq`/`image` are the values given, 0 = none).
inline void check_input_size(const ModelSpec& m, int64_t seq, int64_t image, const std::string& seq_flag,
                             const std::string& image_flag) {
  const bool vision = m.arch == Arch::VisionEncoder;
  SCALEDL_CHECK(!(vision && seq),
                "{}={} does not apply: {} is a vision model (its input is {}, image side in pixels)",
                seq_flag, seq, m.name, image_flag);
  SCALEDL_CHECK(!(!vision && image),
                "{}={} does not apply: {} is a text model (its input is {}, tokens per sample)", image_flag,
                image, m.name, seq_flag);
}

struct ModelArgs {
  std::string model;          ///< path of a Hugging Face config.json
  int64_t batch = 0;          ///< samples per iteration per device, >= 1 (0 = config/default 8)
  int64_t seq = 0;            ///< tokens per sample for text models (0 = config/default 128)
  int64_t image = 0;          ///< image side in pixels for vision models (0 = the config's)
  std::string dtype;          ///< fp32|tf32|bf16|fp16 ("" = config/default fp32)
  std::string optimizer;      ///< sgd|adam|adamw ("" = config/default adamw)
  bool no_optimizer = false;  ///< leave out the optimizer step (= --mode fwd-bwd)
  std::string mode;           ///< train|fwd-bwd|inference ("" = config/default train)

  void add_to(CLI::App& app, bool model_required = true) {
    auto* m = app.add_option("model", model, "Hugging Face config.json");
    if (model_required) m->required();
    app.add_option("--batch", batch, "samples per iteration per device (default 8)")
        ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    auto* seq_opt = app.add_option("--seq", seq, "tokens per sample, text models (default 128)")
                        ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
    app.add_option("--image", image, "image side in pixels, vision models")
        ->check(CLI::Range(int64_t(1), int64_t(1) << 16))
        ->excludes(seq_opt);
    app.add_option("--dtype", dtype, "fp32, tf32, bf16 or fp16 (default fp32)");
    app.add_option("--optimizer", optimizer, "sgd, adam or adamw (default adamw)");
    auto* mode_opt =
        app.add_option("--mode", mode,
                       "train (forward + backward + optimizer step, default), fwd-bwd (no optimizer "
                       "step) or inference (forward only, no grad)");
    app.add_flag("--no-optimizer", no_optimizer, "leave out the optimizer step (same as --mode fwd-bwd)")
        ->excludes(mode_opt);
  }

  /// Parses and validates the config, then applies the flags on top of its settings.
  /// `assumed` (may be null) receives what neither a flag nor the config set (assumed_settings).
  std::pair<ModelSpec, TrainSettings> load(std::vector<std::string>* assumed = nullptr) const {
    json config = read_json_file(model);
    ModelSpec m = parse_model_config(config, model);
    m.name = std::filesystem::path(model).stem().string();
    TrainSettings s = settings_from_config(config, model);
    apply(s);
    check_input_size(m, seq, image, "--seq", "--image");
    if (assumed) *assumed = assumed_settings(config, m, s, {});
    return {m, s};
  }

  /// The settings of `s` that came from a default rather than a flag, a sweep key (`given`) or
  /// the config's own "scaledl" settings, each as a phrase for the output: "seq 128 (the default;
  /// give --seq)", and the dtype when the config's torch_dtype says otherwise.
  std::vector<std::string> assumed_settings(const json& config, const ModelSpec& m, const TrainSettings& s,
                                            const std::vector<std::string>& given) const {
    const json none = json::object();
    const json& own = config.is_object() && config.contains("scaledl") && config["scaledl"].is_object()
                          ? config["scaledl"]
                          : none;
    auto set = [&](const char* flag_key, const char* own_key, bool flag) {
      return flag || own.contains(own_key) || std::find(given.begin(), given.end(), flag_key) != given.end();
    };
    std::vector<std::string> out;
    if (!set("batch", "batch", batch != 0))
      out.push_back(fmt::format("batch {} (the default; give --batch)", s.batch));
    if (m.arch != Arch::VisionEncoder && !set("seq", "seq_len", seq != 0))
      out.push_back(fmt::format("seq {} (the default; give --seq)", s.seq_len));
    if (!set("dtype", "dtype", !dtype.empty())) {
      std::string phrase = fmt::format("dtype {} (the default; give --dtype)", to_string(s.dtype));
      if (config.is_object() && config.contains("torch_dtype") && config["torch_dtype"].is_string()) {
        const std::string td = config["torch_dtype"].get<std::string>();
        const std::string as = td == "bfloat16"  ? "bf16"
                               : td == "float16" ? "fp16"
                               : td == "float32" ? "fp32"
                                                 : "";
        if (!as.empty() && as != to_string(s.dtype))
          phrase = fmt::format(
              "dtype {} (the default, although the config's torch_dtype is {}: give --dtype {} to "
              "train in it)",
              to_string(s.dtype), td, as);
      }
      out.push_back(phrase);
    }
    if (!set("mode", "mode", !mode.empty() || no_optimizer) && !own.contains("optimizer_step") &&
        !own.contains("backward"))
      out.push_back(fmt::format("mode {} (the default; give --mode)", to_string(run_mode(s))));
    // A sliding window is a mask in Hugging Face's eager and SDPA attention: every score is still
    // computed, and the graph costs them all.
    if (config.is_object() && config.contains("sliding_window") &&
        config["sliding_window"].is_number_integer() && config["sliding_window"].get<int64_t>() > 0 &&
        config["sliding_window"].get<int64_t>() < s.seq_len &&
        !(config.contains("use_sliding_window") && config["use_sliding_window"] == false))
      out.push_back(
          fmt::format("attention over all {} tokens: sliding_window={} is costed as the mask eager and SDPA "
                      "attention apply, not as a banded kernel",
                      s.seq_len, config["sliding_window"].get<int64_t>()));
    return out;
  }

  /// The settings flags on top of `s` (a config's own settings).
  void apply(TrainSettings& s) const {
    if (batch) s.batch = batch;
    if (seq) s.seq_len = seq;
    if (image) s.image_size = image;
    if (!dtype.empty()) s.dtype = parse_dtype(dtype, "--dtype");
    if (!optimizer.empty()) s.optimizer = parse_optimizer(optimizer, "--optimizer");
    if (no_optimizer) s.optimizer_step = false;
    if (!mode.empty()) set_run_mode(s, parse_run_mode(mode, "--mode"));
    if (!optimizer.empty()) check_optimizer_applies(s, "--optimizer", optimizer);
  }

  /// An optimizer named (flag, sweep or CSV value) for a run without an optimizer step is a
  /// contradiction, not something to ignore.
  static void check_optimizer_applies(const TrainSettings& s, const std::string& key,
                                      const std::string& value) {
    SCALEDL_CHECK(s.optimizer_step,
                  "{}={} does not apply: mode {} has no optimizer step (drop {} or use mode train)", key,
                  value, to_string(run_mode(s)), key);
  }
};

}  // namespace scaledl::cli
