#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// `scaledl eval memory`: the peak-memory predictors against allocator-exact
// measurements (issue #15, docs/memory.md), under the protocols of `scaledl
// eval` (id: per family a random 80/20 split; ood-size: per family train on the
// smallest 70 % by training FLOP, test on the largest 30 %). Methods:
//   analytic     the replay of memory.hpp alone (nothing trained)
//   corrected    analytic x the learned correction (MemoryCorrection)
//   dnnperf      DNNPerf-style direct regression of log(peak) (the same trees
//                and features, no analytic prior)
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scaledl/eval/eval.hpp"
#include "scaledl/memory/memory.hpp"

namespace scaledl {

struct MemoryEvalOptions {
  std::vector<std::string> dbs;  ///< stores with measured peaks
  std::vector<Protocol> protocols = {Protocol::Id, Protocol::OodSize};
  int seeds = 3;    ///< id: random splits; ood-size is deterministic (seed 0 only)
  std::string out;  ///< report.md, report.json, predictions.csv ("" = none)
};

/// Runs every method on every split and seed; the report JSON holds, per
/// protocol and method, the mean relative error (%) overall, per family and per
/// mode, its worst case and the test-run count. Errors name the store or protocol.
nlohmann::json eval_memory(const MemoryEvalOptions& o);

}  // namespace scaledl
