// Run-level baselines (baselines.hpp).
#include "eval/baselines.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "learn/xgb.hpp"
#include "scaledl/core/error.hpp"

namespace scaledl::eval_detail {

namespace {
float lg(double v) {
  return static_cast<float>(std::log(std::max(v, 0.0) + 1.0));
}
}  // namespace

size_t hp_feature_count() {
  return 18 + kFamilyCount + 4;
}

std::vector<float> hp_features(const EvalRun& r, const DeviceRecord& dev) {
  const ModelSpec& m = r.spec;
  const TrainSettings& s = r.settings;
  const int64_t img = s.image_size > 0 ? s.image_size : m.image_size;
  std::vector<float> x = {lg(static_cast<double>(m.num_layers)),
                          lg(static_cast<double>(m.num_decoder_layers)),
                          lg(static_cast<double>(m.hidden)),
                          lg(static_cast<double>(m.num_heads)),
                          lg(static_cast<double>(m.num_kv_heads)),
                          lg(static_cast<double>(m.ffn_dim)),
                          lg(static_cast<double>(m.vocab_size)),
                          lg(static_cast<double>(s.batch)),
                          lg(static_cast<double>(tokens_per_sample(m, s))),
                          lg(static_cast<double>(decoder_tokens_per_sample(m, s))),
                          lg(static_cast<double>(m.vocab_size > 0 ? 0 : img)),
                          lg(static_cast<double>(m.patch_size)),
                          static_cast<float>(dtype_bytes(s.dtype)),
                          static_cast<float>(static_cast<int>(s.optimizer)),
                          s.optimizer_step ? 1.f : 0.f,
                          s.backward ? 1.f : 0.f,
                          m.gated_ffn ? 1.f : 0.f,
                          lg(static_cast<double>(m.num_experts))};
  for (int f = 0; f < kFamilyCount; ++f) x.push_back(static_cast<int>(m.family) == f ? 1.f : 0.f);
  x.push_back(lg(dev.compute_gflops()));
  x.push_back(lg(dev.bandwidth_gbs()));
  x.push_back(lg(static_cast<double>(dev.cores)));
  x.push_back(lg(static_cast<double>(s.num_devices)));
  SCALEDL_CHECK(x.size() == hp_feature_count(), "internal: {} hp features", x.size());
  return x;
}

std::vector<double> rf_hp_fit_predict(const std::vector<const EvalRun*>& train,
                                      const std::vector<const EvalRun*>& test,
                                      const std::map<std::string, DeviceRecord>& devices, uint64_t seed) {
  const size_t nf = hp_feature_count();
  auto mat = [&](const std::vector<const EvalRun*>& runs) {
    std::vector<float> x;
    x.reserve(runs.size() * nf);
    for (const EvalRun* r : runs) {
      auto f = hp_features(*r, devices.at(r->device));
      x.insert(x.end(), f.begin(), f.end());
    }
    return x;
  };
  std::vector<float> xtr = mat(train), xte = mat(test), y;
  for (const EvalRun* r : train) y.push_back(static_cast<float>(std::log(r->target_ms)));
  xgb::DMatrix dtr(xtr.data(), train.size(), nf, y);
  // A forest of one round: leaves must be plain means of the residuals around
  // the mean log time (lambda = 0, base_score = mean), not shrunk toward
  // XGBoost's default base score 0.5 as one boosting step would be.
  double ymean = 0;
  for (float v : y) ymean += v;
  ymean /= static_cast<double>(y.size());
  xgb::Booster b;
  b.set_params({{"objective", "reg:squarederror"},
                {"num_parallel_tree", "100"},
                {"subsample", "0.632"},
                {"colsample_bynode", "0.6"},
                {"eta", "1"},
                {"max_depth", "12"},
                {"min_child_weight", "1"},
                {"lambda", "0"},
                {"base_score", std::to_string(ymean)},
                {"nthread", "1"},
                {"seed", std::to_string(seed)}});
  b.train(dtr, 1);
  std::vector<float> p(test.size());
  if (!test.empty()) b.predict_dense(xte.data(), test.size(), nf, p.data());
  std::vector<double> out(test.size());
  for (size_t i = 0; i < test.size(); ++i) out[i] = std::exp(static_cast<double>(p[i]));
  return out;
}

namespace {

struct BiRnnImpl : torch::nn::Module {
  BiRnnImpl(int64_t f, int64_t h)
      : lstm(register_module(
            "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(f, h).bidirectional(true).batch_first(true)))),
        head(register_module("head", torch::nn::Sequential(torch::nn::Linear(2 * h, 32), torch::nn::ReLU(),
                                                           torch::nn::Linear(32, 1)))) {
    offset = register_buffer("offset", torch::zeros({1}));
  }
  /// x [B, T, F] padded, lengths [B] (CPU int64) -> log T [B]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& lengths) {
    auto packed = torch::nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true,
                                                              /*enforce_sorted=*/false);
    auto out = lstm->forward_with_packed_input(packed);
    torch::Tensor hn = std::get<0>(std::get<1>(out));  // [2, B, H]
    torch::Tensor h = torch::cat({hn[0], hn[1]}, 1);   // [B, 2H]
    return head->forward(h).squeeze(1) + offset;
  }
  torch::nn::LSTM lstm;
  torch::nn::Sequential head;
  torch::Tensor offset;
};
TORCH_MODULE(BiRnn);

}  // namespace

std::vector<double> birnn_fit_predict(const std::vector<const EvalRun*>& train,
                                      const std::vector<const EvalRun*>& test, int epochs, uint64_t seed) {
  SCALEDL_CHECK(!train.empty(), "birnn: no training runs");
  SCALEDL_CHECK(epochs >= 1, "--birnn-epochs={} must be >= 1", epochs);
  const size_t F = node_feature_names().size();
  // Standardise node features on the training runs' nodes.
  std::vector<double> mu(F, 0), sd(F, 0);
  double n = 0;
  for (const EvalRun* r : train)
    for (int64_t i = 0; i < r->graph.num_nodes; ++i, n += 1)
      for (size_t f = 0; f < F; ++f) mu[f] += r->graph.x[static_cast<size_t>(i) * F + f];
  for (auto& v : mu) v /= n;
  for (const EvalRun* r : train)
    for (int64_t i = 0; i < r->graph.num_nodes; ++i)
      for (size_t f = 0; f < F; ++f) {
        const double d = r->graph.x[static_cast<size_t>(i) * F + f] - mu[f];
        sd[f] += d * d;
      }
  for (auto& v : sd) v = std::max(std::sqrt(v / n), 1e-6);
  auto batch = [&](const std::vector<const EvalRun*>& runs, size_t a, size_t b) {
    int64_t tmax = 0;
    for (size_t i = a; i < b; ++i) tmax = std::max(tmax, runs[i]->graph.num_nodes);
    torch::Tensor x = torch::zeros({static_cast<int64_t>(b - a), tmax, static_cast<int64_t>(F)});
    torch::Tensor len = torch::empty({static_cast<int64_t>(b - a)}, torch::kLong);
    auto xa = x.accessor<float, 3>();
    for (size_t i = a; i < b; ++i) {
      const auto& g = runs[i]->graph;
      len[static_cast<int64_t>(i - a)] = g.num_nodes;
      for (int64_t t = 0; t < g.num_nodes; ++t)
        for (size_t f = 0; f < F; ++f)
          xa[static_cast<int64_t>(i - a)][t][static_cast<int64_t>(f)] =
              static_cast<float>((g.x[static_cast<size_t>(t) * F + f] - mu[f]) / sd[f]);
    }
    return std::make_pair(x, len);
  };
  torch::manual_seed(seed);
  BiRnn net(static_cast<int64_t>(F), 32);
  double ymean = 0;
  for (const EvalRun* r : train) ymean += std::log(r->target_ms);
  ymean /= static_cast<double>(train.size());
  net->offset.fill_(ymean);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(3e-3));
  std::vector<const EvalRun*> order = train;
  std::mt19937_64 rng(seed + 101);
  const size_t bs = 32;
  try {
    for (int ep = 0; ep < epochs; ++ep) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t a = 0; a < order.size(); a += bs) {
        const size_t b = std::min(order.size(), a + bs);
        auto [x, len] = batch(order, a, b);
        torch::Tensor y = torch::empty({static_cast<int64_t>(b - a)});
        for (size_t i = a; i < b; ++i) y[static_cast<int64_t>(i - a)] = std::log(order[i]->target_ms);
        auto loss = torch::mse_loss(net->forward(x, len), y);
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
    }
    torch::NoGradGuard ng;
    std::vector<double> out;
    for (size_t a = 0; a < test.size(); a += 64) {
      const size_t b = std::min(test.size(), a + 64);
      auto [x, len] = batch(test, a, b);
      auto p = net->forward(x, len).exp().to(torch::kDouble);
      for (int64_t i = 0; i < p.size(0); ++i) out.push_back(p[i].item<double>());
    }
    return out;
  } catch (const c10::Error& e) {
    fail("birnn baseline: LibTorch error: {}", e.what_without_backtrace());
  }
}

}  // namespace scaledl::eval_detail
