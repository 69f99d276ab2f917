#pragma once
// LibTorch MLP baseline of the cross-validation (PreNeT's comparison set). Kept in
// its own translation unit: the rest of the learn stage needs no LibTorch headers.
#include <map>
#include <string>
#include <vector>

#include "scaledl/io/device.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl::detail {

/// Trains one MLP per layer type on `train` and predicts `test` (ms, same order).
/// Features: log1p of layer_features() columns, standardised with the training
/// mean/std; target ln(ms) standardised; 2 hidden layers of 64 ReLU; Adam lr 1e-3,
/// mini-batches of 256, `epochs` passes. Types absent from `train`: roofline.
std::vector<double> mlp_fit_predict(const std::vector<LayerSample>& train,
                                    const std::vector<LayerSample>& test,
                                    const std::map<std::string, DeviceRecord>& devices, int epochs,
                                    const std::string& torch_device, uint64_t seed, bool roofline = true);

}  // namespace scaledl::detail
