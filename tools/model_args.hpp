#pragma once
// The model + training-settings flags shared by `inspect` and `predict`:
// MODEL.json, then the config's optional "scaledl" settings object, then flags.
#include <filesystem>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "scaledl/error.hpp"
#include "scaledl/json_util.hpp"
#include "scaledl/model_spec.hpp"

namespace scaledl::cli {

/// A text model's input is --seq, a vision model's --image: the other one would be
/// silently ignored, so it is an error (`seq`/`image` are the values given, 0 = none).
inline void check_input_size(const ModelSpec& m, int64_t seq, int64_t image, const std::string& seq_flag,
                             const std::string& image_flag) {
  const bool vision = m.arch == Arch::VisionEncoder;
  SCALEDL_CHECK(!(vision && seq), "{}={} does not apply: {} is a vision model (its input is {}, image side in pixels)",
                seq_flag, seq, m.name, image_flag);
  SCALEDL_CHECK(!(!vision && image), "{}={} does not apply: {} is a text model (its input is {}, tokens per sample)",
                image_flag, image, m.name, seq_flag);
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
    auto* mode_opt = app.add_option("--mode", mode,
                                    "train (forward + backward + optimizer step, default), fwd-bwd (no optimizer "
                                    "step) or inference (forward only, no grad)");
    app.add_flag("--no-optimizer", no_optimizer, "leave out the optimizer step (same as --mode fwd-bwd)")
        ->excludes(mode_opt);
  }

  /// Parses and validates the config, then applies the flags on top of its settings.
  std::pair<ModelSpec, TrainSettings> load() const {
    json config = read_json_file(model);
    ModelSpec m = parse_model_config(config, model);
    m.name = std::filesystem::path(model).stem().string();
    TrainSettings s = settings_from_config(config, model);
    apply(s);
    check_input_size(m, seq, image, "--seq", "--image");
    return {m, s};
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
  }
};

}  // namespace scaledl::cli
