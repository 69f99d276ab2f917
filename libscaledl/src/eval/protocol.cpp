// The evaluation protocols (their table, names and splits) and the error statistics (eval.hpp).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

namespace {

struct ProtocolRow {
  Protocol protocol;
  const char* name;
  const char* description;
};

#define SCALEDL_EVAL_PROTOCOL_ROW(E, name, description) {Protocol::E, name, description},
constexpr ProtocolRow kProtocols[] = {SCALEDL_EVAL_PROTOCOLS(SCALEDL_EVAL_PROTOCOL_ROW)};
#undef SCALEDL_EVAL_PROTOCOL_ROW

const ProtocolRow& row_of(Protocol p) {
  const auto i = static_cast<size_t>(p);
  SCALEDL_CHECK(i < std::size(kProtocols), "internal: protocol {} is not in SCALEDL_EVAL_PROTOCOLS", i);
  return kProtocols[i];
}

using FamilyRuns = std::map<std::string, std::vector<size_t>>;

EvalSplit split_id(const FamilyRuns& by_family, uint64_t seed) {
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
  return s;
}

std::vector<EvalSplit> split_ood_family(const FamilyRuns& by_family) {
  SCALEDL_CHECK(by_family.size() >= 2,
                "--protocol=ood-family needs runs of >= 2 families, the store has {} ({})", by_family.size(),
                by_family.begin()->first);
  std::vector<EvalSplit> out;
  for (auto& [fam, idx] : by_family) {
    EvalSplit s{"ood-family:" + fam, {}, idx, ""};
    for (auto& [f2, idx2] : by_family)
      if (f2 != fam) s.train.insert(s.train.end(), idx2.begin(), idx2.end());
    out.push_back(std::move(s));
  }
  return out;
}

EvalSplit split_ood_size(const std::vector<EvalRun>& runs, const FamilyRuns& by_family) {
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
  return s;
}

EvalSplit split_cross_device(const FamilyRuns& by_family, const std::vector<size_t>& test_store) {
  SCALEDL_CHECK(!test_store.empty(), "--protocol=cross-device needs --test-db STORE with ok model runs");
  EvalSplit s{"cross-device", {}, test_store, ""};
  for (auto& [fam, idx] : by_family) s.train.insert(s.train.end(), idx.begin(), idx.end());
  return s;
}

std::vector<EvalSplit> split_leave_one_device_out(const std::vector<EvalRun>& runs,
                                                  const FamilyRuns& by_family) {
  std::map<std::string, std::vector<size_t>> by_device;
  for (auto& [fam, idx] : by_family)
    for (size_t i : idx) by_device[runs[i].device].push_back(i);
  SCALEDL_CHECK(by_device.size() >= 2,
                "--protocol=leave-one-device-out needs runs of >= 2 devices, the store has {} ({})",
                by_device.size(), by_device.begin()->first);
  std::vector<EvalSplit> out;
  for (auto& [dev, idx] : by_device) {
    EvalSplit s{"device:" + dev, {}, idx, dev};
    for (auto& [d2, idx2] : by_device)
      if (d2 != dev) s.train.insert(s.train.end(), idx2.begin(), idx2.end());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

const char* to_string(Protocol p) {
  return row_of(p).name;
}

const char* protocol_description(Protocol p) {
  return row_of(p).description;
}

const std::vector<Protocol>& all_protocols() {
  static const std::vector<Protocol> v = [] {
    std::vector<Protocol> out;
    for (const auto& row : kProtocols) out.push_back(row.protocol);
    return out;
  }();
  return v;
}

Protocol parse_protocol(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& row : kProtocols) {
    if (name == row.name) return row.protocol;
    names.push_back(row.name);
  }
  fail("--protocol=\"{}\" is not a protocol ({})", name, fmt::join(names, ", "));
}

bool protocol_splits_are_random(Protocol p) {
  switch (p) {
    case Protocol::Id:
      return true;
    case Protocol::OodFamily:
    case Protocol::OodSize:
    case Protocol::CrossDevice:
    case Protocol::LeaveOneDeviceOut:
      return false;
  }
  return false;
}

std::vector<EvalSplit> make_splits(const std::vector<EvalRun>& runs, Protocol protocol, uint64_t seed) {
  FamilyRuns by_family;  // training-store runs, no sweep
  std::vector<size_t> test_store;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].sweep) continue;
    if (runs[i].test_store)
      test_store.push_back(i);
    else
      by_family[runs[i].family].push_back(i);
  }
  const char* name = to_string(protocol);
  SCALEDL_CHECK(!by_family.empty(), "--protocol={}: the training store(s) hold no ok model runs", name);
  std::vector<EvalSplit> out;
  switch (protocol) {
    case Protocol::Id:
      out.push_back(split_id(by_family, seed));
      break;
    case Protocol::OodFamily:
      out = split_ood_family(by_family);
      break;
    case Protocol::OodSize:
      out.push_back(split_ood_size(runs, by_family));
      break;
    case Protocol::CrossDevice:
      out.push_back(split_cross_device(by_family, test_store));
      break;
    case Protocol::LeaveOneDeviceOut:
      out = split_leave_one_device_out(runs, by_family);
      break;
  }
  for (auto& s : out) {
    SCALEDL_CHECK(!s.train.empty(), "--protocol={}: split {} has no training runs", name, s.name);
    SCALEDL_CHECK(!s.test.empty(), "--protocol={}: split {} has no test runs", name, s.name);
    std::sort(s.train.begin(), s.train.end());
    std::sort(s.test.begin(), s.test.end());
  }
  return out;
}

}  // namespace scaledl
