// Cross-validation of the per-layer regressors against PreNeT's baselines.
// Metrics (docs/learn.md): RMSE_ms = sqrt(mean((p - t)^2)); MRE_% = 100 * mean(|p - t| / t).
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "learn/mlp.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"
#include "scaledl/learn/layer_predictor.hpp"

namespace scaledl {

namespace {

const DeviceRecord& dev_at(const std::map<std::string, DeviceRecord>& devices, const std::string& key) {
  auto it = devices.find(key);
  SCALEDL_CHECK(it != devices.end(), "device=\"{}\" is unknown: import or probe it first", key);
  return it->second;
}

/// Paleo-like baseline: per (type, direction) least squares t = a + b*CT + c*CM,
/// CT and CM in ms (layer_features.hpp). Types absent from `train`: roofline.
std::vector<double> linear_fit_predict(const std::vector<LayerSample>& train,
                                       const std::vector<LayerSample>& test,
                                       const std::map<std::string, DeviceRecord>& devices) {
  auto ct_cm = [&](const LayerSample& s) {
    const DeviceRecord& d = dev_at(devices, s.device);
    LayerCost c = layer_cost(s.type, s.dims, s.dtype);
    return std::pair<double, double>{direction_flops(c, s.dir) / (d.compute_gflops() * 1e6),
                                     traffic_bytes(c, s.dir) / (d.bandwidth_gbs() * 1e6)};
  };
  std::map<std::pair<int, int>, std::vector<const LayerSample*>> groups;
  for (const auto& s : train) groups[{int(s.type), int(s.dir)}].push_back(&s);
  std::map<std::pair<int, int>, Eigen::Vector3d> coef;
  for (const auto& [k, rows] : groups) {
    Eigen::MatrixXd A(rows.size(), 3);
    Eigen::VectorXd b(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      auto [ct, cm] = ct_cm(*rows[i]);
      A.row(i) << 1.0, ct, cm;
      b(i) = rows[i]->ms;
    }
    coef[k] = A.colPivHouseholderQr().solve(b);
  }
  std::vector<double> out(test.size());
  for (size_t i = 0; i < test.size(); ++i) {
    const LayerSample& s = test[i];
    auto it = coef.find({int(s.type), int(s.dir)});
    auto [ct, cm] = ct_cm(s);
    double p = it == coef.end() ? std::max(ct, cm) : it->second(0) + it->second(1) * ct + it->second(2) * cm;
    out[i] = std::max(p, 1e-6);
  }
  return out;
}

struct Acc {
  size_t n = 0;
  double se = 0, re = 0, sre = 0;
  void add(double p, double t) {
    ++n;
    se += (p - t) * (p - t);
    re += std::abs(p - t) / t;
    sre += (p - t) / t;
  }
};

}  // namespace

std::vector<double> fit_predict(const std::string& method, const std::vector<LayerSample>& train,
                                const std::vector<LayerSample>& test,
                                const std::map<std::string, DeviceRecord>& devices, const CvOptions& o) {
  if (method == "linear") return linear_fit_predict(train, test, devices);
  if (method == "mlp")
    return detail::mlp_fit_predict(train, test, devices, o.mlp_epochs, o.torch_device, o.seed,
                                   o.mlp_roofline);
  SCALEDL_CHECK(method == "xgboost" || method == "forest",
                "method=\"{}\" is not a regressor (xgboost, linear, forest, mlp)", method);
  TrainOptions to = o.train;
  to.forest = method == "forest";
  to.verbose = false;
  LayerPredictor p = LayerPredictor::train_samples(train, devices, to);
  // Batch the test rows by (type, direction, dtype, device): one XGBoost call each.
  std::map<std::tuple<int, int, int, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < test.size(); ++i)
    groups[{int(test[i].type), int(test[i].dir), int(test[i].dtype), test[i].device}].push_back(i);
  std::vector<double> out(test.size());
  for (const auto& [k, idx] : groups) {
    const LayerType t = static_cast<LayerType>(std::get<0>(k));
    const size_t nd = layer_info(t).dims.size();
    std::vector<int64_t> dims;
    dims.reserve(idx.size() * nd);
    for (size_t i : idx) {
      SCALEDL_CHECK(test[i].dims.size() == nd, "{}: {} dims, expected {}", to_string(t), test[i].dims.size(),
                    nd);
      dims.insert(dims.end(), test[i].dims.begin(), test[i].dims.end());
    }
    std::vector<double> ms(idx.size());
    p.predict_batch(t, dims.data(), idx.size(), static_cast<DType>(std::get<2>(k)),
                    static_cast<Direction>(std::get<1>(k)), dev_at(devices, std::get<3>(k)), ms.data());
    for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = ms[j];
  }
  return out;
}

