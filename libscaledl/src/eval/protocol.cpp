// Splits of the evaluation protocols and the error statistics (eval.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "core/stats.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/eval/eval.hpp"

namespace scaledl {

const std::vector<std::string>& all_eval_methods() {
  static const std::vector<std::string> m = {
      "sum", "scaledl-tc", "scaledl-anee", "scaledl-nomlp", "dnnperf", "rf-hp", "mlp-acc", "prenet", "birnn"};
  return m;
}

namespace {
nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}
}  // namespace

ErrorStats ErrorStats::of(const std::vector<double>& pred, const std::vector<double>& truth) {
  SCALEDL_CHECK(pred.size() == truth.size(), "internal: {} predictions for {} runs", pred.size(),
                truth.size());
  ErrorStats s;
  s.n = static_cast<int64_t>(pred.size());
  if (pred.empty()) return s;
  std::vector<double> ape(pred.size());
  double se = 0, bias = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    ape[i] = 100 * std::abs(pred[i] - truth[i]) / truth[i];
    bias += 100 * (pred[i] - truth[i]) / truth[i];
    se += (pred[i] - truth[i]) * (pred[i] - truth[i]);
  }
  double sum = 0;
  for (double a : ape) sum += a;
  s.mre_pct = sum / static_cast<double>(ape.size());
  s.bias_pct = bias / static_cast<double>(ape.size());
  s.rmse_ms = std::sqrt(se / static_cast<double>(ape.size()));
  s.p50_pct = quantile(ape, 0.5);
  s.p90_pct = quantile(ape, 0.9);
  return s;
}

nlohmann::json ErrorStats::to_json() const {
  return {{"n", n},
          {"mre_pct", num(mre_pct)},
          {"rmse_ms", num(rmse_ms)},
          {"p50_pct", num(p50_pct)},
          {"p90_pct", num(p90_pct)},
          {"bias_pct", num(bias_pct)}};
}

std::vector<EvalSplit> make_splits(const std::vector<EvalRun>& runs, const std::string& protocol,
                                   uint64_t seed) {
  std::map<std::string, std::vector<size_t>> by_family;  // training-store runs, no sweep
  std::vector<size_t> test_store;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].sweep) continue;
    if (runs[i].test_store)
      test_store.push_back(i);
    else
      by_family[runs[i].family].push_back(i);
  }
  SCALEDL_CHECK(!by_family.empty(), "--protocol={}: the training store(s) hold no ok model runs", protocol);
  std::vector<EvalSplit> out;
  if (protocol == "id") {
    std::mt19937_64 rng(seed * 7919 + 17);
    EvalSplit s{"id", {}, {}, ""};
    for (auto& [fam, idx] : by_family) {
      SCALEDL_CHECK(idx.size() >= 5, "--protocol=id: family {} has {} runs; an 80/20 split needs >= 5", fam,
                    idx.size());
      std::vector<size_t> p = idx;
      std::shuffle(p.begin(), p.end(), rng);
      const size_t ntest =
          std::max<size_t>(1, static_cast<size_t>(std::round(0.2 * static_cast<double>(p.size()))));
      s.test.insert(s.test.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(ntest));
      s.train.insert(s.train.end(), p.begin() + static_cast<std::ptrdiff_t>(ntest), p.end());
    }
    out.push_back(std::move(s));
  } else if (protocol == "ood-family") {
    SCALEDL_CHECK(by_family.size() >= 2,
                  "--protocol=ood-family needs runs of >= 2 families, the store has {} ({})",
                  by_family.size(), by_family.begin()->first);
    for (auto& [fam, idx] : by_family) {
      EvalSplit s{"ood-family:" + fam, {}, idx, ""};
      for (auto& [f2, idx2] : by_family)
        if (f2 != fam) s.train.insert(s.train.end(), idx2.begin(), idx2.end());
      out.push_back(std::move(s));
    }
  } else if (protocol == "ood-size") {
    EvalSplit s{"ood-size", {}, {}, ""};
    for (auto& [fam, idx] : by_family) {
      SCALEDL_CHECK(idx.size() >= 4,
                    "--protocol=ood-size: family {} has {} runs; a 70/30 split by size needs >= 4", fam,
                    idx.size());
      std::vector<size_t> p = idx;
      std::stable_sort(p.begin(), p.end(), [&](size_t a, size_t b) { return runs[a].flops < runs[b].flops; });
      const size_t ntrain = static_cast<size_t>(std::round(0.7 * static_cast<double>(p.size())));
      s.train.insert(s.train.end(), p.begin(), p.begin() + static_cast<std::ptrdiff_t>(ntrain));
      s.test.insert(s.test.end(), p.begin() + static_cast<std::ptrdiff_t>(ntrain), p.end());
    }
    out.push_back(std::move(s));
  } else if (protocol == "cross-device") {
    SCALEDL_CHECK(!test_store.empty(), "--protocol=cross-device needs --test-db STORE with ok model runs");
    EvalSplit s{"cross-device", {}, test_store, ""};
    for (auto& [fam, idx] : by_family) s.train.insert(s.train.end(), idx.begin(), idx.end());
    out.push_back(std::move(s));
  } else if (protocol == "leave-one-device-out") {
    std::map<std::string, std::vector<size_t>> by_device;
    for (auto& [fam, idx] : by_family)
      for (size_t i : idx) by_device[runs[i].device].push_back(i);
    SCALEDL_CHECK(by_device.size() >= 2,
                  "--protocol=leave-one-device-out needs runs of >= 2 devices, the store has {} ({})",
                  by_device.size(), by_device.begin()->first);
    for (auto& [dev, idx] : by_device) {
      EvalSplit s{"device:" + dev, {}, idx, dev};
      for (auto& [d2, idx2] : by_device)
        if (d2 != dev) s.train.insert(s.train.end(), idx2.begin(), idx2.end());
      out.push_back(std::move(s));
    }
  } else {
    fail("--protocol=\"{}\" is not a protocol (id, ood-family, ood-size, cross-device, leave-one-device-out)",
         protocol);
  }
  for (auto& s : out) {
    SCALEDL_CHECK(!s.train.empty(), "--protocol={}: split {} has no training runs", protocol, s.name);
    SCALEDL_CHECK(!s.test.empty(), "--protocol={}: split {} has no test runs", protocol, s.name);
    std::sort(s.train.begin(), s.train.end());
    std::sort(s.test.begin(), s.test.end());
  }
  return out;
}

}  // namespace scaledl
