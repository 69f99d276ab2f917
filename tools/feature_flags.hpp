#pragma once
// The layer models' feature-column and kernel-time flags, one definition for `train`,
// `train layers` and `eval` (docs/learn.md, docs/unseen-gpu.md).
#include <CLI/CLI.hpp>

#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl::cli {

inline void add_feature_flags(CLI::App& app, TrainOptions& t) {
  app.add_flag(
      "--transfer-features", t.transfer_features,
      "layer models: add the tiling / wave-quantisation and device-relative columns (docs/learn.md)");
  app.add_flag("--arch-features", t.arch_features,
               "layer models: add the FP32 lanes per SM of the device's spec (docs/unseen-gpu.md)");
  app.add_flag(
      "--alignment-features", t.alignment_features,
      "layer models: add the GEMM's alignment (the power of two dividing M, N, K) and whether the GPU is "
      "older than Volta (docs/unseen-gpu.md)");
  app.add_flag("!--no-device-features", t.device_features,
               "layer models: drop the h^dev columns, so the device enters through the roofline and transfer "
               "columns only");
  app.add_flag(
      "--kernel-time", t.kernel_time,
      "layer models: learn kernel times, each GPU's rows less its timing floor (the fastest of its rows; "
      "docs/unseen-gpu.md)");
  app.add_flag(
      "--sustained-bw", t.sustained_bw,
      "layer models: memory-bound rooflines at each GPU's sustained bandwidth (its largest elementwise "
      "rows, a probe's copy, or the training GPUs' share of a spec sheet's; docs/unseen-gpu.md)");
  app.add_flag(
      "--dtype-rates", t.dtype_rates,
      "layer models: rooflines at the spec peak of each row's dtype (BF16/FP16 at the tensor-core peak), "
      "not the FP32 rate (docs/unseen-gpu.md)");
  app.add_flag("--split-direction", t.split_direction,
               "layer models: one model per (type, direction), each with its own timing floor (a backward's "
               "harness overhead is not a forward's; docs/learn.md)");
}

}  // namespace scaledl::cli
