// Per-node times of whole-model runs -> layer-model training samples
// (in_model_samples.hpp). The run's graph is rebuilt with the ir stage only
// (model_spec_from_json, build_layer_graph), so learn does not depend on gnn.
#include "scaledl/learn/in_model_samples.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <tuple>

#include "core/stats.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/ir/layer_graph.hpp"
#include "scaledl/ir/model_spec.hpp"

namespace scaledl {

nlohmann::json InModelStats::to_json() const {
  return {{"runs", runs},
          {"runs_not_ok", runs_not_ok},
          {"node_times", node_times},
          {"skipped_missing", skipped_missing},
          {"skipped_fused_scores", skipped_fused_scores},
          {"samples", samples}};
}

std::string in_model_group(const std::string& ctx, const ModelMeasurement& run) {
  return fmt::format("{}: {}", ctx, model_key(run));
}

nlohmann::json RunSumCv::to_json() const {
  return {{"runs", runs},         {"iter_ms", iter_ms},   {"node_sum_ms", node_sum_ms},
          {"t_sum_ms", t_sum_ms}, {"mre_iter", mre_iter}, {"mre_node_sum", mre_node_sum}};
}

std::vector<LayerSample> samples_from_model_runs(const std::vector<ModelMeasurement>& runs,
                                                 const std::map<std::string, DeviceRecord>& devices,
                                                 const std::string& ctx, InModelStats* stats) {
  InModelStats st;
  std::vector<LayerSample> out;
  for (const auto& run : runs) {
    if (run.status != "ok") {
      ++st.runs_not_ok;
      continue;
    }
    ++st.runs;
    const std::string key = model_key(run);
    const std::string rctx = fmt::format("{}: model run '{}'", ctx, key);
    const std::string group = in_model_group(ctx, run);
    SCALEDL_CHECK(devices.count(run.device), "{}: device '{}' is not in the store", rctx, run.device);
    const ModelSpec spec = model_spec_from_json(run.model, rctx + ".model");
    const TrainSettings s = parse_train_settings(run.settings, rctx + ".settings");
    const LayerGraph g = build_layer_graph(spec, s);
    // (type, dims, direction) -> times of the nodes with that key
    std::map<std::tuple<int, std::vector<int64_t>, int>, std::vector<double>> groups;
    std::set<std::string> seen, timed;
    for (const NodeTime& nt : run.node_times) timed.insert(nt.node);
    // A run that timed `<p>.qk` (or its backward) but none of the score kernels the graph has
    // after it ran them inside qk.
    auto fused_scores = [&](const std::string& name) {
      const bool bwd = name.size() > 4 && name.compare(name.size() - 4, 4, ".bwd") == 0;
      const std::string base = bwd ? name.substr(0, name.size() - 4) : name, sfx = bwd ? ".bwd" : "";
      const size_t n = base.size();
      if (n < 3 || base.compare(n - 3, 3, ".qk") != 0) return false;
      const std::string p = base.substr(0, n - 2);
      bool in_graph = false;
      for (const char* k : {"scale", "bias", "mask"}) {
        if (timed.count(p + k + sfx)) return false;
        in_graph |= g.find(p + k + sfx) >= 0;
      }
      return in_graph;
    };
    for (const NodeTime& nt : run.node_times) {
      ++st.node_times;
      SCALEDL_CHECK(seen.insert(nt.node).second, "{}: node_times lists node '{}' twice", rctx, nt.node);
      const int id = g.find(nt.node);
      SCALEDL_CHECK(id >= 0, "{}: node_times name '{}' is not a node of the model's layer graph ({} nodes)",
                    rctx, nt.node, g.nodes.size());
      if (!std::isfinite(nt.ms) || nt.ms <= 0) {
        ++st.skipped_missing;
        continue;
      }
      if (fused_scores(nt.node)) {
        ++st.skipped_fused_scores;
        continue;
      }
      const LayerNode& n = g.nodes[static_cast<size_t>(id)];
      groups[{static_cast<int>(n.type), n.dims, static_cast<int>(n.dir)}].push_back(nt.ms);
    }
    for (const auto& [k, times] : groups) {
      LayerSample smp;
      smp.type = static_cast<LayerType>(std::get<0>(k));
      smp.dims = std::get<1>(k);
      smp.dtype = s.dtype;
      smp.dir = static_cast<Direction>(std::get<2>(k));
      smp.device = run.device;
      smp.ms = median(times);
      smp.group = group;
      smp.harness = run.source;  // timed by our model benchmark ("bench"), as the isolated rows
      out.push_back(std::move(smp));
    }
  }
  st.samples = out.size();
  if (stats) {
    stats->runs += st.runs;
    stats->runs_not_ok += st.runs_not_ok;
    stats->node_times += st.node_times;
    stats->skipped_missing += st.skipped_missing;
    stats->skipped_fused_scores += st.skipped_fused_scores;
    stats->samples += st.samples;
  }
  return out;
}

std::vector<LayerSample> load_in_model_samples(const std::vector<std::string>& dbs,
                                               std::map<std::string, DeviceRecord>& devices,
                                               InModelStats* stats, std::vector<InModelRun>* runs) {
  std::vector<LayerSample> out;
  for (const auto& path : dbs) {
    SCALEDL_CHECK(std::filesystem::exists(path), "--in-model-db={}: no such file", path);
    Store store(path, /*read_only=*/true);
    for (auto& dev : store.devices()) devices[dev.key()] = dev;
    auto ms = store.models("", /*ok_only=*/true);
    auto s = samples_from_model_runs(ms, devices, path, stats);
    out.insert(out.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
    if (runs)
      for (auto& m : ms) runs->push_back({path, std::move(m)});
  }
  return out;
}

RunSumCv cross_validate_run_sums(const std::vector<LayerSample>& samples, const std::vector<InModelRun>& runs,
                                 const std::map<std::string, DeviceRecord>& devices, const CvOptions& o) {
  const std::map<std::string, int> fold = model_run_folds(samples, o.folds, o.seed);
  TrainOptions to = o.train;
  to.verbose = false;
  RunSumCv r;
  for (int k = 0; k < o.folds; ++k) {
    std::vector<LayerSample> train;
    for (const auto& s : samples)
      if (s.group.empty() || (o.in_model_train && fold.at(s.group) != k)) train.push_back(s);
    const LayerPredictor p = LayerPredictor::train_samples(train, devices, to);
    for (const auto& ir : runs) {
      const std::string g = in_model_group(ir.ctx, ir.run);
      auto f = fold.find(g);
      if (f == fold.end() || f->second != k) continue;  // no usable node time, or another fold
      const std::string rctx = fmt::format("{}: model run '{}'", ir.ctx, model_key(ir.run));
      SCALEDL_CHECK(std::isfinite(ir.run.iter.median_ms) && ir.run.iter.median_ms > 0,
                    "{}: iter.median_ms={} is not a usable label", rctx, ir.run.iter.median_ms);
      const LayerGraph graph = build_layer_graph(model_spec_from_json(ir.run.model, rctx + ".model"),
                                                 parse_train_settings(ir.run.settings, rctx + ".settings"));
      double t_sum = 0, node_sum = 0;
      for (double ms : p.predict_nodes(graph, devices.at(ir.run.device))) t_sum += ms;
      for (const auto& nt : ir.run.node_times)
        if (std::isfinite(nt.ms) && nt.ms > 0) node_sum += nt.ms;
      r.runs.push_back(g);
      r.iter_ms.push_back(ir.run.iter.median_ms);
      r.node_sum_ms.push_back(node_sum);
      r.t_sum_ms.push_back(t_sum);
      r.mre_iter += std::abs(t_sum - ir.run.iter.median_ms) / ir.run.iter.median_ms;
      r.mre_node_sum += std::abs(t_sum - node_sum) / node_sum;
    }
  }
  SCALEDL_CHECK(!r.runs.empty(), "run-sum cross-validation: none of the {} runs has in-model samples",
                runs.size());
  r.mre_iter /= r.runs.size();
  r.mre_node_sum /= r.runs.size();
  return r;
}

}  // namespace scaledl
