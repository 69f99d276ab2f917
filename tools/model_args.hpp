#pragma once
// The model + training-settings flags shared by `inspect`, `predict` and `scale`:
// MODEL.json, then the config's optional "scaledl" settings object, then flags.
// What they mean (load, apply, assumed_settings) is the library's ModelRequest
// (scaledl/predict/model_request.hpp); this binds it to the command line.
#include <string>

#include <CLI/CLI.hpp>

#include "scaledl/predict/model_request.hpp"

namespace scaledl::cli {

struct ModelArgs : ModelRequest {
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
    app.add_option("--dtype", dtype,
                   "fp32, tf32, bf16, fp16 (a model loaded in it), fp8: Transformer Engine's recipe, FP8 "
                   "GEMMs in the blocks' linear layers and BF16 elsewhere, or amp-bf16 / amp-fp16: autocast "
                   "over FP32 weights, as Hugging Face's Trainer with bf16=True / fp16=True (default fp32)");
    app.add_option(
        "--framework", framework,
        "kernel recipe: hf-eager (every kernel its own), hf-sdpa (fused attention) or megatron "
        "(fused attention, softmax, GELU and RoPE kernels); each adds the fused optimizer step and "
        "the rotary kernels (default: none, our LibTorch zoo's eager kernels; docs/predict.md)");
    app.add_option("--attention", attention,
                   "attention core: eager or fused (FlashAttention / SDPA), over the "
                   "--framework's choice");
    app.add_option("--lora-rank", lora_rank,
                   "LoRA fine-tuning: adapters of this rank on the blocks' linear layers, every model weight "
                   "frozen (no weight gradients or optimizer state for them)")
        ->check(CLI::Range(int64_t(1), int64_t(65536)));
    app.add_option("--lora-targets", lora_targets,
                   "the linear layers that get adapters: all (default) or a list of q,k,v,o,gate,up,down");
    app.add_option("--optimizer", optimizer, "sgd, adam or adamw (default adamw)");
    auto* mode_opt =
        app.add_option("--mode", mode,
                       "train (forward + backward + optimizer step, default), fwd-bwd (no optimizer "
                       "step) or inference (forward only, no grad)");
    app.add_flag("--no-optimizer", no_optimizer, "leave out the optimizer step (same as --mode fwd-bwd)")
        ->excludes(mode_opt);
  }
};

}  // namespace scaledl::cli
