// LibTorch MLP baseline (see mlp.hpp). Device-agnostic: the torch::Device is
// chosen at run time from a string; everything else is plain LibTorch 1.13/2.x.
#include "learn/mlp.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "scaledl/core/error.hpp"
#include "scaledl/learn/layer_features.hpp"

namespace scaledl::detail {

namespace {
const DeviceRecord& dev_at(const std::map<std::string, DeviceRecord>& devices, const std::string& key) {
  auto it = devices.find(key);
  SCALEDL_CHECK(it != devices.end(), "device=\"{}\" is unknown: import or probe it first", key);
  return it->second;
}

/// log1p(|x|) * sign(x) features of samples of one type: [rows, nf].
std::vector<float> features_of(const std::vector<const LayerSample*>& rows, LayerType t,
                               const std::map<std::string, DeviceRecord>& devices, size_t nf,
                               const FeatureOptions& fo) {
  std::vector<float> x(rows.size() * nf);
  for (size_t i = 0; i < rows.size(); ++i)
    layer_features(t, rows[i]->dims, rows[i]->dtype, rows[i]->dir, dev_at(devices, rows[i]->device), fo,
                   &x[i * nf]);
  for (float& v : x) v = std::copysign(std::log1p(std::abs(v)), v);
  return x;
}

torch::Device parse_device(const std::string& s) {
  try {
    return torch::Device(s);
  } catch (const c10::Error& e) {
    fail("torch_device=\"{}\" is not a LibTorch device: {}", s, e.what_without_backtrace());
  }
}
}  // namespace

std::vector<double> mlp_fit_predict(const std::vector<LayerSample>& train,
                                    const std::vector<LayerSample>& test,
                                    const std::map<std::string, DeviceRecord>& devices, int epochs,
                                    const std::string& torch_device, uint64_t seed, bool roofline) {
  FeatureOptions fo;
  fo.roofline = roofline;
  const torch::Device dev = parse_device(torch_device);
  std::map<int, std::vector<const LayerSample*>> tr, te;
  std::map<int, std::vector<size_t>> te_idx;
  for (const auto& s : train) tr[int(s.type)].push_back(&s);
  for (size_t i = 0; i < test.size(); ++i) {
    te[int(test[i].type)].push_back(&test[i]);
    te_idx[int(test[i].type)].push_back(i);
  }
  std::vector<double> out(test.size());
  try {
    for (const auto& [tid, rows] : te) {
      const LayerType t = static_cast<LayerType>(tid);
      auto it = tr.find(tid);
      if (it == tr.end() || it->second.size() < 2) {  // no data: roofline, as LayerPredictor does
        for (size_t j = 0; j < rows.size(); ++j)
          out[te_idx[tid][j]] =
              roofline_ms(t, rows[j]->dims, rows[j]->dtype, rows[j]->dir, dev_at(devices, rows[j]->device));
        continue;
      }
      const size_t nf = feature_count(t, fo);
      const auto& trows = it->second;
      std::vector<float> xtr = features_of(trows, t, devices, nf, fo),
                         xte = features_of(rows, t, devices, nf, fo);
      std::vector<float> ytr(trows.size());
      for (size_t i = 0; i < trows.size(); ++i) ytr[i] = static_cast<float>(std::log(trows[i]->ms));
      torch::manual_seed(seed);
      auto X = torch::from_blob(xtr.data(), {int64_t(trows.size()), int64_t(nf)}).clone();
      auto Y = torch::from_blob(ytr.data(), {int64_t(trows.size()), 1}).clone();
      // A column constant in training (a flag, the device) gets scale 1: with a
      // tiny scale a test row that differs there would be pushed to +-1e6 sd.
      auto mu = X.mean(0), sd = X.std(0);
      sd = torch::where(sd > 1e-6, sd, torch::ones_like(sd));
      auto ymu = Y.mean(), ysd = Y.std().clamp_min(1e-6);
      X = ((X - mu) / sd).to(dev);
      Y = ((Y - ymu) / ysd).to(dev);
      torch::nn::Sequential net(torch::nn::Linear(int64_t(nf), 64), torch::nn::ReLU(),
                                torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 1));
      net->to(dev);
      torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
      const int64_t n = X.size(0), bs = 256;
      for (int ep = 0; ep < epochs; ++ep) {
        auto perm = torch::randperm(n, torch::TensorOptions().dtype(torch::kLong).device(dev));
        for (int64_t b = 0; b < n; b += bs) {
          auto idx = perm.slice(0, b, std::min(n, b + bs));
          auto loss = torch::mse_loss(net->forward(X.index_select(0, idx)), Y.index_select(0, idx));
          opt.zero_grad();
          loss.backward();
          opt.step();
        }
      }
      torch::NoGradGuard ng;
      auto Xt = torch::from_blob(xte.data(), {int64_t(rows.size()), int64_t(nf)}).clone();
      Xt = ((Xt - mu) / sd).to(dev);
      // log-time predictions stay within 100x of the type's training range: an
      // MLP extrapolates linearly in log space, and one exploding node would
      // otherwise decide a whole model's sum.
      const double lo = Y.min().item<double>() * ysd.item<double>() + ymu.item<double>() - std::log(100.0);
      const double hi = Y.max().item<double>() * ysd.item<double>() + ymu.item<double>() + std::log(100.0);
      auto P = (net->forward(Xt) * ysd.to(dev) + ymu.to(dev))
                   .clamp(lo, hi)
                   .exp()
                   .to(torch::kCPU)
                   .to(torch::kDouble);
      auto acc = P.accessor<double, 2>();
      for (size_t j = 0; j < rows.size(); ++j) out[te_idx[tid][j]] = std::max(acc[j][0], 1e-6);
    }
  } catch (const c10::Error& e) {
    fail("MLP baseline: LibTorch error: {}", e.what_without_backtrace());
  }
  return out;
}

}  // namespace scaledl::detail