std::vector<CvResult> cross_validate(const std::vector<LayerSample>& samples,
                                     const std::map<std::string, DeviceRecord>& devices, const CvOptions& o,
                                     std::vector<CvRowPrediction>* rows) {
  SCALEDL_CHECK(!samples.empty(), "cross-validation needs training rows; the store(s) have none");
  SCALEDL_CHECK(o.mlp_epochs >= 1, "mlp_epochs={} must be >= 1", o.mlp_epochs);
  if (o.train.kernel_time) {  // every method learns, and is scored on, the kernel times
    CvOptions k = o;
    k.train.kernel_time = false;
    return cross_validate(kernel_time_samples(samples, devices), devices, k, rows);
  }
  // Fold of each sample.
  std::vector<int> fold(samples.size());
  std::vector<std::string> fold_names;
  if (o.leave_one_device) {
    // One fold per GPU, whatever its records' kinds: our probed "cuda:NVIDIA H100 80GB HBM3"
    // rows and imported "spec:NVIDIA H100 80GB HBM3" rows are one GPU, held out together.
    std::map<std::string, int> ids;
    for (const auto& s : samples) ids.emplace(device_identity(s.device), 0);
    SCALEDL_CHECK(ids.size() >= 2, "leave-one-device-out needs rows of >= 2 devices, found {}", ids.size());
    for (auto& [k, v] : ids) {
      v = static_cast<int>(fold_names.size());
      fold_names.push_back(k);
    }
    for (size_t i = 0; i < samples.size(); ++i) fold[i] = ids.at(device_identity(samples[i].device));
  } else if (o.holdout == "model-runs") {
    // Group k-fold over the runs of the in-model samples; isolated rows (fold -1)
    // are in every training set and in no test set.
    const std::map<std::string, int> gfold = model_run_folds(samples, o.folds, o.seed);
    for (size_t i = 0; i < samples.size(); ++i)
      fold[i] = samples[i].group.empty() ? -1 : gfold.at(samples[i].group);
    for (int k = 0; k < o.folds; ++k) fold_names.push_back("all");
  } else {
    SCALEDL_CHECK(o.holdout == "rows", "holdout=\"{}\" must be rows or model-runs", o.holdout);
    SCALEDL_CHECK(o.folds >= 2, "folds={} must be >= 2", o.folds);
    SCALEDL_CHECK(samples.size() >= static_cast<size_t>(o.folds), "folds={} exceeds the {} training rows",
                  o.folds, samples.size());
    std::vector<size_t> perm(samples.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937_64 rng(o.seed);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (size_t i = 0; i < perm.size(); ++i) fold[perm[i]] = static_cast<int>(i % o.folds);
    for (int k = 0; k < o.folds; ++k) fold_names.push_back("all");
  }
  // Per-direction rows only when the samples hold several directions.
  std::set<Direction> dirs;
  for (const auto& s : samples) dirs.insert(s.dir);
  const bool per_dir = dirs.size() > 1;
  // Per-dtype rows likewise (imported BF16 and FP8 GEMMs beside FP32 ones).
  std::set<DType> dtypes;
  for (const auto& s : samples) dtypes.insert(s.dtype);
  const bool per_dtype = dtypes.size() > 1;
  // (method, type, direction, dtype, device) -> accumulated error
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, Acc> acc;
  for (size_t k = 0; k < fold_names.size(); ++k) {
    std::vector<LayerSample> tr, te;
    const bool by_run = !o.leave_one_device && o.holdout == "model-runs";
    for (size_t i = 0; i < samples.size(); ++i) {
      if (fold[i] == static_cast<int>(k))
        te.push_back(samples[i]);
      else if (!by_run || fold[i] < 0 || o.in_model_train)
        tr.push_back(samples[i]);
    }
    if (te.empty() || tr.empty()) continue;
    std::map<std::string, DeviceRecord> fold_devices;  // the held-out GPU as a probe knows it
    if (o.leave_one_device && o.probe_bandwidth) {
      fold_devices = devices;
      set_probe_bandwidths(fold_devices, te);
    }
    for (const auto& method : o.methods) {
      std::vector<double> p = fit_predict(method, tr, te, fold_devices.empty() ? devices : fold_devices, o);
      for (size_t i = 0; i < te.size(); ++i) {
        if (rows)
          rows->push_back({method, fold_names[k], te[i].device, te[i].type, te[i].dims, te[i].dtype,
                           te[i].dir, te[i].ms, p[i]});
        const std::string type = to_string(te[i].type);
        const std::string dir = to_string(te[i].dir);
        const std::string dt = to_string(te[i].dtype);
        for (const std::string& ty : {type, std::string("all")})
          for (const std::string& di : {dir, std::string("all")})
            for (const std::string& d : {dt, std::string("all")}) {
              if ((di != "all" && !per_dir) || (d != "all" && !per_dtype)) continue;
              acc[{method, ty, di, d, "all"}].add(p[i], te[i].ms);
              if (o.leave_one_device) acc[{method, ty, di, d, fold_names[k]}].add(p[i], te[i].ms);
            }
      }
      if (o.train.verbose)
        std::cerr << fmt::format("cv: fold {}/{} ({}) {} done\n", k + 1, fold_names.size(), fold_names[k],
                                 method);
    }
  }
  std::vector<CvResult> out;
  for (const auto& [key, a] : acc) {
    CvResult r;
    std::tie(r.method, r.type, r.direction, r.dtype, r.device) = key;
    r.n = a.n;
    r.rmse_ms = std::sqrt(a.se / a.n);
    r.mre_pct = 100.0 * a.re / a.n;
    r.bias_pct = 100.0 * a.sre / a.n;
    out.push_back(r);
  }
  return out;
}

std::string format_cv_table(const std::vector<CvResult>& rows) {
  std::string out = fmt::format("{:<8} {:<14} {:<6} {:<5} {:<28} {:>7} {:>12} {:>8}\n", "method", "type",
                                "dir", "dtype", "device", "n", "RMSE_ms", "MRE_%");
  for (const auto& r : rows)
    out += fmt::format("{:<8} {:<14} {:<6} {:<5} {:<28} {:>7} {:>12.4f} {:>8.2f}\n", r.method, r.type,
                       r.direction, r.dtype, r.device, r.n, r.rmse_ms, r.mre_pct);
  return out;
}

std::string cv_rows_csv(const std::vector<CvRowPrediction>& rows) {
  std::string out = "method,fold,device,type,dims,dtype,direction,measured_ms,predicted_ms\n";
  for (const auto& r : rows) {
    std::string dims;
    for (size_t i = 0; i < r.dims.size(); ++i) dims += (i ? "x" : "") + std::to_string(r.dims[i]);
    out += fmt::format("{},{},{},{},{},{},{},{:.9g},{:.9g}\n", r.method, csv_field(r.fold),
                       csv_field(r.device), to_string(r.type), dims, to_string(r.dtype), to_string(r.dir),
                       r.measured_ms, r.predicted_ms);
  }
  return out;
}

nlohmann::json cv_to_json(const std::vector<CvResult>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows)
    a.push_back({{"method", r.method},
                 {"type", r.type},
                 {"direction", r.direction},
                 {"dtype", r.dtype},
                 {"device", r.device},
                 {"n", r.n},
                 {"rmse_ms", r.rmse_ms},
                 {"mre_pct", r.mre_pct},
                 {"bias_pct", r.bias_pct}});
  return a;
}

}  // namespace scaledl
