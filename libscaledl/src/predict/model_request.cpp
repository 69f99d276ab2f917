// A model config and the settings given on top of it (model_request.hpp).
#include "scaledl/predict/model_request.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "scaledl/core/error.hpp"

namespace scaledl {

void check_input_size(const ModelSpec& m, int64_t seq, int64_t image, const std::string& seq_flag,
                      const std::string& image_flag) {
  const bool vision = m.arch == Arch::VisionEncoder;
  SCALEDL_CHECK(!(vision && seq),
                "{}={} does not apply: {} is a vision model (its input is {}, image side in pixels)",
                seq_flag, seq, m.name, image_flag);
  SCALEDL_CHECK(!(!vision && image),
                "{}={} does not apply: {} is a text model (its input is {}, tokens per sample)", image_flag,
                image, m.name, seq_flag);
}

std::pair<ModelSpec, TrainSettings> ModelRequest::load(std::vector<std::string>* assumed) const {
  json config = read_json_file(model);
  ModelSpec m = parse_model_config(config, model);
  m.name = std::filesystem::path(model).stem().string();
  TrainSettings s = settings_from_config(config, model);
  apply(s);
  check_input_size(m, seq, image, "--seq", "--image");
  if (assumed) *assumed = assumed_settings(config, m, s, {});
  return {m, s};
}

namespace {
/// "dtype fp32 (the default; give --dtype)", or the same naming the config's torch_dtype when it
/// says otherwise.
std::string assumed_dtype(const json& config, const TrainSettings& s) {
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
  return phrase;
}
}  // namespace

std::vector<std::string> ModelRequest::assumed_settings(const json& config, const ModelSpec& m,
                                                        const TrainSettings& s,
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
  if (!set("dtype", "dtype", !dtype.empty())) out.push_back(assumed_dtype(config, s));
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

void ModelRequest::apply(TrainSettings& s) const {
  if (batch) s.batch = batch;
  if (seq) s.seq_len = seq;
  if (image) s.image_size = image;
  if (!dtype.empty()) set_dtype_recipe(s, dtype, "--dtype");
  if (!framework.empty()) apply_framework(s, parse_framework(framework, "--framework"));
  if (!attention.empty()) s.attention = parse_attention_impl(attention, "--attention");
  if (lora_rank) s.lora_rank = lora_rank;
  if (!lora_targets.empty()) {
    SCALEDL_CHECK(s.lora_rank > 0, "--lora-targets={} without --lora-rank (the adapters' rank)",
                  lora_targets);
    s.lora_targets = parse_lora_targets(lora_targets, "--lora-targets");
  }
  if (!optimizer.empty()) s.optimizer = parse_optimizer(optimizer, "--optimizer");
  if (no_optimizer) s.optimizer_step = false;
  if (!mode.empty()) set_run_mode(s, parse_run_mode(mode, "--mode"));
  if (!optimizer.empty()) check_optimizer_applies(s, "--optimizer", optimizer);
}

void ModelRequest::check_optimizer_applies(const TrainSettings& s, const std::string& key,
                                           const std::string& value) {
  SCALEDL_CHECK(s.optimizer_step,
                "{}={} does not apply: mode {} has no optimizer step (drop {} or use mode train)", key, value,
                to_string(run_mode(s)), key);
}

}  // namespace scaledl
